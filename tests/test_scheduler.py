"""SPEC §5.3: one scheduler thread for many agents — turns, backoff, preemption."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from memory_rdf import MemoryManager, MemorySystem, Processed

from helpers import FAST, ScriptedModel, say


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
        assert b.recall(["bee"]) == "[记忆] bee memory"
        assert time.monotonic() - start < 0.7  # served during a's backoff
        # per-agent FIFO: a's recall waits for a's remember, which lands after the backoff
        assert a.recall(["aye"]) == "[记忆] aye memory"
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
        assert b.recall(["bee"]) == "[记忆] bee memory"
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
    assert mem.recall(["three"]) == "[记忆] three"


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
    text = mem.recall(["segment"], depth=0)
    assert text == "[记忆] segment 2 of a long memory"
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
    assert mem.recall(["slow"]) == "[记忆] slow to segment"  # waited behind the remember
    assert mem.recall(["slow"]) == "[记忆] slow to segment"  # waited for nothing
    waits = mem.stats()["recall_queue_wait_ms"]
    assert waits["n"] == 2
    assert waits["max"] >= 150  # the first one
    assert waits["p50"] <= waits["p95"] <= waits["max"]
