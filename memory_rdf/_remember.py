"""remember: segments → nodes, chain and focus links, focus update, in one write (SPEC §5.1)."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Generator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from memory_rdf._calls import (
    Backoff,
    CallStats,
    Wait,
    calls_off_thread,
    log_failed_attempt,
    model_call,
    with_retries,
)
from memory_rdf._config import Config
from memory_rdf._exceptions import ModelError, PermanentModelError
from memory_rdf._focus import FocusManager
from memory_rdf._journal import Journal, JournalTask, Metadata
from memory_rdf._links import NEXT, PREVIOUS, LinkData, LinkStore
from memory_rdf._nodes import NodeData, NodeStore
from memory_rdf._oxigraph import MemoryStore, WriteBatch
from memory_rdf._remote import EndpointUnavailable
from memory_rdf._text import index_terms
from memory_rdf._types import (
    LENGTH_TOLERANCE,
    REMEMBER_SLACK,
    Processed,
    SmallModel,
    check_processed,
    clean_keywords,
)

T = TypeVar("T")


#: Segments (or relation pairs) per batch model call; between two calls the remember yields
#: to the scheduler, so one big remember does not hold every agent's recall (issue 17).
BATCH_CHUNK = 64


class SegmentationFailed(Exception):
    """segment() failed: the task goes to the tail of its agent's queue (SPEC §5.1 step 1)."""


