"""SPEC §5.3: one scheduler thread for many agents — turns, backoff, preemption."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Generator
from concurrent.futures import Future
from pathlib import Path

import pytest

from memory_rdf import MemoryManager, MemorySystem, Processed, QueueFullError
from memory_rdf._calls import Backoff
from memory_rdf._scheduler import Agent, Scheduler, Task, TaskKind

from helpers import FAST, ScriptedModel, say, undated


def test_backoff_never_holds_other_agents(tmp_path: Path) -> None:
    slow = ScriptedModel(fail={"process": 2})  # two failures, then success
    config = FAST.replace(retry_initial_delay=0.8, retry_max_delay=0.8, max_retries=3)
    with MemorySystem(data_dir=tmp_path, model=ScriptedModel(), config=config) as system:
        a = MemoryManager("a", data_dir=tmp_path, config=config, model=slow, system=system)
        a.initialize()
        b = system.agent("b")
        b.remember(say("bee memory"))
        assert b.wait_idle(10)
        start = time.monotonic()
        a.remember(say("aye memory"))  # fails, backs off 0.8 s twice
        time.sleep(0.1)
        assert undated(b.recall(["bee"])) == "[memory] bee memory"
        assert time.monotonic() - start < 0.7  # served during a's backoff
        # per-agent FIFO: a's recall waits for a's remember, which lands after the backoff
        assert undated(a.recall(["aye"])) == "[memory] aye memory"
        assert time.monotonic() - start >= 1.5
        a.close()


def test_compression_slices_take_turns_across_agents(tmp_path: Path) -> None:
    config = FAST.replace(focus_limit=1, compression_batch_size=1)
    with MemorySystem(data_dir=tmp_path, model=ScriptedModel(), config=config) as system:
        agents = [system.agent(f"agent{i}") for i in range(3)]
        for i, mem in enumerate(agents):
            mem.remember(say(f"first long {i} | second long {i} | third long {i}"))
        for mem in agents:
            assert mem.wait_idle(10)
        for mem in agents:
            report = mem.run_compression_slice()
            assert report["scanned"] == 1
        rows = [mem.sparql("SELECT (SUM(?s) AS ?t) WHERE { ?n memory:scanCount ?s }")
                for mem in agents]
        assert [r[0]["t"] for r in rows] == [1, 1, 1]  # type: ignore[index]


def test_auto_slices_of_every_agent_run(tmp_path: Path) -> None:
    config = FAST.replace(focus_limit=1, auto_compress=True)
    with MemorySystem(data_dir=tmp_path, model=ScriptedModel(), config=config) as system:
        agents = [system.agent(f"agent{i}") for i in range(3)]
        for i, mem in enumerate(agents):
            mem.remember(say(f"first long {i} | second long {i}"))
        for mem in agents:
            assert mem.wait_idle(10)
            scans = mem.sparql("SELECT ?s WHERE { ?n memory:scanCount ?s }")
            assert sorted(r["s"] for r in scans) == [0, 1]  # type: ignore[index,union-attr]


def test_user_work_of_another_agent_preempts_a_slow_slice(tmp_path: Path) -> None:
    slow = ScriptedModel(compress_delay=0.3)
    config = FAST.replace(focus_limit=1, link_initial_strength=0.1, auto_compress=True)
    with MemorySystem(data_dir=tmp_path, model=ScriptedModel(), config=config) as system:
        a = MemoryManager("a", data_dir=tmp_path, config=config, model=slow, system=system)
        a.initialize()
        b = system.agent("b")
        b.remember(say("bee memory"))
        assert b.wait_idle(10)
        a.remember(say(" | ".join(f"segment {i} of a long memory" for i in range(10))))
        deadline = time.monotonic() + 10
        while not slow.compress_calls and time.monotonic() < deadline:
            time.sleep(0.01)
        assert slow.compress_calls
        start = time.monotonic()
        assert undated(b.recall(["bee"])) == "[memory] bee memory"
        # at most the one 0.3 s model call in flight stands before it (SPEC §5.3)
        assert time.monotonic() - start < 0.65
        assert a.wait_idle(60)
        a.close()


def test_an_exception_in_a_task_does_not_stop_the_thread(make_manager) -> None:
    class Exploding(ScriptedModel):
        def relation(self, node_content: str, focus_content: str) -> str:
            if node_content == "two":
                raise KeyboardInterrupt  # not even an Exception: still contained
            return ""

    mem = make_manager(model=Exploding())
    mem.remember(say("one"))
    mem.remember(say("two"))  # relation() explodes: the remember fails, the thread lives
    assert mem.wait_idle(10)
    assert mem.stats()["failed_tasks"] == 1  # kept, not silently dropped
    mem.remember(say("three"))
    assert mem.wait_idle(10)
    assert undated(mem.recall(["three"])) == "[memory] three"


class _Gate(ScriptedModel):
    """Segmentation waits for ``gate``: remembers pile up in the queue before any runs."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()

    def segment(self, text: str) -> list[str]:
        assert self.gate.wait(10)
        return super().segment(text)


