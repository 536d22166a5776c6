"""Forgetting: compression scans, slices and the fixed pool (SPEC §5.2, §5.3).

A slice takes the next nodes in scan order (from the ``memory:scanOrder`` index, never by
sorting every node) and scans them one by one. To keep store round trips few, the state of a
chunk of nodes — their text and every link touching them — is read in two queries; the scans
are computed in Python on that copy exactly as if each node were scanned alone (a link between
two scanned nodes decays twice); and the net change is written in one ``update()`` at the end
of the chunk and whenever the slice stops — also when it is abandoned in a model call's
backoff: a node's scan changes the copy only after its model call returned, so what is
written then is every scan before it. A crash therefore leaves every scan either whole or not
done. (Writing before every model call as well cost one update per compressed node.)
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Collection, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any

from memory_rdf import _vocab as V
from memory_rdf._calls import Backoff, CallStats, Wait, calls_off_thread, with_retries
from memory_rdf._config import Config
from memory_rdf._exceptions import ModelError
from memory_rdf._focus import FocusManager
from memory_rdf._links import LinkStore
from memory_rdf._nodes import NodeStore, chunks, importances
from memory_rdf._oxigraph import (
    MemoryStore,
    Term,
    WriteBatch,
    iri_ref,
    link_ends,
    link_iri,
    link_ref,
    lit,
    node_id,
    node_ref,
    render,
    to_python,
    triple,
)
from memory_rdf._text import index_terms
from memory_rdf._types import (
    LENGTH_TOLERANCE,
    Processed,
    SmallModel,
    check_processed,
    clean_keywords,
)

#: Nodes whose state is read and written together within a slice: the default
#: ``compression_batch_size``, so that a default slice is two reads and one write (measured at
#: 100k nodes: 540 against 430 scans/s with chunks of 50, the links between the two halves of
#: a slice then written twice).
CHUNK_SIZE = 100
#: Fixed pool: importance is measured on this many non-focus candidates (plus one per node to
#: evict); SPEC §5.3 asks for at least 16. The candidates are the least important nodes the
#: compression scans saw (each scan computes a node's importance anyway, and an old node only
#: loses importance: it gets no new links), measured again when a node must go. Before the
#: scans have seen enough nodes (a new store, ``auto_compress=False``), a window at a random
#: offset in scan order fills the sample: nodes of similar age rather than independent
#: draws, and an OFFSET linear in the store size (measured: README, Fixed pool).
EVICTION_SAMPLE = 32
#: At least this many candidates are measured (SPEC §5.3).
MIN_SAMPLE = 16
#: The least important scanned nodes kept in memory as eviction candidates.
WEAK_KEPT = 256

LinkKey = tuple[str, str]
#: Adds to a write's batch what follows the nodes it rewrites and forgets (in that order).
OnChange = Callable[[WriteBatch, list[str], list[str]], None]


@dataclass
class SliceReport:
    scanned: int = 0
    compressed: int = 0
    forgotten: int = 0
    links_removed: int = 0
    model_calls: int = 0
    model_requests: int = 0  # HTTP requests (HTTP models only)
    model_failures: int = 0
    model_retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    preempted: bool = False
    elapsed_ms: float = 0.0

    def add_calls(self, calls: CallStats) -> None:
        self.model_calls += calls.calls
        self.model_requests += calls.requests
        self.model_failures += calls.failures
        self.model_retries += calls.retries
        self.prompt_tokens += calls.prompt_tokens
        self.completion_tokens += calls.completion_tokens

    def as_dict(self) -> dict[str, Any]:
        return {
            "scanned": self.scanned,
            "compressed": self.compressed,
            "forgotten": self.forgotten,
            "links_removed": self.links_removed,
            "model_calls": self.model_calls,
            "model_requests": self.model_requests,
            "model_failures": self.model_failures,
            "model_retries": self.model_retries,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "preempted": self.preempted,
            "elapsed_ms": round(self.elapsed_ms, 3),
        }


def forget_ops(batch: WriteBatch, nid: str) -> None:
    """Forget a node: its triples and the links out of it; links into it stay (dangling)."""
    ref = node_ref(nid)
    batch.update("forget_node", node=ref)


@dataclass
class _Node:
    content: str
    original: int
    scans: int
    key: int


@dataclass
class _Chunk:
    """Local copy of a chunk's nodes and of every link touching them, with the net change
    since the last write, so one update can carry many scans."""

    keyword_index: bool = True
    nodes: dict[str, _Node] = field(default_factory=dict)
    links: dict[LinkKey, float] = field(default_factory=dict)
    refs: dict[LinkKey, Term] = field(default_factory=dict)  # link IRIs as read
    node_refs: dict[str, Term] = field(default_factory=dict)  # the chunk's node IRIs
    by_node: dict[str, list[LinkKey]] = field(default_factory=dict)
    # what the store holds now (as of the last write) for changed values
    stored_links: dict[LinkKey, float] = field(default_factory=dict)
    stored_scans: dict[str, tuple[int, int]] = field(default_factory=dict)
    removed_links: list[LinkKey] = field(default_factory=list)
    forgotten: list[str] = field(default_factory=list)
    rewrites: list[tuple[str, Processed]] = field(default_factory=list)

    @classmethod
    def read(cls, store: MemoryStore, ids: Sequence[str], keyword_index: bool) -> _Chunk:
        chunk = cls(keyword_index=keyword_index)
        refs = [node_ref(i) for i in ids]
        chunk.node_refs = dict(zip(ids, refs, strict=True))
        table = store.text_table()  # the read mirror's texts, beside its scan state
        rows = store.rows(render("scan_state", nodes=refs)) if table is None else [
            (iri, content, *rest) for iri, *rest in store.rows(render("scan_counts", nodes=refs))
            for content in table.contents(node_id(iri))]
        for iri, content, original, scans, key in rows:
            chunk.nodes[node_id(iri)] = _Node(content, int(original), int(scans), int(key))
        wanted = set(ids)
        odd: dict[str, float] = {}  # links whose IRI does not name their ends
        for iri, ref, w in _link_rows(store, refs):
            ends = link_ends(iri)
            if ends is None or not (ends[0] in wanted or ends[1] in wanted):
                odd.setdefault(iri, w)
            elif ends not in chunk.links:
                chunk.links[ends] = w
                if ref is not None:
                    chunk.refs[ends] = ref
        if odd:
            query = render("link_ends", links=[iri_ref(i) for i in odd])
            for iri, s, t in store.rows(query):
                key = (node_id(s), node_id(t))
                if iri in odd and key not in chunk.links:
                    chunk.links[key] = odd[iri]
                    chunk.refs[key] = iri_ref(iri)
        for key in sorted(chunk.links):
            for end in dict.fromkeys(key):
                if end in wanted:
                    chunk.by_node.setdefault(end, []).append(key)
        return chunk

    def ref(self, key: LinkKey) -> Term:
        """The link's IRI: as read (serialized by pyoxigraph), else derived from its ends."""
        ref = self.refs.get(key)
        return ref if ref is not None else link_ref(*key)

    def node_ref(self, nid: str) -> Term:
        ref = self.node_refs.get(nid)
        return ref if ref is not None else node_ref(nid)

    def touching(self, nid: str) -> list[LinkKey]:
        return [k for k in self.by_node.get(nid, ()) if k in self.links]

    def remove_link(self, key: LinkKey) -> None:
        self.links.pop(key)
        self.stored_links.pop(key, None)
        self.removed_links.append(key)

    def bump_scans(self, nid: str) -> None:
        node = self.nodes[nid]
        self.stored_scans.setdefault(nid, (node.scans, node.key))
        node.scans += 1
        node.key += 1 << V.SEQ_BITS

    def forget(self, nid: str) -> None:
        self.nodes.pop(nid)
        self.stored_scans.pop(nid, None)
        for key in [k for k in self.links if k[0] == nid]:
            self.links.pop(key)
            self.stored_links.pop(key, None)
        self.forgotten.append(nid)

    def flush(self, store: MemoryStore, on_change: OnChange | None = None) -> None:
        """Write the net change since the last flush as one update (a few operations whatever
        the number of nodes: the deletions by pattern take the nodes and links as VALUES),
        with what ``on_change`` adds to it when nodes were rewritten or forgotten."""
        batch = WriteBatch()
        if on_change is not None and (self.rewrites or self.forgotten):
            on_change(batch, [n for n, _ in self.rewrites], list(self.forgotten))
        if self.forgotten:
            batch.update("forget_nodes", nodes=[node_ref(n) for n in self.forgotten])
        if self.removed_links:
            batch.update("delete_links", links=[self.ref(k) for k in self.removed_links])
            batch.delete(triple(node_ref(s), V.LINK_P, node_ref(t)) for s, t in self.removed_links)
        deletes: list[str] = []
        inserts: list[str] = []
        if self.rewrites:
            self._rewrite_ops(store, batch, deletes, inserts)
        for nid, (scans, skey) in self.stored_scans.items():
            ref, node = self.node_ref(nid), self.nodes[nid]
            deletes += [triple(ref, V.SCAN_COUNT, lit(scans)), triple(ref, V.SCAN_ORDER, lit(skey))]
            inserts += [
                triple(ref, V.SCAN_COUNT, lit(node.scans)),
                triple(ref, V.SCAN_ORDER, lit(node.key)),
            ]
        # Nothing here that the read mirror's link index follows: strengths and texts, and
        # the scanCount of scanned nodes, replaced on nodes that stay live (a forgotten node's
        # scan state is not written: it went with forget_nodes above).
        batch.delete(deletes, index_neutral=True)
        batch.insert(inserts, index_neutral=True)
        batch.replace_strengths((self.ref(key), lit(old), lit(self.links[key]))
                                for key, old in self.stored_links.items())
        store.commit(batch)
        self.stored_links.clear()
        self.stored_scans.clear()
        self.removed_links.clear()
        self.forgotten.clear()
        self.rewrites.clear()


    def _rewrite_ops(self, store: MemoryStore, batch: WriteBatch, deletes: list[str],
                     inserts: list[str]) -> None:
        """The text triples of the rewritten nodes that change: the old ones are read
        (``node_text_triples.rq``) and only the difference is deleted and inserted (compared
        as values: only the triples that change are serialized). A node holding a text
        literal of another form than the library writes has its text deleted by pattern
        (``delete_node_texts.ru``) and all of the new one inserted."""
        refs = {nid: self.node_ref(nid) for nid, _ in self.rewrites}
        old: dict[str, set[tuple[str, str | int]]] = {nid: set() for nid in refs}
        odd: set[str] = set()
        query = render("node_text_triples", nodes=list(refs.values()))
        for iri, pred, o, plain in _text_rows(store, query):  # ?node, ?p: those asked for
            if plain is True:
                old[node_id(iri)].add((_TEXT_PREDICATES[pred], o))
            else:
                odd.add(node_id(iri))
        if odd:
            batch.update("delete_node_texts", nodes=[refs[n] for n in sorted(odd)])
        for nid, p in self.rewrites:
            ref = refs[nid]
            new = _text_values(p, self.keyword_index)
            if nid in odd:
                inserts += [triple(ref, pred, lit(v)) for pred, v in new]
                continue
            was = old[nid]
            fresh = set(new)
            deletes += sorted(triple(ref, pred, lit(v)) for pred, v in was.difference(fresh))
            inserts += [triple(ref, pred, lit(v)) for pred, v in new if (pred, v) not in was]


