"""The shipped ontology and SHACL shapes (SPEC §2, §5.5): they parse, agree with each
other, are documented in English and Chinese, and tell a healthy store from a broken one."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pyshacl import validate
from rdflib import OWL, RDF, RDFS, SH, XSD, Graph, Literal, Namespace, URIRef

from memory_rdf._resources import ontology_text

MEMORY = Namespace("https://w3id.org/memory-rdf/ontology#")
NODE = Namespace("https://w3id.org/memory-rdf/node/")
LINK = Namespace("https://w3id.org/memory-rdf/link/")
ONTOLOGY_IRI = URIRef("https://w3id.org/memory-rdf/ontology")
FOCUS = URIRef("https://w3id.org/memory-rdf/focus")

CLASSES = {"Node", "Link", "FocusList", "StoreMetadata", "Task"}
OBJECT_PROPERTIES = {"link", "source", "target", "member"}
DATATYPE_PROPERTIES = {
    # the memory network, SPEC §2 and §5.5
    "content": XSD.string,
    "phrase": XSD.string,
    "keyword": XSD.string,
    "createdAt": XSD.dateTime,
    "saidAt": XSD.dateTime,
    "scanCount": XSD.integer,
    "scanOrder": XSD.integer,
    "originalLength": XSD.integer,
    "term": XSD.string,
    "termCount": XSD.integer,
    "strength": XSD.double,
    "relation": XSD.string,
    "focusOrder": XSD.integer,
    "pinned": XSD.boolean,
    # the semantic entry's vectors graph (SPEC §5.7)
    "vector": XSD.string,
    "embeddingModel": XSD.string,
    "embeddingDimension": XSD.integer,
    "embeddingText": XSD.string,
    # bookkeeping in named graphs
    "schemaVersion": XSD.integer,
    "agentId": XSD.string,
    "lastCreatedAt": XSD.dateTime,
    "nodeSequence": XSD.integer,
    "taskText": XSD.string,
    "taskSeq": XSD.integer,
    "taskStatus": XSD.string,
    "attempts": XSD.integer,
    "lastError": XSD.string,
    "acceptedAt": XSD.dateTime,
    "taskSaidAt": XSD.dateTime,
}
#: At most one value per subject, which is what owl:FunctionalProperty says; shapes.ttl
#: checks which of them are required as well.
FUNCTIONAL = {
    "content", "phrase", "createdAt", "saidAt", "scanCount", "scanOrder", "originalLength",
    "termCount",
    "source", "target", "strength", "relation", "focusOrder", "pinned",
    "schemaVersion", "agentId", "lastCreatedAt", "nodeSequence",
    "taskText", "taskSeq", "taskStatus", "attempts", "lastError", "acceptedAt", "taskSaidAt",
    "vector", "embeddingModel", "embeddingDimension", "embeddingText",
}  # fmt: skip


def _parse(filename: str) -> Graph:
    return Graph().parse(data=ontology_text(filename), format="turtle")


@pytest.fixture(scope="module")
def ontology() -> Graph:
    return _parse("memory.ttl")


@pytest.fixture(scope="module")
def shapes() -> Graph:
    return _parse("shapes.ttl")


def _defined_terms(ontology: Graph) -> set[URIRef]:
    kinds = (OWL.Class, OWL.ObjectProperty, OWL.DatatypeProperty)
    return {
        s
        for kind in kinds
        for s in ontology.subjects(RDF.type, kind)
        if isinstance(s, URIRef) and s.startswith(MEMORY)
    }


# --- the ontology -----------------------------------------------------------------------------


def test_both_files_parse(ontology: Graph, shapes: Graph) -> None:
    assert (ONTOLOGY_IRI, RDF.type, OWL.Ontology) in ontology
    assert any(shapes.subjects(RDF.type, SH.NodeShape))


def test_ontology_defines_exactly_the_vocabulary(ontology: Graph) -> None:
    expected = {
        **{MEMORY[c]: OWL.Class for c in CLASSES},
        **{MEMORY[p]: OWL.ObjectProperty for p in OBJECT_PROPERTIES},
        **{MEMORY[p]: OWL.DatatypeProperty for p in DATATYPE_PROPERTIES},
    }
    assert _defined_terms(ontology) == set(expected)
    for term, kind in expected.items():
        assert (term, RDF.type, kind) in ontology, term


def test_every_memory_term_used_anywhere_is_defined(ontology: Graph, shapes: Graph) -> None:
    defined = _defined_terms(ontology)
    for graph in (ontology, shapes):
        used = {t for triple in graph for t in triple if isinstance(t, URIRef)}
        assert {t for t in used if t.startswith(MEMORY)} <= defined


@pytest.mark.parametrize("predicate", [RDFS.label, RDFS.comment], ids=["label", "comment"])
def test_every_term_is_documented_in_english_and_chinese(
    ontology: Graph, predicate: URIRef
) -> None:
    for term in [ONTOLOGY_IRI, *_defined_terms(ontology)]:
        values = list(ontology.objects(term, predicate))
        languages = sorted(v.language or "" for v in values if isinstance(v, Literal))
        assert languages == ["en", "zh"], (term, predicate, languages)
        assert all(str(v).strip() for v in values), term


def test_every_property_has_domain_and_range(ontology: Graph) -> None:
    for term in _defined_terms(ontology):
        if (term, RDF.type, OWL.Class) in ontology:
            continue
        assert len(list(ontology.objects(term, RDFS.domain))) == 1, term
        assert len(list(ontology.objects(term, RDFS.range))) == 1, term


def test_datatype_ranges(ontology: Graph) -> None:
    for name, datatype in DATATYPE_PROPERTIES.items():
        assert ontology.value(MEMORY[name], RDFS.range) == datatype, name


def test_dangling_link_targets_are_not_forced_to_be_nodes(ontology: Graph) -> None:
    # An RDFS reasoner would otherwise "revive" every forgotten target as a memory:Node.
    assert ontology.value(MEMORY.source, RDFS.range) == MEMORY.Node
    assert ontology.value(MEMORY.target, RDFS.range) != MEMORY.Node
    assert ontology.value(MEMORY.link, RDFS.range) != MEMORY.Node


def test_functional_properties(ontology: Graph) -> None:
    functional = {
        t for t in ontology.subjects(RDF.type, OWL.FunctionalProperty) if isinstance(t, URIRef)
    }
    assert functional == {MEMORY[p] for p in FUNCTIONAL}


# --- the shapes -------------------------------------------------------------------------------


def test_every_shape_has_a_comment(shapes: Graph) -> None:
    node_shapes = set(shapes.subjects(RDF.type, SH.NodeShape))
    property_shapes = set(shapes.objects(None, SH.property))
    assert node_shapes and property_shapes
    for shape in node_shapes | property_shapes:
        assert shapes.value(shape, RDFS.comment) is not None, shape


def test_shapes_are_shacl_core_only(shapes: Graph) -> None:
    assert not list(shapes.subject_objects(SH.sparql))
    assert not list(shapes.subjects(RDF.type, SH.SPARQLConstraint))


HEALTHY = """
@prefix memory: <https://w3id.org/memory-rdf/ontology#> .
@prefix node:   <https://w3id.org/memory-rdf/node/> .
@prefix link:   <https://w3id.org/memory-rdf/link/> .
@prefix xsd:    <http://www.w3.org/2001/XMLSchema#> .