def new_node_id() -> str:
    """A UUID (version 7 layout) in hex: unique across agents, roughly ordered by creation."""
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = (ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | (rand >> 68) << 64 | 0b10 << 62
    value |= rand & ((1 << 62) - 1)
    return uuid.UUID(int=value).hex


class CreatedAtClock:
    """Strictly increasing createdAt values, also across restarts (kept in store metadata)."""

    def __init__(self, last: datetime | None) -> None:
        self._last = last

    def next(self) -> datetime:
        now = datetime.now(UTC)
        if self._last is not None and now <= self._last:
            now = self._last + timedelta(microseconds=1)
        self._last = now
        return now


def validate_segments(value: Any) -> list[str]:
    if not isinstance(value, list) or not value:
        raise ModelError("segment() must return a non-empty list of str")
    segments = []
    for s in value:
        if not isinstance(s, str):
            raise ModelError("segment() returned a non-str segment")
        if s.strip():
            segments.append(s.strip())
    if not segments:
        raise ModelError("segment() returned only blank segments")
    for s in segments:
        try:
            s.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ModelError("segment() returned text that is not valid Unicode") from exc
    return segments


def validate_relation(value: Any) -> str:
    if not isinstance(value, str):
        raise ModelError("relation() must return a str")
    value = value.strip()
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ModelError("relation() returned text that is not valid Unicode") from exc
    return value


class Rememberer:
    """Runs remember tasks for one agent."""

    def __init__(
        self,
        *,
        store: MemoryStore,
        nodes: NodeStore,
        links: LinkStore,
        focus: FocusManager,
        journal: Journal,
        metadata: Metadata,
        config: Config,
        model: SmallModel,
        fallback: SmallModel,
        make_room: Callable[[WriteBatch, int, set[str]], None] | None = None,
    ) -> None:
        self.store, self.nodes, self.links, self.focus = store, nodes, links, focus
        self.journal, self.metadata = journal, metadata
        self.config, self.model, self.fallback = config, model, fallback
        self.clock = CreatedAtClock(metadata.last_created_at)
        self.make_room = make_room
        self.stats = CallStats()
        #: The model's calls run in the scheduler's model-call threads (SPEC §5.3).
        self.off_thread = calls_off_thread(model)
        #: Writes a SPARQL endpoint did not answer (:class:`EndpointUnavailable`), by journal
        #: task id, with the node ids they create: the server may still apply them (a slow
        #: server runs a request its client gave up on), so a retry of the remember sends the
        #: same write again (:meth:`resend`) instead of a new one with new nodes (SPEC §8).
        self.unanswered: dict[str, tuple[WriteBatch, list[str]]] = {}

    def settle_unanswered(self, task: JournalTask) -> list[str] | None:
        """After an outage: ``[]`` when the write of ``task`` had landed after all (the task
        left the journal; its after-commit steps run now), the node ids when its unanswered
        write is sent again, as it was (a slow server may still apply the first copy: a new
        write, with new nodes, stored the remember twice); None when there is no such write
        (the remember runs again)."""
        if not any(t.id == task.id for t in self.journal.tasks("pending")):
            unanswered = self.unanswered.pop(task.id, None)
            if unanswered is not None:
                unanswered[0].run_after_commit()
            return []
        unanswered = self.unanswered.get(task.id)
        if unanswered is None:
            return None
        batch, ids = unanswered
        self.store.commit(batch)
        del self.unanswered[task.id]
        return ids

    def segment(self, text: str) -> Generator[Wait, None, list[str]]:
        """One segmentation attempt (failure → :class:`SegmentationFailed`)."""
        try:
            return (yield from model_call(
                lambda: validate_segments(self.model.segment(text)), self.stats, "segment",
                self.off_thread,
            ))
        except PermanentModelError as exc:
            # cannot heal by waiting: the task fails at once (SPEC §4)
            log_failed_attempt("segment", str(exc), "cannot heal by waiting, not retried")
            raise
        except ModelError as exc:
            raise SegmentationFailed(str(exc)) from exc  # logged by the task's error handler

    def run(self, task: JournalTask) -> Generator[Wait, None, list[str]]:
        """Process one journalled remember; returns the new node ids."""
        segments = yield from self.segment(task.text)
        processed = yield from self._process_all(segments)
        current = self.focus.current()
        relations = yield from self._relations(processed, current)
        return self._write(task, processed, current, relations)

    # -- model calls ---------------------------------------------------------------------------

    def _process_all(self, segments: Sequence[str]) -> Generator[Wait, None, list[Processed]]:
        cfg, model = self.config, self.model
        batch_fn = getattr(model, "process_batch", None)
        if batch_fn is not None and len(segments) > 1:
            try:
                done: list[Processed] = []
                for start in range(0, len(segments), BATCH_CHUNK):
                    if start:
                        yield Backoff(0.0)  # let other agents' recalls run (issue 17)
                    part = list(segments[start : start + BATCH_CHUNK])
                    done += yield from _batch_attempt(
                        lambda part=part: _checked_batch(batch_fn(part), part),  # type: ignore[misc]
                        self.stats, "process_batch", self.off_thread,
                    )
                for p in done:
                    if not p.phrase:  # as compression does: the built-in model's phrase
                        p.phrase = self.fallback.process(p.content).phrase
                return done
            except _BatchFailed:
                pass  # one call per segment, same results (SPEC §4), each with its retries
        out: list[Processed] = []
        for i, seg in enumerate(segments):
            if i:
                yield Backoff(0.0)  # let other agents' recalls run between segments (issue 17)
            try:
                p = yield from with_retries(
                    lambda seg=seg: checked_answer(model.process(seg), seg),  # type: ignore[misc]
                    cfg, self.stats, "process", self.off_thread,
                )
                if not p.phrase:  # as compression does: the built-in model's phrase
                    p.phrase = self.fallback.process(p.content).phrase
                out.append(p)
            except ModelError:
                # SPEC §5.1 step 2: keep the text, take phrase and keywords from the built-in model.
                fb = self.fallback.process(seg)
                out.append(Processed(seg, fb.phrase, clean_keywords(fb.keywords)))
        return out

    def _relations(
        self, processed: Sequence[Processed], current: Sequence[tuple[str, int]]
    ) -> Generator[Wait, None, list[list[str]]]:
        """``names[i][j]``: relation of new node i to focus node j ("" = unnamed)."""
        if not current:
            return [[] for _ in processed]
        texts = self.nodes.texts([nid for nid, _ in current])
        focus_texts = [texts[nid][0] if nid in texts else "" for nid, _ in current]
        pairs = [(p.content, f) for p in processed for f in focus_texts]
        names: list[str] | None = None
        cfg, model = self.config, self.model
        batch_fn = getattr(model, "relation_batch", None)
        if batch_fn is not None and len(pairs) > 1:
            try:
                names = []
                for start in range(0, len(pairs), BATCH_CHUNK):
                    if start:
                        yield Backoff(0.0)  # let other agents' recalls run (issue 17)
                    chunk = pairs[start : start + BATCH_CHUNK]
                    names += yield from _batch_attempt(
                        lambda chunk=chunk: _checked_relations(batch_fn(chunk), len(chunk)),  # type: ignore[misc]
                        self.stats, "relation_batch", self.off_thread,
                    )
            except _BatchFailed:
                names = None
        if names is None:
            names = []
            for i, (node_text, focus_text) in enumerate(pairs):
                if i:
                    yield Backoff(0.0)
                try:
                    name = yield from with_retries(
                        lambda a=node_text, b=focus_text: validate_relation(  # type: ignore[misc]
                            model.relation(a, b)
                        ),
                        cfg, self.stats, "relation", self.off_thread,
                    )
                except ModelError:
                    name = ""  # SPEC §5.1 step 3: no name if the call fails
                names.append(name)
        f = len(current)
        return [names[i * f : (i + 1) * f] for i in range(len(processed))]

    # -- the one atomic write ------------------------------------------------------------------

    def _write(
        self,
        task: JournalTask,
        processed: Sequence[Processed],
        current: Sequence[tuple[str, int]],
        relations: Sequence[Sequence[str]],
    ) -> list[str]:
        cfg = self.config
        batch = WriteBatch()
        ids = [new_node_id() for _ in processed]
        if self.make_room is not None:
            self.make_room(batch, len(ids), {nid for nid, _ in current})
        created = None
        seq = self.metadata.node_sequence
        for nid, p in zip(ids, processed, strict=True):
            created = self.clock.next()
            seq += 1
            terms = index_terms(p.content, p.keywords) if cfg.keyword_index else []
            self.nodes.add(
                batch,
                NodeData(nid, p.content, p.phrase, p.keywords, created, len(p.content), seq,
                         0, terms, task.said_at),
            )
        links: list[LinkData] = []
        w = cfg.link_initial_strength
        for a, b in zip(ids, ids[1:], strict=False):
            links.append(LinkData(a, b, w, NEXT))
            links.append(LinkData(b, a, w, PREVIOUS))
        fw = cfg.focus_link_strength
        for i, nid in enumerate(ids):
            for j, (fid, _) in enumerate(current):
                name = relations[i][j]
                links.append(LinkData(nid, fid, fw, name))
                links.append(LinkData(fid, nid, fw, name))
        self.links.add(batch, links)
        self.focus.update(batch, current, ids[-cfg.focus_limit :])
        if created is not None:
            self.metadata.record_creation(batch, created, seq)
        self.journal.remove(batch, task.id)
        try:
            self.store.commit(batch)
        except EndpointUnavailable:
            self.unanswered[task.id] = (batch, ids)
            raise
        return ids


class _BatchFailed(Exception):
    """A batched call failed in a way the single calls may not: use them instead."""


def _batch_attempt(
    fn: Callable[[], T], stats: CallStats, label: str, off_thread: bool
) -> Generator[Wait, None, T]:
    """One attempt at a batched call, never retried: an invalid batch (or a timeout, a 429,
    a 5xx) falls back at once to the single calls, which keep the full retry policy, instead
    of waiting out up to ``max_retries`` backoffs first. A :class:`PermanentModelError`
    (wrong model, key or request) propagates: the single calls would fail the same way."""
    try:
        return (yield from model_call(fn, stats, label, off_thread))
    except PermanentModelError as exc:
        log_failed_attempt(label, str(exc), "cannot heal by waiting, not retried")
        raise
    except ModelError as exc:
        log_failed_attempt(label, str(exc), "batched call, falling back to single calls")
        raise _BatchFailed(str(exc)) from exc


def checked_answer(value: Any, segment: str) -> Processed:
    """What ``process(segment)`` returned at remember, cleaned as it is stored. Besides the
    type checks (:func:`check_processed`: a phrase of at most ``PHRASE_MAX`` characters), a
    content longer than ``LENGTH_TOLERANCE`` × the segment plus ``REMEMBER_SLACK`` characters
    is a failed call (``ValueError``), as a compressed text longer than its target is: the
    content is the segment, not another text (SPEC §4, §5.1 step 2)."""
    p = check_processed(value)
    content = p.content.strip()
    longest = int(LENGTH_TOLERANCE * len(segment)) + REMEMBER_SLACK
    if len(content) > longest:
        raise ValueError(f"process() returned {len(content)} characters of content for a "
                         f"segment of {len(segment)} (at most {longest})")
    return Processed(content, p.phrase.strip(), clean_keywords(p.keywords))


def _checked_batch(value: Any, segments: Sequence[str]) -> list[Processed]:
    n = len(segments)
    if not isinstance(value, list) or len(value) != n:
        raise ModelError(f"process_batch() must return {n} results")
    return [checked_answer(p, seg) for p, seg in zip(value, segments, strict=True)]


def _checked_relations(value: Any, n: int) -> list[str]:
    if not isinstance(value, list) or len(value) != n:
        raise ModelError(f"relation_batch() must return {n} names")
    return [validate_relation(v) for v in value]