def _link_rows(store: MemoryStore, refs: list[Term]) -> list[tuple[str, Term | None, float]]:
    """The links touching the nodes ``refs`` as (link IRI, its serialized term or None,
    strength): from the read mirror's link quads when it serves reads
    (``mirror_chunk_links.rq``, one row per link kept), else ``chunk_links.rq``'s rows, from
    pyoxigraph terms when the store gives them (only the strength made a Python value; the
    term kept for the write, instead of a ``link_ref`` per link), else from :meth:`rows`."""
    local = store.local
    if local is not None and local.mirrored:
        quads = local.mirror_rows(render("mirror_chunk_links", nodes=refs))
        if quads is not None:
            seen: dict[tuple[str, str, str], None] = {}
            out: list[tuple[str, Term | None, float]] = []
            for s, t, w in quads:
                key = (s.value, t.value, w.value)
                if key not in seen:
                    seen[key] = None
                    iri = link_iri(node_id(s.value), node_id(t.value))
                    out.append((iri, Term(f"<{iri}>"), _strength(w)))
            return out
    query = render("chunk_links", nodes=refs)
    raw = store.term_rows(query)
    if raw is None:
        return [(iri, None, float(w)) for iri, w in store.rows(query)]
    return [(link.value, Term(str(link)), _strength(w)) for link, w in raw]