node:a a memory:Node ;
    memory:content "我们决定登录用 JWT，token 有效期两小时。" ;
    memory:phrase "登录用JWT有效期两小时" ;
    memory:keyword "JWT", "登录" ;
    memory:createdAt "2026-09-07T10:00:00.1Z"^^xsd:dateTime ;
    memory:saidAt "2024-05-01T09:30:00Z"^^xsd:dateTime ;
    memory:scanCount 3 ;
    memory:scanOrder 12884901889 ;
    memory:originalLength 21 ;
    memory:term "jwt", "登录", "token" ;
    memory:termCount 3 ;
    memory:link node:b .

node:b a memory:Node ;
    memory:content "数据库选 PostgreSQL。" ;
    memory:phrase "选PG" ;
    memory:createdAt "2026-09-07T10:00:00.2Z"^^xsd:dateTime ;
    memory:scanCount 0 ;
    memory:scanOrder 2 ;
    memory:originalLength 16 ;
    memory:focusOrder 7 ;
    memory:pinned true ;
    memory:link node:a, node:gone .

link:a--b a memory:Link ;
    memory:source node:a ;
    memory:target node:b ;
    memory:strength "0.5"^^xsd:double ;
    memory:relation "下文" .

link:b--a a memory:Link ;
    memory:source node:b ;
    memory:target node:a ;
    memory:strength "0.485"^^xsd:double ;
    memory:relation "上文" .

# node:gone was forgotten: the link into it is dangling, and legal.
link:b--gone a memory:Link ;
    memory:source node:b ;
    memory:target node:gone ;
    memory:strength "0.02"^^xsd:double .

<https://w3id.org/memory-rdf/focus> a memory:FocusList ;
    memory:member node:b .
