"""The read mirror (:class:`_Mirror`): an in-memory copy of an agent's disk store that
answers its reads, built in a background thread and kept in step with every commit.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import pyoxigraph as ox

from memory_rdf import _vocab as V
from memory_rdf._oxigraph.batch import WriteBatch
from memory_rdf._oxigraph.block_caches import after_whole_read, release_freed_memory
from memory_rdf._oxigraph.link_index import (
    MirrorFilter,
    Unfollowable,
    apply_plan,
    apply_texts,
    plan,
)
from memory_rdf._oxigraph.mirror_budget import MIRROR_BUDGET, MIRROR_BYTES_PER_NODE
from memory_rdf._oxigraph.render import render
from memory_rdf._oxigraph.terms import to_python
from memory_rdf._oxigraph.text_table import TextTable, odd_characters

if TYPE_CHECKING:
    from memory_rdf._oxigraph.agent_store import AgentStore

log = logging.getLogger("memory_rdf")


#: Bytes of N-Quads loaded into the mirror at a time while it is built (the copy streams:
#: the whole dump is never held in memory, and close() stops the build between two chunks).
MIRROR_CHUNK = 4 << 20
#: Chunks read from the dump and waiting for the loader thread (at most this × MIRROR_CHUNK
#: bytes held in memory besides the mirror).
MIRROR_QUEUED_CHUNKS = 2
#: Oxigraph's in-memory store keeps every triple deleted from it (measured, pyoxigraph
#: 0.5.13: ~0.45 kB per triple deleted and inserted again, never given back, not even by
#: optimize()), so a mirror kept in step with compression — every scan rewrites link
#: strengths and often a text — grew by 9 MB/s at 10k nodes. The mirror is therefore built
#: again from the disk store once the update text applied to it reaches the size of the
#: N-Quads it was built from (the garbage is then ~2.5× that text, about the live copy's own
#: size: the process holds at most ~2 copies' worth), and at least this many bytes (a small
#: store's copy is rebuilt in well under a second; ~40 MB of garbage at most per agent). Half
#: the N-Quads as threshold cost a third of compression's throughput at 10k nodes in rebuilds
#: (reads go to disk during one). (Added by the compression work; benchmarks/README.md, Soak.)
MIRROR_RENEW_MIN_BYTES = 16 << 20
#: Once the copy is in, the updates committed meanwhile are applied to it in rounds without
#: the owner's turn (``_Mirror._catch_up``); the last ones, at most this many bytes of update
#: text (a few compression commits), under it, as the copy takes over.
MIRROR_CATCH_UP_BYTES = 1 << 20
#: Rounds of that before the rest is applied under the lock whatever its size (each round
#: applies what the writers committed during the previous one: the mirror applies an update
#: several times faster than the writer makes it, so rounds shrink fast).
MIRROR_CATCH_UP_ROUNDS = 8
#: The tests' seam into a build (None in use): called in the build's thread with the step it
#: reached, to hold the build there or act beside it. ``"loading"``: the dump has taken its
#: snapshot, the owner's turn is free again, the disk store still held (StoreUsers), at its
#: first chunk; ``"indexing"``: the copy is in, nothing held, before its link index is built.
build_steps: Callable[[str], None] | None = None


def _nodes_estimate(disk: ox.Store) -> int:
    """How many nodes the store holds, at most: the agent's node-creation counter (one
    lookup in the meta graph, SPEC §2), else a count of the nodes (~0.1 s at 100k nodes, which
    a close() right after the open would wait for)."""
    counter = ox.NamedNode(V.MEMORY + "nodeSequence")
    for quad in disk.quads_for_pattern(None, counter, None, ox.NamedNode(V.META_GRAPH)):
        value = to_python(quad.object)
        if isinstance(value, int):
            return value
    rows = disk.query(render("node_count"), prefixes=V.PREFIXES)
    assert isinstance(rows, ox.QuerySolutions)
    return int(to_python(next(iter(rows))[0]) or 0)


class _Cancelled(Exception):
    pass


class DiskAfter:
    """The disk store once a write the owner runs beside the mirror's update has landed
    (``AgentStore._commit_at_once``): called by the update for the links it reads back (none
    in a compression commit); :meth:`outcome` is the write's error or None, taken once."""

    def __init__(self, answer: queue.SimpleQueue[Any], disk: Callable[[], ox.Store]) -> None:
        self._answer = answer
        self._disk = disk
        self._got: list[BaseException | None] = []

    def outcome(self) -> BaseException | None:
        if not self._got:
            self._got.append(self._answer.get())
        return self._got[0]

    def __call__(self) -> ox.Store:
        failed = self.outcome()
        if failed is not None:
            raise failed
        return self._disk()


