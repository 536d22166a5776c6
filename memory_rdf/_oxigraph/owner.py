"""The owner of an agent's embedded store (:class:`StoreOwner`): one thread per open agent
that takes, in order, every message that writes the RocksDB store or changes its lifecycle —
commits' disk updates, flushes, compactions, park and reopen, a purge's copy and swap, close.
Reads stay on the callers' threads, inside a counted hold (:class:`~.holds.StoreUsers`),
which the owner drains before it lets the store go. docs/concurrency.md has the map.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import threading
from collections import deque
from collections.abc import Callable
from functools import lru_cache
from typing import Any, TypeVar

from memory_rdf._exceptions import StoreError
from memory_rdf._oxigraph.holds import _clear_frames

log = logging.getLogger("memory_rdf")
T = TypeVar("T")


@lru_cache(maxsize=1)
def parallel_writes() -> bool:
    """More than one CPU to run a commit's disk update (the owner) and its mirror update (the
    committing thread) at once (AgentStore._commit_at_once)."""
    try:
        return len(os.sched_getaffinity(0)) > 1
    except AttributeError:  # pragma: no cover - not Linux
        return (os.cpu_count() or 1) > 1


class _Turn:
    """The owner's turn, held by another thread (:meth:`StoreOwner.turn`): the owner handles
    no other message until it ends, and runs on its own thread what the holder hands it
    (:meth:`call`, :meth:`start`). A commit holds one while the owner applies a large update
    to disk and the commit applies it to the read mirror; a mirror's build while it takes its
    snapshot and catches up; a test to hold the owner between two messages.

    Taken while the owner is idle, the turn is *direct*: the owner thread stays asleep (no
    thread switch: a commit costs what a lock did) until the holder hands it work.
    """

    __slots__ = ("_owner", "_started", "_work", "_refused", "_ended", "_inline", "_direct",
                 "_served")

    def __init__(self, owner: StoreOwner, inline: bool = False) -> None:
        self._owner = owner
        self._started = threading.Event()
        self._work: queue.SimpleQueue[tuple[Callable[[], Any], queue.SimpleQueue[Any]] | None]
        self._work = queue.SimpleQueue()
        self._refused = False
        self._ended = False
        #: Taken by the owner thread itself, or within a turn of the same thread: what it
        #: hands on runs here.
        self._inline = inline
        self._direct = False  # taken while the owner was idle (see above)
        self._served = False  # the owner thread serves it (its work goes there)

    def begin(self, deliver: Callable[[], None] | None = None) -> _Turn:
        """Wait for the turn (``deliver``: called every 50 ms while waiting, to let a Ctrl-C
        through, which gives the turn up before anything ran). StoreError: the store closed."""
        if self._inline:
            return self
        owner = self._owner
        try:
            if deliver is None:
                self._started.wait()
            else:
                while not self._started.wait(0.05):
                    deliver()
        except BaseException:
            self.end()  # the owner skips it when it comes to it
            raise
        if self._refused:
            raise StoreError(f"the memory store {owner.what} is closed")
        owner._holder = threading.get_ident()
        return self

    def end(self) -> None:
        """Give the turn back (idempotent)."""
        if self._ended or self._inline:
            return
        self._ended = True
        owner = self._owner
        if owner._holder == threading.get_ident():
            owner._holder = None
        if self._started.is_set() and not self._refused:
            with owner._cv:  # idle from now on (a park may come), unless work is queued
                owner._busy = False
                if owner._direct is self:
                    owner._direct = None
                    owner._cv.notify()  # what was queued meanwhile
                    if not self._served:
                        return
        self._work.put(None)

    def __enter__(self) -> _Turn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.end()

    def start(self, fn: Callable[[], Any]) -> queue.SimpleQueue[Any]:
        """Have the owner run ``fn()`` on its thread while this one goes on; the queue answers
        None, or the exception raised."""
        answer: queue.SimpleQueue[Any] = queue.SimpleQueue()
        if self._direct and not self._served:  # wake the owner to serve this turn
            owner = self._owner
            with owner._cv:
                self._served = True
                owner._queue.appendleft(self)
                owner._cv.notify()
        if self._inline:
            try:
                fn()
                answer.put(None)
            except BaseException as exc:  # handed over, as from the owner thread
                answer.put(exc)
        else:
            self._work.put((fn, answer))
        return answer

    def call(self, fn: Callable[[], None]) -> None:
        """``fn()`` run on the owner's thread; its exception raised here."""
        failed = self.start(fn).get()
        if failed is not None:
            raise failed

    def _serve(self) -> None:
        """On the owner thread: run what the holder hands on until the turn ends."""
        self._started.set()
        while (item := self._work.get()) is not None:
            fn, answer = item
            outcome: BaseException | None = None
            try:
                fn()
            except BaseException as exc:  # handed to the holder
                _clear_frames(exc)  # its frames would keep the store alive
                outcome = exc
            # Nothing of the work kept past its answer: the holder may let the store go next.
            del fn, item
            answer.put(outcome)
            del answer, outcome

    def _refuse(self) -> None:
        self._refused = True
        self._started.set()


