# take_lease — take or renew an agent's lease on a SPARQL endpoint (SPEC §8): only when no one
# holds it, the caller already does, or the holder's lease has expired. The caller reads the
# lease back (lease.rq) to learn whether it got it.
# Inputs:  $meta $lease (see lease.rq), $holder (xsd:string), $now and $expires (xsd:dateTime)
# Output:  none (an update)
PREFIX memory: <https://w3id.org/memory-rdf/ontology#>
DELETE { GRAPH $meta { $lease memory:leaseHolder ?holder ; memory:leaseExpires ?expires } }
INSERT { GRAPH $meta { $lease memory:leaseHolder $holder ; memory:leaseExpires $expires } }
WHERE {
  OPTIONAL { GRAPH $meta { $lease memory:leaseHolder ?holder ; memory:leaseExpires ?expires } }
  FILTER(!BOUND(?holder) || ?holder = $holder || ?expires < $now)
}
