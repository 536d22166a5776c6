# clear_creation_marks — drop the store metadata's newest createdAt and creation sequence
# number; the caller inserts the new values in the same write (SPEC §2, §5.1).
# Inputs:  $meta   the metadata graph (embedded: <https://w3id.org/memory-rdf/graph/meta>)
# Output:  none (an update)
PREFIX memory: <https://w3id.org/memory-rdf/ontology#>
DELETE { GRAPH $meta { <https://w3id.org/memory-rdf/store> memory:lastCreatedAt ?old } }
WHERE { GRAPH $meta { <https://w3id.org/memory-rdf/store> memory:lastCreatedAt ?old } } ;
DELETE { GRAPH $meta { <https://w3id.org/memory-rdf/store> memory:nodeSequence ?old } }
WHERE { GRAPH $meta { <https://w3id.org/memory-rdf/store> memory:nodeSequence ?old } }
