# wipe_agent — remove everything of one agent from a SPARQL endpoint (SPEC §8) except its
# lease, which the caller holds and releases afterwards (the demo starts afresh this way).
# Inputs:  $memory $journal $meta $vectors  the agent's graphs; $lease <https://w3id.org/memory-rdf/lease>
# Output:  none (an update). Run as-is (unbound graphs) it empties every named graph.
DELETE { GRAPH $memory { ?s ?p ?o } } WHERE { GRAPH $memory { ?s ?p ?o } } ;
DELETE { GRAPH $journal { ?s ?p ?o } } WHERE { GRAPH $journal { ?s ?p ?o } } ;
DELETE { GRAPH $meta { ?s ?p ?o } } WHERE { GRAPH $meta { ?s ?p ?o FILTER(?s != $lease) } } ;
DELETE { GRAPH $vectors { ?s ?p ?o } } WHERE { GRAPH $vectors { ?s ?p ?o } }