def test_every_processed_remember_queues_one_slice(tmp_path: Path) -> None:
    """SPEC §5.1 step 5: six remembers processed back to back queue six slices (not one)."""
    model = _Gate()
    config = FAST.replace(focus_limit=1, compression_batch_size=1, auto_compress=True)
    with MemorySystem(data_dir=tmp_path, model=model, config=config) as system:
        mem = system.agent("a")
        for i in range(6):
            mem.remember(say(f"memory number {i}"))
        model.gate.set()  # all six are queued; user tasks run before any slice
        assert mem.wait_idle(30)
        scans = mem.sparql("SELECT (SUM(?s) AS ?t) WHERE { ?n memory:scanCount ?s }")
        # every slice scans one non-focus node (batch size 1): 6 slices, 6 scans
        assert scans[0]["t"] == 6  # type: ignore[index]


class _FailOnceCompressing(ScriptedModel):
    """The first compression call fails (a retry backoff follows); the rest succeed."""

    failed = 0

    def process(self, text: str, target_length: int | None = None) -> Processed:
        if target_length is not None and not self.failed:
            self.failed += 1
            with self.lock:
                self.compress_calls.append((text, target_length))
            raise RuntimeError("scripted compression failure")
        return super().process(text, target_length)


def test_a_slice_in_backoff_is_abandoned_when_user_work_arrives(make_manager) -> None:
    """SPEC §5.3: a compression call waiting out its backoff is abandoned when user work
    waits; the node is left unchanged and scanned again by a slice queued again."""
    model = _FailOnceCompressing()
    config = FAST.replace(focus_limit=1, link_initial_strength=0.1, auto_compress=True,
                          retry_initial_delay=5.0, retry_max_delay=5.0, max_retries=2)
    mem = make_manager(config=config, model=model)
    start = time.monotonic()
    mem.remember(say(" | ".join(f"segment {i} of a long memory" for i in range(3))))
    deadline = time.monotonic() + 10
    while not model.failed and time.monotonic() < deadline:
        time.sleep(0.01)
    assert model.failed == 1  # the slice is now waiting out a 5 s backoff
    text = mem.recall(["segment"], depth=0, entry="focus")
    assert undated(text) == "[memory] segment 2 of a long memory"
    assert mem.wait_idle(30)
    assert time.monotonic() - start < 4.5  # nobody waited for the 5 s backoff
    first_text, target = model.compress_calls[0]
    # scanned again by the re-queued slice, this time compressed
    assert (first_text, target) in model.compress_calls[1:]
    contents = [r["c"] for r in mem.sparql("SELECT ?c WHERE { ?n memory:content ?c }")]  # type: ignore[index,union-attr]
    assert first_text not in contents
    assert first_text[:target] in contents