def _strength(term: Any) -> float:
    """``float(to_python(term))`` of a strength literal, without reading its datatype when
    its lexical form is a number (an xsd:double, as the library writes them)."""
    try:
        return float(term.value)
    except ValueError:
        return float(to_python(term))


def _text_rows(store: MemoryStore, query: str) -> list[tuple[str, str, Any, Any]]:
    """``node_text_triples.rq``'s rows as (node IRI, predicate IRI, value, plain): as
    :meth:`rows` gives them, with only the value converted when the store gives terms."""
    raw = store.term_rows(query)
    if raw is None:
        return store.rows(query)
    return [(node.value, p.value, to_python(o), plain is not None and plain.value == "true")
            for node, p, o, plain in raw]


#: Text predicates (full IRI → SPARQL form) that a rewrite replaces (node_text_triples.rq).
_TEXT_PREDICATES = {
    V.MEMORY + name: V.m(name) for name in ("content", "phrase", "keyword", "term", "termCount")
}


def _text_values(p: Processed, keyword_index: bool) -> list[tuple[str, str | int]]:
    """(predicate, value) of the content, phrase, keywords and index terms (SPEC §5.5) of a
    rewritten node."""
    out: list[tuple[str, str | int]] = [(V.CONTENT, p.content), (V.PHRASE, p.phrase)]
    out += [(V.KEYWORD, k) for k in p.keywords]
    terms = index_terms(p.content, p.keywords) if keyword_index else []
    out += [(V.TERM, t) for t in terms]
    if terms:
        out.append((V.TERM_COUNT, len(terms)))
    return out


