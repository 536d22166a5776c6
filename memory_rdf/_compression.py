"""Forgetting: compression scans, slices and the fixed pool (SPEC §5.2, §5.3).

A slice takes the next nodes in scan order and scans them one by one. To keep the store round
trips few, the state of a chunk of nodes (their text, their links) is read in two queries and
the scans are computed in Python on that local copy, exactly as if each node were scanned
alone (a link between two scanned nodes decays twice); the writes are committed in one
``update()`` per chunk, before any model call and whenever the slice stops, so a crash leaves
every scan either whole or not done.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any

from memory_rdf import _vocab as V
from memory_rdf._calls import Backoff, CallStats, with_retries
from memory_rdf._config import Config
from memory_rdf._exceptions import ModelError
from memory_rdf._focus import FocusManager
from memory_rdf._links import LinkStore
from memory_rdf._nodes import NodeStore, chunks
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
from memory_rdf._text import index_terms
from memory_rdf._types import Processed, SmallModel, check_processed

#: Nodes whose state is read and written together (one read, one update) within a slice.
CHUNK_SIZE = 32
#: Fixed pool: importance is measured on this many sampled non-focus nodes (SPEC §5.3: ≥ 16).
EVICTION_SAMPLE = 32


@dataclass
class SliceReport:
    scanned: int = 0
    compressed: int = 0
    forgotten: int = 0
    links_removed: int = 0
    model_calls: int = 0
    preempted: bool = False
    elapsed_ms: float = 0.0
    forgotten_ids: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "scanned": self.scanned,
            "compressed": self.compressed,
            "forgotten": self.forgotten,
            "links_removed": self.links_removed,
            "model_calls": self.model_calls,
            "preempted": self.preempted,
            "elapsed_ms": round(self.elapsed_ms, 3),
        }


def forget_ops(batch: WriteBatch, nid: str) -> None:
    """Forget a node: its triples and the links out of it; links into it stay (dangling)."""
    ref = node_ref(nid)
    batch.operation(f"DELETE WHERE {{ ?link {V.SOURCE} {ref} . ?link ?p ?o }}")
    batch.operation(f"DELETE WHERE {{ {ref} ?p ?o }}")


class Compressor:
    def __init__(
        self,
        *,
        store: AgentStore,
        nodes: NodeStore,
        links: LinkStore,
        focus: FocusManager,
        config: Config,
        model: SmallModel,
        fallback: SmallModel,
        user_waiting: Callable[[], bool],
    ) -> None:
        self.store, self.nodes, self.links, self.focus = store, nodes, links, focus
        self.config, self.model, self.fallback = config, model, fallback
        self.user_waiting = user_waiting
        self.stats = CallStats()
        self._rng = random.Random(0x5EED)

    # -- scan order ----------------------------------------------------------------------------

    def next_batch(self, limit: int) -> list[str]:
        rows = self.store.rows(render("scan_order") + f"\nLIMIT {int(limit)}")
        return [node_id(r[0]) for r in rows]

    # -- a slice -------------------------------------------------------------------------------

    def run_slice(self) -> Generator[Backoff, None, dict[str, Any]]:
        cfg = self.config
        report = SliceReport()
        running = 0.0  # own running time, backoff waits excluded (SPEC §5.3)
        mark = time.perf_counter()
        focus = set(self.focus.ids())
        candidates = self.next_batch(cfg.compression_batch_size)
        pending = WriteBatch()
        try:
            for part in chunks(candidates, CHUNK_SIZE):
                state = _ChunkState.read(self.store, part)
                for nid in part:
                    running += time.perf_counter() - mark
                    mark = time.perf_counter()
                    if running * 1000 >= cfg.time_slice_ms:
                        return self._done(report, running, pending)
                    if self.user_waiting():
                        report.preempted = True
                        return self._done(report, running, pending)
                    if nid not in state.nodes:
                        continue
                    gen = self._scan(nid, state, focus, pending, report)
                    try:
                        while True:
                            backoff = next(gen)
                            running += time.perf_counter() - mark
                            yield backoff
                            mark = time.perf_counter()
                    except StopIteration:
                        pass
                self.store.commit(pending)
                pending = WriteBatch()
            running += time.perf_counter() - mark
            return self._done(report, running, pending)
        except GeneratorExit:
            # Abandoned during a model backoff: what was computed before that node is whole.
            self.store.commit(pending)
            raise

    def _done(self, report: SliceReport, running: float, pending: WriteBatch) -> dict[str, Any]:
        self.store.commit(pending)
        report.elapsed_ms = running * 1000
        return report.as_dict()

    # -- one node ------------------------------------------------------------------------------

    def _scan(
        self,
        nid: str,
        state: _ChunkState,
        focus: set[str],
        pending: WriteBatch,
        report: SliceReport,
    ) -> Generator[Backoff, None, None]:
        cfg = self.config
        content, original, scans = state.nodes[nid]
        touching = state.touching(nid)
        live = (state.links[k] for k in touching)
        importance = sum(w for w in live if w >= cfg.link_break_threshold)
        target = math.floor(original * min(importance, 1.0)) if importance > 0 else 0
        if importance <= 0 or target < cfg.delete_threshold:
            forget_ops(pending, nid)
            state.forget(nid)
            report.forgotten += 1
            report.forgotten_ids.append(nid)
            report.scanned += 1
            return
        ref = node_ref(nid)
        if target < len(content):
            # Commit what is planned so far: a model call may be abandoned (SPEC §5.3).
            self.store.commit(pending)
            pending.clear()
            before = self.stats.calls
            try:
                p = yield from with_retries(
                    lambda: self._checked(self.model.process(content, target), target),
                    cfg, self.stats, "process",
                )
                self._rewrite(pending, ref, p)
                state.nodes[nid] = (p.content, original, scans)
                report.compressed += 1
            except ModelError:
                pass  # the node stays as it was; decay and scanCount still happen
            finally:
                report.model_calls += self.stats.calls - before
        for key in touching:
            source, target_id = key
            if source in focus:
                continue  # links out of a focus node do not decay (SPEC §5.2 step 7)
            w = state.links[key] * cfg.decay_rate
            lref = link_ref(source, target_id)
            pending.operation(f"DELETE WHERE {{ {lref} {V.STRENGTH} ?w }}")
            if w < cfg.link_break_threshold:
                pending.operation(f"DELETE WHERE {{ {lref} ?p ?o }}")
                pending.delete([triple(node_ref(source), V.LINK_P, node_ref(target_id))])
                state.remove_link(key)
                report.links_removed += 1
            else:
                pending.insert([triple(lref, V.STRENGTH, lit(w))])
                state.links[key] = w
        pending.operation(f"DELETE WHERE {{ {ref} {V.SCAN_COUNT} ?s }}")
        pending.insert([triple(ref, V.SCAN_COUNT, lit(scans + 1))])
        state.nodes[nid] = (state.nodes[nid][0], original, scans + 1)
        report.scanned += 1

    def _checked(self, value: Any, target: int) -> Processed:
        p = check_processed(value)
        content = p.content.strip()
        if not content or len(content) > 1.25 * target:
            raise ModelError(
                f"compressed text has {len(content)} characters for a target of {target}"
            )
        keywords = [k for k in dict.fromkeys(k.strip() for k in p.keywords) if k]
        phrase = p.phrase.strip() or self.fallback.process(content).phrase
        return Processed(content, phrase, keywords)

    def _rewrite(self, batch: WriteBatch, ref: str, p: Processed) -> None:
        for prop in (V.CONTENT, V.PHRASE, V.KEYWORD, V.TERM, V.TERM_COUNT):
            batch.operation(f"DELETE WHERE {{ {ref} {prop} ?o }}")
        triples = [triple(ref, V.CONTENT, lit(p.content)), triple(ref, V.PHRASE, lit(p.phrase))]
        triples += [triple(ref, V.KEYWORD, lit(k)) for k in p.keywords]
        if self.config.keyword_index:
            terms = index_terms(p.content, p.keywords)
            triples += [triple(ref, V.TERM, lit(t)) for t in terms]
            if terms:
                triples.append(triple(ref, V.TERM_COUNT, lit(len(terms))))
        batch.insert(triples)

    # -- fixed pool ----------------------------------------------------------------------------

    def make_room(self, batch: WriteBatch, incoming: int, focus: set[str]) -> None:
        """Before ``incoming`` nodes are created: forget the least important non-focus nodes
        until they fit in ``max_nodes`` (SPEC §5.3). Importance is estimated on a random window
        of ``EVICTION_SAMPLE`` candidates, never by sorting every node."""
        cap = self.config.max_nodes
        if cap is None:
            return
        excess = self.nodes.count() + incoming - cap
        if excess <= 0:
            return
        base = render("eviction_sample")
        total = int(self.store.scalar(
            "SELECT (COUNT(?n) AS ?c) WHERE { ?n memory:scanCount ?s . FILTER NOT EXISTS { "
            f"{V.FOCUS} {V.MEMBER} ?n }} }}", 0))
        evicted: set[str] = set()
        for _ in range(min(excess, total)):
            size = max(EVICTION_SAMPLE, 16)
            offset = self._rng.randrange(max(total - size, 0) + 1)
            sample = [
                node_id(r[0])
                for r in self.store.rows(base + f"\nOFFSET {int(offset)} LIMIT {int(size)}")
            ]
            sample = [n for n in sample if n not in evicted and n not in focus]
            if not sample:
                break
            victim = min(sample, key=lambda n: (self.links.importance(n), n))
            forget_ops(batch, victim)
            evicted.add(victim)


class _ChunkState:
    """Local copy of a chunk's nodes and of every link touching them."""

    def __init__(self) -> None:
        self.nodes: dict[str, tuple[str, int, int]] = {}
        self.links: dict[tuple[str, str], float] = {}
        self._by_node: dict[str, list[tuple[str, str]]] = {}

    @classmethod
    def read(cls, store: AgentStore, ids: Sequence[str]) -> _ChunkState:
        state = cls()
        refs = [node_ref(i) for i in ids]
        for iri, content, original, scans in store.rows(render("scan_state", nodes=refs)):
            state.nodes[node_id(iri)] = (content, int(original), int(scans))
        for s, t, w in store.rows(render("touching_links", nodes=refs)):
            key = (node_id(s), node_id(t))
            if key not in state.links:
                state.links[key] = float(w)
        wanted = set(ids)
        for key in sorted(state.links):
            for end in key:
                if end in wanted:
                    lst = state._by_node.setdefault(end, [])
                    if key not in lst:
                        lst.append(key)
        return state

    def touching(self, nid: str) -> list[tuple[str, str]]:
        return [k for k in self._by_node.get(nid, []) if k in self.links]

    def remove_link(self, key: tuple[str, str]) -> None:
        self.links.pop(key, None)

    def forget(self, nid: str) -> None:
        self.nodes.pop(nid, None)
        for key in list(self.links):
            if key[0] == nid:
                del self.links[key]
