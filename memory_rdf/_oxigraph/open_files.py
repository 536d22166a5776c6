"""Parking under the open-files limit: the agents' stores open on disk in this
process (:data:`OPEN_STORES`), the idle ones parked when the process nears its limit.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from memory_rdf._exceptions import (
    StoreError,
)

if TYPE_CHECKING:
    from memory_rdf._oxigraph.agent_store import AgentStore

log = logging.getLogger("memory_rdf")
T = TypeVar("T")


def _open_files() -> int | None:
    """How many files this process has open (None where that cannot be told cheaply)."""
    for listing in ("/proc/self/fd", "/dev/fd"):
        with contextlib.suppress(OSError):
            return len(os.listdir(listing))
    return None


def _files_limit() -> int | None:
    """The process's soft limit on open files (None: unknown, or none that binds)."""
    try:
        import resource
    except ImportError:  # Windows: handles, no low per-process limit
        return None
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return None if soft == resource.RLIM_INFINITY or soft <= 0 else soft


def too_many_open_files(exc: BaseException) -> bool:
    """``exc`` is the OS refusing a file for the process's open-files limit (EMFILE, as RocksDB
    words it too)."""
    return "Too many open files" in str(exc)


class _OpenStores:
    """The agents' stores open on disk for writing in this process, and the files they keep.

    RocksDB keeps every file of a store open: ~20 for a new agent, more as it grows (one per
    table file). With a common soft limit of 1,024 open files, a process serving many agents
    (a MemorySystem, ``memory-rdf serve``) failed with "Too many open files" from about the
    50th. When the process's open files pass ``HIGH`` of its limit as a store opens, the
    stores used least recently that are idle are parked (:meth:`AgentStore.park`: RocksDB's
    files closed, the agent's lock kept, reopened at their next use) until they are under
    ``LOW``. An open that still meets the limit parks every idle store and tries once more."""

    HIGH = 0.7
    LOW = 0.5

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stores: weakref.WeakSet[AgentStore] = weakref.WeakSet()
        #: One store opened at a time, after the room for it is made: opens in several
        #: threads at once each counted the files before the others' opens took theirs, and
        #: together passed the limit (the sixty-agent test failed 1 run in 7 under load).
        self.opening = threading.Lock()

    def add(self, store: AgentStore) -> None:
        with self._lock:
            self._stores.add(store)

    def discard(self, store: AgentStore) -> None:
        with self._lock:
            self._stores.discard(store)

    def open_with_room(self, opening: AgentStore, open_: Callable[[], T]) -> T:
        """``open_()`` (a store or a lock file of ``opening``), tried once more after every
        idle store is parked when the process's limit of open files refuses it."""
        try:
            return open_()
        except (OSError, StoreError) as exc:
            if not (too_many_open_files(exc) and self.make_room(opening, everything=True)):
                raise
        return open_()

    def make_room(self, opening: AgentStore, *, everything: bool = False) -> int:
        """Park idle stores (least recently used first) when the process is near its limit
        of open files (``everything``: every idle store, whatever the count); returns how
        many were parked."""
        limit = _files_limit()
        if limit is None and not everything:
            return 0
        used = _open_files()
        if not everything and (used is None or limit is None or used <= limit * self.HIGH):
            return 0
        with self._lock:
            candidates = sorted((s for s in self._stores if s is not opening and s.parkable),
                                key=lambda s: s.last_use)
        parked = 0
        for store in candidates:
            if store.park():
                parked += 1
                if not everything:
                    used = _open_files()
                    if used is None or limit is None or used <= limit * self.LOW:
                        break
        if parked:
            log.info("memory_rdf: parked %d idle agent store(s) to stay under the limit of "
                     "%s open files", parked, limit)
        return parked


OPEN_STORES = _OpenStores()
