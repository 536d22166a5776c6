"""Link store: weighted, named, directed links between nodes (SPEC §2).

A link is a resource ``link:{a}--{b}`` (source, target, strength, optional relation) plus a
shortcut triple ``node:a memory:link node:b``. A link whose target is no longer a node is
*dangling* and is kept.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Any

from memory_rdf import _vocab as V
from memory_rdf._nodes import chunks
from memory_rdf._oxigraph import (
    AgentStore,
    MemoryStore,
    Row,
    Term,
    WriteBatch,
    iri_ref,
    link_iri,
    link_ref,
    lit,
    node_id,
    node_ref,
    render,
    triple,
)
from memory_rdf._oxigraph.link_index import graph_link
from memory_rdf._oxigraph.term_index import KeptReads


class _Strengths(dict[str, float]):
    """A strength's lexical form (as the read mirror gives it) → its float, parsed on first
    sight. A walk level reads up to thousands of strengths, often the same few values (a link
    starts at a configured strength): parsing a shortest-repr double (~1,500 instructions) cost
    more than the lookup, and a dict's own lookup (``__getitem__``, C-level on a hit) is
    cheaper than an ``lru_cache``'s, which reorders its list at every hit (issue 38). At most
    :data:`STRENGTHS_KEPT` values: when full, it starts again empty."""

    __slots__ = ()

    def __missing__(self, text: str) -> float:
        if len(self) >= STRENGTHS_KEPT:
            self.clear()
        value = self[text] = float(text)
        return value


#: Most distinct strengths :data:`_strength` keeps (~0.5 MB at most).
STRENGTHS_KEPT = 4096
#: A strength's lexical form → its float (:class:`_Strengths`).
_strength = _Strengths().__getitem__
#: A target IRI's node id: the IRI after the node prefix (C-level, for ``map``).
_after_prefix = operator.itemgetter(slice(len(V.NODE), None))
#: Walk levels of at least this many sources read a row a source (``mirror_level.rq``),
#: smaller ones a row a link (``mirror_outgoing.rq``): grouping costs ~0.14 M instructions a
#: query and saves ~30 k a source (callgrind, the 10k suite's links; issue 38).
GROUPED_LEVEL = 6


@dataclass(frozen=True)
class LinkData:
    source: str
    target: str
    strength: float
    relation: str = ""  # "" = no name


def link_triples(link: LinkData) -> list[str]:
    s, t, r = node_ref(link.source), node_ref(link.target), link_ref(link.source, link.target)
    out = [
        triple(s, V.LINK_P, t),
        triple(r, V.A, V.LINK_CLASS),
        triple(r, V.SOURCE, s),
        triple(r, V.TARGET, t),
        triple(r, V.STRENGTH, lit(float(link.strength))),
    ]
    if link.relation:
        out.append(triple(r, V.RELATION, lit(link.relation)))
    return out


def by_strength(links: Sequence[tuple[str, float, str]]) -> dict[str, list[str]]:
    """``(source, strength, relation)`` → ``source → relations``, strongest first, then by
    name ("" = unnamed first): the order of SPEC §5.4's perception entry."""
    out: dict[str, list[str]] = {}
    for source, _w, rel in sorted(links, key=lambda x: (x[0], -x[1], x[2])):
        out.setdefault(source, []).append(rel)
    return out


#: The relations of the links between consecutive segments of one remember (SPEC §5.1
#: step 3): segment i → i+1, and i+1 → i.
NEXT = "下文"
PREVIOUS = "上文"


def named(relation: object, relations: Sequence[str] | None) -> bool:
    """Whether a link row of ``relation`` (None: unnamed) passes the filter ``relations``.
    The queries filter already; Virtuoso 7 let an unnamed link through a
    ``FILTER(?relation IN (a, b))`` after ``OPTIONAL { ?link memory:relation ?relation }``
    (two names or more: SPEC §5.4 v3's two forms of a name), so the rows are checked here too.
    """
    return relations is None or (isinstance(relation, str) and relation in relations)


