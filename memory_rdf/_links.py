"""Link store: weighted, named, directed links between nodes (SPEC §2).

A link is a resource ``link:{a}--{b}`` (source, target, strength, optional relation) plus a
shortcut triple ``node:a memory:link node:b``. A link whose target is no longer a node is
*dangling* and is kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memory_rdf import _vocab as V
from memory_rdf._nodes import chunks
from memory_rdf._store import (
    AgentStore,
    WriteBatch,
    link_ref,
    lit,
    node_id,
    node_ref,
    render,
    triple,
)


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


class LinkStore:
    def __init__(self, store: AgentStore, threshold: float) -> None:
        self._store = store
        self._threshold = lit(float(threshold))

    def add(self, batch: WriteBatch, links: Sequence[LinkData]) -> None:
        batch.insert(t for link in links for t in link_triples(link))

    def live_outgoing(
        self, sources: Sequence[str], relations: Sequence[str] | None
    ) -> list[tuple[str, str, float, str]]:
        """``(source, target, strength, relation)`` of live links from ``sources`` to live nodes."""
        rels = None if relations is None else [lit(r) for r in relations]
        out: list[tuple[str, str, float, str]] = []
        for part in chunks(sources):
            query = render(
                "live_outgoing_links",
                sources=[node_ref(i) for i in part],
                threshold=self._threshold,
                relations=rels,
            )
            for s, t, w, rel in self._store.rows(query):
                out.append((node_id(s), node_id(t), w, rel or ""))
        return out

    def dangling_outgoing(
        self, sources: Sequence[str], relations: Sequence[str] | None
    ) -> dict[str, list[str]]:
        """``source → relation names`` (strongest first, "" = unnamed) of live dangling links."""
        rels = None if relations is None else [lit(r) for r in relations]
        out: dict[str, list[str]] = {}
        for part in chunks(sources):
            query = render(
                "dangling_links",
                sources=[node_ref(i) for i in part],
                threshold=self._threshold,
                relations=rels,
            )
            for s, _t, _w, rel in self._store.rows(query):
                out.setdefault(node_id(s), []).append(rel or "")
        return out

    def importance(self, nid: str) -> float:
        query = render("importance", node=node_ref(nid), threshold=self._threshold)
        return float(self._store.scalar(query, 0.0))

    def counts(self) -> tuple[int, int]:
        """``(links, dangling links)``."""
        rows = self._store.rows(render("link_counts"))
        links, dangling = rows[0] if rows else (0, 0)
        return int(links or 0), int(dangling or 0)