class _LoadSink:
    """Where the disk store's dump (N-Quads) goes while the mirror is built: each full chunk
    (cut at a line end) is handed to a loader thread, which loads it into the mirror while
    the dump reads on (pyoxigraph releases the GIL in both; at 100k nodes the copy took 38
    against 59 s one after the other, benchmarks/PROFILE.md). ``started`` is called at the
    first write: the dump has taken its snapshot by then. :meth:`copy_from` runs the dump
    and always ends with :meth:`close`, which waits for the loader and raises its error."""

    def __init__(self, target: ox.Store, cancel: threading.Event,
                 started: Callable[[], None], keep: MirrorFilter) -> None:
        self._target = target
        self._keep = keep
        self._cancel = cancel
        self._started = started
        self._buffer = bytearray()
        self.loaded = 0  # bytes of N-Quads received
        self._chunks: queue.Queue[bytes | None] = queue.Queue(maxsize=MIRROR_QUEUED_CHUNKS)
        self._error: Exception | None = None
        self._loader = threading.Thread(target=self._load, name="memory-rdf-mirror-load",
                                        daemon=True)
        self._loader.start()

    def copy_from(self, source: ox.Store) -> None:
        """Copy what the mirror keeps of ``source``'s memory network (its default graph)
        into the target, through the loader thread (:class:`MirrorFilter`: the links are
        noted, their quads made afterwards); the loader has ended when this returns or raises."""
        try:
            source.dump(self, format=ox.RdfFormat.N_TRIPLES,  # type: ignore[arg-type]
                        from_graph=ox.DefaultGraph())
            self._started()  # a store with nothing to dump never wrote: its snapshot is taken
        finally:
            self.close()

    def _load(self) -> None:
        # Runs until close()'s end mark; after a failure or a cancel it only drains the
        # queue, so that the dump's thread never waits on a full one.
        while (chunk := self._chunks.get()) is not None:
            if self._error is not None or self._cancel.is_set():
                continue
            try:
                kept = self._keep.take(chunk)
                if kept:
                    self._target.load(kept, format=ox.RdfFormat.N_TRIPLES)
            except Exception as exc:
                self._error = exc

    def write(self, data: bytes) -> int:
        self._started()
        if build_steps is not None and not self.loaded:
            build_steps("loading")
        if self._cancel.is_set():
            raise _Cancelled
        if self._error is not None:
            raise self._error
        self.loaded += len(data)
        self._buffer += data
        if len(self._buffer) >= MIRROR_CHUNK:
            cut = self._buffer.rfind(b"\n") + 1
            self._chunks.put(bytes(self._buffer[:cut]))
            del self._buffer[:cut]
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        """Load what is left, wait for the loader thread, raise its error."""
        if self._buffer and self._error is None and not self._cancel.is_set():
            self._chunks.put(bytes(self._buffer))
        self._buffer.clear()
        self._chunks.put(None)
        self._loader.join()
        if self._error is not None:
            raise self._error


