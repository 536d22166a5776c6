"""Recall: a best-first walk from the focus over live links (SPEC §5.4).

The walk itself is a few lines of Python over one global priority queue. The graph it walks
is fetched from the store level by level: one ``live_outgoing_links`` query per hop for the
whole frontier (never one per node), one ``matching_nodes`` query for the keyword test, and
text only for the results. Every node the walk can expand (hop < depth along its first, best
path) is within ``depth - 1`` hops of a seed, so fetching BFS levels ``0 … depth-1`` gives the
walk every edge it can use.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

from memory_rdf._config import Templates
from memory_rdf._links import LinkStore
from memory_rdf._nodes import NodeStore


@dataclass(frozen=True)
class Seed:
    """A starting point: ``rank`` orders ties (0 = most recent focus node)."""

    node: str
    strength: float
    rank: int


@dataclass(frozen=True)
class Hit:
    node: str
    strength: float
    hop: int


def walk(
    seeds: Sequence[Seed],
    adjacency: dict[str, list[tuple[str, float, str]]],
    matches: set[str] | None,
    depth: int,
    limit: int,
) -> list[Hit]:
    """The best-first walk of SPEC §5.4 steps 2–3 over an in-memory adjacency.

    ``adjacency[node]`` lists ``(target, strength, relation)`` of the live, relation-filtered
    links to live nodes; ``matches`` is None when every node matches. Priority: higher path
    strength, then more recent seed, then discovery order.
    """
    heap: list[tuple[float, int, int, str, int]] = []
    order = 0
    for seed in seeds:
        heap.append((-seed.strength, seed.rank, order, seed.node, 0))
        order += 1
    heapq.heapify(heap)
    visited: set[str] = set()
    hits: list[Hit] = []
    while heap:
        neg, rank, _, node, hop = heapq.heappop(heap)
        if node in visited:
            continue
        visited.add(node)
        if matches is None or node in matches:
            hits.append(Hit(node, -neg, hop))
            if limit and len(hits) >= limit:
                break
        if hop < depth:
            for target, strength, _rel in adjacency.get(node, ()):
                if target not in visited:
                    heapq.heappush(heap, (neg * strength, rank, order, target, hop + 1))
                    order += 1
    return hits


class Searcher:
    def __init__(self, nodes: NodeStore, links: LinkStore, templates: Templates) -> None:
        self._nodes = nodes
        self._links = links
        self._templates = templates

    def fetch(
        self, seeds: Sequence[Seed], depth: int, relations: Sequence[str] | None
    ) -> tuple[dict[str, list[tuple[str, float, str]]], list[str]]:
        """Adjacency of every node within ``depth - 1`` hops, and every node reached."""
        adjacency: dict[str, list[tuple[str, float, str]]] = {}
        reached: dict[str, None] = dict.fromkeys(s.node for s in seeds)
        frontier = list(reached)
        for _ in range(depth):
            if not frontier:
                break
            fetched = self._links.live_outgoing(frontier, relations)
            for node in frontier:
                adjacency.setdefault(node, [])
            nxt: dict[str, None] = {}
            for source, target, strength, relation in fetched:
                adjacency[source].append((target, strength, relation))
                if target not in reached:
                    reached[target] = None
                    nxt[target] = None
            frontier = list(nxt)
        for targets in adjacency.values():
            # Discovery order among one node's links must not depend on the engine's row order.
            targets.sort(key=lambda t: (-t[1], t[0]))
        return adjacency, list(reached)

    def recall(
        self,
        seeds: Sequence[Seed],
        keywords: Sequence[str],
        relations: Sequence[str] | None,
        depth: int,
        limit: int,
    ) -> str:
        if not seeds:
            return ""
        adjacency, reached = self.fetch(seeds, depth, relations)
        matches = self._nodes.matching(reached, keywords) if keywords else None
        hits = walk(seeds, adjacency, matches, depth, limit)
        return self.render([h.node for h in hits], relations)

    def render(self, results: Sequence[str], relations: Sequence[str] | None) -> str:
        if not results:
            return ""
        texts = self._nodes.texts(results)
        dangling = self._links.dangling_outgoing(results, relations)
        t = self._templates
        entries: list[str] = []
        for nid in results:
            content, phrase = texts[nid]
            entries.append(t.memory.format(content=content))
            if nid in dangling:
                names = [r for r in dict.fromkeys(dangling[nid]) if r]
                if names:
                    entries.append(
                        t.forgotten_named.format(
                            phrase=phrase, relations=t.relation_separator.join(names)
                        )
                    )
                else:
                    entries.append(t.forgotten_unnamed.format(phrase=phrase))
        return t.entry_separator.join(entries)
