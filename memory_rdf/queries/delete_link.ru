# delete_link — remove a broken link's description (SPEC §5.2); the caller deletes its
# memory:link shortcut triple in the same write.
# Inputs:  $link   the link's IRI
#          "@with memory" the agent's memory graph on an endpoint (SPEC §8); nothing embedded
# Output:  none (an update)
# @with memory
DELETE { $link ?p ?o } WHERE { $link ?p ?o }
