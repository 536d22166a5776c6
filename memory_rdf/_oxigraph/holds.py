"""The calls that have an agent's disk store in hand, counted (:class:`StoreUsers`),
so that what lets the store go waits for them.
"""

from __future__ import annotations

import contextlib
import threading
import traceback
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memory_rdf._oxigraph.agent_store import AgentStore


class StoreUsers:
    """The calls that have an agent's disk store in hand, counted, so that what lets the
    store go waits for them.

    pyoxigraph has no ``close()``: a store goes (and RocksDB lets go of its files) when the
    last reference to it does (SPEC §7). A read running in another thread holds one for as
    long as it runs: an untimed ``sparql()`` or ``stats()`` with the read mirror off or
    loading, or a timed-out aggregate that pyoxigraph cannot stop (:func:`run_bounded`).
    :meth:`AgentStore.close` therefore releases the agent's lock only once no call holds the
    store (else a second instance could open beside the live one under another spelling of
    its path), and a purge's swap (:meth:`AgentStore._rewrite`) first waits for the calls in
    progress and keeps new ones waiting until the fresh copy is open (else the old instance,
    still alive, writes into the fresh copy when it goes: the agent lost).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._count = 0
        self._closed_to_new = False
        self._idle_waiters = 0  # threads waiting for the count to reach 0
        #: Called by the thread whose hold just ended, after the count went down (a test's
        #: seam: it holds a reader there, its frame not yet returned).
        self.released: Callable[[], None] | None = None

    def hold(self) -> StoreUsers:
        """Count the calling code as holding the store for a ``with`` block (it waits while a
        swap is under way). The object is its own context manager: ~0.4 µs a block, against
        ~3 µs for a generator-based one — a recall holds the store several times."""
        return self

    def __enter__(self) -> None:
        with self._lock:
            while self._closed_to_new:
                self._changed.wait()
            self._count += 1

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc is not None:
            # The traceback's frames hold the store the call had in hand: drop them here, or
            # the store outlives the count (the release would come while it is still open).
            _clear_frames(exc)
        with self._lock:
            self._count -= 1
            if not self._count and self._idle_waiters:
                self._changed.notify_all()
        released = self.released
        if released is not None:
            released()

    def _wait_idle(self) -> None:
        """Wait (the lock held) until no call holds the store."""
        self._idle_waiters += 1
        try:
            self._changed.wait_for(lambda: not self._count)
        finally:
            self._idle_waiters -= 1

    @property
    def active(self) -> int:
        """How many calls hold the store now."""
        with self._changed:
            return self._count

    def wait_idle(self) -> None:
        """Wait until no call holds the store."""
        with self._lock:
            self._wait_idle()

    @contextlib.contextmanager
    def alone_if_idle(self, wait: float = 0) -> Iterator[bool]:
        """When no call holds the store (waiting up to ``wait`` seconds for that, while new
        ones still come in), keep new ones waiting until the block ends and give True; else
        give False (and keep no one waiting)."""
        with self._changed:
            if wait > 0:
                self._idle_waiters += 1
                try:
                    self._changed.wait_for(
                        lambda: not self._count and not self._closed_to_new, wait)
                finally:
                    self._idle_waiters -= 1
            idle = not self._count and not self._closed_to_new
            if idle:
                self._closed_to_new = True
        try:
            yield idle
        finally:
            if idle:
                with self._changed:
                    self._closed_to_new = False
                    self._changed.notify_all()

    @contextlib.contextmanager
    def alone(self) -> Iterator[None]:
        """Wait for the calls in progress, keep new ones waiting until the block ends."""
        with self._changed:
            self._closed_to_new = True
            try:
                self._wait_idle()
            except BaseException:
                self._closed_to_new = False
                self._changed.notify_all()
                raise
        try:
            yield
        finally:
            with self._changed:
                self._closed_to_new = False
                self._changed.notify_all()


class Reading:
    """A read's hold of the disk store (``with store._reading:``): counted in
    :class:`StoreUsers`, and the store open — a parked one is opened again by the owner
    first, *outside* the hold, so that no reader waits for the owner while it holds the
    store (the owner may be waiting for the holds to end: a purge's swap)."""

    __slots__ = ("_store",)

    def __init__(self, store: AgentStore) -> None:
        self._store = store

    def __enter__(self) -> None:
        store = self._store
        users = store._users
        while True:
            users.__enter__()
            if store._store is not None or store._closing:
                return
            users.__exit__(None, None, None)
            store._unpark()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: Any) -> None:
        self._store._users.__exit__(kind, exc, tb)


def _clear_frames(exc: BaseException) -> None:
    """Clear the local variables of the finished frames in ``exc``'s traceback and in those
    of the exceptions it was raised from or during."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        item = todo.pop()
        if item is None or id(item) in seen:
            continue
        seen.add(id(item))
        traceback.clear_frames(item.__traceback__)
        todo += [item.__cause__, item.__context__]
