# delete_vectors — remove the vectors of the given nodes (SPEC §5.7): before their new
# vectors are written (compression rewrote the content), or the vectors of nodes now gone.
# Inputs:  ?node VALUES: node IRIs
#          $vectors the agent's vectors graph
# Output:  none (an update; one operation of the caller's atomic write)
PREFIX memory: <https://w3id.org/memory-rdf/ontology#>
DELETE { GRAPH $vectors { ?node memory:vector ?v } } WHERE {
  # @values node nodes
  GRAPH $vectors { ?node memory:vector ?v }
}
