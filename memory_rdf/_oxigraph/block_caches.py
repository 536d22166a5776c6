"""RocksDB's block caches of an agent's disk store, let go after a whole-store read
(:func:`after_whole_read`): the agent's handle is closed and opened again by its owner.

Reading the whole store through the agent's handle — the read mirror's build (a dump of the
default graph), the term index's build, an export — fills RocksDB's block caches, which the
handle keeps for its life: Oxigraph gives the index column families a 32 MB cache and the
strings' column family one of 128 MB (``OptimizeForPointLookup(128)``), ~5.2 kB per node at
10k nodes, ~2 kB at 100k, that nothing reads again once the mirror serves reads (issue 38;
benchmarks/HISTORY.md, the 11:35 run of 2026-11-29). pyoxigraph has no option for those
caches and no way to empty them; dropping the handle does (the caches go with it,
``malloc_trim`` gives the pages back: :mod:`memory_rdf._allocator`).

The reopen is an owner message, so no commit, flush, compaction, park or swap runs beside it;
it waits up to :data:`READERS_WAIT` for the reads in progress to end (new ones come in
meanwhile), keeps new ones waiting while the handle is swapped, and gives up — the caches
stay, nothing else changes — when reads keep the store in hand, when the disk is (nearly) full
(the handle refused a write, which the next write opens again, or the memtables cannot be
flushed), or when something else still holds the old handle. No write is lost:
the writes that landed are flushed first, and any that were not are in the write-ahead log,
which the open replays. An open that fails leaves the store parked: the next use opens it.
"""

from __future__ import annotations

import gc
import logging
import sys
import time
from functools import partial
from typing import TYPE_CHECKING

import pyoxigraph as ox

from memory_rdf._allocator import release_freed_memory
from memory_rdf._exceptions import StoreError
from memory_rdf._oxigraph.errors import _room_to_reopen, _storage_errors

if TYPE_CHECKING:
    from memory_rdf._oxigraph.agent_store import AgentStore

log = logging.getLogger("memory_rdf")

#: Seconds the reopen waits for reads in progress to end before it gives up (the owner, so
#: commits, wait as long; new reads still come in while it waits).
READERS_WAIT = 0.5


def after_whole_read(store: AgentStore) -> None:
    """``store``'s disk handle read the whole store: have its owner open it again after the
    messages sent before this (without waiting), when a read mirror serves the reads — a
    store read from disk keeps its caches, which its reads use."""
    if store.path is not None and not store.read_only and store.mirrored:
        store.owner.post(partial(_reopen, store))


def _reopen(store: AgentStore) -> None:
    reopen_handle(store)


def reopen_handle(store: AgentStore) -> bool:
    """Close ``store``'s disk handle and open it again (by its owner; see the module's doc):
    True when done, False when given up or nothing is open."""
    path = store.path
    if path is None or store._store is None or store._closing:
        return False  # parked or closed meanwhile: its caches went with the handle
    if store._write_refused or not _room_to_reopen(path):
        return False  # (a full disk) the next write opens a refused handle once there is room
    started = time.perf_counter()
    with store._users.alone_if_idle(READERS_WAIT) as alone:
        old = store._store
        if not alone or not isinstance(old, ox.Store):
            # None: parked meanwhile. Not a Store: a wrapper around it (a test's spy), whose
            # inner handle the refcount below cannot see: closing would leave RocksDB open.
            return False
        try:
            with _storage_errors(f"cannot flush the memory store {path}"):
                old.flush()
        except StoreError:
            return False  # (a full disk) the handle stays open, its caches with it
        store._store = None
        gc.collect()
        if sys.getrefcount(old) > 2:  # held elsewhere (here and getrefcount's argument)
            store._store = old  # it would stay open, and the new open would be refused
            return False
        del old  # the last reference: RocksDB closes, its caches go
        try:
            with _storage_errors(f"cannot open the memory store {path} again"):
                store._store = store._open_disk_store(path)
        except StoreError as exc:
            store._parked = not store._closing  # the next use tries again (lock still held)
            log.warning("memory_rdf: %s; it is opened again at its next use", exc)
            return False
        store.handle_reopens += 1
    release_freed_memory()
    log.debug("memory_rdf: %s opened again after a whole read, %.0f ms", path,
              (time.perf_counter() - started) * 1000)
    return True
