"""One scheduler thread per MemorySystem, serving all its agents (SPEC §5.3).

Order of service: queued user tasks first (remember, recall, an explicit compression slice),
agents taking turns, FIFO within an agent; then automatic compression slices, agents taking
turns. Tasks are generators that yield a Backoff instead of sleeping, so a task waiting out a
retry delay never holds the thread.

Model calls (issue 33 F4). A call to a model that waits on a network (the HTTP models:
``_calls.calls_off_thread``) never runs on this thread: the task yields an ``AwaitCall``, the
call runs in one of the system's model-call threads (:class:`CallPool`: at most
:data:`CALL_THREADS`, daemon threads named ``memory-rdf-model-call-N``), and the task is
parked until it returned — as a task waiting out a backoff, it keeps its place: its agent's
later tasks wait behind it (per-agent FIFO), while every other agent's recalls, remembers and
compression slices run. An automatic compression slice parked on a call is abandoned (its node
left unchanged, scanned again later; the call's answer dropped) when a remember, forget or
asked-for slice of the *same* agent is about to run; recalls run beside it (they do not
write). A slice parked in a backoff is abandoned by any user work, as before (SPEC §5.3).
Closing an agent does not wait for a call in flight past its timeout: the parked task stays
journalled and the call's answer is dropped. Calls of an in-process model (the built-in
``HeuristicModel``, a model of your own) still run in the task on this thread, serialized as
they always were (such a model need not be thread-safe; one can opt in with a
``calls_off_thread = True`` attribute): with the built-in model, moving its calls to the pool
made no difference within the noise of ``python -m benchmarks --quick`` and of an interleaved
remember/compression A/B on the 2-CPU benchmark machine (issue 33).

The scheduler knows nothing of managers: an agent registers an id and two callbacks (make an
automatic compression slice, the queue went idle); a task carries its own ``on_error`` that
says whether to queue it again and after what delay. No callback and no task step runs under
the scheduler's lock, and a caller that must write before it enqueues (a remember's durable
journal write) first reserves a queue slot (:meth:`~Scheduler.reserve`), writes outside the
lock, then submits with the reservation or releases it.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import math
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from memory_rdf._calls import AwaitCall, Wait, current_agent
from memory_rdf._exceptions import MemoryClosedError, QueueFullError

log = logging.getLogger("memory_rdf")


class TaskKind(StrEnum):
    """What a task does; the scheduler orders and preempts by kind."""

    REMEMBER = "remember"
    RECALL = "recall"
    MEMORIES = "memories"
    FORGET = "forget"
    PIN = "pin"  # pin() / unpin() (SPEC §5.6 v3)
    SLICE = "slice"  # a compression slice asked for by the user (run_compression_slice)
    AUTO_SLICE = "auto"  # an automatic compression slice (made by the agent's callback)


#: Tasks a caller waits for: a compression slice ends early for them (SPEC §5.3).
USER_KINDS = frozenset({TaskKind.REMEMBER, TaskKind.RECALL, TaskKind.MEMORIES, TaskKind.FORGET,
                        TaskKind.PIN})

#: Tasks that write the agent's store: one of them abandons the agent's compression slice
#: parked on a model call before it runs; a recall or memories() runs beside it. A pin is one:
#: the slice's answer would shorten a node pinned meanwhile (SPEC §5.6 v3).
WRITE_KINDS = frozenset({TaskKind.REMEMBER, TaskKind.FORGET, TaskKind.PIN, TaskKind.SLICE})

#: A generator step: yields a Backoff (or an AwaitCall) to wait without holding the thread,
#: returns the result.
Step = Generator[Wait, None, Any]

#: Most model calls in flight at once per MemorySystem (its model-call threads).
CALL_THREADS = 4

#: Recalls whose queue wait is kept per agent (for stats()["recall_queue_wait_ms"]).
RECENT_WAITS = 1000
#: Steps of the scheduler thread longer than this (seconds) are kept in ``Scheduler.long_steps``
#: (the LONG_STEPS longest): what held the queue when a recall waited (benchmarks/soak.py).
LONG_STEP = 0.1
LONG_STEPS = 20
#: Longest single wait of the idle loop (s); it wakes up and looks again.
MAX_WAIT = 60.0
#: Longest backoff a task may ask for (s): Config bounds its delays to an hour.
MAX_DELAY = 3600.0


def _delay(value: object) -> float:
    """A task's requested delay, made safe: NaN or negative → 0, beyond MAX_DELAY (or not a
    number) → MAX_DELAY."""
    try:
        delay = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return MAX_DELAY
    if delay != delay or delay < 0:
        return 0.0
    return min(delay, MAX_DELAY)


class CallPool:
    """At most ``size`` daemon threads making model calls for the scheduler (started as
    needed). Daemon threads: a call still in flight when the process exits (an agent closed
    with its timeout, Ctrl-C) never holds up the exit; its answer is dropped, and the task that
    asked for it stays journalled (nothing is written off the scheduler's tasks)."""

    def __init__(self, size: int = CALL_THREADS, name: str = "memory-rdf-model-call") -> None:
        self._size = size
        self._name = name
        self._queue: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]] | None] = (
            queue.SimpleQueue())
        self._idle = threading.Semaphore(0)
        self._lock = threading.Lock()
        self._threads = 0
        self._stopped = False

    def submit(self, fn: Callable[[], Any]) -> Future[Any]:
        """Run ``fn`` in a pool thread (in a copy of the caller's context: the agent named
        in log lines); its future. A future cancelled before the call starts skips it."""
        future: Future[Any] = Future()
        context = contextvars.copy_context()
        self._queue.put((future, lambda: context.run(fn)))
        if not self._idle.acquire(blocking=False):
            with self._lock:
                if self._threads < self._size and not self._stopped:
                    self._threads += 1
                    threading.Thread(target=self._work, daemon=True,
                                     name=f"{self._name}-{self._threads}").start()
        return future

    def stop(self) -> None:
        """Let the threads end once the calls queued so far are made (no wait here)."""
        with self._lock:
            self._stopped = True
            threads = self._threads
        for _ in range(threads):
            self._queue.put(None)

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            future, fn = item
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn())
                except BaseException as exc:  # the task reads it (AwaitCall.result)
                    future.set_exception(exc)
            del item, future, fn  # hold no answer while idle
            self._idle.release()


