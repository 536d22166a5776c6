# mirror_index — keep the read mirror's link index (mirror_index_all.ru) in step with one
# commit, applied to the in-memory mirror right after the commit (never to the disk store).
#
# The entries of the links the commit wrote or deleted (their source, target or relation
# triples), of the links into nodes whose liveness it changed (forgotten: the links become
# dangling; created), and of the links out of the nodes it forgot are deleted, then derived
# again from what the store holds now. Strength changes (compression's decay) need nothing:
# the index does not copy strengths.
# Inputs:  ?link   VALUES (links):     link IRIs the commit wrote or deleted
#          ?x      VALUES (changed):   nodes whose liveness the commit changed
#          ?source VALUES (forgotten): nodes the commit forgot (their links went with them)
# Output:  none (an update).
PREFIX memory: <https://w3id.org/memory-rdf/ontology#>
# (one DELETE per graph: a graph variable bound by VALUES made Oxigraph 0.5 scan the whole
# index, 0.3 s at 10k nodes)
DELETE { GRAPH <https://w3id.org/memory-rdf/graph/mirror-out> { ?source ?link ?entry } } WHERE {
  {
    # @values link links
  } UNION {
    # @values x changed
    ?link memory:target ?x .
  }
  GRAPH <https://w3id.org/memory-rdf/graph/mirror-out> { ?source ?link ?entry }
} ;
DELETE { GRAPH <https://w3id.org/memory-rdf/graph/mirror-lost> { ?source ?link ?entry } } WHERE {
  {
    # @values link links
  } UNION {
    # @values x changed
    ?link memory:target ?x .
  }
  GRAPH <https://w3id.org/memory-rdf/graph/mirror-lost> { ?source ?link ?entry }
} ;
DELETE { GRAPH <https://w3id.org/memory-rdf/graph/mirror-out> { ?source ?link ?entry } } WHERE {
  # @values source forgotten
  GRAPH <https://w3id.org/memory-rdf/graph/mirror-out> { ?source ?link ?entry }
} ;
DELETE { GRAPH <https://w3id.org/memory-rdf/graph/mirror-lost> { ?source ?link ?entry } } WHERE {
  # @values source forgotten
  GRAPH <https://w3id.org/memory-rdf/graph/mirror-lost> { ?source ?link ?entry }
} ;
INSERT { GRAPH ?index { ?source ?link ?entry } } WHERE {
  {
    # @values link links
  } UNION {
    # @values x changed
    ?link memory:target ?x .
  }
  ?link memory:source ?source ;
        memory:target ?target .
  OPTIONAL { ?link memory:relation ?relation }
  BIND(IF(EXISTS { ?target memory:scanCount ?alive },
          <https://w3id.org/memory-rdf/graph/mirror-out>,
          <https://w3id.org/memory-rdf/graph/mirror-lost>) AS ?index)
  BIND(CONCAT(IF(STRSTARTS(STR(?target), "https://w3id.org/memory-rdf/node/"),
                 STRAFTER(STR(?target), "https://w3id.org/memory-rdf/node/"), STR(?target)),
              COALESCE(CONCAT(" ", STR(?relation)), "")) AS ?entry)
}
