# delete_node_texts — drop the text and index (content, phrase, keywords, index terms and
# their count) of the given nodes before their compressed texts are inserted in the same
# write (SPEC §5.2). delete_node_text.ru for many nodes in one operation.
# Inputs:  ?node VALUES: node IRIs
#          "@with memory" the agent's memory graph on an endpoint (SPEC §8); nothing embedded
# Output:  none (an update)
PREFIX memory: <https://w3id.org/memory-rdf/ontology#>
# @with memory
DELETE { ?node ?p ?o } WHERE {
  # @values node nodes
  ?node ?p ?o
  # (a second VALUES for ?p made Oxigraph 0.5 scan every triple: 3.4 s at 100k nodes)
  FILTER(?p IN (memory:content, memory:phrase, memory:keyword, memory:term, memory:termCount))
}