@dataclass(eq=False)
class Task:
    """A unit of work for one agent. ``start()`` makes the generator; the scheduler steps it."""

    kind: TaskKind
    start: Callable[[], Step]
    future: Future[Any] | None = None
    counted: bool = True  # counts toward max_queue_size
    not_before: float = 0.0
    gen: Step | None = None
    #: Called (outside the lock) when the task raised: a delay in seconds sends it back to the
    #: tail of its agent's queue to start again after that delay; None lets it fail.
    on_error: Callable[[BaseException], float | None] | None = None
    failures: int = 0  # times it failed and was queued again
    #: The model call it is parked on (an AwaitCall running in a model-call thread), if any.
    waiting: Future[Any] | None = None
    enqueued: float = 0.0  # time.monotonic() when submitted
    seq: int = 0  # submission order within the scheduler (kept when a remember is requeued)


@dataclass(frozen=True)
class Agent:
    """What the scheduler needs from an agent: its id and two callbacks."""

    agent_id: str
    #: a fresh automatic compression slice (called when one is due, outside the lock)
    make_slice: Callable[[], Step]
    #: the agent's queue just emptied (called outside the lock; e.g. compact the store)
    on_idle: Callable[[], None] = lambda: None


@dataclass(eq=False)
class Reservation:
    """A queue slot held by :meth:`Scheduler.reserve` until submitted or released."""

    agent_id: str
    used: bool = False


@dataclass(eq=False)
class AgentSlot:
    agent: Agent
    queue: deque[Task] = field(default_factory=deque)
    reserved: int = 0  # slots reserved and not yet submitted or released
    running: Task | None = None
    #: automatic slices queued and not yet started: one per processed remember (SPEC §5.1
    #: step 5), one more for a slice that was preempted or abandoned (SPEC §5.3).
    slices_pending: int = 0
    auto_slice: Task | None = None  # an automatic slice in progress
    closing: bool = False  # close() called: no new auto slices, queued tasks still run
    stopping: bool = False  # close() timed out: start nothing more for this agent
    #: seconds each recent recall waited in the queue before it started (stats(), soak)
    recall_waits: deque[float] = field(default_factory=lambda: deque(maxlen=RECENT_WAITS))


