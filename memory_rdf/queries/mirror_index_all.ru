# mirror_index_all — build the read mirror's link index from scratch (run on the in-memory
# mirror only, once its copy of the disk store is in; never on the disk store).
#
# The index is a derived copy of the structure of SPEC §2's link resources: one triple per
# link, on its source node, with the link itself as predicate and its target id and relation
# as object, in one of two graphs by whether the target is a live node:
#
#   GRAPH <…/graph/mirror-out>  { node:a link:a--b "b 下文" }   # target b is a live node
#   GRAPH <…/graph/mirror-lost> { node:a link:a--c "c" }        # c was forgotten (dangling),
#                                                                # the link has no relation
#
# The strength is not copied: recall reads it from the link resource (the one value that
# compression rewrites all the time stays in one place). A level of recall then costs two
# lookups per link instead of five (benchmarks/PROFILE.md). The graphs exist only in the
# mirror: never on disk, and sparql() reads the default graph only. Kept in step with every
# commit by mirror_index.ru.
# Inputs:  none.
# Output:  none (an update).
PREFIX memory: <https://w3id.org/memory-rdf/ontology#>
INSERT { GRAPH ?index { ?source ?link ?entry } }
WHERE {
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
