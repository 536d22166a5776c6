# forget_node — forget one node (SPEC §5.2): its triples and the links out of it. Links into
# it stay, dangling (SPEC §2).
# Inputs:  $node   the node's IRI
#          "@with memory" the agent's memory graph on an endpoint (SPEC §8); nothing embedded
#          $vectors the agent's vectors graph (SPEC §5.7): the node's vector goes too
# Output:  none (an update; one operation of the caller's atomic write)
PREFIX memory: <https://w3id.org/memory-rdf/ontology#>
# @with memory
DELETE { ?link ?p ?o } WHERE { ?link memory:source $node . ?link ?p ?o } ;
# @with memory
DELETE { $node ?p ?o } WHERE { $node ?p ?o } ;
DELETE { GRAPH $vectors { $node memory:vector ?v } } WHERE { GRAPH $vectors { $node memory:vector ?v } }
