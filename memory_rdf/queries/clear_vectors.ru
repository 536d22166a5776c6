# clear_vectors — remove every vector of the agent and the record of the model that made
# them (SPEC §5.7): the store's vectors were made by another embedding model, and are made
# again with the new one.
# Inputs:  $vectors the agent's vectors graph
# Output:  none (an update)
DELETE { GRAPH $vectors { ?s ?p ?o } } WHERE { GRAPH $vectors { ?s ?p ?o } }