def relation_terms(relations: Sequence[str] | None) -> list[Term] | None:
    """A recall's relation filter as the literals the link queries take (None: any)."""
    return None if relations is None else [lit(r) for r in relations]


def _graph(iri: str) -> tuple[bool, str | None]:
    """``(dangling, relation)`` of a link quad's graph in the read mirror (None: unnamed)."""
    found = graph_link(iri)
    if found is None:  # the mirror holds no other named graph
        raise ValueError(f"not a link graph of the read mirror: {iri}")
    return found


def _graph_names(local: AgentStore) -> tuple[str, ...] | None:
    """The read mirror's named graphs; None when no mirror serves reads."""
    graphs = local.mirror_graphs()
    return None if graphs is None else tuple(graphs)


@lru_cache(maxsize=256)
def _link_graphs(graphs: tuple[str, ...], lost: bool,
                 relations: tuple[str, ...] | None) -> tuple[Term, ...]:
    """Of a read mirror's named ``graphs``, the link graphs of live (``lost``: forgotten)
    targets of the given relations (None: any), as terms; cached (a walk level asks)."""
    out: list[Term] = []
    for graph in graphs:
        kind = graph_link(graph)
        if kind is not None and kind[0] == lost and (
                relations is None or (kind[1] is not None and kind[1] in relations)):
            out.append(iri_ref(graph))
    return tuple(out)


def link_rows(rows: Sequence[Sequence[Any]]) -> dict[str, list[tuple[str, float]]]:
    """``source → [(target, strength), …]`` of ``mirror_outgoing.rq``'s rows (three terms a
    link). A source's rows come together: its id and its list are looked up once for them."""
    live: dict[str, list[tuple[str, float]]] = {}
    previous: object = None
    links: list[tuple[str, float]] = []
    cut, strength = len(V.NODE), _strength
    for s, t, w in rows:
        if s != previous:
            previous = s
            links = live.setdefault(s.value[cut:], [])
        links.append((t.value[cut:], strength(w.value)))
    return live


def level_links(rows: Sequence[Sequence[Any]]) -> dict[str, list[tuple[str, float]]]:
    """``source → [(target, strength), …]`` of ``mirror_level.rq``'s rows (pyoxigraph terms).

    One row a source: its links' targets as "target target …" and their strengths as
    "strength strength …", split here at C level instead of three terms a link unpacked in
    Python (issue 38). The link quads' ends are always node IRIs (link_index.py): a target's
    id is its IRI after the prefix; a strength the query's FILTER keeps is a valid number,
    whose lexical form holds no space. Two lists of different lengths raise ValueError."""
    live: dict[str, list[tuple[str, float]]] = {}
    cut, target, strength = len(V.NODE), _after_prefix, _strength
    for s, targets, strengths in rows:
        ts, ws = targets.value.split(" "), strengths.value.split(" ")
        if len(ts) != len(ws):
            raise ValueError(f"a level row of {len(ts)} targets and {len(ws)} strengths")
        live[s.value[cut:]] = list(zip(map(target, ts), map(strength, ws), strict=False))
    return live


