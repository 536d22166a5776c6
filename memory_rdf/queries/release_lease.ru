# release_lease — give an agent's lease on a SPARQL endpoint back (SPEC §8), if the caller
# holds it.
# Inputs:  $meta $lease (see lease.rq), $holder (xsd:string)
# Output:  none (an update)
PREFIX memory: <https://w3id.org/memory-rdf/ontology#>
DELETE { GRAPH $meta { $lease memory:leaseHolder $holder ; memory:leaseExpires ?expires } }
WHERE { GRAPH $meta { $lease memory:leaseHolder $holder ; memory:leaseExpires ?expires } }
