# forget_nodes — forget the given nodes (SPEC §5.2): their triples and the links out of them.
# Links into them stay, dangling (SPEC §2). forget_node.ru for many nodes in two operations.
# Inputs:  ?node VALUES: node IRIs
#          "@with memory" the agent's memory graph on an endpoint (SPEC §8); nothing embedded
#          $vectors the agent's vectors graph (SPEC §5.7): the node's vector goes too
# Output:  none (an update; one operation of the caller's atomic write)
PREFIX memory: <https://w3id.org/memory-rdf/ontology#>
# @with memory
DELETE { ?link ?p ?o } WHERE {
  # @values node nodes
  ?link memory:source ?node .
  ?link ?p ?o
} ;
# @with memory
DELETE { ?node ?p ?o } WHERE {
  # @values node nodes
  ?node ?p ?o
} ;
DELETE { GRAPH $vectors { ?node memory:vector ?v } } WHERE {
  # @values node nodes
  GRAPH $vectors { ?node memory:vector ?v }
}