class LinkStore:
    def __init__(self, store: MemoryStore, threshold: float) -> None:
        self._store = store
        self._threshold = lit(float(threshold))
        #: the read mirror's named graphs, kept until the next commit: :meth:`_mirror_graphs`
        self._kept = KeptReads()

    def add(self, batch: WriteBatch, links: Sequence[LinkData]) -> None:
        batch.insert(t for link in links for t in link_triples(link))

    def outgoing(
        self, sources: Sequence[str], relations: Sequence[str] | None
    ) -> tuple[dict[str, list[tuple[str, float]]], list[tuple[str, float, str]] | None]:
        """Live links out of ``sources``: ``source → [(target, strength), …]`` of links to
        live nodes (a source without any: absent or []), and ``(source, strength, relation)``
        of dangling ones (relation "" = unnamed), or None when they were not read. From the
        read mirror's link quads when the store has one (``mirror_level.rq``, or
        ``mirror_outgoing.rq`` for a few sources, :data:`GROUPED_LEVEL`: one lookup per link,
        the link graphs of live targets only: the dangling links are looked up for the
        results alone, :meth:`dangling_outgoing`), else from the SPEC §2 link resources
        (``outgoing_links.rq``); the same links either way, each source's in the engine's
        order (the sources in any order)."""
        live: dict[str, list[tuple[str, float]]] = {}
        graphs = self._mirror_graphs(False, relations)
        # a row a source from a few sources on (mirror_level.rq); below, a row a link
        # (mirror_outgoing.rq: the grouping's fixed cost is more than it saves on a few rows)
        grouped = len(sources) >= GROUPED_LEVEL
        indexed = None if graphs is None else self._indexed_rows(
            "mirror_level" if grouped else "mirror_outgoing", sources, graphs)
        if indexed is not None:
            return (level_links if grouped else link_rows)(indexed), None
        dangling: list[tuple[str, float, str]] = []
        for s, t, w, rel, alive in self._filtered_rows("outgoing_links", "sources", sources,
                                                       relations):
            if not named(rel, relations):
                continue
            if alive is None:
                dangling.append((node_id(s), w, rel or ""))
            else:
                live.setdefault(node_id(s), []).append((node_id(t), w))
        return live, dangling

    def _mirror_graphs(
        self, lost: bool, relations: Sequence[str] | None
    ) -> tuple[Term, ...] | None:
        """The read mirror's link graphs of live (``lost``: forgotten) targets, of the given
        relations (None: any), for a ``mirror_*.rq`` query's ``FROM NAMED``; None when no read
        mirror serves reads (an endpoint has none)."""
        local = self._store.local
        if local is None:
            return None
        # A graph comes with the first link of its kind, in a commit: the list read at a commit
        # generation is kept while it lasts (a walk level asks; issue 38). A mirror built again
        # meanwhile holds the same graphs (or fewer, the emptied ones: they give no rows).
        graphs = self._kept.get(local, "graphs", partial(_graph_names, local))
        if graphs is None or not local.mirrored:
            return None
        return _link_graphs(graphs, lost, None if relations is None else tuple(relations))

    def replies(
        self, sources: Sequence[str], relations: Sequence[str] | None
    ) -> dict[str, str]:
        """``source → the node that came right after it`` (``reply_context.rq``): among the
        live nodes a source links to (relation filter applied) that were created after it,
        the target of its "下文" link (the next segment of the same remember) if it has one,
        else the earliest created (a node of a later remember, linked to the source while the
        source was in focus: SPEC §5.1 step 3). Sources without such a link are absent."""
        best: dict[str, tuple[bool, Any, str]] = {}
        for s, t, rel, created in self._filtered_rows("reply_context", "nodes", sources,
                                                       relations):
            if not named(rel, relations):
                continue
            source, target = node_id(s), node_id(t)
            key = (rel != NEXT, created, target)
            if source not in best or key < best[source]:
                best[source] = key
        return {source: key[2] for source, key in best.items()}

    def _filtered_rows(
        self, name: str, param: str, ids: Sequence[str], relations: Sequence[str] | None
    ) -> Iterator[Row]:
        """Rows of query ``name`` for the nodes ``ids`` (bound to ``param``, a chunk at a
        time) over live links (``$threshold``) of the given relations (None: any)."""
        rels = relation_terms(relations)
        for part in chunks(ids):
            yield from self._store.rows(render(
                name, **{param: [node_ref(i) for i in part]},
                threshold=self._threshold, relations=rels,
            ))

    def _indexed_rows(
        self, name: str, sources: Sequence[str], graphs: Sequence[Term]
    ) -> list[Sequence[Any]] | None:
        """Rows (pyoxigraph terms) of the link-quad query ``name`` (``mirror_*.rq``) for
        ``sources``, a chunk at a time, over live links of the link ``graphs``
        (:meth:`_mirror_graphs`; none: no rows); None when no read mirror serves reads — at
        any chunk (a mirror renewed meanwhile): then ask the SPEC §2 layout for all of them."""
        local = self._store.local
        if local is None:  # an endpoint has no read mirror
            return None
        out: list[Sequence[Any]] = []
        if not graphs:  # FROM NAMED of no graph would read every one
            return out
        for part in chunks(sources):
            rows = local.mirror_rows(render(
                name, sources=[node_ref(i) for i in part], threshold=self._threshold,
                graphs=graphs,
            ))
            if rows is None:
                return None
            out += rows
        return out

    def dangling_outgoing(
        self, sources: Sequence[str], relations: Sequence[str] | None
    ) -> dict[str, list[str]]:
        """``source → relation names`` (strongest first, "" = unnamed) of live dangling links.

        With a read mirror, one lookup per link in its link quads (``mirror_lost.rq``).
        Without, two steps: the forgotten targets through the shortcut triples
        (``dangling_targets.rq``), then strength and relation of just those links by IRI
        (``dangling_link_details.rq``) — instead of reading every link resource of every
        source (``dangling_links.rq``: the same answer, dearer; benchmarks/profile_recall.py)."""
        graphs = self._mirror_graphs(True, relations)
        indexed = None if graphs is None else self._indexed_rows("mirror_lost", sources, graphs)
        if indexed is not None:
            # the graphs read are those of the asked relations (_mirror_graphs): every row counts
            found = [(node_id(s.value), _strength(w.value), _graph(g.value)[1] or "")
                     for s, w, g in indexed]
            return by_strength(found)
        pairs: dict[str, str] = {}  # link IRI → source id
        for part in chunks(sources):
            query = render("dangling_targets", sources=[node_ref(i) for i in part])
            for s, t in self._store.rows(query):
                source, target = node_id(s), node_id(t)
                pairs[link_iri(source, target)] = source
        if not pairs:
            return {}
        found = []
        for part in chunks(list(pairs)):
            query = render(
                "dangling_link_details",
                links=[iri_ref(i) for i in part],
                threshold=self._threshold,
                relations=relation_terms(relations),
            )
            for iri, w, rel in self._store.rows(query):
                if named(rel, relations):
                    found.append((pairs[iri], w, rel or ""))
        return by_strength(found)

    def cut_incoming(self, batch: WriteBatch, targets: Sequence[str]) -> None:
        """Remove, as part of ``batch``, every link into ``targets`` from other nodes: their
        resources and their shortcut triples (``incoming_links.rq``), for a forget that leaves
        no trace (SPEC §5.6 v3). The links out of ``targets`` go with the nodes themselves."""
        gone = set(targets)
        links: set[str] = set()
        shortcuts: set[tuple[str, str]] = set()
        for part in chunks(targets):
            query = render("incoming_links", nodes=[node_ref(i) for i in part])
            for node, source, link in self._store.rows(query):
                if source is not None and (node_id(source) in gone or source.startswith("_:")):
                    continue  # out of a node forgotten by the same batch (or not a node)
                if link is not None:
                    if not link.startswith("_:"):
                        links.add(link)
                elif source is not None:
                    shortcuts.add((source, node))
        if links:
            batch.update("delete_links", links=[iri_ref(i) for i in sorted(links)])
        batch.delete(triple(iri_ref(s), V.LINK_P, iri_ref(t)) for s, t in sorted(shortcuts))

    def importance(self, nid: str) -> float:
        query = render("importance", node=node_ref(nid), threshold=self._threshold)
        return float(self._store.scalar(query, 0.0))

    def counts(self) -> tuple[int, int]:
        """``(links, dangling links)``."""
        rows = self._store.rows(render("link_counts"))
        links, dangling = rows[0] if rows else (0, 0)
        return int(links or 0), int(dangling or 0)