def test_stats_report_how_long_recalls_waited_in_the_queue(make_manager) -> None:
    model = ScriptedModel(delay=0.2)  # the remember ahead of the recall takes > 0.2 s
    mem = make_manager(model=model)
    assert mem.stats()["recall_queue_wait_ms"] == {"n": 0}
    mem.remember(say("slow to segment"))
    assert undated(mem.recall(["slow"])) == "[memory] slow to segment"  # waited behind the remember
    assert undated(mem.recall(["slow"])) == "[memory] slow to segment"  # waited for nothing
    waits = mem.stats()["recall_queue_wait_ms"]
    assert waits["n"] == 2
    assert waits["max"] >= 150  # the first one
    assert waits["p50"] <= waits["p95"] <= waits["max"]


# -- the scheduler alone: callbacks, no manager ---------------------------------------------------


def _returns(value: object) -> Callable[[], Generator[Backoff, None, object]]:
    def start() -> Generator[Backoff, None, object]:
        return value
        yield  # a generator

    return start


def _other_thread_can_take_the_lock(scheduler: Scheduler) -> bool:
    """True when another thread gets the scheduler's lock within 2 s (it is not held)."""
    done = threading.Event()
    threading.Thread(target=lambda: (scheduler.pending("a"), done.set()), daemon=True).start()
    return done.wait(2)


def test_the_scheduler_stands_alone() -> None:
    """Agents register an id and callbacks; the scheduler imports nothing of the manager, runs
    callbacks outside its lock, requeues a failed task after the delay its on_error returns."""
    import ast

    import memory_rdf._scheduler as module

    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not imported & {"memory_rdf._manager", "memory_rdf._remember",
                         "memory_rdf._oxigraph"}

    scheduler = Scheduler()
    idle_free: list[bool] = []
    slices: list[int] = []

    def make_slice() -> Generator[Backoff, None, dict[str, object]]:
        slices.append(1)
        return {"preempted": False}
        yield

    def on_idle() -> None:
        idle_free.append(_other_thread_can_take_the_lock(scheduler))

    scheduler.add_agent(Agent("a", make_slice=make_slice, on_idle=on_idle))
    try:
        tries: list[float] = []
        errors: list[bool] = []

        def flaky() -> Generator[Backoff, None, str]:
            tries.append(time.monotonic())
            if len(tries) < 3:
                raise RuntimeError("not yet")
            return "done"
            yield

        def on_error(exc: BaseException) -> float | None:
            errors.append(_other_thread_can_take_the_lock(scheduler))
            return 0.1

        future: Future[str] = Future()
        scheduler.submit("a", Task(TaskKind.REMEMBER, flaky, future=future, on_error=on_error),
                         None)
        assert future.result(10) == "done"
        assert len(tries) == 3 and tries[2] - tries[1] >= 0.09  # the delay on_error asked for
        assert errors == [True, True]  # on_error ran without the scheduler's lock

        failed: Future[str] = Future()
        scheduler.submit("a", Task(TaskKind.RECALL, lambda: _boom(), future=failed), None)
        with pytest.raises(ValueError, match="boom"):
            failed.result(10)  # no on_error: the caller gets the exception; the thread lives
        ok: Future[object] = Future()
        scheduler.submit("a", Task(TaskKind.RECALL, _returns(42), future=ok), None)
        assert ok.result(10) == 42

        scheduler.request_slice("a")
        assert scheduler.wait_idle("a", 10)
        assert slices == [1]  # the agent's callback made the automatic slice
        assert idle_free and all(idle_free)  # on_idle ran without the scheduler's lock
    finally:
        scheduler.remove_agent("a", timeout=5)
        scheduler.stop()


def _boom() -> Generator[Backoff, None, str]:
    raise ValueError("boom")
    yield


