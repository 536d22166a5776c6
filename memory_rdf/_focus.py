"""Focus manager: the agent's most recent nodes, an LRU by order, not by time (SPEC §5.1 step 4)."""

from __future__ import annotations

from collections.abc import Sequence

from memory_rdf import _vocab as V
from memory_rdf._oxigraph import MemoryStore, WriteBatch, lit, node_id, node_ref, render, triple


class FocusManager:
    def __init__(self, store: MemoryStore, limit: int) -> None:
        self._store = store
        self._limit = limit

    def current(self) -> list[tuple[str, int]]:
        """``(id, focusOrder)`` of the focus nodes, newest first."""
        rows = self._store.rows(render("focus_nodes"))
        return [(node_id(iri), int(order)) for iri, order in rows]

    def ids(self) -> list[str]:
        return [nid for nid, _ in self.current()]

    def update(
        self, batch: WriteBatch, current: Sequence[tuple[str, int]], new_ids: Sequence[str]
    ) -> list[str]:
        """Put the newest ``min(limit, n)`` new nodes in front; drop the oldest beyond the limit.

        ``current`` is the focus as read in the same task (newest first). Returns the new focus
        ids, newest first.
        """
        next_order = max((order for _, order in current), default=0) + 1
        incoming = [(nid, next_order + i) for i, nid in enumerate(new_ids)]
        merged = sorted([*current, *incoming], key=lambda item: -item[1])
        keep = merged[: self._limit]
        kept = {nid for nid, _ in keep}
        dropped = [(nid, order) for nid, order in current if nid not in kept]
        added = [(nid, order) for nid, order in incoming if nid in kept]
        focus = V.FOCUS
        batch.delete(
            t
            for nid, order in dropped
            for t in (
                triple(focus, V.MEMBER, node_ref(nid)),
                triple(node_ref(nid), V.FOCUS_ORDER, lit(order)),
            )
        )
        inserts = [triple(focus, V.A, V.FOCUS_CLASS)]
        for nid, order in added:
            inserts.append(triple(focus, V.MEMBER, node_ref(nid)))
            inserts.append(triple(node_ref(nid), V.FOCUS_ORDER, lit(order)))
        batch.insert(inserts)
        return [nid for nid, _ in keep]