class _Message:
    __slots__ = ("fn", "answer", "then")

    def __init__(self, fn: Callable[[], Any], answer: queue.SimpleQueue[Any] | None,
                 then: bool = False) -> None:
        self.fn = fn
        self.answer = answer
        #: The last message (close): its fn returns what to do after the answer.
        self.then = then


class StoreOwner:
    """The one thread that writes an agent's embedded store and changes its lifecycle.

    Messages are handled one at a time, in the order they come: :meth:`run` (wait for the
    answer), :meth:`post` (do not), :meth:`try_run` (only when the owner is idle: a park),
    :meth:`turn` (the owner held for a block of another thread), :meth:`close` (the last).
    Code the owner runs, or that holds its turn, runs what it asks of the owner in place.

    Started with the store's open, before its read mirror's first build, and kept until its
    close: a writer thread started after a build had ended applied the same compression
    updates ~2.4× slower (0.98 against 0.41 s for 1,800 scans at 100k nodes; PROFILE.md,
    eleventh pass): glibc likely hands a new thread the allocator arena a finished thread
    left, here the build thread's, which holds the whole in-memory copy.

    ``thread`` False (a read-only store: no write, no park): no thread, messages run in the
    calling thread one at a time.
    """

    def __init__(self, what: str, *, thread: bool = True) -> None:
        self.what = what
        self._cv = threading.Condition(threading.Lock())
        self._queue: deque[_Message | _Turn] = deque()
        self._busy = False
        self._closed = False
        self._stopping = False  # the thread's last message is queued
        self._holder: int | None = None  # the thread holding a turn
        self._direct: _Turn | None = None  # a turn taken while the owner was idle
        self._pid = os.getpid()
        self._ident: int | None = None
        self._inline = threading.RLock() if not thread else None
        if thread:
            self._thread: threading.Thread | None = threading.Thread(
                target=self._loop, name="memory-rdf-owner", daemon=True)
            self._thread.start()
            self._ident = self._thread.ident
        else:
            self._thread = None

    # -- asking ---------------------------------------------------------------------------------

    def _here(self) -> bool:
        """The calling code may act as the owner: it is the owner thread, holds its turn, or
        there is no thread (read-only; or a forked child, where the thread is gone)."""
        me = threading.get_ident()
        return (self._thread is None or me == self._ident or me == self._holder
                or os.getpid() != self._pid)

    def _put(self, item: _Message | _Turn, *, only_if_idle: bool = False) -> bool:
        with self._cv:
            if self._closed:
                if isinstance(item, _Turn):
                    item._refuse()
                    return True
                raise StoreError(f"the memory store {self.what} is closed")
            if only_if_idle and (self._busy or self._queue):
                return False
            self._queue.append(item)
            self._busy = True
            self._cv.notify()
        return True

    def run(self, fn: Callable[[], T]) -> T:
        """``fn()`` run by the owner, after the messages before it; its answer or its
        exception. StoreError once the store is closed."""
        if self._here():
            if self._inline is None:
                return fn()
            with self._inline:
                return fn()
        answer: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._put(_Message(fn, answer))
        ok, value = answer.get()
        if ok:
            return value
        raise value

    def try_run(self, fn: Callable[[], bool]) -> bool:
        """``fn()`` run by the owner only if it is idle now (no message running nor waiting);
        False without waiting otherwise, or once closed."""
        if self._here():
            return self.run(fn)
        answer: queue.SimpleQueue[Any] = queue.SimpleQueue()
        try:
            if not self._put(_Message(fn, answer), only_if_idle=True):
                return False
        except StoreError:
            return False
        ok, value = answer.get()
        if ok:
            return bool(value)
        raise value

    def post(self, fn: Callable[[], None]) -> None:
        """Have the owner run ``fn()`` after the messages before it, without waiting; its
        errors are logged. Nothing once the store is closed."""
        if self._thread is None or os.getpid() != self._pid:
            fn()
            return
        with contextlib.suppress(StoreError):
            self._put(_Message(fn, None))

    def turn(self, deliver: Callable[[], None] | None = None) -> _Turn:
        """The owner's turn for a ``with`` block of the calling thread, once the messages
        before it are handled (see :class:`_Turn`; ``deliver``: see :meth:`_Turn.begin`).
        Tests use it to hold the owner between two messages: what is sent meanwhile waits,
        in order, and a :meth:`try_run` (a park) is refused."""
        if self._here():
            return _Turn(self, inline=True)
        turn = _Turn(self)
        with self._cv:
            if not self._closed and not self._busy and not self._queue:
                self._busy = True  # taken at once, the owner thread left asleep
                self._direct = turn
                turn._direct = True
                turn._started.set()
        if not turn._direct:
            self._put(turn)
        return turn.begin(deliver)

    def drain(self) -> None:
        """Wait until the messages sent so far are handled (a background flush, say)."""
        with contextlib.suppress(StoreError):
            self.run(lambda: None)

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self, fn: Callable[[], Callable[[], None] | None]) -> None:
        """The last message: ``fn()`` runs after the others, every message after it is
        refused (StoreError, "closed"), the caller has its answer, and then the thread runs
        what ``fn`` returned (waiting for the readers still holding the store, say) and ends.
        """
        if self._here():  # no thread, a forked child, or the owner's own code
            then = self.run(fn)
            self._refuse_the_rest()
            self.abandon()
            if then is not None:
                then()
            return
        answer: queue.SimpleQueue[Any] = queue.SimpleQueue()
        try:
            self._put(_Message(fn, answer, then=True))
        except StoreError:
            return  # closed already
        ok, value = answer.get()
        if not ok:
            raise value

    def abandon(self) -> None:
        """End the thread without running anything more (the store was dropped unclosed)."""
        with self._cv:
            if self._thread is None or self._stopping:
                return
            self._closed = self._stopping = True
            self._queue.append(_Message(lambda: None, None, then=True))
            self._cv.notify()

    @property
    def idle(self) -> bool:
        with self._cv:
            return not self._busy and not self._queue

    # -- the thread -----------------------------------------------------------------------------

    def _loop(self) -> None:
        self._ident = threading.get_ident()
        while True:
            with self._cv:
                # (a direct turn held: only that turn, once its holder hands work on)
                while not self._queue or (self._direct is not None
                                          and self._queue[0] is not self._direct):
                    if self._direct is None:
                        self._busy = False
                    self._cv.wait()
                item = self._queue.popleft()
                self._busy = True
            if isinstance(item, _Turn):
                item._serve()
                del item
                continue
            ok, value = True, None
            try:
                value = item.fn()
            except BaseException as exc:  # handed to the caller
                _clear_frames(exc)  # its frames would keep the store alive
                ok, value = False, exc
                if item.answer is None:
                    log.warning("memory_rdf: %s: %s", self.what, exc)
            last, answer = item.then, item.answer
            del item
            if last:
                self._refuse_the_rest()
            else:
                with self._cv:  # idle before the answer: the caller may park next
                    self._busy = False
            if answer is not None:
                answer.put((ok, None if last else value))
            del answer
            if last:
                if ok and callable(value):
                    try:
                        value()
                    except Exception as exc:  # pragma: no cover - logged, the thread ends
                        log.warning("memory_rdf: %s: %s", self.what, exc)
                return
            del value

    def _refuse_the_rest(self) -> None:
        with self._cv:
            self._closed = True
            rest = list(self._queue)
            self._queue.clear()
        closed = StoreError(f"the memory store {self.what} is closed")
        for item in rest:
            if isinstance(item, _Turn):
                item._refuse()
            elif item.answer is not None:
                item.answer.put((False, closed))