class _Mirror:
    """The read mirror of an :class:`AgentStore`: an in-memory ``pyoxigraph.Store`` holding
    what recall's and compression's hot reads need of the disk store (:mod:`.link_index`: the
    scan state, focus and pins as they are, one quad per link), which answers the queries
    written against that layout — ~3× cheaper per joined row than RocksDB
    (benchmarks/PROFILE.md) — and beside it the nodes' texts and times in a
    :class:`~.text_table.TextTable`, which answers the text reads. Every other read, and the
    user's SPARQL, goes to disk.

    Built in a background thread when the store opens (reads go to disk until it is ready):
    the disk store is dumped (N-Quads, streamed in chunks into the mirror) from one snapshot,
    taken in the store owner's turn; every update committed after it is queued and applied
    once the copy is in, so the mirror is exactly the disk store from then on. Each commit
    applies its update to the disk store first (the truth, and the journal), then to the
    mirror (:meth:`apply`); a large one (a compression chunk's) to both at once, the mirror
    built again if the disk refuses it (:meth:`AgentStore._commit_at_once`). A mirror that
    fails to apply an update is dropped (reads go back to disk) and rebuilt once; a second
    failure leaves the store without one. Both are logged as warnings.
    """

    def __init__(self, owner: AgentStore, wanted: bool | None, failures: int = 0,
                 renewal: bool = False) -> None:
        self.owner = owner
        self.renewal = renewal  # built again to shed a previous copy's deleted triples
        self.wanted = wanted
        self.failures = failures
        #: The in-memory store, once built (None while loading, or when not kept).
        self.store: ox.Store | None = None
        #: The nodes' texts, beside ``store`` (set before it; serving while it is).
        self.texts: TextTable | None = None
        #: "loading", "on", "too large" (the automatic choice said no), "failed", "off".
        self.state = "loading"
        #: updates committed while loading (their batches: :func:`plan` is read at replay)
        self._pending: list[tuple[int, WriteBatch | None]] | None = None
        self.applied = 0  # bytes of update text applied since the build
        self.renew_after = 0  # ... at which the mirror is built again (0: not built yet)
        self._cancel = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._build, name="memory-rdf-mirror",
                                        daemon=True)
        self._thread.start()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the build ended; True when the mirror serves reads."""
        self._done.wait(timeout)
        return self.store is not None

    @property
    def ended(self) -> bool:
        """The build thread is done with the store and its locks: it takes the owner's write
        lock one last time after the state says "on", "too large" or "failed", so what joins
        it under that lock (:meth:`AgentStore.park`) waits for this first."""
        return self._done.is_set()

    def stop(self) -> None:
        """Stop a build in progress (between two chunks) and wait for its thread."""
        self._cancel.set()
        if self._thread is not threading.current_thread():
            self._thread.join()

    def apply(self, text: str, batch: WriteBatch | None = None,
              disk: Callable[[], ox.Store] | None = None) -> None:
        """Follow a committed update (in the store owner's turn): ``batch``, the writes it
        was made of, is read for what it changes in the mirror (:func:`plan`) only when a
        copy is being built or kept — a mirror "too large" or "failed" takes none; ``disk``
        gives the disk store holding the commit (links the batch changes other than by their
        strength are read back from it). ``text`` (the update) counts towards a renewal."""
        mirror = self.store
        if self._pending is None and mirror is None:
            return
        if self._pending is not None:
            self._pending.append((len(text), batch))
            return
        assert mirror is not None
        try:
            if batch is None:
                raise Unfollowable("an update without its batch")
            todo = plan(batch)
            assert self.texts is not None
            apply_texts(self.texts, todo)
            apply_plan(mirror, todo, disk or self._disk)
            self.applied += len(text)
            if self.renew_after and self.applied >= self.renew_after:
                self.renew()
                return
        except Unfollowable as exc:  # built again from the disk store (given up if it fails)
            self.rebuild(str(exc))
        except Exception as exc:  # the disk store has the write: only the mirror is behind
            self.store = None
            self.texts = None
            self.state = "failed"
            again = self.failures == 0
            log.warning(
                "memory_rdf: the read mirror of %s did not apply an update (%s); reads go to "
                "the disk store%s", self.owner.location, exc,
                ", the mirror is rebuilt from it" if again else "",
            )
            if again:
                self.owner._mirror = _Mirror(self.owner, True, self.failures + 1)
            else:
                MIRROR_BUDGET.release(self.owner)

    def renew(self) -> None:
        """Drop this copy (and the deleted triples it keeps) and build a fresh one from the
        disk store in the background (reads go to disk meanwhile); in the store owner's turn.
        See MIRROR_RENEW_MIN_BYTES."""
        self.owner.mirror_renewals += 1
        self._build_again(renewal=True)

    def rebuild(self, why: str) -> None:
        """Drop this copy, which may differ from the disk store after ``why``, and build a
        fresh one from the disk store in the background (reads go to disk meanwhile); in the
        store owner's turn."""
        log.warning("memory_rdf: the read mirror of %s is built again after %s",
                    self.owner.location, why)
        self._build_again(renewal=False)

    def interrupted(self) -> None:
        """A commit stopped while it applied an update to the disk store or to this copy (in
        the store owner's turn): whether either holds the write is unknown, so a copy
        kept or being built is built again from the disk store."""
        if self.store is None and self._pending is None:
            return  # no copy kept ("too large", "failed", "off"), nor one being filled
        self._cancel.set()  # a build in progress stops between two chunks
        self.rebuild("an interrupted write")

    def _build_again(self, renewal: bool) -> None:
        self.store = None
        self.texts = None
        self.state = "off"
        self.owner._mirror = _Mirror(self.owner, True, self.failures, renewal=renewal)

    @property
    def served_texts(self) -> TextTable | None:
        """The text table while the mirror serves reads (None otherwise)."""
        return self.texts if self.store is not None else None

    def _catch_up(self, mirror: ox.Store, texts: TextTable) -> None:
        """Apply the updates committed since the snapshot to the new copy, in rounds, without
        the owner's turn: each round takes what was queued so far and writers go on queueing
        behind it. The last few (at most MIRROR_CATCH_UP_BYTES, or what is left after
        MIRROR_CATCH_UP_ROUNDS) are applied under the lock when the copy takes over. (All of
        them under the lock held every writer ~19 s at 100k nodes after a build that ran
        beside continuous compression.)"""
        for _ in range(MIRROR_CATCH_UP_ROUNDS):
            with self.owner.turn():
                queued = self._pending
                assert queued is not None
                if sum(size for size, _ in queued) <= MIRROR_CATCH_UP_BYTES:
                    return
                self._pending = []
            self._replay(mirror, texts, queued)

    def _replay(self, mirror: ox.Store, texts: TextTable,
                queued: Sequence[tuple[int, WriteBatch | None]]) -> None:
        """Apply updates queued during the build to the new copy, in commit order, stopping
        between two if the build was cancelled. A link read back from the disk store is read
        as it is now (later commits included): what the later commits' replays write of it
        is the same, so the copy ends as the disk store."""
        if not queued:
            return
        with self.owner._users.hold():
            for _, batch in queued:
                if self._cancel.is_set():
                    raise _Cancelled
                if batch is None:
                    raise Unfollowable("an update without its batch")
                todo = plan(batch)
                apply_texts(texts, todo)
                apply_plan(mirror, todo, self._disk, live=False)

    def _disk(self) -> ox.Store:
        """The owner's disk store, as it is (never opened again if parked: a build of the
        current mirror never runs on a parked store); a build cancelled, or a store closed,
        ends the build (:class:`_Cancelled`)."""
        disk = self.owner._store
        if disk is None or self._cancel.is_set():
            raise _Cancelled
        return disk

    def _build(self) -> None:
        # The disk store is in hand only inside a hold (StoreUsers): close(), a park and a
        # purge's swap wait for it even when this build is no longer the owner's mirror (one
        # a commit interrupted, or a failed write, replaced; it stops at its next chunk). The
        # copy's hold is taken in the owner's turn, never while waiting for it: a swap (the
        # owner's message) waits for the holds to end.
        owner = self.owner
        try:
            with owner._users.hold():
                nodes = _nodes_estimate(self._disk())
            if not MIRROR_BUDGET.claim(owner, nodes, self.wanted):
                self.state = "too large"
                log.info("memory_rdf: no read mirror for %s: %d nodes would take ~%d MB, "
                         "beside ~%d MB for the process's other mirrors",
                         owner.location, nodes, nodes * MIRROR_BYTES_PER_NODE // 2**20,
                         MIRROR_BUDGET.reserved() // 2**20)
                return
            mirror = ox.Store()
            keep = MirrorFilter()
            turn = owner.turn()  # the store's owner writes nothing until the snapshot
            held = True

            def snapshot_taken() -> None:
                # The dump reads one snapshot, taken before its first write: commits from
                # now on are queued (apply()) and replayed once the copy is in.
                nonlocal held
                if held:
                    held = False
                    turn.end()

            try:
                with owner._users.hold():
                    disk = self._disk()
                    try:
                        self._pending = []
                        sink = _LoadSink(mirror, self._cancel, snapshot_taken, keep)
                        sink.copy_from(disk)
                    finally:
                        del disk  # before the hold ends
            finally:
                if held:
                    turn.end()
            if self._cancel.is_set():
                raise _Cancelled
            # The links of the snapshot (the commits queued meanwhile bring theirs).
            if build_steps is not None:
                build_steps("indexing")
            mirror.extend(list(keep.link_quads(mirror)))
            texts = keep.text_table()  # after the links' notes are gone (see there)
            del keep
            odd_characters()  # what the text reads' LCASE asks the engine for (once a process)
            self._catch_up(mirror, texts)
            with owner.turn():
                self._replay(mirror, texts, self._pending)
                self._pending = None
                self.renew_after = max(MIRROR_RENEW_MIN_BYTES, sink.loaded)
                self.texts = texts
                self.store = mirror
                self.state = "on"
                after_whole_read(owner)  # the dump filled the handle's caches: let them go
            release_freed_memory()  # the links' notes, a renewed copy's predecessor
        except Exception as exc:
            if owner._mirror is self:  # not replaced: no mirror of this store is held
                MIRROR_BUDGET.release(owner)
            if self._cancel.is_set():
                self.state = "off"
            else:
                self.state = "failed"
                log.warning("memory_rdf: cannot build the read mirror of %s (%s); reads go to "
                            "the disk store", owner.location, exc)
        finally:
            try:
                with owner.turn():
                    self._pending = None
            except Exception:  # the store closed: no commit comes any more
                self._pending = None
            self._done.set()