def test_a_reservation_holds_a_queue_slot_until_submitted_or_released() -> None:
    scheduler = Scheduler()
    gate = threading.Event()

    def blocked() -> Generator[Backoff, None, None]:
        gate.wait(10)
        return None
        yield

    scheduler.add_agent(Agent("a", make_slice=lambda: _returns({})()))
    try:
        scheduler.submit("a", Task(TaskKind.RECALL, blocked), 2)  # runs, holds the thread
        time.sleep(0.1)
        first = scheduler.reserve("a", 2)
        second = scheduler.reserve("a", 2)
        with pytest.raises(QueueFullError):
            scheduler.reserve("a", 2)  # both slots are held by reservations
        with pytest.raises(QueueFullError):
            scheduler.submit("a", Task(TaskKind.RECALL, _returns(1)), 2)
        scheduler.release(second)
        third = scheduler.reserve("a", 2)  # the released slot is free again
        done: Future[object] = Future()
        scheduler.submit("a", Task(TaskKind.REMEMBER, _returns("x"), future=done), None,
                         reservation=first)
        with pytest.raises(RuntimeError):
            scheduler.release(first)  # a reservation is used once
        scheduler.release(third)
        gate.set()
        assert done.result(10) == "x"
        assert scheduler.wait_idle("a", 10)
    finally:
        gate.set()
        scheduler.remove_agent("a", timeout=5)
        scheduler.stop()


def test_a_manager_built_with_system_is_closed_by_the_system(tmp_path: Path) -> None:
    system = MemorySystem(data_dir=tmp_path, model=ScriptedModel(), config=FAST)
    mem = MemoryManager("own", data_dir=tmp_path, system=system).initialize()
    mem.remember(say("kept"))
    assert system.agents() == ["own"]
    system.close()
    assert mem.closed
    with MemoryManager("own", data_dir=tmp_path, model=ScriptedModel(), config=FAST) as again:
        assert undated(again.recall(["kept"])) == "[memory] kept"  # the store was released and kept


def test_the_longest_steps_are_kept_for_diagnosis(monkeypatch: pytest.MonkeyPatch) -> None:
    """Steps of the scheduler thread longer than LONG_STEP are recorded (kind, agent, seconds),
    the LONG_STEPS longest only: what a waiting recall waited behind (benchmarks/soak.py)."""
    import memory_rdf._scheduler as module

    monkeypatch.setattr(module, "LONG_STEP", 0.02)
    monkeypatch.setattr(module, "LONG_STEPS", 3)
    scheduler = Scheduler()
    scheduler.add_agent(Agent("a", make_slice=lambda: _returns({"preempted": False})(),
                              on_idle=lambda: None))
    try:
        def sleeper(seconds: float) -> Callable[[], Generator[Backoff, None, float]]:
            def run() -> Generator[Backoff, None, float]:
                time.sleep(seconds)
                return seconds
                yield
            return run

        futures: list[Future[float]] = []
        for seconds in (0.0, 0.4, 0.0, 0.03, 0.1, 0.2):
            future: Future[float] = Future()
            scheduler.submit("a", Task(TaskKind.RECALL, sleeper(seconds), future=future), None)
            futures.append(future)
        for future in futures:
            future.result(30)
        assert scheduler.wait_idle("a", 10)  # the last step is noted before the agent is idle
        kept = sorted(scheduler.long_steps, reverse=True)
        assert [kind for _, kind, _, _ in kept] == ["RECALL"] * 3
        assert {agent for _, _, agent, _ in kept} == {"a"}
        assert [s >= w for (s, *_), w in zip(kept, (0.4, 0.2, 0.1), strict=True)] == [True] * 3
    finally:
        scheduler.remove_agent("a", timeout=5)
        scheduler.stop()