"""


def _healthy() -> Graph:
    return Graph().parse(data=HEALTHY, format="turtle")


def _violations(data: Graph, shapes: Graph) -> tuple[bool, set[URIRef]]:
    """Whether ``data`` conforms, and the paths of the violations if not."""
    conforms, report, _ = validate(data, shacl_graph=shapes, ont_graph=None, inference="none")
    results = report.objects(None, SH.result)  # top level only, not nested sh:detail
    paths = {p for r in results for p in report.objects(r, SH.resultPath) if isinstance(p, URIRef)}
    return bool(conforms), paths


def test_shapes_accept_a_healthy_store(shapes: Graph) -> None:
    assert _violations(_healthy(), shapes) == (True, set())


@pytest.mark.parametrize("inference", ["rdfs", "owlrl"])
def test_inference_with_the_ontology_keeps_a_healthy_store_healthy(
    ontology: Graph, shapes: Graph, inference: str
) -> None:
    # Had memory:target the range memory:Node, a reasoner would turn the forgotten
    # target of the dangling link into a node without content.
    conforms, _, text = validate(
        _healthy(), shacl_graph=shapes, ont_graph=ontology, inference=inference
    )
    assert conforms, text


def test_shapes_accept_a_store_without_nodes(shapes: Graph) -> None:
    empty_focus = Graph()
    empty_focus.add((FOCUS, RDF.type, MEMORY.FocusList))
    assert _violations(empty_focus, shapes) == (True, set())


#: Changes a healthy graph in place (the return value, if any, is ignored).
Breakage = Callable[[Graph], object]


def _set(subject: URIRef, predicate: URIRef, value: Literal | URIRef) -> Breakage:
    return lambda g: g.set((subject, predicate, value))


def _remove(subject: URIRef, predicate: URIRef) -> Breakage:
    return lambda g: g.remove((subject, predicate, None))


def _add(subject: URIRef, predicate: URIRef, value: Literal | URIRef) -> Breakage:
    return lambda g: g.add((subject, predicate, value))


BROKEN: dict[str, tuple[Breakage, URIRef | None]] = {
    # name: (how to break the healthy graph, the path of the expected violation;
    #        None when the violation is about the subject itself, with no path)
    "node without content": (_remove(NODE.a, MEMORY.content), MEMORY.content),
    "node with two contents": (_add(NODE.a, MEMORY.content, Literal("另一段")), MEMORY.content),
    "node with blank content": (_set(NODE.a, MEMORY.content, Literal("")), MEMORY.content),
    "content with a language tag": (
        _set(NODE.a, MEMORY.content, Literal("JWT", lang="en")),
        MEMORY.content,
    ),
    "node without phrase": (_remove(NODE.b, MEMORY.phrase), MEMORY.phrase),
    "createdAt as a string": (
        _set(NODE.a, MEMORY.createdAt, Literal("2026-09-07T10:00:00Z")),
        MEMORY.createdAt,
    ),
    "saidAt as a string": (
        _set(NODE.a, MEMORY.saidAt, Literal("2024-05-01T09:30:00Z")),
        MEMORY.saidAt,
    ),
    "two saidAts": (
        _add(NODE.a, MEMORY.saidAt, Literal("2024-05-02T09:30:00Z", datatype=XSD.dateTime)),
        MEMORY.saidAt,
    ),
    "saidAt on a forgotten node": (
        _add(NODE.gone, MEMORY.saidAt, Literal("2024-05-02T09:30:00Z", datatype=XSD.dateTime)),
        None,
    ),
    "negative scanCount": (_set(NODE.a, MEMORY.scanCount, Literal(-1)), MEMORY.scanCount),
    "two termCounts": (_add(NODE.a, MEMORY.termCount, Literal(4)), MEMORY.termCount),
    "strength above 1": (
        _set(LINK["a--b"], MEMORY.strength, Literal(1.5, datatype=XSD.double)),
        MEMORY.strength,
    ),
    "strength as a string": (_set(LINK["a--b"], MEMORY.strength, Literal("0.5")), MEMORY.strength),
    "link without strength": (_remove(LINK["a--b"], MEMORY.strength), MEMORY.strength),
    "link source not a node": (_set(LINK["a--b"], MEMORY.source, NODE.gone), MEMORY.source),
    "link target a literal": (_set(LINK["a--b"], MEMORY.target, Literal("b")), MEMORY.target),
    "link with two relations": (
        _add(LINK["a--b"], MEMORY.relation, Literal("因果")),
        MEMORY.relation,
    ),
    "pinned as a string": (_set(NODE.b, MEMORY.pinned, Literal("true")), MEMORY.pinned),
    "two pinned flags": (
        _add(NODE.b, MEMORY.pinned, Literal("false", datatype=XSD.boolean)), MEMORY.pinned,
    ),
    "focus member without focusOrder": (_remove(NODE.b, MEMORY.focusOrder), MEMORY.member),
    "focus member not a node": (_add(FOCUS, MEMORY.member, NODE.gone), MEMORY.member),
    "half-forgotten node": (_add(NODE.gone, MEMORY.content, Literal("残留")), None),
}


@pytest.mark.parametrize("name", BROKEN)
def test_shapes_reject_a_broken_store(shapes: Graph, name: str) -> None:
    breaks, path = BROKEN[name]
    data = _healthy()
    breaks(data)
    conforms, paths = _violations(data, shapes)
    assert not conforms
    assert paths == ({path} if path is not None else set())
