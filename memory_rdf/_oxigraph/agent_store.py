"""One agent's embedded Oxigraph store (:class:`AgentStore`): reads (from the read
mirror when it serves them), commits, flushes and compactions, parking, a purge's rewrite, the
user's SPARQL, export.
"""

from __future__ import annotations

import contextlib
import gc
import os
import shutil
import stat
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO

import pyoxigraph as ox

from memory_rdf import _vocab as V
from memory_rdf._agents import refuse_shared_directory
from memory_rdf._exceptions import StoreError
from memory_rdf._interrupts import interrupts_held
from memory_rdf._oxigraph.agent_lock import AgentLock
from memory_rdf._oxigraph.batch import WriteBatch
from memory_rdf._oxigraph.block_caches import after_whole_read
from memory_rdf._oxigraph.bounded import _check_bounds, _Sink, run_bounded
from memory_rdf._oxigraph.directories import (
    _ROCKSDB_FILE,
    _finish_rewrite,
    _private_directory,
    _prune_info_logs,
    _refuse_foreign_directory,
    _rewrite_dirs,
    _rewrite_dump,
)
from memory_rdf._oxigraph.errors import _room_to_reopen, _storage_errors, disk_refused
from memory_rdf._oxigraph.holds import Reading, StoreUsers, _clear_frames
from memory_rdf._oxigraph.interface import MemoryStore, Row, UserResult
from memory_rdf._oxigraph.link_index import mirrored_query
from memory_rdf._oxigraph.mirror import DiskAfter, _Mirror
from memory_rdf._oxigraph.mirror_budget import MIRROR_BUDGET
from memory_rdf._oxigraph.open_files import OPEN_STORES
from memory_rdf._oxigraph.owner import StoreOwner, _Turn, parallel_writes
from memory_rdf._oxigraph.snapshot import Snapshot
from memory_rdf._oxigraph.term_index import TermIndexes
from memory_rdf._oxigraph.terms import Term, to_python
from memory_rdf._oxigraph.text_table import TextTable
from memory_rdf._query_guard import check_user_query

#: Updates of at least this much text go to the disk store and a live read mirror at once
#: (AgentStore._commit_at_once): a compression chunk's (360-700 kB of text for 100 scans, decay
#: only or every node shortened). A remember's (~80 kB, 5 segments) stays one store after the
#: other, as measured for issue 16's remember figures.
PARALLEL_COMMIT_BYTES = 256 << 10


