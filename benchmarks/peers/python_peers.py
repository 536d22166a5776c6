"""Two in-memory Python peers: plain dicts (the lower bound for Python) and a NetworkX DiGraph.

Both expand nodes lazily during the walk (only popped nodes with hop < depth), as a user of
an in-memory graph would, and test keywords only on the nodes the walk pops.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from benchmarks.peers import (
    Adjacent,
    Peer,
    Query,
    Snapshot,
    best_first,
    discovery_order,
    render,
    text_matches,
)
from memory_rdf._oxigraph import AgentStore


class DictPeer(Peer):
    """The whole graph in dicts; links pre-sorted in discovery order at load time."""

    name = "python dict"

    def load(self, snapshot: Snapshot, store: AgentStore, workdir: Any) -> None:
        self.snap = snapshot
        self.threshold = snapshot.threshold
        alive = snapshot.nodes
        out: dict[str, list[tuple[str, float, str]]] = {}
        for s, t, w, r in snapshot.links:
            out.setdefault(s, []).append((t, w, r))
        self.out = {s: sorted(v, key=lambda x: (-x[1], x[0])) for s, v in out.items()}
        self.alive = set(alive)
        self.lowered = {n: (row.content.lower(), tuple(k.lower() for k in row.keywords))
                        for n, row in alive.items()}

    def recall(self, query: Query) -> str:
        seeds = self.snap.focus
        if not seeds:
            return ""
        threshold, alive = self.threshold, self.alive

        def neighbours(node: str) -> Iterator[Adjacent]:
            for t, w, r in self.out.get(node, ()):
                if w >= threshold and t in alive and query.follows(r):
                    yield t, w

        needles = query.needles

        def matches(node: str) -> bool:
            content, kws = self.lowered[node]
            return any(n in content or any(n in k for k in kws) for n in needles)

        results = best_first(seeds, neighbours, matches if needles else None, query.depth,
                             query.limit)
        nodes = self.snap.nodes
        texts = {n: (nodes[n].content, nodes[n].phrase) for n in results}
        dangling: dict[str, list[tuple[float, str]]] = {}
        for n in results:
            lost = [(w, r) for t, w, r in self.out.get(n, ())
                    if t not in alive and w >= threshold and query.follows(r)]
            if lost:
                dangling[n] = lost
        return render(self.snap.templates, results, texts, dangling)

    def importance(self, node: str) -> float:
        """SPEC §5.2 step 2 over the dicts (the baseline of LinkStore.importance)."""
        total = sum(w for _, w, _ in self.out.get(node, ()) if w >= self.threshold)
        return total + sum(w for w in self._incoming().get(node, ()) if w >= self.threshold)

    def _incoming(self) -> dict[str, list[float]]:
        inc: dict[str, list[float]] | None = getattr(self, "_inc", None)
        if inc is None:
            inc = {}
            for targets in self.out.values():
                for t, w, _ in targets:
                    inc.setdefault(t, []).append(w)
            self._inc = inc
        return inc

    def next_batch(self, limit: int) -> list[str]:
        focus = set(self.snap.focus)
        keyed = sorted((row.scan_key, n) for n, row in self.snap.nodes.items() if n not in focus)
        return [n for _, n in keyed[:limit]]


class NetworkXPeer(Peer):
    """A NetworkX DiGraph: node attributes hold the text, edge attributes strength/relation;
    a forgotten node is a bare node (added by the edge into it) without ``content``."""

    name = "networkx"
    default_max_nodes = 200_000

    def available(self) -> str | None:
        try:
            import networkx  # type: ignore[import-untyped, unused-ignore]  # noqa: F401
        except ImportError:
            return "networkx is not installed (pip install networkx)"
        return None

    def load(self, snapshot: Snapshot, store: AgentStore, workdir: Any) -> None:
        import networkx as nx  # type: ignore[import-untyped, unused-ignore]

        g: Any = nx.DiGraph()
        for n, row in snapshot.nodes.items():
            g.add_node(n, content=row.content, phrase=row.phrase, keywords=row.keywords)
        g.add_edges_from(
            (s, t, {"strength": w, "relation": r}) for s, t, w, r in snapshot.links
        )
        self.g = g
        self.snap = snapshot

    def recall(self, query: Query) -> str:
        seeds = self.snap.focus
        if not seeds:
            return ""
        g, threshold = self.g, self.snap.threshold
        nodes = g.nodes

        def neighbours(node: str) -> list[Adjacent]:
            return discovery_order(
                (t, d["strength"]) for t, d in g.succ[node].items()
                if d["strength"] >= threshold and "content" in nodes[t]
                and query.follows(d["relation"])
            )

        needles = query.needles

        def matches(node: str) -> bool:
            data = nodes[node]
            return text_matches(needles, data["content"], data["keywords"])

        results = best_first(seeds, neighbours, matches if needles else None, query.depth,
                             query.limit)
        texts = {n: (nodes[n]["content"], nodes[n]["phrase"]) for n in results}
        dangling: dict[str, list[tuple[float, str]]] = {}
        for n in results:
            lost = [(d["strength"], d["relation"]) for t, d in g.succ[n].items()
                    if "content" not in nodes[t] and d["strength"] >= threshold
                    and query.follows(d["relation"])]
            if lost:
                dangling[n] = lost
        return render(self.snap.templates, results, texts, dangling)

    def close(self) -> None:
        self.g = None
