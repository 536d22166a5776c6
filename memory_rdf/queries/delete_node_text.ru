# delete_node_text — drop a node's text and index (content, phrase, keywords, index terms and
# their count) before the compressed text is inserted in the same write (SPEC §5.2).
# Inputs:  $node   the node's IRI
#          "@with memory" the agent's memory graph on an endpoint (SPEC §8); nothing embedded
# Output:  none (an update)
PREFIX memory: <https://w3id.org/memory-rdf/ontology#>
# @with memory
DELETE { $node memory:content ?o } WHERE { $node memory:content ?o } ;
# @with memory
DELETE { $node memory:phrase ?o } WHERE { $node memory:phrase ?o } ;
# @with memory
DELETE { $node memory:keyword ?o } WHERE { $node memory:keyword ?o } ;
# @with memory
DELETE { $node memory:term ?o } WHERE { $node memory:term ?o } ;
# @with memory
DELETE { $node memory:termCount ?o } WHERE { $node memory:termCount ?o }