class AgentStore(MemoryStore):
    """One agent's embedded Oxigraph store (``path=None``: in memory).

    ``mirror`` (an on-disk, writable store only): serve reads from an in-memory copy of the
    store, the *read mirror* (see :class:`_Mirror`): True always, None when its estimated size
    fits the memory available (:func:`mirror_fits`), False never. The disk store stays the
    truth: every write lands there first, then on the mirror — or, for a large one, on both at
    once (:meth:`_commit_at_once`). ``read_only``: a fixed snapshot, no lock taken: it reads a
    private copy of ``path``'s files that it deletes when closed or collected (:mod:`.snapshot`).
    """

    def __init__(self, path: Path | None, *, read_only: bool = False,
                 mirror: bool | None = False) -> None:
        self.path = path
        self.read_only = read_only
        #: A read-only store on disk reads a private copy of ``path``'s files, its own: deleted
        #: when it is closed or collected (:class:`~.snapshot.Snapshot`).
        self.snapshot: Snapshot | None = None
        self._commits_since_optimize = 0
        self._unflushed = 0  # bytes of update text since the last flush()
        self.auto_flushes = 0  # flushes because FLUSH_AFTER_BYTES of updates piled up
        self.commits_at_once = 0  # commits applied to disk and mirror at once (_commit_at_once)
        #: A background flush / compaction is queued for the owner and has not started.
        self._flush_queued = False
        self._optimize_queued = False
        self._mirror_wanted = mirror
        self._mirror: _Mirror | None = None
        self.mirror_renewals = 0  # mirrors built again to shed deleted triples
        self.handle_reopens = 0  # disk handles opened again after a whole read (block_caches)
        #: The derived term index of the keyword entry (SPEC §5.5), kept in step with commits.
        self.terms = TermIndexes()
        #: The agent's writer lock (a writable store on disk), held until the store is gone.
        self._agent_lock: AgentLock | None = None
        #: The calls that have the disk store in hand (close and a purge's swap wait for them).
        self._users = StoreUsers()
        self._reading = Reading(self)
        #: Parked (:meth:`park`): RocksDB's files closed while idle, reopened at the next use.
        #: It, ``_closing`` and ``_store`` change only on the owner (or in its turn).
        self._parked = False
        self._closing = False  # close() began: never parked nor opened again
        #: RocksDB refused a write with an I/O error (a full disk): the handle is opened
        #: again before the next write (:meth:`_reopen_after_refusal`).
        self._write_refused = False
        self.last_use = time.monotonic()  # of the disk store: what parking goes by
        what = f"cannot open the memory store {path}"
        with _storage_errors(what):
            if path is not None:
                refuse_shared_directory(path)
            if path is None:
                self._store: ox.Store | None = ox.Store()
            elif read_only:  # never the live directory: undefined beside a writer
                self.snapshot = Snapshot(self, path)
                self._store = self.snapshot.open()
            else:
                # The lock first: the crash repair and the checks below must not run while
                # another writer (a purge's swap, above all) is at work in the directory.
                self._agent_lock = OPEN_STORES.open_with_room(
                    self, lambda: AgentLock(path, what))
                try:
                    _finish_rewrite(path)
                    _refuse_foreign_directory(path)
                    _private_directory(path)
                    self._store = self._open_disk_store(path)
                except BaseException:
                    self._store = None
                    gc.collect()
                    self._agent_lock.release()
                    self._agent_lock = None
                    raise
        #: The thread that writes the store and changes its lifecycle (:class:`StoreOwner`):
        #: started before the read mirror's first build (see there). A read-only store has
        #: none (no write, no park): what it would run runs in the calling thread.
        self.owner = StoreOwner(str(path), thread=not read_only)
        weakref.finalize(self, self.owner.abandon)
        if path is not None and not read_only:
            OPEN_STORES.add(self)
        try:
            self._start_mirror()
        except BaseException:
            self.close()
            raise

    @property
    def location(self) -> str:
        return str(self.path) if self.path is not None else "(in memory)"

    @property
    def local(self) -> AgentStore:
        return self

    # -- the read mirror -----------------------------------------------------------------------

    def _start_mirror(self) -> None:
        if (self._mirror_wanted is False or self.path is None or self.read_only
                or self._store is None):
            return
        self._mirror = _Mirror(self, self._mirror_wanted)

    def _stop_mirror(self) -> None:
        mirror = self._mirror
        self._mirror = None
        if mirror is not None:
            mirror.stop()
        MIRROR_BUDGET.release(self)

    @property
    def mirror_state(self) -> str:
        """The read mirror: "on", "loading", "off", "too large" or "failed" (reads on disk)."""
        return getattr(self._mirror, "state", "off")

    @property
    def mirror_building(self) -> bool:
        """A read mirror is being built (automatic compression waits for it)."""
        return self.mirror_state == "loading"

    def wait_mirror(self, timeout: float | None = None) -> bool:
        """Wait until the read mirror is built (or given up); True when it serves reads."""
        mirror = self._mirror
        return mirror is not None and mirror.wait(timeout)

    def _reads(self, query: str) -> ox.Store:
        """The mirror for a query written against its layout (:func:`mirrored_query`); disk else."""
        store, mirror = self.store, self._mirror  # self.store first: it counts as a use
        copy = None if mirror is None else mirror.store
        return copy if copy is not None and mirrored_query(query) else store

    # -- lifecycle -----------------------------------------------------------------------------

    @property
    def store(self) -> ox.Store:
        """The disk store, opened again first if parked (by the owner). Readers take it
        inside a hold (``self._reading``), which opens a parked store before it counts."""
        store = self._store
        if store is None:
            return self._unpark()
        self.last_use = time.monotonic()
        return store

    def turn(self, deliver: Callable[[], None] | None = None) -> _Turn:
        """The owner's turn (:meth:`StoreOwner.turn`): no write, park, swap or close of the
        store runs until the block ends."""
        return self.owner.turn(deliver)

    def _open_disk_store(self, path: Path) -> ox.Store:
        """RocksDB's store at ``path`` (the agent's lock is held). Refused for the process's
        limit of open files, it is tried once more after every idle store is parked."""
        with OPEN_STORES.opening:
            OPEN_STORES.make_room(self)
            store = OPEN_STORES.open_with_room(self, lambda: ox.Store(str(path)))
        _prune_info_logs(path)
        return store

    # -- parking (many agents in one process) ------------------------------------------------

    @property
    def parked(self) -> bool:
        """RocksDB's files are closed while the agent is idle (:meth:`park`)."""
        return self._parked

    @property
    def parkable(self) -> bool:
        """Open on disk for writing, and not building its read mirror (whose thread reads
        the disk store, and waits for the owner's turn, which :meth:`park` has as it stops
        the mirror, until it has ended) nor without the mirror it wants (a purge or a bulk load
        stopped it while it works on the store; an unpark would start one beside it)."""
        mirror = self._mirror
        return (self._store is not None and self.path is not None and not self.read_only
                and (mirror.ended if mirror is not None
                     else self._mirror_wanted is False))

    def park(self, *, flush: bool = True) -> bool:
        """Close RocksDB's files while no call uses the store (``_OpenStores``): the read
        mirror is dropped, the agent's lock stays held (no one else opens the agent), and the
        next use opens the store again (~50 ms for a small agent) and builds the mirror anew.
        Returns False, changing nothing, when the store is in use (a call holding it, a
        commit, a flush or compaction running, the mirror being built). ``flush`` False: the
        memtables are not flushed first (the write-ahead log holds them; a full disk would
        refuse the flush)."""
        if not self.parkable:
            return False
        # Only when the owner is idle, without waiting for it: the caller (make_room) holds
        # OPEN_STORES.opening, which an unpark on the owner may be waiting for.
        return self.owner.try_run(partial(self._park_here, flush))

    def _park_here(self, flush: bool) -> bool:
        """The park, run by the owner: no commit, flush, compaction or swap is under way."""
        with self._users.alone_if_idle() as idle:
            if self._closing or not idle or not self.parkable:
                return False
            self._stop_mirror()  # its build has ended (parkable): no wait
            store = self._store
            assert store is not None
            try:
                if flush:
                    with _storage_errors(f"cannot flush {self.path}"):
                        store.flush()
            except StoreError:
                self._start_mirror()
                return False
            del store
            self._store = None
            self._parked = True
            gc.collect()  # the last reference going away closes RocksDB (SPEC §7)
            return True

    def _unpark(self) -> ox.Store:
        """The disk store opened again after :meth:`park`, by the owner (StoreError when it
        is closed)."""
        if self._closing:
            raise StoreError(f"the memory store {self.path} is closed")
        store = self.owner.run(self._unpark_here)
        self.last_use = time.monotonic()
        return store

    def _unpark_here(self) -> ox.Store:
        store = self._store
        if store is None:
            if self._closing or not self._parked or self.path is None:
                raise StoreError(f"the memory store {self.path} is closed")
            with _storage_errors(f"cannot open the memory store {self.path} again"):
                store = self._open_disk_store(self.path)
            self._store = store
            self._parked = False
            self._start_mirror()
        return store

    def close(self) -> None:
        """Release the store (and its RocksDB lock): pyoxigraph has no close(), the last
        reference going away is what unlocks it (SPEC §7). The owner's last message: after
        the writes and upkeep sent before it; every message after it is refused."""
        if self.owner.closed:
            return
        try:
            self.owner.run(self._mark_closing)  # no park, and no call opens it again
        except StoreError:
            return  # closed meanwhile
        OPEN_STORES.discard(self)
        self._stop_mirror()  # here, not on the owner: the build may wait for its turn
        self.owner.close(self._close_here)

    def _mark_closing(self) -> None:
        self._closing = True
        self._parked = False

    def _close_here(self) -> Callable[[], None] | None:
        store, self._store = self._store, None
        if store is not None:
            if not self.read_only and self.path is not None:
                with (contextlib.suppress(StoreError),
                      _storage_errors(f"cannot flush the memory store {self.path}")):
                    store.flush()
            del store
            gc.collect()
        if self.snapshot is not None:
            self.snapshot.delete()
        return self._release_agent_lock()

    def keep_agent_lock(self) -> AgentLock | None:
        """Take the agent's writer lock out of this store, so that :meth:`close` leaves it
        held: the caller works on the directory after the store is let go (the demo wipes
        it) and releases the lock itself."""
        lock, self._agent_lock = self._agent_lock, None
        return lock

    def _release_agent_lock(self) -> Callable[[], None] | None:
        """Release the writer lock once no call holds the disk store: a read in another thread
        (an untimed query with the mirror off, or a timed one that timed out: an aggregate
        finishes in the background, :func:`run_bounded`) may still have it in hand, and a
        second instance of the store in this process must not open beside it. Then it
        returns what releases the lock when the last such call ends, which the owner runs
        after close() has its answer, as its thread's last work."""
        lock, self._agent_lock = self._agent_lock, None
        if lock is None:
            return None
        users = self._users
        if not users.active:
            lock.release()
            return None

        def release_later() -> None:
            users.wait_idle()
            gc.collect()
            lock.release()

        return release_later

    def flush(self) -> None:
        """Flush RocksDB's memtables, by the owner (a parked store was flushed as it was)."""
        self.owner.run(partial(self._upkeep_here, "flush",
                               f"cannot flush the memory store {self.path}", False))

    def optimize(self) -> None:
        """Compact the store, by the owner."""
        self.owner.run(partial(self._upkeep_here, "optimize",
                               f"cannot compact the memory store {self.path}", False))
        self._commits_since_optimize = 0

    #: Writes after which an idle agent's store is compacted in the background. RocksDB keeps
    #: every write in its log until compaction, and a read-only open — how live inspection
    #: works — replays that log (measurements: README, "Fixed pool").
    OPTIMIZE_AFTER_COMMITS = 1000
    #: Bytes of updates after which the writer flushes RocksDB's memtables to disk: without it
    #: a busy agent's process grew its RSS steadily (benchmarks/soak.py). A flush also makes
    #: the writes survive a power cut (SPEC §7).
    FLUSH_AFTER_BYTES = 4 * 2**20

    def maybe_optimize_in_background(self) -> bool:
        """Have the owner compact the store once enough writes piled up (queued: the caller
        does not wait; RocksDB compaction runs beside reads; close() comes after it)."""
        if (
            self.read_only
            or self.path is None
            or self._commits_since_optimize < self.OPTIMIZE_AFTER_COMMITS
            or self._optimize_queued
            or self._store is None  # parked (nothing written since) or closed
        ):
            return False
        self._commits_since_optimize = 0
        self._optimize_queued = True
        self.owner.post(self._background_optimize)
        return True

    def _background_optimize(self) -> None:
        self._optimize_queued = False
        self._upkeep_here("optimize", "background compaction", True)

    def rewrite(self) -> None:
        """Copy the store's current contents into a fresh directory and swap it in, so that
        nothing deleted before survives in any file (forget(purge=True), SPEC §5.6).

        Measured on pyoxigraph 0.5.13: a deleted literal stays in the store's files after
        ``flush()``, ``optimize()`` and even ``clear()`` (Oxigraph never deletes a string from
        its dictionary, and RocksDB recycles write-ahead log files without wiping them); only
        a store that never held it is free of it. Crash-safe: the copy is complete and closed
        before two directory renames (``{agent}`` → ``{agent}~old``, ``{agent}~new`` →
        ``{agent}``); an interrupted swap is finished by the next open. The RocksDB lock is
        released for the few milliseconds of the swap.
        """
        if self.path is None or self.read_only:
            return
        path = self.path
        new, old = _rewrite_dirs(path)
        dump = _rewrite_dump(path)
        # The read mirror is built again from the fresh copy: an in-memory store keeps the
        # strings of what was deleted from it, too (reads go to disk meanwhile). A parked
        # store is opened first: opened during the rewrite, it would start a mirror of its own.
        self.store  # noqa: B018
        self._stop_mirror()
        try:
            # The owner copies and swaps: no commit, flush or park runs meanwhile.
            self.owner.run(partial(self._rewrite, path, new, old, dump))
        finally:
            self._start_mirror()

    def _rewrite(self, path: Path, new: Path, old: Path, dump: Path) -> None:
        self.terms.stale()
        try:
            for leftover in (new, old):
                if leftover.exists():
                    shutil.rmtree(leftover)
            dump.unlink(missing_ok=True)
            # Through a file, not memory: N-Quads run to ~16 kB per node (measured at 10k
            # nodes: 157 MB), and both calls stream it. The file holds every memory and
            # sits beside the agents' directories: readable by the owner only.
            os.close(os.open(dump, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            self.store.dump(output=str(dump), format=ox.RdfFormat.N_QUADS)
            new.mkdir()  # the copy keeps the permissions of the directory it replaces
            os.chmod(new, stat.S_IMODE(path.stat().st_mode))
            fresh = ox.Store(str(new))
            fresh.bulk_load(path=str(dump), format=ox.RdfFormat.N_QUADS)
            fresh.flush()
            del fresh
            dump.unlink()
            for extra in path.iterdir():  # files of ours (not RocksDB's) move along
                if extra.is_file() and not _ROCKSDB_FILE.match(extra.name):
                    shutil.copy2(extra, new / extra.name)
            # No call may have the old instance in hand across the swap (a read in
            # another thread: an untimed query with the mirror off, a timed-out aggregate
            # still running): alive, it writes into the fresh copy when it goes, and the
            # reopen fails meanwhile. Reads that come meanwhile wait for the fresh copy.
            with self._users.alone():
                self._swap(path, new, old)
            shutil.rmtree(old)
        except OSError as exc:
            raise StoreError(f"cannot rewrite the memory store {path}: {exc}") from exc
        self._commits_since_optimize = 0
        self._unflushed = 0

    def _swap(self, path: Path, new: Path, old: Path) -> None:
        """Put the complete copy ``new`` in the place of the store at ``path`` (run by the
        owner, no call holds the store). On an error the store at ``path`` is open again."""
        try:
            self.store.flush()
            self._store = None
            gc.collect()  # the last reference going away releases the lock (SPEC §7)
            os.rename(path, old)
            os.rename(new, path)
            try:
                self._store = ox.Store(str(path))
            except OSError:
                # Put the old store back (the next open would take the copy as the store and
                # delete the old one): nothing purged, nothing lost.
                os.rename(path, new)
                os.rename(old, path)
                raise
        except OSError:
            if self._store is None and path.exists():
                with contextlib.suppress(OSError):
                    self._store = ox.Store(str(path))
                if self._store is None:
                    # Not open again now (the old instance still alive, the open-files
                    # limit): parked, so that the next use tries again (the agent's lock is
                    # still held), instead of a store closed for the rest of the session.
                    self._parked = not self._closing
            raise

    def bulk_load_nquads(self, path: Path) -> None:
        """Load an N-Quads file with Oxigraph's bulk loader (not atomic: for fresh stores)."""
        self.store  # noqa: B018 - opened first if parked (opening starts a mirror: stopped here)
        self._stop_mirror()  # the load bypasses commit(): the mirror is built again after it
        self.terms.stale()  # before and after it: what a recall read meanwhile is not kept
        def load() -> None:
            with _storage_errors(f"cannot bulk-load {path} into {self.path}"):
                self.store.bulk_load(path=str(path), format=ox.RdfFormat.N_QUADS)

        try:
            self.owner.run(load)
        finally:
            self.terms.stale()
            self._start_mirror()

    # -- internal queries ----------------------------------------------------------------------

    def rows(self, query: str) -> list[Row]:
        with self._reading, _storage_errors(f"cannot read the memory store {self.path}"):
            return self._rows(self._reads(query), query)

    @staticmethod
    def _rows(store: ox.Store, query: str) -> list[Row]:
        result = store.query(query, prefixes=V.PREFIXES)
        assert isinstance(result, ox.QuerySolutions)
        width = len(result.variables)
        return [tuple(to_python(sol[i]) for i in range(width)) for sol in result]

    def term_rows(self, query: str) -> list[Sequence[Any]] | None:
        with self._reading:
            return self._solutions(self._reads(query), query, f"the memory store {self.path}")

    @staticmethod
    def _solutions(store: ox.Store, query: str, what: str) -> list[Sequence[Any]]:
        """A SELECT's rows as pyoxigraph terms, materialized here, in the calling thread
        (SPEC §7)."""
        with _storage_errors(f"cannot read {what}"):
            result = store.query(query, prefixes=V.PREFIXES)
            assert isinstance(result, ox.QuerySolutions)
            return list(result)

    def index_rows(self, query: str) -> list[Row]:
        with self._reading, _storage_errors(f"cannot read the memory store {self.path}"):
            return self._rows(self.store, query)

    @property
    def mirrored(self) -> bool:
        """A read mirror serves reads now (it may go away: :meth:`mirror_rows` says None)."""
        return getattr(self._mirror, "store", None) is not None

    def mirror_rows(self, query: str) -> list[Sequence[Any]] | None:
        """Rows (pyoxigraph terms, None unbound; the caller reads each ``value`` it needs) of a
        ``mirror_*.rq`` query over the mirror's link index; None: no mirror serves reads."""
        copy = getattr(self._mirror, "store", None)
        return None if copy is None else self._solutions(copy, query, f"mirror of {self.path}")

    def text_table(self) -> TextTable | None:
        return getattr(self._mirror, "served_texts", None)

    def mirror_graphs(self) -> list[str] | None:
        """The read mirror's named graphs (its link graphs); None: no mirror serves reads."""
        copy = getattr(self._mirror, "store", None)
        return None if copy is None else [g.value for g in copy.named_graphs()]

    def ask(self, query: str) -> bool:
        with self._reading, _storage_errors(f"cannot read the memory store {self.path}"):
            return bool(self.store.query(query, prefixes=V.PREFIXES))

    def commit(self, batch: WriteBatch) -> None:
        """Apply ``batch`` to the disk store, then to the read mirror, then run its
        after-commit steps. A Ctrl-C in the main thread is held back until all of it is done
        (:func:`interrupts_held`), so it does not leave the mirror or the in-memory state
        behind the disk store; anything else that stops the commit after it started (an
        exception raised by another signal's handler) has the mirror built again from the
        disk store, as :meth:`_commit_at_once` does."""
        if not batch:
            return
        text = batch.text()
        if self._write_refused:
            self._reopen_after_refusal()
        with interrupts_held() as held:
            # The wait for the owner's turn (a purge's rewrite takes it for minutes on a
            # large store) stays open to Ctrl-C: it raises there, before anything is written.
            with self.owner.turn(held.deliver) as turn:
                self._commits_since_optimize += 1
                try:
                    self._write(text, batch, turn)
                except BaseException:
                    self.terms.stale()  # whether the store has the write is not known here
                    raise
                self.terms.committed(batch)
                self._unflushed += len(text)
                if self._unflushed >= self.FLUSH_AFTER_BYTES and self.path is not None:
                    self._flush_in_background()
            batch.run_after_commit()

    def _reopen_after_refusal(self) -> None:
        """RocksDB keeps the I/O error a write met (a full disk) and refuses every later
        write on that handle, even once the disk has room again (Oxigraph has no
        ``DB::Resume``): the handle is closed, without a flush (the write-ahead log holds
        every write that landed), and the write opens the store again (issue 33 F6). Only
        once the disk has room for the open (which replays the log into a new table file):
        opened on a full disk, the store could not be read either. Until then, or while
        another call holds the store, the write is refused again, and a remember tries again
        after a backoff (``MemoryManager``)."""
        if self.path is not None and _room_to_reopen(self.path) and self.park(flush=False):
            self._write_refused = False

    def _refused(self, exc: StoreError) -> None:
        """Note a write the disk store refused with an I/O error (see above)."""
        if self.path is not None and disk_refused(exc):
            self._write_refused = True

    def _write(self, text: str, batch: WriteBatch, turn: _Turn) -> None:
        """The update applied to both stores, in the owner's turn (no park, swap or close can
        be under way: they are the owner's messages)."""
        try:
            self.store  # noqa: B018 - opened again first if parked, with its mirror loading
            mirror = self._mirror
            if (mirror is not None and mirror.store is not None
                    and len(text) >= PARALLEL_COMMIT_BYTES and parallel_writes()):
                self._commit_at_once(text, batch, mirror, turn)
            else:
                self._commit_in_turn(text, batch, mirror, turn)
        except BaseException as exc:
            # The traceback's frames must not keep the store past the commit (a park or a
            # close after it would leave RocksDB open).
            _clear_frames(exc)
            raise

    def _disk_now(self) -> ox.Store:
        """The open disk store, in the owner's turn (a commit's)."""
        if (store := self._store) is None:
            raise StoreError(f"the memory store {self.path} is closed")
        return store

    def _disk_update(self, text: str) -> None:
        """The update applied to the disk store: by the owner, or in its turn."""
        self._disk_now().update(text, prefixes=V.PREFIXES)

    def _commit_in_turn(self, text: str, batch: WriteBatch, mirror: _Mirror | None,
                        turn: _Turn) -> None:
        """The update applied to the disk store, then to the read mirror, here, in the owner's
        turn (its holder acts as the owner: a thread switch per commit cost a remember 1.6×
        its write floor on a loaded machine, against 1.04× in place). Stopped in between (or
        in either, whether the disk store has the write is then unknown), the mirror is built
        again from the disk store, the truth; a write the disk store refused (StoreError) is
        in neither."""
        try:
            with _storage_errors(f"cannot write the memory store {self.path}"):
                self._disk_update(text)
            if mirror is not None:  # disk first: the disk store is the truth
                mirror.apply(text, batch, self._disk_now)
        except StoreError as exc:
            self._refused(exc)
            raise
        except BaseException:
            if mirror is not None and self._mirror is mirror:
                mirror.interrupted()
            raise

    def _commit_at_once(self, text: str, batch: WriteBatch, mirror: _Mirror,
                        turn: _Turn) -> None:
        """A large update applied to the disk store (by the owner) and to the live read
        mirror (here) at the same time: pyoxigraph releases the GIL in both, so on two CPUs a
        compression commit costs the calling thread the longer of the two instead of their
        sum (benchmarks/PROFILE.md, eleventh pass). The owner's turn is held until both are
        in, so commits still land one after the other, in order, on both stores. If the disk
        update fails, the mirror (which may hold the write) is dropped and built again from
        the disk store, which stays the truth; a reader of the mirror may have seen the
        failed write in between, as it sees any write before this call returns."""
        answer = turn.start(partial(self._disk_update, text))
        self.commits_at_once += 1
        landed = DiskAfter(answer, self._disk_now)  # what the mirror reads back, once in
        try:
            mirror.apply(text, batch, landed)
        except BaseException:  # interrupted: whether the copy has the write is unknown
            landed.outcome()
            if self._mirror is mirror:
                mirror.interrupted()
            raise
        try:
            with _storage_errors(f"cannot write the memory store {self.path}"):
                if (failed := landed.outcome()) is not None:
                    raise failed
        except StoreError as exc:
            self._refused(exc)
            current = self._mirror
            if current is not None and current.store is not None:
                current.rebuild("a write that failed on the disk store")
            raise

    def _flush_in_background(self) -> None:
        """Have RocksDB's memtables flushed by the owner after this commit (in its turn): the
        writer returns first (a flush took 60-90 ms at 100k nodes). Asked again before the
        queued flush started, it is not queued twice. The owner runs flushes and compactions
        one at a time, with every other message: two at once can wait forever for each other
        with Oxigraph's options (min_write_buffer_number_to_merge = 2 and several column
        families: RocksDB issues #12094, #12166, #13280)."""
        self._unflushed = 0
        self.auto_flushes += 1
        if not self._flush_queued:
            self._flush_queued = True
            self.owner.post(self._background_flush)

    def _background_flush(self) -> None:
        self._flush_queued = False
        self._upkeep_here("flush", "background flush", True)

    def _upkeep_here(self, name: str, what: str, background: bool) -> None:
        """``Store.flush`` or ``Store.optimize`` (``name``), run by the owner, only while the
        store is open: parked meanwhile (flushed as it was), nothing is left to do; closed,
        StoreError unless ``background`` (whose errors are dropped: the writes it tidies have
        landed). A park is the owner's message too: it never meets one of them under way."""
        store = self._store
        if store is None:
            if self._closing and not background:
                raise StoreError(f"the memory store {self.path} is closed")
            return
        with contextlib.suppress(*((StoreError,) if background else ())), _storage_errors(what):
            getattr(store, name)()

    def wait_flush(self) -> None:
        """Wait until the flushes and compactions asked for so far are done (the owner has
        handled every message sent before this call)."""
        self.owner.drain()

    def quads(self, subject: str | None, predicate: str | None, obj: Term | None,
              graph: str | None) -> list[tuple[Any, Any, Any]]:
        s = ox.NamedNode(subject) if subject else None
        p = ox.NamedNode(predicate) if predicate else None
        g = ox.NamedNode(graph) if graph else ox.DefaultGraph()
        with self._reading, _storage_errors(f"cannot read the memory store {self.path}"):
            return [
                (to_python(q.subject), to_python(q.predicate), to_python(q.object))
                for q in self.store.quads_for_pattern(s, p, None, g)
            ]

    # -- the user's SPARQL (SPEC §6) -----------------------------------------------------------

    def _user_result(self, query: str) -> ox.QuerySolutions | ox.QueryBoolean | ox.QueryTriples:
        return self.store.query(  # the disk store: all of SPEC §2, never the mirror's layout
            query, prefixes=V.PREFIXES, default_graph=ox.DefaultGraph(), named_graphs=[]
        )

    def user_query(
        self, query: str, *, timeout: float | None = None, limit: int | None = None
    ) -> UserResult:
        check_user_query(query)

        def run(cancel: threading.Event) -> UserResult:
            # The result (which has the store in hand) lives in a frame of its own, ended
            # before the hold is: here it outlived the hold, and a purge's swap or close()
            # could go ahead with the store still open.
            with (self._reading, _storage_errors(f"cannot read the memory store {self.path}",
                                                      user_query=query)):
                return self._user_rows(query, cancel, timeout, limit)

        return run_bounded(run, timeout)

    def _user_rows(self, query: str, cancel: threading.Event, timeout: float | None,
                   limit: int | None) -> UserResult:
        result = self._user_result(query)
        if isinstance(result, ox.QueryBoolean):
            return bool(result)
        out: list[Any] = []
        if isinstance(result, ox.QuerySolutions):
            names = [v.value for v in result.variables]
            for sol in result:
                _check_bounds(cancel, timeout, limit, len(out))
                row: dict[str, Any] = {}
                for i, name in enumerate(names):
                    term = sol[i]
                    if term is not None:
                        row[name] = to_python(term)
                out.append(row)
            return out
        for t in result:
            _check_bounds(cancel, timeout, limit, len(out))
            out.append((to_python(t.subject), to_python(t.predicate), to_python(t.object)))
        return out

    def user_query_serialized(
        self, query: str, fmt: str, *, timeout: float | None = None,
        output: BinaryIO | None = None,
    ) -> bytes | None:
        formats = {
            "json": ox.QueryResultsFormat.JSON,
            "csv": ox.QueryResultsFormat.CSV,
            "tsv": ox.QueryResultsFormat.TSV,
            "xml": ox.QueryResultsFormat.XML,
        }
        check_user_query(query)

        def serialize(sink: Any) -> bytes | None:  # the result ends with this frame
            result = self._user_result(query)
            if isinstance(result, ox.QueryTriples):
                return result.serialize(sink, format=ox.RdfFormat.N_TRIPLES)
            return result.serialize(sink, format=formats[fmt])

        def run(cancel: threading.Event) -> bytes | None:
            sink: Any = None if output is None else _Sink(output, cancel, timeout)
            with (self._reading, _storage_errors(f"cannot read the memory store {self.path}",
                                                      user_query=query)):
                return serialize(sink)

        return run_bounded(run, timeout)

    # -- export --------------------------------------------------------------------------------

    def dump(self, fmt: str, *, default_graph_only: bool) -> bytes:
        formats = {"turtle": ox.RdfFormat.TURTLE, "ntriples": ox.RdfFormat.N_TRIPLES,
                   "nquads": ox.RdfFormat.N_QUADS, "trig": ox.RdfFormat.TRIG}
        kwargs: dict[str, Any] = {"format": formats[fmt]}
        if default_graph_only or fmt in ("turtle", "ntriples"):
            kwargs["from_graph"] = ox.DefaultGraph()
        if fmt in ("turtle", "trig"):
            kwargs["prefixes"] = V.PREFIXES
        with self._reading, _storage_errors(f"cannot export the memory store {self.path}"):
            data = self.store.dump(**kwargs)
        after_whole_read(self)
        assert data is not None
        return data

