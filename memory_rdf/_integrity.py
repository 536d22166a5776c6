"""What a store of memory_rdf may hold: the SHACL shapes (``ontology/shapes.ttl``) and the
library's own invariants, checked without pyshacl (an optional extra) over a pyoxigraph store,
in SPARQL (issue 33 F7, F8).

:func:`~memory_rdf._oxigraph.integrity.first_problem` (which runs these checks on a pyoxigraph
store) is what a restore runs on a backup before it becomes an agent
(:func:`memory_rdf.backup.restore`): everything this memory_rdf would not have written is
refused, named by one offending triple. :func:`task_problem` is remember()'s check of a
journalled task's text (its size, its roles, the indentation of lines that read as a role),
run on a backup's journal and on the journal of an agent as it opens.

Every check is one query with ``LIMIT 1``: a healthy store answers each with nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from memory_rdf import _vocab as V
from memory_rdf._types import _LINE_BREAK, _ROLE_LABEL, ROLES

if TYPE_CHECKING:
    from memory_rdf._oxigraph.integrity import _Counts

_RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
_PREFIXES = (
    f"PREFIX memory: <{V.MEMORY}>\nPREFIX node: <{V.NODE}>\nPREFIX link: <{V.LINK}>\n"
    f"PREFIX xsd: <{V.XSD}>\nPREFIX rdf: <{_RDF}>\nPREFIX task: <{V.TASK}>\n"
)
_FOCUS = f"<{V.FOCUS_LIST}>"
_META = f"<{V.META_GRAPH}>"
_JOURNAL = f"<{V.JOURNAL_GRAPH}>"
_VECTORS = f"<{V.VECTOR_GRAPH}>"
_STORE = f"<{V.META_SUBJECT}>"

#: The largest number an integer of ours may hold (Oxigraph's xsd:integer is 64 bits).
_MAX_INT = 2**63 - 1

# Properties by what their values must be.
_NODE_STRINGS = ("content", "phrase", "keyword", "term")
_NODE_COUNTS = ("scanCount", "scanOrder", "originalLength", "termCount")
_NODE_ONE = ("content", "phrase", "createdAt", "scanCount", "scanOrder", "originalLength")
_NODE_AT_MOST_ONE = ("saidAt", "termCount", "focusOrder", "pinned")
_NODE_PROPS = (*_NODE_STRINGS, *_NODE_COUNTS, "createdAt", "saidAt", "focusOrder", "pinned",
               "link")
_LINK_PROPS = ("source", "target", "strength", "relation")
_TASK_PROPS = ("taskSeq", "taskText", "taskStatus", "attempts", "acceptedAt", "lastError",
               "taskSaidAt")
_META_PROPS = ("schemaVersion", "agentId", "createdAt", "lastCreatedAt", "nodeSequence")


def _in(local: tuple[str, ...]) -> str:
    return ", ".join(f"memory:{p}" for p in local)


def _string(o: str, max_chars: int) -> str:
    """A FILTER body true when ``o`` is not a plain string of at most ``max_chars``."""
    return f"(!isLiteral({o}) || DATATYPE({o}) != xsd:string || STRLEN({o}) > {max_chars})"


def _count(o: str, low: int | None = 0) -> str:
    """... when ``o`` is not an xsd:integer (valid, at least ``low`` when given)."""
    bound = f"{o} >= {low}" if low is not None else f"ABS({o}) >= 0"
    return (f"(!isLiteral({o}) || DATATYPE({o}) != xsd:integer "
            f"|| !COALESCE({bound} && {o} <= {_MAX_INT}, false))")


def _datetime(o: str) -> str:
    """... when ``o`` is not a valid xsd:dateTime with a time zone (as this library writes)."""
    return (f"(!isLiteral({o}) || DATATYPE({o}) != xsd:dateTime "
            f"|| !COALESCE(YEAR({o}) >= 1 && YEAR({o}) <= 9999 && TZ({o}) != \"\", false))")


def _values(graph: str, local: str, bad: str) -> str:
    """The query for the values of ``memory:{local}`` in ``graph`` that the condition ``bad``
    (on ``?o``) refuses, in the ``?s ?p ?o`` shape every check answers in."""
    return (f"SELECT ?s ?p ?o WHERE {{ GRAPH {graph} {{ ?s memory:{local} ?o }} "
            f"BIND(memory:{local} AS ?p) FILTER({bad}) }}")


def _checks(max_chars: int) -> Iterator[tuple[str, str]]:
    """(what is wrong, a query selecting ?s ?p ?o of one triple that shows it)."""
    # No check of its own for blank nodes and triple terms (a scan of every triple, the
    # slowest check by far): every property allowed has its subject checked to be an IRI of
    # ours and its object an IRI of ours or a literal, so each of them fails a check below.
    # -- the memory graph (the default graph, SPEC §2) --
    yield "a property memory_rdf does not write", (
        "SELECT ?s ?p ?o WHERE { ?s ?p ?o FILTER(?p NOT IN (rdf:type, memory:member, "
        f"{_in(_NODE_PROPS)}, {_in(_LINK_PROPS)})) }}")
    yield "a type memory_rdf does not write", (
        "SELECT ?s ?p ?o WHERE { ?s a ?o . BIND(rdf:type AS ?p) "
        "FILTER(?o NOT IN (memory:Node, memory:Link, memory:FocusList)) }")
    yield "a node that is not node:{32 hex digits}", (
        "SELECT ?s ?p ?o WHERE { ?s a memory:Node . BIND(rdf:type AS ?p) "
        "BIND(memory:Node AS ?o) FILTER(!isIRI(?s) || !REGEX(STR(?s), "
        f"\"^{V.NODE}[0-9a-f]{{32}}$\")) }}")
    yield "a link whose IRI is not link:{source}--{target}", (
        "SELECT ?s ?p ?o WHERE { ?s a memory:Link . BIND(rdf:type AS ?p) "
        "BIND(memory:Link AS ?o) FILTER(!isIRI(?s) || !STRSTARTS(STR(?s), STR(link:))) }")
    yield "a focus list other than memory_rdf's", (
        "SELECT ?s ?p ?o WHERE { ?s a memory:FocusList . BIND(rdf:type AS ?p) "
        f"BIND(memory:FocusList AS ?o) FILTER(?s != {_FOCUS}) }}")
    # Every property allowed above is a node's, a link's or the focus list's, checked below
    # against the subject's type: no subject can be anything else.
    yield "a node property on something that is not a node", (
        f"SELECT ?s ?p ?o WHERE {{ ?s ?p ?o FILTER(?p IN ({_in(_NODE_PROPS)})) "
        "FILTER NOT EXISTS { ?s a memory:Node } }")
    yield "a link property on something that is not a link", (
        f"SELECT ?s ?p ?o WHERE {{ ?s ?p ?o FILTER(?p IN ({_in(_LINK_PROPS)})) "
        "FILTER NOT EXISTS { ?s a memory:Link } }")
    yield "a focus member on something that is not the focus list", (
        "SELECT ?s ?p ?o WHERE { ?s memory:member ?o . BIND(memory:member AS ?p) "
        "FILTER NOT EXISTS { ?s a memory:FocusList } }")
    for local in _NODE_STRINGS + ("relation",):
        empty = " || STRLEN(?o) = 0" if local == "content" else ""
        yield f"a memory:{local} that is not a string of 1 to {max_chars:,} characters", (
            f"SELECT ?s ?p ?o WHERE {{ ?s memory:{local} ?o . BIND(memory:{local} AS ?p) "
            f"FILTER({_string('?o', max_chars)}{empty}) }}")
    for local in _NODE_COUNTS:
        yield f"a memory:{local} that is not a non-negative integer", (
            f"SELECT ?s ?p ?o WHERE {{ ?s memory:{local} ?o . BIND(memory:{local} AS ?p) "
            f"FILTER({_count('?o')}) }}")
    yield "a memory:focusOrder that is not an integer", (
        "SELECT ?s ?p ?o WHERE { ?s memory:focusOrder ?o . BIND(memory:focusOrder AS ?p) "
        f"FILTER({_count('?o', None)}) }}")
    for local in ("createdAt", "saidAt"):
        yield f"a memory:{local} that is not a dateTime with a time zone", (
            f"SELECT ?s ?p ?o WHERE {{ ?s memory:{local} ?o . BIND(memory:{local} AS ?p) "
            f"FILTER({_datetime('?o')}) }}")
    yield "a memory:pinned that is not a boolean", (
        "SELECT ?s ?p ?o WHERE { ?s memory:pinned ?o . BIND(memory:pinned AS ?p) "
        "FILTER(!isLiteral(?o) || DATATYPE(?o) != xsd:boolean "
        "|| !COALESCE(?o || true, false)) }")
    yield "a link strength that is not a double in [0, 1]", (
        "SELECT ?s ?p ?o WHERE { ?s memory:strength ?o . BIND(memory:strength AS ?p) "
        "FILTER(!isLiteral(?o) || DATATYPE(?o) != xsd:double "
        "|| !COALESCE(?o >= 0 && ?o <= 1, false)) }")
    for local in ("link", "target"):
        yield f"a memory:{local} that is not a node's IRI", (
            f"SELECT ?s ?p ?o WHERE {{ ?s memory:{local} ?o . BIND(memory:{local} AS ?p) "
            f"FILTER(!isIRI(?o) || !REGEX(STR(?o), \"^{V.NODE}[0-9a-f]{{32}}$\")) }}")
    yield "a link whose source is not a memory node", (
        "SELECT ?s ?p ?o WHERE { ?s memory:source ?o . BIND(memory:source AS ?p) "
        "FILTER NOT EXISTS { ?o a memory:Node } }")
    yield "a link whose IRI is not link:{source}--{target}", (
        "SELECT ?s ?p ?o WHERE { ?s memory:source ?src ; memory:target ?o . "
        "BIND(memory:target AS ?p) FILTER(STR(?s) != CONCAT(STR(link:), "
        "STRAFTER(STR(?src), STR(node:)), \"--\", STRAFTER(STR(?o), STR(node:)))) }")
    yield "a focus member that is not a memory node with one memory:focusOrder", (
        f"SELECT ?s ?p ?o WHERE {{ {_FOCUS} memory:member ?o . BIND({_FOCUS} AS ?s) "
        "BIND(memory:member AS ?p) FILTER(NOT EXISTS { ?o a memory:Node } "
        "|| NOT EXISTS { ?o memory:focusOrder ?order }) }")
    for local in _NODE_ONE:
        yield f"a node without exactly one memory:{local}", (
            f"SELECT ?s ?p ?o WHERE {{ ?s a memory:Node . OPTIONAL {{ ?s memory:{local} ?x }} "
            f"BIND(memory:{local} AS ?p) BIND(\"(count)\" AS ?o) }} "
            "GROUP BY ?s ?p ?o HAVING(COUNT(?x) != 1)")
    for local in _NODE_AT_MOST_ONE:
        yield f"a node with more than one memory:{local}", (
            f"SELECT ?s ?p ?o WHERE {{ ?s memory:{local} ?x . BIND(memory:{local} AS ?p) "
            "BIND(\"(count)\" AS ?o) } GROUP BY ?s ?p ?o HAVING(COUNT(?x) > 1)")
    for local in ("source", "target", "strength"):
        yield f"a link without exactly one memory:{local}", (
            f"SELECT ?s ?p ?o WHERE {{ ?s a memory:Link . OPTIONAL {{ ?s memory:{local} ?x }} "
            f"BIND(memory:{local} AS ?p) BIND(\"(count)\" AS ?o) }} "
            "GROUP BY ?s ?p ?o HAVING(COUNT(?x) != 1)")
    yield "a link with more than one memory:relation", (
        "SELECT ?s ?p ?o WHERE { ?s memory:relation ?x . BIND(memory:relation AS ?p) "
        "BIND(\"(count)\" AS ?o) } GROUP BY ?s ?p ?o HAVING(COUNT(?x) > 1)")
    # -- the journal (SPEC §5.1) --
    yield "a journal entry that is not a task", (
        f"SELECT ?s ?p ?o WHERE {{ GRAPH {_JOURNAL} {{ ?s ?p ?o "
        f"FILTER(!isIRI(?s) || !REGEX(STR(?s), \"^{V.TASK}[0-9a-f]{{32}}$\") "
        f"|| ?p NOT IN (rdf:type, {_in(_TASK_PROPS)}) "
        "|| (?p = rdf:type && ?o != memory:Task)) } }")
    for local in ("taskSeq", "attempts"):
        yield f"a task's memory:{local} that is not a non-negative integer", (
            _values(_JOURNAL, local, _count("?o")))
    for local in ("taskText", "lastError"):
        yield f"a task's memory:{local} that is not a string of at most {max_chars:,} characters", (
            _values(_JOURNAL, local, _string("?o", max_chars)))
    # "withdrawn": the mark a remember refused on a silent endpoint leaves (Journal.withdraw)
    yield "a task's memory:taskStatus other than \"pending\", \"failed\" or \"withdrawn\"", (
        _values(_JOURNAL, "taskStatus", "!isLiteral(?o) || DATATYPE(?o) != xsd:string "
                "|| STR(?o) NOT IN (\"pending\", \"failed\", \"withdrawn\")"))
    for local in ("acceptedAt", "taskSaidAt"):
        yield f"a task's memory:{local} that is not a dateTime with a time zone", (
            _values(_JOURNAL, local, _datetime("?o")))
    for local in _TASK_PROPS:
        # a task the server wrote after the write that withdrew it has two statuses (SPEC §8)
        not_withdrawn = 'FILTER(!sameTerm(?x, "withdrawn"))' if local == "taskStatus" else ""
        low = "0" if local in ("acceptedAt", "lastError", "taskSaidAt") else "1"
        yield f"a task without {'exactly' if low == '1' else 'at most'} one memory:{local}", (
            f"SELECT ?s ?p ?o WHERE {{ GRAPH {_JOURNAL} {{ ?s a memory:Task . "
            f"OPTIONAL {{ ?s memory:{local} ?x {not_withdrawn} }} }} BIND(memory:{local} AS ?p) "
            "BIND(\"(count)\" AS ?o) } GROUP BY ?s ?p ?o "
            f"HAVING(COUNT(?x) > 1 || COUNT(?x) < {low})")
    yield "a task with a memory:taskSeq another task has", (
        f"SELECT ?s ?p ?o WHERE {{ GRAPH {_JOURNAL} {{ ?s memory:taskSeq ?o . "
        "?other memory:taskSeq ?o FILTER(?other != ?s) } BIND(memory:taskSeq AS ?p) }")
    # -- the store's metadata --
    yield "metadata memory_rdf does not write", (
        f"SELECT ?s ?p ?o WHERE {{ GRAPH {_META} {{ ?s ?p ?o "
        f"FILTER(?s != {_STORE} || ?p NOT IN (rdf:type, {_in(_META_PROPS)}) "
        "|| (?p = rdf:type && ?o != memory:StoreMetadata)) } }")
    yield "a memory:nodeSequence that is not a non-negative integer", (
        _values(_META, "nodeSequence", _count("?o")))
    for local in ("createdAt", "lastCreatedAt"):
        yield f"a memory:{local} of the store that is not a dateTime with a time zone", (
            _values(_META, local, _datetime("?o")))
    yield "a memory:agentId that is not a short string", (
        _values(_META, "agentId", _string("?o", 1024)))
    # -- the semantic entry's vectors (SPEC §5.7) --
    yield "a vector triple memory_rdf does not write", (
        f"SELECT ?s ?p ?o WHERE {{ GRAPH {_VECTORS} {{ ?s ?p ?o "
        f"FILTER(!((?p = memory:vector && isIRI(?s) && REGEX(STR(?s), "
        f"\"^{V.NODE}[0-9a-f]{{32}}$\") && isLiteral(?o) && DATATYPE(?o) = xsd:string "
        "&& REGEX(STR(?o), \"^[A-Za-z0-9+/]{4,}={0,2}$\") && STRLEN(?o) <= 1000000) "
        f"|| (?s = {_STORE} && ((?p = memory:embeddingModel && isLiteral(?o) "
        "&& DATATYPE(?o) = xsd:string && STRLEN(?o) <= 1024) "
        "|| (?p = memory:embeddingText && isLiteral(?o) "
        "&& DATATYPE(?o) = xsd:string && STRLEN(?o) <= 1024) "
        "|| (?p = memory:embeddingDimension && isLiteral(?o) && DATATYPE(?o) = xsd:integer "
        "&& COALESCE(?o >= 1 && ?o <= 65536, false)))))) } }")
    for local in ("vector", "embeddingModel", "embeddingDimension", "embeddingText"):
        yield f"more than one memory:{local} for one subject", (
            f"SELECT ?s ?p ?o WHERE {{ GRAPH {_VECTORS} {{ ?s memory:{local} ?x }} "
            f"BIND(memory:{local} AS ?p) BIND(\"(count)\" AS ?o) }} GROUP BY ?s ?p ?o "
            "HAVING(COUNT(?x) > 1)")
    for local in _META_PROPS:
        yield f"the store with more than one memory:{local}", (
            f"SELECT ?s ?p ?o WHERE {{ GRAPH {_META} {{ ?s memory:{local} ?x }} "
            f"BIND(memory:{local} AS ?p) BIND(\"(count)\" AS ?o) }} GROUP BY ?s ?p ?o "
            "HAVING(COUNT(?x) > 1)")


def _gate(what: str, counts: _Counts) -> bool:
    """True when the counts show the check ``what`` finds nothing (the checks of every
    property's subject come first, so these may rely on them)."""
    if what == "a node property on something that is not a node":
        return counts.subjects_typed("Node", _NODE_PROPS)
    if what == "a link property on something that is not a link":
        return counts.subjects_typed("Link", _LINK_PROPS)
    found = re.fullmatch(r"an? (node|link) (without exactly one|with more than one) memory:(\w+)",
                         what)
    if found is None:
        return False
    cls, kind, prop = found.groups()
    if kind == "with more than one":
        return counts.at_most_one(prop)
    return counts.one_each(cls.capitalize(), prop)


def _shown(term: object, limit: int = 120) -> str:
    text = str(term)
    return text if len(text) <= limit else text[:limit] + f"… ({len(text):,} characters)"


def task_problem(text: str, max_chars: int) -> str | None:
    """Why remember() would not have journalled ``text``, or None: more than ``max_chars``
    characters, a line that is not a message of a known role ("role: …") nor a continuation,
    a continuation line that reads as a role label without the indentation remember() gives
    it (SPEC §4, issue 17), another kind of line break."""
    if len(text) > max_chars:
        return f"{len(text):,} characters, more than max_remember_chars {max_chars:,}"
    if not text.strip():
        return "no message"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "not valid Unicode text"
    lines = text.split("\n")
    if any(_LINE_BREAK.search(line) for line in lines):
        return "a line break other than \\n"
    for i, line in enumerate(lines):
        role, sep, _ = line.partition(": ")
        if sep and role in ROLES:
            continue
        if i == 0:
            return f"the first line is not a message of one of the roles {ROLES}"
        if _ROLE_LABEL.match(line) and not line.startswith("  "):
            return f"line {i + 1} reads as a message of its own without being one of {ROLES}"
    return None
