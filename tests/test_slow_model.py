"""A slow small model holds nobody but its own agent (issue 33 F4, F5; SPEC §5.3).

The model is a real OpenAI-compatible server on loopback (``benchmarks/_fake_llm.py``) told
to hang before it answers; the client, the manager, its scheduler and the store are real.
A model call waits in one of the system's model-call threads: other agents' recalls,
remembers and memories() run meanwhile, the waiting agent's later tasks wait behind it
(per-agent FIFO), and ``close(timeout)`` and Ctrl-C return within their bounds, the remember
still journalled for the next start.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks._fake_llm import FakeLLM
from memory_rdf import Config, HeuristicModel, MemoryManager, MemorySystem, Processed
from memory_rdf._calls import calls_off_thread
from memory_rdf._scheduler import CALL_THREADS
from memory_rdf.small_model import OpenAIModel

from helpers import ScriptedModel, memory_rdf_command, say

MODEL = "fake-model"
REPO = Path(__file__).resolve().parent.parent
#: A remember's first model call (segment) hangs this long on the server, then is answered.
SLOW = 8.0
CONFIG = Config(auto_compress=False, max_retries=0)
LOGIN = ("the login module belongs to Zhang Wei, who ships it on Wednesday after the security "
         "review of the token refresh flow and the audit of the session cookies is done")


@pytest.fixture
def server() -> Iterator[FakeLLM]:
    with FakeLLM() as s:
        yield s


@pytest.fixture
def model(server: FakeLLM) -> Iterator[OpenAIModel]:
    with OpenAIModel(MODEL, server.openai_url) as m:
        yield m


def wait_for_requests(server: FakeLLM, task: str, n: int, timeout: float = 20) -> None:
    """Until the server has received ``n`` requests of ``task`` (the hung one included)."""
    deadline = time.monotonic() + timeout
    while server.count(task) < n:
        assert time.monotonic() < deadline, f"only {server.count(task)} {task} requests came"
        time.sleep(0.01)


def contents(mem: MemoryManager) -> list[str]:
    return sorted(m["content"] for m in mem.memories())


def test_another_agents_work_runs_while_a_model_call_is_in_flight(
    server: FakeLLM, model: OpenAIModel, data_dir: Path
) -> None:
    with MemorySystem(data_dir=data_dir, model=model, config=CONFIG) as system:
        a, b = system.agent("a"), system.agent("b")
        b.remember(say("the payment callback times out"))
        assert b.wait_idle(timeout=20)
        server.misbehave("hang", task="segment", seconds=SLOW)
        asked = time.monotonic()
        a.remember(say("Zhang Wei owns the login module"))
        wait_for_requests(server, "segment", 2)  # b's answered one, a's hanging now
        # b through the queue (a timeout given: not run inline in this thread)
        start = time.monotonic()
        assert "payment callback" in b.recall(["payment"], timeout=30, entry="both")
        assert time.monotonic() - start < 2.0
        start = time.monotonic()
        assert [m["content"] for m in b.memories(timeout=30)] == [
            "user: the payment callback times out"]
        assert time.monotonic() - start < 2.0
        start = time.monotonic()
        b.remember(say("the refund job runs nightly"))  # b's model calls are answered at once
        assert b.wait_idle(timeout=30)
        assert time.monotonic() - start < 2.0
        assert "refund job" in b.recall(["refund"], timeout=30, entry="both")
        assert time.monotonic() - asked < SLOW  # all of it while a's call was in flight
        assert not a.wait_idle(timeout=0)
        with pytest.raises(TimeoutError, match=r"1 remember\(s\) still waiting on the small"):
            a.recall(["login"], timeout=0.3)  # behind its remember, which waits on the model
        # Per-agent FIFO: a's recall waits behind a's remember, and sees it.
        assert "login module" in a.recall(["login"], timeout=30, entry="both")
        assert time.monotonic() - asked >= SLOW - 0.5
        assert contents(a) == ["user: Zhang Wei owns the login module"]
        assert a.failed_tasks() == [] and a.pending_remembers() == 0


def test_a_later_remember_of_the_same_agent_waits_behind_the_call(
    server: FakeLLM, model: OpenAIModel, data_dir: Path
) -> None:
    """FIFO within the agent: its second remember runs after its first, whose model call is
    in flight, and lands after it."""
    with MemorySystem(data_dir=data_dir, model=model, config=CONFIG) as system:
        a = system.agent("a")
        server.misbehave("hang", task="segment", seconds=3.0)
        a.remember(say("first: the login module"))
        wait_for_requests(server, "segment", 1)
        a.remember(say("second: the payment module"))
        time.sleep(0.5)
        assert server.count("segment") == 1  # the second has not started
        assert a.pending_remembers() == 2
        assert a.wait_idle(timeout=30)
        made = sorted((m["created_at"], m["content"]) for m in a.memories())
        assert [c for _, c in made] == [
            "user: first: the login module", "user: second: the payment module"]


def test_a_compression_call_in_flight_holds_no_user_work(
    server: FakeLLM, model: OpenAIModel, data_dir: Path
) -> None:
    """An automatic slice waiting on a slow compression call: other agents and the agent's
    own recalls run beside it; the agent's next remember abandons it (the node left as it
    was) and the slice queued again compresses the node without waiting for that call."""
    config = Config(focus_limit=1, link_initial_strength=0.1, max_retries=0)
    with MemorySystem(data_dir=data_dir, model=model, config=config) as system:
        a, b = system.agent("a"), system.agent("b")
        b.remember(say("the payment callback times out"))
        assert b.wait_idle(timeout=20)
        compressing = server.count("process")
        server.misbehave("hang", task="process", seconds=SLOW)  # the next process call
        asked = time.monotonic()
        a.remember(say(LOGIN, "the billing service needs a refund endpoint before the launch"))
        wait_for_requests(server, "process", compressing + 1)  # a's slice: its call hangs
        hung = server.requests("process")[-1]
        start = time.monotonic()
        assert "payment callback" in b.recall(["payment"], timeout=30, entry="both")
        assert "login module" in a.recall(["login"], timeout=30, entry="both")
        assert time.monotonic() - start < 2.0
        a.remember(say("the deploy key rotates on Monday"))
        assert a.wait_idle(timeout=30)
        assert time.monotonic() - asked < SLOW  # nobody waited for the hung call
        texts = [r.body["messages"][-1]["content"] for r in server.requests("process")]
        assert texts.count(hung.body["messages"][-1]["content"]) >= 2  # asked again
        stored = [m["content"] for m in a.memories()]
        assert "user: the deploy key rotates on Monday" in stored
        (login,) = [c for c in stored if c.startswith("user: the login")]
        assert len(login) < len(f"user: {LOGIN}")  # compressed after all


@pytest.mark.parametrize("closing", ["manager", "system"])
def test_close_returns_within_its_timeout_and_the_remember_stays_journalled(
    server: FakeLLM, model: OpenAIModel, data_dir: Path, closing: str
) -> None:
    """close(timeout=2) with a 20 s model call in flight returns in about 2 s (F5: it took
    the whole call); reopened with a fast model, the remember is processed, whole."""
    server.misbehave("hang", times=-1, task="segment", seconds=20)
    system: MemorySystem | None = None
    if closing == "system":
        system = MemorySystem(data_dir=data_dir, model=model, config=CONFIG)
        agents = [system.agent("a"), system.agent("b")]
    else:
        agents = [MemoryManager("a", data_dir=data_dir, model=model, config=CONFIG)]
        agents[0].initialize()
    for mem in agents:
        mem.remember(say(f"{mem.agent_id}: the release needs payment checks"))
    wait_for_requests(server, "segment", len(agents))
    start = time.monotonic()
    if system is not None:
        system.close(timeout=2)
    else:
        agents[0].close(timeout=2)
    took = time.monotonic() - start
    assert took < 4.0, f"close(timeout=2) took {took:.1f} s"
    assert all(m.closed for m in agents)
    for mem in agents:
        with MemoryManager(mem.agent_id, data_dir=data_dir, model=HeuristicModel(),
                           config=CONFIG) as again:
            assert again.wait_idle(timeout=30)
            assert contents(again) == [
                f"user: {mem.agent_id}: the release needs payment checks"]
            assert again.pending_remembers() == 0 and again.failed_tasks() == []


def test_ctrl_c_stops_a_cli_remember_waiting_on_the_model(
    server: FakeLLM, data_dir: Path, tmp_path: Path
) -> None:
    """`memory-rdf remember` with a model hanging 30 s, interrupted after its request
    arrived: exit 130 within a few seconds (F5: 117 s), the remember still journalled."""
    server.misbehave("hang", times=-1, task="segment", seconds=30)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.pop("MEMORY_RDF_DATA_DIR", None)
    env.update(MEMORY_RDF_MODEL=f"openai:{MODEL}", MEMORY_RDF_MODEL_URL=server.openai_url,
               PYTHONIOENCODING="utf-8")
    messages = tmp_path / "messages.json"
    messages.write_text(json.dumps(
        [{"role": "user", "content": "the deploy key rotates on Monday"}]), encoding="utf-8")
    process = subprocess.Popen(
        [memory_rdf_command(), "remember", "cli", str(messages), "--data-dir", str(data_dir)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
    )
    try:
        wait_for_requests(server, "segment", 1, timeout=60)
        time.sleep(0.5)
        interrupted = time.monotonic()
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=30)
        took = time.monotonic() - interrupted
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130, stderr
    assert "interrupted" in stderr
    assert took < 5.0, f"the CLI exited {took:.1f} s after Ctrl-C"
    tasks = subprocess.run(
        [memory_rdf_command(), "tasks", "cli", "--data-dir", str(data_dir)], env=env,
        capture_output=True, text=True, encoding="utf-8", timeout=60, cwd=tmp_path)
    assert tasks.returncode == 0, tasks.stderr
    (line,) = tasks.stdout.splitlines()
    assert line.startswith("pending") and "user: the deploy key rotates on Monday" in line
    with MemoryManager("cli", data_dir=data_dir, model=HeuristicModel(), config=CONFIG) as mem:
        assert mem.wait_idle(timeout=30)
        assert contents(mem) == ["user: the deploy key rotates on Monday"]


class OffThread(ScriptedModel):
    """A scripted model that asks for the model-call threads, and records where and how many
    of its calls ran at once."""

    calls_off_thread = True

    def __init__(self, delay: float) -> None:
        super().__init__(delay=delay)
        self.threads: set[str] = set()
        self.running = 0
        self.most = 0

    def process(self, text: str, target_length: int | None = None) -> Processed:
        with self.lock:
            self.threads.add(threading.current_thread().name)
            self.running += 1
            self.most = max(self.most, self.running)
        try:
            return super().process(text, target_length)
        finally:
            with self.lock:
                self.running -= 1


def test_which_models_call_off_the_scheduler_thread(model: OpenAIModel) -> None:
    assert calls_off_thread(model)  # sends requests: takes Config.model_timeout
    assert not calls_off_thread(HeuristicModel())  # in process: on the scheduler thread
    assert not calls_off_thread(ScriptedModel())
    assert calls_off_thread(OffThread(0.0))  # a model's own bool attribute wins


def test_model_calls_run_in_a_bounded_pool_of_named_threads(data_dir: Path) -> None:
    slow = OffThread(delay=1.0)
    agents = CALL_THREADS + 2
    with MemorySystem(data_dir=data_dir, model=slow, config=CONFIG) as system:
        mems = [system.agent(f"agent{i}") for i in range(agents)]
        for mem in mems:
            mem.remember(say(f"{mem.agent_id} owns module {mem.agent_id}"))
        for mem in mems:
            assert mem.wait_idle(timeout=60)
        assert [contents(m) for m in mems] == [
            [f"{m.agent_id} owns module {m.agent_id}"] for m in mems]
    assert slow.threads <= {f"memory-rdf-model-call-{i}" for i in range(1, CALL_THREADS + 1)}
    assert slow.most == CALL_THREADS  # the agents' calls overlapped, up to the bound


class GatedCompression(ScriptedModel):
    """A scripted model whose compression calls (a target length given) run in the model-call
    threads and wait for ``gate``; ``asked`` is set when one is waiting."""

    calls_off_thread = True

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.asked = threading.Event()

    def process(self, text: str, target_length: int | None = None) -> Processed:
        if target_length is not None:
            self.asked.set()
            assert self.gate.wait(30)
        return super().process(text, target_length)


def test_a_memory_pinned_while_its_compression_call_is_in_flight_is_not_shortened(
    data_dir: Path
) -> None:
    """pin() writes the store: it abandons the agent's slice parked on a model call, as a
    remember or forget does, so the answer of that call never shortens the pinned memory
    (SPEC §5.6 v3)."""
    model = GatedCompression()
    config = Config(focus_limit=1, link_initial_strength=0.1, max_retries=0)
    with MemorySystem(data_dir=data_dir, model=model, config=config) as system:
        a = system.agent("a")
        a.remember(say(f"{LOGIN} | the billing service needs a refund endpoint"))
        assert model.asked.wait(30)  # a slice waits on the compression of the login memory
        (login,) = [m for m in a.memories(timeout=30) if LOGIN in m["content"]]
        assert a.pin([login["id"]], timeout=30) == 1
        model.gate.set()
        assert a.wait_idle(timeout=30)
        (kept,) = [m for m in a.memories(timeout=30) if m["id"] == login["id"]]
        assert kept["pinned"] is True
        assert kept["content"] == login["content"]  # not cut by the call's answer