def test_an_idle_agents_task_runs_inline_in_the_agents_order() -> None:
    """run_inline (recall() without a timeout) runs a task in the calling thread only when the
    agent has nothing queued or running; the agent's task submitted meanwhile waits behind
    it, and a second inline run is refused (queued instead): per-agent FIFO (SPEC §5.3)."""
    scheduler = Scheduler()
    scheduler.add_agent(Agent("a", make_slice=lambda: _returns({"preempted": False})(),
                              on_idle=lambda: None))
    try:
        entered, release = threading.Event(), threading.Event()
        ran: list[tuple[str, str]] = []

        def blocking() -> Generator[Backoff, None, str]:
            entered.set()
            release.wait(10)
            ran.append(("inline", threading.current_thread().name))
            return "inline"
            yield

        def queued() -> Generator[Backoff, None, str]:
            ran.append(("queued", threading.current_thread().name))
            return "queued"
            yield

        inline: Future[str] = Future()
        accepted: list[bool] = []
        caller = threading.Thread(target=lambda: accepted.append(scheduler.run_inline(
            "a", Task(TaskKind.RECALL, blocking, future=inline))), name="caller")
        caller.start()
        assert entered.wait(10)
        later: Future[str] = Future()
        scheduler.submit("a", Task(TaskKind.RECALL, queued, future=later), None)
        refused: Future[str] = Future()
        assert not scheduler.run_inline("a", Task(TaskKind.RECALL, queued, future=refused))
        assert not refused.done()
        time.sleep(0.1)
        assert ran == []  # the queued task waits behind the inline one
        release.set()
        caller.join(10)
        assert accepted == [True] and inline.result(10) == "inline"
        assert later.result(10) == "queued"
        assert ran[0] == ("inline", "caller") and ran[1][0] == "queued"
        assert ran[1][1] != "caller"  # the queued one ran on the scheduler thread
    finally:
        scheduler.remove_agent("a", timeout=5)
        scheduler.stop()


def _inline_run_holding(scheduler: Scheduler) -> tuple[threading.Event, threading.Thread]:
    """Start a task run inline on agent "a" in another thread; it ends when the returned
    event is set."""
    entered, release = threading.Event(), threading.Event()

    def blocking() -> Generator[Backoff, None, str]:
        entered.set()
        release.wait(30)
        return "inline"
        yield

    caller = threading.Thread(target=lambda: scheduler.run_inline(
        "a", Task(TaskKind.RECALL, blocking, future=Future())), name="caller")
    caller.start()
    assert entered.wait(10)
    return release, caller


def test_an_inline_task_ending_wakes_a_thread_waiting_for_the_agent() -> None:
    """A task run inline wakes the scheduler thread only when somebody waits: a thread in
    wait_idle() while it runs returns as soon as it ends (not at its own timeout)."""
    scheduler = Scheduler()
    scheduler.add_agent(Agent("a", make_slice=lambda: _returns({"preempted": False})(),
                              on_idle=lambda: None))
    try:
        release, caller = _inline_run_holding(scheduler)
        idle: list[bool] = []
        waiter = threading.Thread(target=lambda: idle.append(scheduler.wait_idle("a", 60)))
        waiter.start()
        time.sleep(0.1)
        assert idle == []  # still running
        release.set()
        waiter.join(10)  # woken at the end: its 60 s timeout never reached
        assert not waiter.is_alive() and idle == [True]
        caller.join(10)
    finally:
        scheduler.remove_agent("a", timeout=5)
        scheduler.stop()


def test_a_slice_requested_during_an_inline_task_runs_when_it_ends() -> None:
    """A compression slice asked for while a task runs inline waits for it, then runs: the
    scheduler thread, which found the agent busy, is woken when the inline task ends."""
    scheduler = Scheduler()
    sliced = threading.Event()

    def make_slice() -> Generator[Backoff, None, dict[str, bool]]:
        sliced.set()
        return {"preempted": False}
        yield

    scheduler.add_agent(Agent("a", make_slice=make_slice, on_idle=lambda: None))
    try:
        release, caller = _inline_run_holding(scheduler)
        scheduler.request_slice("a")
        time.sleep(0.1)
        assert not sliced.is_set()  # the agent is busy
        release.set()
        assert sliced.wait(10)
        caller.join(10)
    finally:
        scheduler.remove_agent("a", timeout=5)
        scheduler.stop()
