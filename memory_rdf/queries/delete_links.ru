# delete_links — remove broken links' descriptions (SPEC §5.2); the caller deletes their
# memory:link shortcut triples in the same write. delete_link.ru for many links at once.
# Inputs:  ?link VALUES: link IRIs
#          "@with memory" the agent's memory graph on an endpoint (SPEC §8); nothing embedded
# Output:  none (an update)
# @with memory
DELETE { ?link ?p ?o } WHERE {
  # @values link links
  ?link ?p ?o
}
