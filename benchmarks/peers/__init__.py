"""Peers: other engines answering THE SAME recall as memory_rdf, for side-by-side timing.

Every peer loads the same graph (read from the agent's store) and answers the same query: the
same seeds (the focus, newest first), depth, keywords, relation filter, result limit and
tie-break rules (SPEC §5.4: higher path strength, then the more recent seed, then discovery
order; one node's links are discovered strongest first, then by target id — the order
``memory_rdf._search.Searcher`` uses), rendered with the same templates. The suite checks that
every peer returns the identical text.

The best-first walk and the rendering here are written independently of
``memory_rdf._search`` on purpose: the Python peers are also a second implementation of
SPEC §5.4 that the library's answer is checked against.
"""

from __future__ import annotations

import functools
import heapq
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from memory_rdf._config import Templates
from memory_rdf._oxigraph import AgentStore, node_id

Adjacent = tuple[str, float]  # (target, strength)


@dataclass(frozen=True)
class Query:
    """One recall, as every engine must answer it."""

    label: str
    keywords: tuple[str, ...]
    relations: tuple[str, ...] | None
    depth: int
    limit: int

    @property
    def needles(self) -> list[str]:
        """The keywords as SPEC §5.4 step 4 compares them (blank ones ignored, lower-cased)."""
        return [k.strip().lower() for k in self.keywords if k.strip()]

    def follows(self, relation: str) -> bool:
        """Does the relation filter let a link with this name through? An unnamed link never
        passes a filter (SPARQL: ``FILTER(?relation IN (…))`` is false when unbound)."""
        return self.relations is None or (relation != "" and relation in self.relations)


@dataclass
class NodeRow:
    content: str
    phrase: str
    keywords: tuple[str, ...]
    scan_key: int


@dataclass
class Snapshot:
    """The memory graph as plain Python data, read once from the store."""

    nodes: dict[str, NodeRow]
    links: list[tuple[str, str, float, str]]  # (source, target, strength, relation ""=unnamed)
    focus: list[str]  # newest first: seed i has rank i
    threshold: float
    templates: Templates = field(default_factory=Templates)

    @classmethod
    def read(cls, store: AgentStore, threshold: float, templates: Templates) -> Snapshot:
        nodes: dict[str, NodeRow] = {}
        ids: dict[str, str] = {}  # one str object per id: millions of links share them

        def nid(iri: str) -> str:
            key = node_id(iri)
            return ids.setdefault(key, key)

        for iri, content, phrase, key in store.rows(
            "SELECT ?n ?c ?p ?k WHERE { ?n memory:scanOrder ?k ; memory:content ?c ; "
            "memory:phrase ?p }"
        ):
            nodes[nid(iri)] = NodeRow(content, phrase, (), int(key))
        keywords: dict[str, list[str]] = {}
        for iri, kw in store.rows("SELECT ?n ?k WHERE { ?n memory:keyword ?k }"):
            keywords.setdefault(nid(iri), []).append(kw)
        for n, kws in keywords.items():
            if n in nodes:
                nodes[n].keywords = tuple(kws)
        links = [
            (nid(s), nid(t), float(w), r or "")
            for s, t, w, r in store.rows(
                "SELECT ?s ?t ?w ?r WHERE { ?l memory:source ?s ; memory:target ?t ; "
                "memory:strength ?w . OPTIONAL { ?l memory:relation ?r } }"
            )
        ]
        focus = [
            nid(iri)
            for iri, _ in store.rows(
                "SELECT ?n ?o WHERE { <https://w3id.org/memory-rdf/focus> memory:member ?n . "
                "?n memory:focusOrder ?o } ORDER BY DESC(?o)"
            )
        ]
        return cls(nodes, links, focus, threshold, templates)


