"""rdflib peer: an in-memory rdflib Graph filled from the store's dump, running the library's
own SPARQL (the shipped ``.rq`` files, rendered by ``memory_rdf._oxigraph.render``) level by
level, exactly the query sequence the library runs on Oxigraph:

``outgoing_links`` per BFS level (frontier chunked to 500 IRIs; its dangling rows are the
perception of the expanded nodes), ``matching_nodes`` on every reached node, ``node_texts`` on
the results, and ``dangling_targets`` + ``dangling_link_details`` for the results that were not
expanded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchmarks.peers import Peer, Query, Snapshot, best_first, render
from memory_rdf import _vocab as V
from memory_rdf._nodes import chunks
from memory_rdf._oxigraph import AgentStore, Term, iri_ref, link_iri, lit, node_id, node_ref
from memory_rdf._oxigraph import render as render_query


class RdflibPeer(Peer):
    name = "rdflib (same SPARQL)"
    #: rdflib holds ~90 triples per node as Python objects (~1 kB each) and parses ~100k
    #: triples/s: 20k nodes is ~2M triples, ~20 s and a few GB.
    default_max_nodes = 20_000

    def available(self) -> str | None:
        try:
            import rdflib  # noqa: F401
        except ImportError:
            return "rdflib is not installed (pip install rdflib)"
        return None

    def load(self, snapshot: Snapshot, store: AgentStore, workdir: Any) -> None:
        import rdflib

        self.graph = rdflib.Graph()
        self.graph.parse(data=store.dump("ntriples", default_graph_only=True), format="nt")
        self.snap = snapshot
        self.threshold = lit(float(snapshot.threshold))
        self.triples = len(self.graph)

    def rows(self, query: str) -> list[tuple[Any, ...]]:
        out = []
        for row in self.graph.query(query, initNs=V.PREFIXES):
            out.append(tuple(None if v is None else v.toPython() for v in row))  # type: ignore[union-attr]
        return out

    def recall(self, query: Query) -> str:
        seeds = self.snap.focus
        if not seeds:
            return ""
        rels: list[Term] | None = (
            None if query.relations is None else [lit(r) for r in query.relations]
        )
        adjacency: dict[str, list[tuple[str, float]]] = {}
        dangling: dict[str, list[tuple[float, str]]] = {}
        reached: dict[str, None] = dict.fromkeys(seeds)
        frontier = list(reached)
        for _ in range(query.depth):
            if not frontier:
                break
            nxt: dict[str, None] = {}
            for part in chunks(frontier):
                for n in part:
                    adjacency.setdefault(n, [])
                q = render_query("outgoing_links", sources=[node_ref(n) for n in part],
                                 threshold=self.threshold, relations=rels)
                for s, t, w, r, alive in self.rows(q):
                    source, target = node_id(str(s)), node_id(str(t))
                    if alive is None:
                        dangling.setdefault(source, []).append((float(w), str(r or "")))
                        continue
                    adjacency[source].append((target, float(w)))
                    if target not in reached:
                        reached[target] = None
                        nxt[target] = None
            frontier = list(nxt)
        for targets in adjacency.values():
            targets.sort(key=lambda t: (-t[1], t[0]))
        needles = query.needles
        matches: set[str] | None = None
        if needles:
            matches = set()
            for part in chunks(list(reached)):
                q = render_query("matching_nodes", nodes=[node_ref(n) for n in part],
                                 keywords=[lit(k) for k in needles])
                matches.update(node_id(str(r[0])) for r in self.rows(q))
        results = best_first(
            seeds, lambda n: adjacency.get(n, ()),
            None if matches is None else matches.__contains__, query.depth, query.limit,
        )
        texts: dict[str, tuple[str, str]] = {}
        for part in chunks(results):
            q = render_query("node_texts", nodes=[node_ref(n) for n in part])
            for iri, content, phrase in self.rows(q):
                texts[node_id(str(iri))] = (str(content), str(phrase))
        todo = [n for n in results if n not in adjacency]
        dangling.update(self._dangling(todo, rels))
        return render(self.snap.templates, results, texts, dangling)

    def _dangling(
        self, sources: Sequence[str], rels: list[Term] | None
    ) -> dict[str, list[tuple[float, str]]]:
        pairs: dict[str, str] = {}
        for part in chunks(sources):
            q = render_query("dangling_targets", sources=[node_ref(n) for n in part])
            for s, t in self.rows(q):
                source = node_id(str(s))
                pairs[link_iri(source, node_id(str(t)))] = source
        out: dict[str, list[tuple[float, str]]] = {}
        for part in chunks(list(pairs)):
            q = render_query("dangling_link_details", links=[iri_ref(i) for i in part],
                             threshold=self.threshold, relations=rels)
            for link, w, r in self.rows(q):
                out.setdefault(pairs[str(link)], []).append((float(w), str(r or "")))
        return out

    def close(self) -> None:
        self.graph = None  # type: ignore[assignment]