class Scheduler:
    def __init__(self, name: str = "memory-rdf-scheduler") -> None:
        self._cv = threading.Condition(threading.RLock())
        self._agents: dict[str, AgentSlot] = {}
        self._turn = 0
        self._slice_turn = 0
        self._stopped = False
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._calls = CallPool()
        self._started = False
        self._submitted = 0
        #: Threads other than the scheduler's own waiting on ``_cv`` (wait_idle, remove_agent):
        #: a task run inline wakes the scheduler thread only for them or for work it held up.
        self._waiters = 0
        #: (seconds, task kind, agent id, monotonic start) of the longest steps over LONG_STEP
        self.long_steps: list[tuple[float, str, str, float]] = []

    # -- registration --------------------------------------------------------------------------

    def add_agent(self, agent: Agent) -> None:
        with self._cv:
            if self._stopped:
                raise MemoryClosedError("the memory system is closed")
            self._agents[agent.agent_id] = AgentSlot(agent)
            if not self._started:
                self._started = True
                self._thread.start()
            self._cv.notify_all()

    def remove_agent(self, agent_id: str, timeout: float | None,
                     on_stopping: Callable[[], None] | None = None) -> list[Task]:
        """Wait (up to ``timeout``) for the agent's queued user tasks; return the leftovers.
        ``on_stopping`` is called (outside the lock) once the wait is over, before waiting for
        the step still running: it can make that step give up (a store retrying a server)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cv:
            slot = self._agents.get(agent_id)
            if slot is None:
                return []
            slot.closing = True
            slot.slices_pending = 0

            def drained() -> bool:
                return not slot.queue and slot.running is None

            while not drained():
                if self._stopped or threading.current_thread() is self._thread:
                    break
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    break
                with self._waiting():
                    self._cv.wait(remaining if remaining is not None else 0.5)
            slot.stopping = True  # whatever is still queued stays journalled
            if on_stopping is not None and slot.running is not None:
                self._cv.release()
                try:
                    on_stopping()
                finally:
                    self._cv.acquire()
            # Never pull the store from under a step that is running right now.
            while slot.running is not None and threading.current_thread() is not self._thread:
                with self._waiting():
                    self._cv.wait(0.5)
            if slot.auto_slice is not None and slot.auto_slice.gen is not None:
                self._drop_call(slot.auto_slice)
                slot.auto_slice.gen.close()
            for task in slot.queue:  # a call in flight is not waited for: its answer is dropped
                if task.waiting is not None:
                    self._drop_call(task)
                    if task.gen is not None:
                        with contextlib.suppress(BaseException):
                            task.gen.close()
                        task.gen = None
            leftovers = list(slot.queue)
            slot.queue.clear()
            del self._agents[agent_id]
            self._cv.notify_all()
            return leftovers

    def stop(self) -> None:
        with self._cv:
            self._stopped = True
            self._cv.notify_all()
        self._calls.stop()
        if self._started and threading.current_thread() is not self._thread:
            self._thread.join(timeout=30)

    # -- submission ----------------------------------------------------------------------------

    def submit(
        self, agent_id: str, task: Task, limit: int | None, *, front: bool = False,
        reservation: Reservation | None = None,
    ) -> None:
        """Queue ``task``. ``limit``: raise :class:`QueueFullError` (queueing nothing) when the
        agent already has that many counted tasks waiting. ``reservation``: the slot
        :meth:`reserve` held for it (no room check then); released if the agent is closed."""
        with self._cv:
            if reservation is not None:
                self._use(reservation)
            slot = self._slot(agent_id)
            if limit is not None and task.counted and reservation is None:
                self._check_room(slot, agent_id, limit)
            self._enqueue(slot, task, front)
            self._cv.notify_all()

    def _enqueue(self, slot: AgentSlot, task: Task, front: bool = False) -> None:
        """Stamp ``task`` (enqueue time, submission order) and queue it; the lock is held."""
        task.enqueued = time.monotonic()
        self._submitted += 1
        task.seq = self._submitted
        if front:
            slot.queue.appendleft(task)
        else:
            slot.queue.append(task)

    def run_inline(self, agent_id: str, task: Task) -> bool:
        """Run a user task to its end in the calling thread when the agent is idle — nothing
        queued, reserved or running, not even its compression — so the per-agent order is
        the same as through the queue; the agent counts as busy meanwhile (its later tasks
        wait behind it, compression does not start on it). False: not idle, nothing done
        (queue it). Saves a recall the two thread hand-offs through the scheduler thread:
        on the loaded 2-CPU benchmark machine, 1–3 ms of a 1–3 ms recall (benchmarks/PROFILE.md).
        For a task that never yields a backoff (a recall)."""
        with self._cv:
            slot = self._slot(agent_id)
            if slot.queue or slot.reserved or slot.running is not None or slot.stopping:
                return False
            self._abandon_auto_slices(slot, task)  # as when the scheduler thread picks user work
            self._enqueue(slot, task)
            slot.running = task
        try:
            self._step(slot, task)
            if task in slot.queue:  # it yielded a backoff: not for inline tasks
                raise RuntimeError(f"a {task.kind} task run inline asked for a backoff")
        except BaseException as exc:
            self._fail(slot, task, exc)
        finally:
            with self._cv:
                slot.running = None
                self._wake(slot)
        return True

    def reserve(self, agent_id: str, limit: int) -> Reservation:
        """Hold one queue slot of the agent, or raise :class:`QueueFullError` now. The caller
        does its slow work (a durable write) without any lock, then calls :meth:`submit` with the
        reservation or :meth:`release`."""
        with self._cv:
            slot = self._slot(agent_id)
            self._check_room(slot, agent_id, limit)
            slot.reserved += 1
            return Reservation(agent_id)

    def release(self, reservation: Reservation) -> None:
        """Give back a slot that will not be used (the write before the submit failed)."""
        with self._cv:
            self._use(reservation)
            self._cv.notify_all()

    def _use(self, reservation: Reservation) -> None:
        if reservation.used:
            raise RuntimeError("a queue reservation is used once")
        reservation.used = True
        slot = self._agents.get(reservation.agent_id)
        if slot is not None:
            slot.reserved -= 1

    @staticmethod
    def _check_room(slot: AgentSlot, agent_id: str, limit: int) -> None:
        waiting = sum(1 for t in slot.queue if t.counted and t.gen is None) + slot.reserved
        if waiting >= limit:
            raise QueueFullError(
                f"agent {agent_id!r} already has {waiting} tasks waiting "
                f"(max_queue_size={limit}); retry later"
            )

    def request_slice(self, agent_id: str) -> None:
        with self._cv:
            slot = self._agents.get(agent_id)
            if slot is not None and not slot.closing:
                slot.slices_pending += 1
                self._cv.notify_all()

    def _slot(self, agent_id: str) -> AgentSlot:
        slot = self._agents.get(agent_id)
        if slot is None or slot.closing or self._stopped:
            raise MemoryClosedError(f"agent {agent_id!r} is closed")
        return slot

    # -- observation ---------------------------------------------------------------------------

    def pending(self, agent_id: str) -> int:
        with self._cv:
            slot = self._agents.get(agent_id)
            if slot is None:
                return 0
            running = slot.running is not None and slot.running.kind is not TaskKind.AUTO_SLICE
            return len(slot.queue) + (1 if running and slot.running not in slot.queue else 0)

    def remembers_waiting(self, agent_id: str) -> int:
        """Remembers of the agent queued that wait on the small model: for the answer of a
        call in flight, out a backoff, or tried again after a failed segmentation."""
        now = time.monotonic()
        with self._cv:
            slot = self._agents.get(agent_id)
            if slot is None:
                return 0
            return sum(
                1 for t in slot.queue
                if t.kind is TaskKind.REMEMBER and (t.failures > 0 or t.not_before > now)
            )

    def recall_waits(self, agent_id: str) -> list[float]:
        """Seconds the agent's recent recalls waited in its queue (behind its earlier tasks and
        the compression step in flight) before they started, oldest first."""
        with self._cv:
            slot = self._agents.get(agent_id)
            return [] if slot is None else list(slot.recall_waits)

    def idle(self, agent_id: str) -> bool:
        slot = self._agents.get(agent_id)
        return slot is None or (
            not slot.queue
            and slot.running is None
            and not slot.slices_pending
            and slot.auto_slice is None
        )

    def wait_idle(self, agent_id: str, timeout: float | None) -> bool:
        with self._cv, self._waiting():
            return self._cv.wait_for(lambda: self.idle(agent_id) or self._stopped, timeout)

    @contextlib.contextmanager
    def _waiting(self) -> Iterator[None]:
        """Around a wait on ``_cv`` (held) by a thread other than the scheduler's: counted in
        ``_waiters``, so that the end of a task wakes it (:meth:`_wake`)."""
        self._waiters += 1
        try:
            yield
        finally:
            self._waiters -= 1

    def _wake(self, slot: AgentSlot) -> None:
        """A task of ``slot`` ended (``_cv`` held): wake whoever may be waiting for that —
        threads in :meth:`wait_idle` / :meth:`remove_agent`, and the scheduler thread when the
        agent has work the task held up or the task ran inline (a caller's thread). A recall
        run inline on an idle agent wakes nobody: waking the idle scheduler thread for
        nothing cost the caller a GIL hand-off, 0.4-1 ms of a 1-2 ms recall on the loaded
        2-CPU benchmark machine (benchmarks/PROFILE.md)."""
        if (self._waiters or slot.queue or slot.slices_pending or slot.auto_slice is not None
                or threading.current_thread() is self._thread):
            self._cv.notify_all()

    def user_work_waiting(self) -> bool:
        """True when any agent has a user task ready to run (checked between compression nodes)."""
        now = time.monotonic()
        with self._cv:
            return self._user_waiting_locked(now)

    # -- the loop ------------------------------------------------------------------------------

    def _loop(self) -> None:
        while True:
            try:
                with self._cv:
                    picked = self._pick()
                    while picked is None:
                        if self._stopped:
                            return
                        self._cv.wait(self._wait_time())
                        picked = self._pick()
                    slot, task = picked
                    slot.running = task
            except BaseException:  # never let anything stop the thread (issue 17)
                log.exception("memory_rdf scheduler: unexpected error while picking a task")
                time.sleep(0.01)
                continue
            started = time.monotonic()
            try:
                self._step(slot, task)
            except BaseException as exc:  # never let a task stop the thread
                log.exception("memory_rdf scheduler: unexpected error in a %s task of agent %s",
                              task.kind, slot.agent.agent_id)
                self._fail(slot, task, exc)
            finally:
                with self._cv:
                    self._note_step(time.monotonic() - started, task, slot, started)
                    slot.running = None
                    self._cv.notify_all()

    def _note_step(self, seconds: float, task: Task, slot: AgentSlot, started: float) -> None:
        if seconds < LONG_STEP:
            return
        steps = self.long_steps
        steps.append((seconds, task.kind.name, slot.agent.agent_id, started))
        if len(steps) > LONG_STEPS:
            steps.sort(reverse=True)
            del steps[LONG_STEPS:]

    def _fail(self, slot: AgentSlot, task: Task, exc: BaseException) -> None:
        """What escaped a task's own error handling: the task fails (its caller gets the
        error), the others keep being served."""
        with self._cv:
            if task in slot.queue:
                slot.queue.remove(task)
            if slot.auto_slice is task:
                slot.auto_slice = None
            self._cv.notify_all()
        self._drop_call(task)
        if task.gen is not None:
            with contextlib.suppress(BaseException):
                task.gen.close()
        if task.future is not None and not task.future.done():
            task.future.set_exception(exc)

    def _pick(self) -> tuple[AgentSlot, Task] | None:
        if self._stopped:
            return None
        now = time.monotonic()
        slots = list(self._agents.values())
        n = len(slots)
        for i in range(n):
            slot = slots[(self._turn + i) % n]
            task = self._ready(slot, now)
            if task is not None:
                self._turn = (self._turn + i + 1) % n
                self._abandon_auto_slices(slot, task)
                return slot, task
        for i in range(n):
            slot = slots[(self._slice_turn + i) % n]
            if slot.running is not None or slot.closing:
                continue
            if any(t.waiting is not None for t in slot.queue):
                continue  # its user task waits on a model call: the slice would be abandoned
            if slot.auto_slice is None and slot.slices_pending:
                slot.slices_pending -= 1
                slot.auto_slice = Task(TaskKind.AUTO_SLICE, slot.agent.make_slice,
                                       counted=False)
            if slot.auto_slice is not None and slot.auto_slice.not_before <= now:
                self._slice_turn = (self._slice_turn + i + 1) % n
                return slot, slot.auto_slice
        return None

    @classmethod
    def _ready(cls, slot: AgentSlot, now: float) -> Task | None:
        """The agent's next runnable user task: FIFO, except that a remember sent back to the
        tail after a segmentation failure lets later *remembers* pass while it waits (SPEC
        §5.1). Reads and forgets (recall, memories, forget) still wait behind every remember
        submitted before them, so a recall sees what was remembered before it and a forget
        finds the nodes it names (per-agent FIFO, SPEC §4) — within the caller's timeout.
        A task suspended mid-way (waiting out a backoff, or parked on a model call) blocks the
        tasks behind it. A task given up by its caller (timed out, cancelled: its future done)
        is dropped unstarted."""
        if slot.running is not None or slot.stopping:
            return None
        dropped = [
            t for t in slot.queue
            if t.gen is None and t.future is not None and t.future.done()
        ]
        for task in dropped:
            slot.queue.remove(task)
        return cls._first_ready(slot, now)

    @staticmethod
    def _first_ready(slot: AgentSlot, now: float, skip: Task | None = None) -> Task | None:
        """:meth:`_ready`'s choice in the agent's queue, ``skip`` (the task running) left
        out; tasks given up by their callers are passed over."""
        earliest_remember = min(
            (t.seq for t in slot.queue if t.kind is TaskKind.REMEMBER and t is not skip),
            default=None,
        )
        for task in slot.queue:
            if task is skip:
                continue
            if task.gen is None and task.future is not None and task.future.done():
                continue
            blocked = (
                task.kind is not TaskKind.REMEMBER
                and earliest_remember is not None
                and earliest_remember < task.seq
            )
            if task.not_before <= now and not blocked:
                return task
            if task.gen is not None:
                return None
        return None

    def _abandon_auto_slices(self, picked: AgentSlot, task: Task) -> None:
        """User work (``task`` of ``picked``) is about to run: a compression slice waiting out
        a model backoff is abandoned (its node left unchanged, scanned again later) and queued
        again (SPEC §5.3); so is the agent's own slice parked on a model call when ``task``
        writes the store (its answer is dropped). Other slices parked on a call go on: they
        hold nobody."""
        for slot in self._agents.values():
            slice_task = slot.auto_slice
            if slice_task is None or slice_task.gen is None or slot.running is not None:
                continue
            if slice_task.waiting is not None and not (
                slot is picked and task.kind in WRITE_KINDS
            ):
                continue
            self._drop_call(slice_task)
            slice_task.gen.close()
            slot.auto_slice = None
            self._requeue_slice(slot)

    @staticmethod
    def _drop_call(task: Task) -> None:
        """The task will not read the answer of the model call it is parked on (the call is
        skipped if it has not started; one in flight runs to its end in its thread)."""
        future, task.waiting = task.waiting, None
        if future is not None:
            future.cancel()  # its callback (returned) now leaves the task alone

    @staticmethod
    def _requeue_slice(slot: AgentSlot) -> None:
        """A slice that stopped early (preempted, abandoned in a backoff) is queued again."""
        if not slot.closing:
            slot.slices_pending += 1

    def _wait_time(self) -> float | None:
        # An agent with a task running (inline, in a caller's thread) is woken for when it
        # ends (_wake): its queue's times would have this thread poll every millisecond.
        free = [s for s in self._agents.values() if s.running is None]
        times = [t for s in free for t in self._start_times(s)]
        times += [s.auto_slice.not_before for s in free if s.auto_slice]
        if not times:
            return None
        # Capped: a wait longer than the platform's limit raises OverflowError (issue 17).
        return min(max(0.0, min(times) - time.monotonic()) + 0.001, MAX_WAIT)

    @staticmethod
    def _start_times(slot: AgentSlot) -> Iterator[float]:
        """When the agent's queued tasks may start, as far as time tells: not the tasks
        that wait behind a suspended one or behind an earlier remember (a model call or a
        backoff ends first; polling them would spin the thread while it lasts)."""
        earliest_remember = min(
            (t.seq for t in slot.queue if t.kind is TaskKind.REMEMBER), default=None
        )
        for task in slot.queue:
            if task.kind is TaskKind.REMEMBER or earliest_remember is None \
                    or task.seq < earliest_remember:
                yield task.not_before
            if task.gen is not None:
                return

    def _step(self, slot: AgentSlot, task: Task) -> None:
        """Advance ``task`` until it finishes or asks for a backoff."""
        token = current_agent.set(slot.agent.agent_id)  # names the agent in log lines
        try:
            self._step_in(slot, task)
        finally:
            current_agent.reset(token)

    def _step_in(self, slot: AgentSlot, task: Task) -> None:
        if task.gen is None:
            if task.kind is TaskKind.RECALL:
                slot.recall_waits.append(time.monotonic() - task.enqueued)
            task.gen = task.start()
        task.waiting = None
        try:
            backoff = next(task.gen)
        except StopIteration as stop:
            self._finish(slot, task, stop.value, None)
            return
        except BaseException as exc:
            self._finish(slot, task, None, exc)
            return
        if isinstance(backoff, AwaitCall):
            self._park(slot, task, backoff)
            return
        with self._cv:
            if task.kind is TaskKind.AUTO_SLICE and self._user_waiting_locked():
                task.gen.close()  # abandon: the node stays as it was, scanned again later
                slot.auto_slice = None
                self._requeue_slice(slot)
            else:
                task.not_before = time.monotonic() + _delay(backoff.delay)

    def _park(self, slot: AgentSlot, task: Task, call: AwaitCall) -> None:
        """``task`` waits for a model call: it runs in a model-call thread, and the task is
        ready again (and the scheduler woken) when it returned."""
        with self._cv:
            future = self._calls.submit(call.fn)
            call.future = future
            task.waiting = future
            task.not_before = math.inf

            def returned(done: Future[Any]) -> None:
                with self._cv:
                    if task.waiting is done:
                        task.not_before = 0.0
                        self._cv.notify_all()

            future.add_done_callback(returned)

    def _user_waiting_locked(self, now: float | None = None) -> bool:
        """Whether some agent has a user task that could start now (not one waiting out a
        backoff or parked on a model call, nor one queued behind such a task)."""
        now = time.monotonic() if now is None else now
        for s in self._agents.values():
            if s.stopping:
                continue
            task = self._first_ready(s, now, skip=s.running)
            if task is not None and task.kind in USER_KINDS:
                return True
        return False

    def _finish(self, slot: AgentSlot, task: Task, value: Any, exc: BaseException | None) -> None:
        """The task ended. Its callbacks run outside the lock; the task stays in its queue (and
        the agent busy) until they decided, so nobody sees the agent idle in between."""
        delay = None
        if exc is not None and task.on_error is not None:
            try:
                delay = task.on_error(exc)
            except Exception:  # a failing callback must not stop the thread
                log.exception("memory_rdf: the error handler of a %s task failed", task.kind)
        with self._cv:
            if task.kind is TaskKind.AUTO_SLICE:
                slot.auto_slice = None
                if exc is None and isinstance(value, dict) and value.get("preempted"):
                    self._requeue_slice(slot)
            elif task in slot.queue:
                slot.queue.remove(task)
                if delay is not None:
                    task.gen = None
                    task.failures += 1
                    task.not_before = time.monotonic() + _delay(delay)
                    slot.queue.append(task)  # tail of the agent's queue (SPEC §5.1 step 1)
            idle = not slot.queue and not slot.closing
            self._wake(slot)
        if idle:
            try:
                slot.agent.on_idle()
            except Exception:
                log.exception("memory_rdf: the idle callback of agent %s failed",
                              slot.agent.agent_id)
        if delay is not None and task.kind is not TaskKind.AUTO_SLICE:
            return
        if exc is not None:
            if task.future is not None and not task.future.done():
                task.future.set_exception(exc)
            elif task.kind is TaskKind.AUTO_SLICE or (
                task.future is None and task.on_error is None
            ):
                log.warning("memory_rdf: %s task of agent %s failed: %s",
                            task.kind, slot.agent.agent_id, exc)
        elif task.future is not None and not task.future.done():
            task.future.set_result(value)