def best_first(
    seeds: Sequence[str],
    neighbours: Callable[[str], Iterable[Adjacent]],
    matches: Callable[[str], bool] | None,
    depth: int,
    limit: int,
    strengths: Sequence[float] | None = None,
) -> list[str]:
    """SPEC §5.4 steps 2–3. ``neighbours(node)`` yields the live, relation-filtered links to
    live nodes in discovery order (strongest first, then target id). ``strengths``: each
    seed's path strength (default 1.0: the focus; SPEC §5.5's keyword seeds have less)."""
    heap: list[tuple[float, int, int, str, int]] = [
        (-(1.0 if strengths is None else strengths[rank]), rank, rank, node, 0)
        for rank, node in enumerate(seeds)
    ]
    heapq.heapify(heap)
    order = len(heap)
    visited: set[str] = set()
    results: list[str] = []
    while heap:
        neg, rank, _, node, hop = heapq.heappop(heap)
        if node in visited:
            continue
        visited.add(node)
        if matches is None or matches(node):
            results.append(node)
            if limit and len(results) >= limit:
                break
        if hop < depth:
            for target, strength in neighbours(node):
                if target not in visited:
                    heapq.heappush(heap, (neg * strength, rank, order, target, hop + 1))
                    order += 1
    return results


def discovery_order(links: Iterable[tuple[str, float]]) -> list[Adjacent]:
    return sorted(links, key=lambda t: (-t[1], t[0]))


def text_matches(needles: Sequence[str], content: str, keywords: Iterable[str]) -> bool:
    """SPEC §5.4 step 4: a keyword is a case-insensitive substring of the content or of one
    of the node's keywords."""
    lowered = content.lower()
    kws = [k.lower() for k in keywords]
    return any(n in lowered or any(n in k for k in kws) for n in needles)


def render(
    templates: Templates,
    results: Sequence[str],
    texts: dict[str, tuple[str, str]],
    dangling: dict[str, list[tuple[float, str]]],
) -> str:
    """The recall text (SPEC §5.4 output): ``dangling[node]`` lists (strength, relation) of the
    node's live dangling links; their names are given strongest first, then by name."""
    entries: list[str] = []
    for node in results:
        content, phrase = texts[node]
        entries.append(templates.memory.format(content=content))
        lost = dangling.get(node)
        if lost:
            ordered = sorted(lost, key=lambda wr: (-wr[0], wr[1]))
            names = [r for r in dict.fromkeys(r for _, r in ordered) if r]
            if names:
                entries.append(templates.forgotten_named.format(
                    phrase=phrase, relations=templates.relation_separator.join(names)))
            else:
                entries.append(templates.forgotten_unnamed.format(phrase=phrase))
    return templates.entry_separator.join(entries)


@dataclass(frozen=True)
class Timer:
    """Runs one recall repeatedly: at least ``min_repeat`` and at most ``repeat`` timed runs,
    stopping early once ``budget_s`` seconds are spent. The first, untimed run gives the text
    (and warms caches)."""

    repeat: int = 30
    min_repeat: int = 3
    budget_s: float = 2.0

    def __call__(self, fn: Callable[[], str]) -> dict[str, Any]:
        text = fn()
        samples: list[float] = []
        began = time.perf_counter()
        while len(samples) < self.repeat and (
            len(samples) < self.min_repeat or time.perf_counter() - began < self.budget_s
        ):
            start = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - start) * 1000)
        return {"text": text, "samples_ms": samples}


class Peer:
    """An engine answering recall. Subclasses load a :class:`Snapshot` (or the store)."""

    name = "peer"
    #: Largest store (nodes) the peer is run on by default (memory or load time).
    default_max_nodes: int | None = None
    #: Load time measured by the peer itself (an external process), else None.
    reported_load_ms: float | None = None
    #: Resident memory of the peer's own process after loading, else None.
    reported_rss_bytes: int | None = None

    def available(self) -> str | None:
        """None when the peer can run here, else why not (shown as the skip reason)."""
        return None

    def load(self, snapshot: Snapshot, store: AgentStore, workdir: Any) -> None:
        raise NotImplementedError

    def recall(self, query: Query) -> str:
        raise NotImplementedError

    def run(self, queries: Sequence[Query], timer: Timer) -> list[dict[str, Any]]:
        """Answer every query under ``timer``: ``{"text", "samples_ms"}`` per query."""
        return [timer(functools.partial(self.recall, q)) for q in queries]

    def close(self) -> None:
        pass


def all_peers() -> list[Peer]:
    from benchmarks.peers.levelgraph_peer import LevelGraphPeer
    from benchmarks.peers.python_peers import DictPeer, NetworkXPeer
    from benchmarks.peers.rdflib_peer import RdflibPeer
    from benchmarks.peers.sqlite_peer import SqlitePeer

    return [DictPeer(), NetworkXPeer(), RdflibPeer(), SqlitePeer(), LevelGraphPeer()]