class Compressor:
    def __init__(
        self,
        *,
        store: MemoryStore,
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
        #: The model's calls run in the scheduler's model-call threads (SPEC §5.3).
        self.off_thread = calls_off_thread(model)
        self._rng = random.Random(0x5EED)
        self.index_fallbacks = 0  # times scan_order came back unordered (engine changed)
        #: live nodes, for the fixed pool: None until first needed (one COUNT), then kept
        #: up to date by remember's writes and by forgetting (this writer is the only one).
        self._pool: int | None = None
        #: node → importance at its last scan, for the least important nodes scanned
        #: (at most 2 × WEAK_KEPT; pruned to the WEAK_KEPT least important).
        self._weak: dict[str, float] = {}
        #: Adds to each write that rewrites or forgets nodes (a flush, an eviction) what
        #: follows them (the semantic entry's vectors, SPEC §5.7: in the same write).
        self.on_change: OnChange | None = None

    # -- scan order ----------------------------------------------------------------------------

    def protected(self) -> set[str]:
        """The nodes compression leaves alone: the focus and the pinned nodes (SPEC §5.2 step 1,
        §5.6 v3). Neither is scanned, links out of them do not decay, and the fixed pool never
        evicts them."""
        return {*self.focus.ids(), *self.nodes.pinned()}

    def next_batch(self, limit: int, focus: Collection[str] | None = None) -> list[str]:
        """The next ``limit`` nodes in scan order (SPEC §5.3), read from the scanOrder index;
        focus and pinned nodes are not candidates (``focus``: :meth:`protected`, when the
        caller has it): ``limit`` + their number of rows are read and they are dropped here
        (a node that is never scanned keeps its place at the head of the scan order)."""
        if focus is None:
            focus = self.protected()
        want = int(limit) + len(focus)
        rows = self.store.index_rows(self.store.render("scan_order", limit=want))
        keys = [int(k) for _, k in rows]
        if any(a >= b for a, b in zip(keys, keys[1:], strict=False)):
            self.index_fallbacks += 1
            rows = self.store.rows(render("scan_order_sorted", limit=want))
        return [nid for nid in (node_id(r[0]) for r in rows) if nid not in focus][:limit]

    # -- a slice -------------------------------------------------------------------------------

    def run_slice(self) -> Generator[Wait, None, dict[str, Any]]:
        cfg = self.config
        report = SliceReport()
        # Own running time, backoff waits excluded (SPEC §5.3); a model call made off the
        # scheduler thread counts, as it did when it ran in the slice: slices keep their size.
        running = 0.0
        mark = time.perf_counter()
        focus = self.protected()
        candidates = self.next_batch(cfg.compression_batch_size, focus)
        chunk = _Chunk()
        try:
            for part in chunks(candidates, CHUNK_SIZE):
                chunk = _Chunk.read(self.store, part, cfg.keyword_index)
                for nid in part:
                    running += time.perf_counter() - mark
                    mark = time.perf_counter()
                    if running * 1000 >= cfg.time_slice_ms:
                        return self._done(report, running, chunk)
                    if self.user_waiting():
                        report.preempted = True
                        return self._done(report, running, chunk)
                    if nid not in chunk.nodes:
                        continue
                    scan = self._scan(nid, chunk, focus, report)
                    try:
                        while True:
                            wait = next(scan)
                            if isinstance(wait, Backoff):
                                running += time.perf_counter() - mark
                            yield wait
                            if isinstance(wait, Backoff):
                                mark = time.perf_counter()
                    except StopIteration:
                        pass
                self._flush(chunk)
            running += time.perf_counter() - mark
            return self._done(report, running, chunk)
        except GeneratorExit:
            # Abandoned during a model backoff or call: the scans before that node are whole.
            self._flush(chunk)
            raise

    def _done(self, report: SliceReport, running: float, chunk: _Chunk) -> dict[str, Any]:
        self._flush(chunk)
        report.elapsed_ms = running * 1000
        return report.as_dict()

    # -- one node (SPEC §5.2) ------------------------------------------------------------------

    def _scan(
        self, nid: str, chunk: _Chunk, focus: set[str], report: SliceReport
    ) -> Generator[Wait, None, None]:
        cfg = self.config
        node = chunk.nodes[nid]
        touching = chunk.touching(nid)
        importance = sum(
            w for w in (chunk.links[k] for k in touching) if w >= cfg.link_break_threshold
        )
        target = math.floor(node.original * min(importance, 1.0)) if importance > 0 else 0
        report.scanned += 1
        if importance <= 0 or target < cfg.delete_threshold or self._no_gist(node.content, target):
            chunk.forget(nid)
            self._weak.pop(nid, None)
            report.forgotten += 1
            return
        if self.config.max_nodes is not None:
            self._note_weak(nid, importance)
        if target < len(node.content):
            call = CallStats()  # this node's model call, retries included
            content = node.content
            try:
                p = yield from with_retries(
                    lambda: self._checked(self.model.process(content, target), target),
                    cfg, call, "process", self.off_thread,
                )
                chunk.rewrites.append((nid, p))
                node.content = p.content
                report.compressed += 1
            except ModelError:
                pass  # the node stays as it was; decay and scanCount still happen
            finally:
                self.stats.add(call)
                report.add_calls(call)
        links, stored = chunk.links, chunk.stored_links
        decay, threshold = cfg.decay_rate, cfg.link_break_threshold
        for key in touching:
            if key[0] in focus:
                continue  # links out of a focus or pinned node do not decay (§5.2 step 7)
            old = links[key]
            w = old * decay
            if w < threshold:
                chunk.remove_link(key)
                report.links_removed += 1
            else:  # the stored value kept for the write's DELETE DATA
                stored.setdefault(key, old)
                links[key] = w
        chunk.bump_scans(nid)

    def _no_gist(self, content: str, target: int) -> bool:
        """The model says ``content`` has no gist as short as ``target`` allows (a model with
        ``shortest_length``, as the built-in one): the node is forgotten, not cut to a lone
        word (SPEC §5.2 step 5)."""
        shortest = getattr(self.model, "shortest_length", None)
        return (shortest is not None and target < len(content)
                and LENGTH_TOLERANCE * target < shortest(content))

    def _checked(self, value: Any, target: int) -> Processed:
        p = check_processed(value)
        content = p.content.strip()
        if not content or len(content) > LENGTH_TOLERANCE * target:
            raise ModelError(
                f"compressed text has {len(content)} characters for a target of {target}"
            )
        keywords = clean_keywords(p.keywords)
        phrase = p.phrase.strip() or self.fallback.process(content).phrase
        return Processed(content, phrase, keywords)

    # -- fixed pool ----------------------------------------------------------------------------

    def make_room(self, batch: WriteBatch, incoming: int, focus: set[str]) -> None:
        """Before ``incoming`` nodes are created: forget the least important nodes neither in
        the focus nor pinned so that they fit in ``max_nodes`` (SPEC §5.3), as part of ``batch``.

        Candidates: the ``EVICTION_SAMPLE`` + excess least important nodes the compression
        scans saw, completed by a window at a random offset in scan order
        (``eviction_sample.rq``) when they are fewer than needed — never a sort of every
        node. Their importance is measured again in one query and the least important go.
        The node count comes from memory (counted once, then kept by the writes that create
        and forget nodes), not from a COUNT per remember.
        """
        cap = self.config.max_nodes
        if cap is None:
            return
        count = self._pool_count()
        excess = count + incoming - cap
        victims: list[str] = []
        if excess > 0:
            focus = {*focus, *self.nodes.pinned()}  # pinned nodes are never evicted (§5.6 v3)
            size = EVICTION_SAMPLE + excess
            weakest = sorted(self._weak, key=lambda n: (self._weak[n], n))
            measured = self._importances([n for n in weakest if n not in focus][:size])
            if len(measured) < max(MIN_SAMPLE, excess + 1):
                candidates = count - len(focus)
                offset = self._rng.randrange(max(candidates - size, 0) + 1)
                query = render("eviction_sample", offset=int(offset), size=int(size))
                window = [node_id(r[0]) for r in self.store.index_rows(query)]
                measured.update(self._importances(
                    [n for n in window if n not in focus and n not in measured]))
            victims = sorted(measured, key=lambda n: (measured[n], n))[:excess]
            if victims and self.on_change is not None:  # the vectors holding their text
                self.on_change(batch, [], victims)
            for victim in victims:
                forget_ops(batch, victim)
                self._weak.pop(victim, None)
        after = count - len(victims) + incoming
        batch.after_commit(lambda: setattr(self, "_pool", after))

    def _importances(self, ids: Sequence[str]) -> dict[str, float]:
        """Importance (SPEC §5.2 step 2) of those of ``ids`` that are still nodes; the others
        (forgotten on request since a scan saw them) are dropped from the candidates."""
        if not ids:
            return {}
        refs = [node_ref(n) for n in ids]
        alive = set(self.nodes.existing(ids))
        for gone in set(ids) - alive:
            self._weak.pop(gone, None)
        measured = importances(self.store, refs, lit(self.config.link_break_threshold))
        return {nid: measured.get(nid, 0.0) for nid in alive}

    def _note_weak(self, nid: str, importance: float) -> None:
        """Keep ``nid`` as an eviction candidate if it is among the least important seen."""
        self._weak[nid] = importance
        if len(self._weak) > 2 * WEAK_KEPT:
            keep = sorted(self._weak, key=lambda n: (self._weak[n], n))[:WEAK_KEPT]
            self._weak = {n: self._weak[n] for n in keep}

    def recount(self) -> None:
        """Nodes were forgotten outside a slice (forget on request): count again when needed
        (forgotten eviction candidates are dropped when next measured)."""
        self._pool = None

    def _pool_count(self) -> int:
        if self._pool is None:
            self._pool = self.nodes.count()
        return self._pool

    def _flush(self, chunk: _Chunk) -> None:
        """Land a chunk's net change; the node count follows what was forgotten."""
        forgotten = len(chunk.forgotten)
        chunk.flush(self.store, self.on_change)
        if forgotten and self._pool is not None:
            self._pool -= forgotten
