"""The read mirror's layout (issue 38): what of the disk store the in-memory mirror holds, how
it is derived from the store's dump (:class:`MirrorFilter`, :func:`link_quads`), and how a
commit's :class:`WriteBatch` is followed on it (:func:`plan`, :func:`apply_plan`).

The mirror is not a copy of the store: it holds what recall's and compression's hot reads
need, ~5.2 kB per node instead of ~41 (~4.5 in its store, ~0.7 in its text table, 10k
nodes; benchmarks/memory_parts.py):

* every triple of the memory network (the default graph) whose predicate is one of
  :data:`KEPT` — a node's scan state, the focus list, the pins — as it is on disk;
* a node's texts and times (``content``, ``phrase``, ``keyword``, ``createdAt``,
  ``saidAt``) not as quads but in a Python table beside the store (:mod:`.text_table`:
  ~300 bytes a quad in the store, ~9 a node), which answers the text reads
  (``node_texts``, ``node_dates``, ``node_entries``, ``matching_nodes``,
  ``matching_texts``, and ``scan_state``'s content); SPARQL answers the rest;
* **one quad per link**, ``GRAPH <…/graph/mirror/{out|lost}[/{relation}]> { node:a node:b
  strength }``: the link ``link:a--b`` (SPEC §2) with its strength inline, in the graph of
  its target's liveness (``out``: a live node; ``lost``: a forgotten one, a dangling link)
  and its relation (percent-encoded; none: no ``/``). A link of two relations (or two
  strengths) has one quad per pair, as the SPEC §2 join gives one row per pair.

Nothing else: no ``a memory:Node`` / ``memory:Link``, no ``memory:link`` shortcut, no index
terms, no journal, metadata or vectors. Only the templates written against this layout read
the mirror (:data:`MIRRORED_TEMPLATES` and the ``mirror_*.rq`` queries); every other read,
and every user query, goes to the disk store (``AgentStore``).

A link whose IRI does not name its ends (``link:{source}--{target}``, as every write of the
library makes them) cannot be followed by its IRI: a mirror meeting one is given up
(:class:`Unfollowable`; reads go to disk).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from urllib.parse import quote, unquote

import pyoxigraph as ox

from memory_rdf import _vocab as V
from memory_rdf._oxigraph.batch import EMBEDDED_GRAPHS, STRENGTHS, WriteBatch
from memory_rdf._oxigraph.render import _terms, render
from memory_rdf._oxigraph.terms import link_ends
from memory_rdf._oxigraph.text_table import TEXT_LINE, TEXT_TOKENS, TextTable

#: The memory network's predicates the mirror keeps as they are (local names).
KEPT_NAMES = ("scanCount", "scanOrder", "originalLength", "member", "focusOrder", "pinned")
KEPT = frozenset(V.MEMORY + name for name in KEPT_NAMES)
_KEPT_TOKENS = frozenset(V.m(name) for name in KEPT_NAMES)
_LINK_TOKENS = frozenset((V.SOURCE, V.TARGET, V.RELATION))

#: Shipped queries written against the mirror's layout: read nothing but :data:`KEPT`
#: triples of the default graph (tests/test_read_mirror.py checks it). The mirror answers
#: them; every other query goes to the disk store. (The text reads, ``node_texts`` …
#: ``scan_state``, are answered by the mirror's :class:`TextTable` through the store's
#: :meth:`~.interface.MemoryStore.text_table`, or by SPARQL on the disk store.)
MIRRORED_TEMPLATES = frozenset({"focus_nodes", "pinned_nodes", "scan_counts"})

#: Shipped update templates that touch only graphs the mirror does not hold (journal, metadata,
#: vectors): nothing to follow. (The name is the one the tests know.)
_INDEX_NEUTRAL = frozenset({"remove_task", "release_lease", "take_lease",
                            "clear_creation_marks", "delete_vectors", "clear_vectors",
                            "delete_node_text", "delete_node_texts"})
#: Of those, the ones that delete texts (followed on the :class:`TextTable`).
_DELETE_TEXTS = frozenset({"delete_node_text", "delete_node_texts"})
_FORGET = frozenset({"forget_node", "forget_nodes"})
_DELETE_LINKS = frozenset({"delete_link", "delete_links"})

LINKS = V.MIRROR_LINKS
_OUT = LINKS + "out"
_LOST = LINKS + "lost"
_SCAN_COUNT = ox.NamedNode(V.MEMORY + "scanCount")
_DEFAULT = ox.DefaultGraph()


def mirrored_query(query: str) -> bool:
    """Whether ``query`` is a shipped template the mirror answers (named by its first comment
    line, ``# name — …``)."""
    return query.startswith("# ") and query[2:query.find(" ", 2)] in MIRRORED_TEMPLATES


class Unfollowable(Exception):
    """The mirror cannot follow the store (a link not named by its ends, or an update it does
    not know): it is built again, or given up."""


@lru_cache(maxsize=4096)
def link_graph(live: bool, relation: str | None) -> ox.NamedNode:
    """The graph of a link's quad: its target's liveness and its relation (None: unnamed)."""
    base = _OUT if live else _LOST
    return ox.NamedNode(base if relation is None else f"{base}/{quote(relation, safe='')}")


@lru_cache(maxsize=4096)
def graph_link(graph: str) -> tuple[bool, str | None] | None:
    """``(lost, relation)`` of a link graph's IRI (the inverse of :func:`link_graph`), or None
    when it is not one."""
    for base, lost in ((_OUT, False), (_LOST, True)):
        if graph == base:
            return lost, None
        if graph.startswith(base + "/"):
            return lost, unquote(graph[len(base) + 1:])
    return None


def _is_link_graph(graph: object) -> bool:
    return isinstance(graph, ox.NamedNode) and graph.value.startswith(LINKS)


def _alive(mirror: ox.Store, node: ox.NamedNode) -> bool:
    return next(iter(mirror.quads_for_pattern(node, _SCAN_COUNT, None, _DEFAULT)),
                None) is not None


def _relation(term: ox.Literal | ox.NamedNode | ox.BlankNode) -> str:
    return term.value if not isinstance(term, ox.BlankNode) else str(term)


# -- the build -------------------------------------------------------------------------------

_KEPT_LINE = re.compile(
    rb"^\S+ <" + re.escape(V.MEMORY.encode()) + rb"(?:"
    + b"|".join(n.encode() for n in KEPT_NAMES) + rb")> [^\n]*\n", re.MULTILINE)
_LINK_LINE = re.compile(
    rb"^<[^>\s]*> <" + re.escape(V.MEMORY.encode())
    + rb"(?:source|target|strength|relation)> [^\n]*\n", re.MULTILINE)


@dataclass
class _Link:
    strengths: list[ox.Literal] = field(default_factory=list)
    relations: list[str] = field(default_factory=list)
    source: bool = False
    target: bool = False


class MirrorFilter:
    """What of the default graph's N-Triples dump goes into the mirror: :meth:`take` keeps a
    chunk's KEPT lines (returned, to load as they are), keeps its text lines for
    :meth:`text_table` and notes its link lines, from which :meth:`link_quads` makes the link
    quads once every node's liveness is in the mirror."""

    def __init__(self) -> None:
        self.links: dict[str, _Link] = {}
        self.text_lines: list[bytes] = []

    def take(self, chunk: bytes) -> bytes:
        link_lines = b"".join(_LINK_LINE.findall(chunk))
        if link_lines:
            self._note(ox.parse(link_lines, format=ox.RdfFormat.N_TRIPLES))
        text_lines = b"".join(TEXT_LINE.findall(chunk))
        if text_lines:
            self.text_lines.append(text_lines)
        return b"".join(_KEPT_LINE.findall(chunk))

    def text_table(self) -> TextTable:
        """The text table of the lines kept (empties them). Made after :meth:`link_quads`:
        built beside the links' notes, its objects sat among theirs in the allocator's pools,
        which then could not be given back when the notes went (measured at 10k nodes: 49 MB
        held against 6 MB made afterwards)."""
        table = TextTable()
        lines, self.text_lines = self.text_lines, []
        while lines:
            table.take(lines.pop(0))
        return table

    def _note(self, triples: Iterable[ox.Triple]) -> None:
        for t in triples:
            iri = str(t.subject)[1:-1]
            link = self.links.get(iri)
            if link is None:
                link = self.links[iri] = _Link()
            name = t.predicate.value[len(V.MEMORY):]
            if name == "strength":
                if isinstance(t.object, ox.Literal):
                    link.strengths.append(t.object)
                continue
            if name == "relation":
                if not isinstance(t.object, ox.Triple):
                    link.relations.append(_relation(t.object))
                continue
            ends = link_ends(iri)
            end = ends[0 if name == "source" else 1] if ends else None
            if (end is None or t.object != ox.NamedNode(V.NODE + end)
                    or (link.source if name == "source" else link.target)):
                raise Unfollowable(f"the link {iri} is not named by its ends")
            if name == "source":
                link.source = True
            else:
                link.target = True

    def link_quads(self, mirror: ox.Store) -> Iterator[ox.Quad]:
        """The link quads (every node's scanCount already in ``mirror``); empties the notes."""
        links, self.links = self.links, {}
        live: dict[str, bool] = {}
        for iri, link in links.items():
            yield from _quads_of(mirror, iri, link, live)


def _quads_of(mirror: ox.Store, iri: str, link: _Link,
              live: dict[str, bool] | None = None) -> Iterator[ox.Quad]:
    if not (link.source and link.target and link.strengths):
        return
    ends = link_ends(iri)
    assert ends is not None
    a, b = ox.NamedNode(V.NODE + ends[0]), ox.NamedNode(V.NODE + ends[1])
    alive = None if live is None else live.get(ends[1])
    if alive is None:
        alive = _alive(mirror, b)
        if live is not None:
            live[ends[1]] = alive
    relations: list[str | None] = [*dict.fromkeys(link.relations)] or [None]
    for w in dict.fromkeys(link.strengths):
        for relation in relations:
            yield ox.Quad(a, b, w, link_graph(alive, relation))


def derive(disk: ox.Store) -> ox.Store:
    """A mirror's store of ``disk`` built at once (tests, benchmarks): what a build gives."""
    return derive_both(disk)[0]


def derive_both(disk: ox.Store) -> tuple[ox.Store, TextTable]:
    """A mirror of ``disk`` built at once (tests, benchmarks): its store and text table."""
    mirror = ox.Store()
    take = MirrorFilter()
    kept = take.take(disk.dump(format=ox.RdfFormat.N_TRIPLES, from_graph=_DEFAULT) or b"")
    mirror.load(kept, format=ox.RdfFormat.N_TRIPLES)
    mirror.extend(list(take.link_quads(mirror)))
    return mirror, take.text_table()


# -- following commits -----------------------------------------------------------------------


@dataclass
class Plan:
    """What a :class:`WriteBatch` changes in the mirror (:func:`plan`)."""

    #: the update to run on the mirror: the batch's KEPT lines and the templates run as is
    text: list[str] = field(default_factory=list)
    #: the batch's writes of texts, in order, for the :class:`TextTable`: ("add" | "remove",
    #: N-Triples lines) and ("drop" (their texts) | "forget", node IRIs)
    texts: list[tuple[str, Sequence[str]]] = field(default_factory=list)
    #: nodes forgotten (their links' quads go; the links into them become dangling)
    forgotten: list[str] = field(default_factory=list)
    #: links deleted by template
    deleted: list[str] = field(default_factory=list)
    #: links whose source, target or relation the batch writes or deletes: read from disk
    structural: set[str] = field(default_factory=set)
    #: link → the batch's strength writes, in order: (inserted, serialized literal)
    strengths: dict[str, list[tuple[bool, str]]] = field(default_factory=dict)
    #: nodes whose liveness the batch may change (a scanCount written or deleted)
    liveness: set[str] = field(default_factory=set)
    #: strengths written by index-neutral operations, by link ends:
    #: (source id, target id) → ([deleted literals], [inserted literals])
    neutral: dict[tuple[str, str], tuple[list[str], list[str]]] = field(default_factory=dict)
    #: the batch's strength replacements given as data (``WriteBatch.strengths``)
    replaced: list[tuple[str, str, str]] = field(default_factory=list)


def plan(batch: WriteBatch) -> Plan:
    """Read ``batch``'s operations for what they change in the mirror (Unfollowable for an
    update template it does not know)."""
    out = Plan()
    params = EMBEDDED_GRAPHS.params()
    for verb, body, values, graph, neutral in batch._ops:
        if verb == "update":
            if body in _FORGET:
                nodes = _terms("nodes", values.get("nodes", values.get("node")), many=True)
                out.forgotten += nodes
                out.liveness.update(nodes)
                out.texts.append(("forget", nodes))
                out.text.append(render(body + ".ru", **{**params, **values}).strip())
            elif body in _DELETE_LINKS:
                out.deleted += _terms("links", values.get("links", values.get("link")),
                                      many=True)
            elif body in _DELETE_TEXTS:
                out.texts.append(("drop", _terms("nodes", values.get("nodes",
                                                                     values.get("node")),
                                                 many=True)))
            elif body not in _INDEX_NEUTRAL:
                raise Unfollowable(f"the update {body}")
            continue
        if graph is not None:  # the journal, the metadata, the vectors: not in the mirror
            continue
        inserting = verb == "INSERT DATA"
        if neutral == STRENGTHS:  # read from batch.strengths below
            continue
        if neutral and _neutral(out, verb, body):
            continue
        kept: list[str] = []
        texts: list[str] = []
        for line in body.split("\n"):
            parts = line.split(" ", 2)
            if len(parts) < 3:
                if line.strip():
                    raise Unfollowable(f"a triple not one a line: {line[:80]!r}")
                continue
            subject, predicate, rest = parts
            if predicate in TEXT_TOKENS:
                texts.append(line)
            elif predicate in _KEPT_TOKENS:
                kept.append(line)
                if predicate == V.SCAN_COUNT and not neutral:
                    out.liveness.add(subject)
            elif predicate == V.STRENGTH:
                obj = rest[:-1].rstrip() if rest.endswith(".") else rest
                out.strengths.setdefault(subject, []).append((inserting, obj))
            elif predicate in _LINK_TOKENS:
                out.structural.add(subject)
            elif not predicate.startswith("<"):
                raise Unfollowable(f"a triple not written by the library: {line[:80]!r}")
        _kept(out, verb, kept, texts)
    out.replaced = batch.strengths
    return out


def _by_ends(todo: Plan) -> None:
    """Move ``todo.replaced`` into ``todo.neutral`` (by link ends)."""
    for link, old, new in todo.replaced:
        source, sep, target = link[len(_LINK_SUBJECT):-1].partition("--")
        if (not link.startswith(_LINK_SUBJECT) or not link.endswith(">") or not sep
                or not source or not target or "--" in target):
            raise Unfollowable(f"the link {link} is not named by its ends")
        deleted, inserted = todo.neutral.setdefault((source, target), ([], []))
        deleted.append(old)
        inserted.append(new)
    todo.replaced = []


def _replaced_rows(todo: Plan) -> list[str] | None:
    """The VALUES rows of ``todo.replaced`` spliced from the link terms with string
    operations (a compression commit's ~1,200: each link once, named by its ends), or None
    when they are not all of that form (then read by :func:`_by_ends`)."""
    replaced = todo.replaced
    if todo.neutral or len({link for link, _, _ in replaced}) != len(replaced):
        return None
    node = "<" + V.NODE
    rows: list[str] = []
    for link, old, new in replaced:
        if (not link.startswith(_LINK_SUBJECT) or link.count("--") != 1 or "/--" in link
                or "-->" in link or not link.endswith(">") or " " in link):
            return None
        ends = link.replace(_LINK_SUBJECT, node, 1).replace("--", "> " + node, 1)
        rows.append(f"({ends} {old} {new})")
    todo.replaced = []
    return rows


_LINK_SUBJECT = "<" + V.LINK


def _neutral(out: Plan, verb: str, body: str) -> bool:
    """Read an index-neutral operation (its writer vouches: no link source, target or
    relation, no liveness change) without the checks of :func:`plan` (a compression commit
    holds ~10,000 lines): its KEPT lines, and its strengths by link ends. False (read it as
    any other) when a line is not ``s p o .`` or a strength not of a link named by its ends."""
    at = 0 if verb == "DELETE DATA" else 1
    kept: list[str] = []
    texts: list[str] = []
    neutral = out.neutral
    for line in body.split("\n"):
        parts = line.split(" ", 2)
        if len(parts) < 3:
            return False
        predicate = parts[1]
        if predicate in TEXT_TOKENS:
            texts.append(line)
        elif predicate in _KEPT_TOKENS:
            kept.append(line)
        elif predicate == V.STRENGTH:
            subject = parts[0]
            source, sep, target = subject[len(_LINK_SUBJECT):-1].partition("--")
            rest = parts[2]
            if (not subject.startswith(_LINK_SUBJECT) or not sep or not source or not target
                    or "--" in target or not rest.endswith(" .")):
                return False
            neutral.setdefault((source, target), ([], []))[at].append(rest[:-2])
    _kept(out, verb, kept, texts)
    return True


def _kept(out: Plan, verb: str, kept: list[str], texts: list[str]) -> None:
    """Note the KEPT lines (as an update) and the text lines of an ``INSERT``/``DELETE
    DATA``."""
    if kept:
        out.text.append(f"{verb} {{\n" + "\n".join(kept) + "\n}")
    if texts:
        out.texts.append(("add" if verb == "INSERT DATA" else "remove", texts))


def apply_texts(table: TextTable, todo: Plan) -> None:
    """Follow a batch's writes of texts on the mirror's text table, in the batch's order,
    as one change for readers (:meth:`TextTable.commit`)."""
    if not todo.texts:
        return
    with table.commit():
        for kind, items in todo.texts:
            if kind in ("add", "remove"):
                triples = ox.parse("\n".join(items).encode(), format=ox.RdfFormat.N_TRIPLES)
                (table.add if kind == "add" else table.remove)(triples)
            else:
                ids = [_node_id(ref) for ref in items]
                (table.forget if kind == "forget" else table.drop_texts)(
                    i for i in ids if i is not None)


def _node_id(ref: str) -> str | None:
    node = "<" + V.NODE
    return ref[len(node):-1] if ref.startswith(node) and ref.endswith(">") else None


def _neutral_update(todo: Plan) -> str | None:
    """The mirror update of the neutral strengths that replace one value by another (the
    link's quad deleted and inserted with the new strength, in whatever graph it is); the
    others are left in ``todo.strengths`` for :func:`_restrengthen`."""
    rows = _replaced_rows(todo) if todo.replaced else None
    if rows is None:
        rows = []
        _by_ends(todo)
    for (a, b), (deleted, inserted) in todo.neutral.items():
        if len(deleted) == 1 and len(inserted) == 1:
            rows.append(f"(<{V.NODE}{a}> <{V.NODE}{b}> {deleted[0]} {inserted[0]})")
        else:
            writes = [(False, d) for d in deleted] + [(True, i) for i in inserted]
            todo.strengths.setdefault(f"<{V.LINK}{a}--{b}>", []).extend(writes)
    todo.neutral = {}
    if not rows:
        return None
    return ("DELETE { GRAPH ?g { ?a ?b ?old } } INSERT { GRAPH ?g { ?a ?b ?new } } WHERE {\n"
            "VALUES (?a ?b ?old ?new) {\n" + "\n".join(rows) + "\n}\n"
            "GRAPH ?g { ?a ?b ?old } }")


def _ends(link: str) -> tuple[ox.NamedNode, ox.NamedNode]:
    ends = link_ends(link[1:-1]) if link.startswith("<") and link.endswith(">") else None
    if ends is None:
        raise Unfollowable(f"the link {link} is not named by its ends")
    return ox.NamedNode(V.NODE + ends[0]), ox.NamedNode(V.NODE + ends[1])


def _link_quads_of(mirror: ox.Store, a: ox.NamedNode, b: ox.NamedNode) -> list[ox.Quad]:
    return [q for q in mirror.quads_for_pattern(a, b, None, None) if _is_link_graph(q.graph_name)]


_DOUBLE_LITERAL = re.compile(r'^"([^"\\]*)"\^\^<([^>\s]*)>$')


_XSD_DOUBLE = V.XSD + "double"


def _literal(serialized: str) -> ox.Literal | None:
    """A typed literal as the store holds it (an xsd:double in its canonical form: the batch
    writes ``"1.0"``, the store gives back ``"1"``); None for any other form."""
    found = _DOUBLE_LITERAL.match(serialized)
    if found is None:
        return None
    if found[2] == _XSD_DOUBLE:
        try:
            return ox.Literal(float(found[1]))
        except ValueError:
            return None
    return ox.Literal(found[1], datatype=ox.NamedNode(found[2]))


def _restrengthen(mirror: ox.Store, link: str, writes: list[tuple[bool, str]]) -> bool:
    """Apply a link's strength writes to its quads in the mirror (delete + insert: the quad
    carries the strength); False when the mirror cannot tell (read the link from disk)."""
    a, b = _ends(link)
    current = _link_quads_of(mirror, a, b)
    if not current:
        return False
    graphs = list(dict.fromkeys(q.graph_name for q in current))
    strengths = list(dict.fromkeys(q.object for q in current))
    for inserted, serialized in writes:
        value = _literal(serialized)
        if value is None:
            return False
        if inserted:
            if value not in strengths:
                strengths.append(value)
        elif value in strengths:
            strengths.remove(value)
        else:
            return False  # a strength the mirror does not hold: it is behind, read the disk
    wanted = {ox.Quad(a, b, w, g) for w in strengths for g in graphs}
    for q in current:
        if q not in wanted:
            mirror.remove(q)
    for q in wanted.difference(current):
        mirror.add(q)
    return True


def _reread(mirror: ox.Store, disk: ox.Store, link: str) -> None:
    """Write a link's quads as the disk store holds it now."""
    a, b = _ends(link)
    for q in _link_quads_of(mirror, a, b):
        mirror.remove(q)
    iri = link[1:-1]
    seen = _Link()
    note = MirrorFilter()
    note.links[iri] = seen
    note._note(ox.Triple(q.subject, q.predicate, q.object) for q in disk.quads_for_pattern(
        ox.NamedNode(iri), None, None, _DEFAULT)
        if q.predicate.value[len(V.MEMORY):] in ("source", "target", "strength", "relation")
        and q.predicate.value.startswith(V.MEMORY))
    mirror.extend(list(_quads_of(mirror, iri, seen)))


def _regraph(mirror: ox.Store, node: str) -> None:
    """Put the quads of the links into ``node`` in the graph of its liveness now."""
    target = ox.NamedNode(node[1:-1])
    alive = _alive(mirror, target)
    for q in list(mirror.quads_for_pattern(None, target, None, None)):
        graph = q.graph_name
        where = graph_link(graph.value) if isinstance(graph, ox.NamedNode) else None
        if where is None or where[0] != alive:
            continue
        mirror.remove(q)
        mirror.add(ox.Quad(q.subject, q.predicate, q.object, link_graph(alive, where[1])))


def apply_plan(mirror: ox.Store, todo: Plan, disk: Callable[[], ox.Store],
               live: bool = True) -> None:
    """Follow a committed batch on the mirror: its KEPT lines and templates as an update, then
    its links — deleted with the forgotten nodes and by template, strengths rewritten in
    place, any other change read back from ``disk()`` (the disk store, holding the commit:
    called only then) — then the links into nodes whose liveness changed moved.

    ``live``: the mirror is exactly the disk store before the commit (not a copy catching up
    on commits queued during its build): a compression commit's strength replacements are
    then one update in the engine (``DELETE``/``INSERT`` of each link's quad where it holds
    the old strength); while catching up, each is checked against the mirror (a link read
    back from disk already holds later strengths) and read back again if it differs."""
    parts = list(todo.text)
    if todo.neutral or todo.replaced:
        if live:
            update = _neutral_update(todo)
            if update is not None:
                parts.append(update)
        else:
            _by_ends(todo)
            for (from_id, to_id), (old, new) in todo.neutral.items():
                todo.strengths.setdefault(f"<{V.LINK}{from_id}--{to_id}>", []).extend(
                    [(False, d) for d in old] + [(True, i) for i in new])
            todo.neutral = {}
    if parts:
        mirror.update(" ;\n".join(parts), prefixes=V.PREFIXES)
    forgotten = set()
    for node in todo.forgotten:
        forgotten.add(node)
        source = ox.NamedNode(node[1:-1])
        for q in list(mirror.quads_for_pattern(source, None, None, None)):
            if _is_link_graph(q.graph_name):
                mirror.remove(q)
    deleted = set(todo.deleted)
    for link in todo.deleted:
        a, b = _ends(link)
        for q in _link_quads_of(mirror, a, b):
            mirror.remove(q)
    reread = set(todo.structural)
    for link, writes in todo.strengths.items():
        if link in reread:
            continue
        a, _ = _ends(link)
        if (link in deleted or f"<{a.value}>" in forgotten
                or not _restrengthen(mirror, link, writes)):
            reread.add(link)
    if reread:
        store = disk()
        for link in sorted(reread):
            _reread(mirror, store, link)
    for node in sorted(todo.liveness):
        _regraph(mirror, node)
