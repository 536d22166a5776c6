"""Failures are loud (issue 15): a remember whose small-model calls keep failing is seen at
once — recalls wait behind it (per-agent FIFO) and say why when they time out, every failed
attempt is a WARNING with its reason, and the counters agree with the attempts made.

Each test here failed before the fix: recalls returned "" at once while the remember waited
out its backoffs, one WARNING came after the last attempt (~5.5 minutes with the default
retries), and ``stats()`` said ``model_failures 16, model_retries 0``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks._fake_llm import FakeLLM
from memory_rdf import MemoryManager
from memory_rdf.small_model import OllamaModel

from helpers import FAST, ScriptedModel, say, undated

#: Backoffs long enough to see a recall wait, short enough for a test.
SLOW_RETRY = FAST.replace(max_retries=3, retry_initial_delay=0.3, retry_max_delay=0.3)


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno == logging.WARNING and r.name == "memory_rdf"]


@pytest.mark.parametrize("timeout", [30, None])  # None: the inline path, refused while queued
def test_recall_waits_behind_a_remember_whose_segmentation_is_retried(
    make_manager, timeout: float | None
) -> None:
    model = ScriptedModel(fail={"segment": 2})  # two failed attempts, then it works
    mem = make_manager(config=SLOW_RETRY, model=model)
    mem.remember(say("we chose PostgreSQL"))
    started = time.monotonic()
    text = mem.recall(["PostgreSQL"], timeout=timeout)
    assert undated(text) == "[memory] we chose PostgreSQL"  # was "" at once
    assert time.monotonic() - started >= 0.5  # it waited out the two backoffs
    assert model.calls["segment"] == 3
    # memories() and forget() wait the same way
    model.fail["segment"] = 1
    mem.remember(say("and Redis"))
    assert [m["content"] for m in mem.memories()][0] == "and Redis"


def test_later_remembers_still_pass_a_failing_one(make_manager) -> None:
    """SPEC §5.1 step 1 stays: only reads and forgets wait; another remember runs first."""
    model = ScriptedModel(fail={"segment": 1})
    mem = make_manager(config=SLOW_RETRY, model=model)
    mem.remember(say("first"))
    mem.remember(say("second"))
    listed = [m["content"] for m in mem.memories()]
    assert listed == ["first", "second"]  # newest first: "second" was created before "first"


def test_a_recall_that_times_out_says_what_it_waits_for(make_manager) -> None:
    model = ScriptedModel(fail={"segment": -1})
    mem = make_manager(config=SLOW_RETRY, model=model)
    mem.remember(say("lost for now"))
    time.sleep(0.1)  # the first attempt has failed: the remember waits out a backoff
    with pytest.raises(TimeoutError) as caught:
        mem.recall(["lost"], timeout=0.2)
    message = str(caught.value)
    assert "1 remember(s) still waiting on the small model" in message
    assert "scripted segment failure" in message  # the reason, not just "timed out"
    assert mem.wait_idle(30)
    # once the remember has failed for good, recall answers (and the failure is counted)
    assert undated(mem.recall(["lost"], timeout=5)) == ""
    assert mem.stats()["failed_tasks"] == 1


def test_every_failed_attempt_is_a_warning_with_its_reason(
    make_manager, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="memory_rdf")
    model = ScriptedModel(fail={"segment": -1})
    mem = make_manager(agent="loud", config=SLOW_RETRY, model=model)
    mem.remember(say("nobody hears"))
    deadline = time.monotonic() + 10
    while not warnings_of(caplog) and time.monotonic() < deadline:
        time.sleep(0.01)
    first = warnings_of(caplog)
    assert first, "no warning after the first failed attempt"
    assert "agent 'loud'" in first[0] and "segment()" in first[0]
    assert "scripted segment failure" in first[0] and "attempt 1 of 4" in first[0]
    assert mem.wait_idle(30)
    lines = warnings_of(caplog)
    attempts = [w for w in lines if "small model segment() failed (" in w]
    assert len(attempts) == 4  # one per attempt: 1 + max_retries
    assert "giving up" in attempts[-1]
    assert any("kept as a failed task" in w and "--retry" in w for w in lines)


def test_failed_process_calls_are_logged_per_attempt(
    make_manager, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="memory_rdf")
    model = ScriptedModel(fail={"process": 2})
    mem = make_manager(config=FAST, model=model)
    mem.remember(say("kept anyway"))
    assert mem.wait_idle(30)
    attempts = [w for w in warnings_of(caplog) if "small model process() failed" in w]
    assert len(attempts) == 2 and all("retrying" in w for w in attempts)
    assert mem.stats()["nodes"] == 1


def test_counters_agree_with_the_attempts(make_manager) -> None:
    model = ScriptedModel(fail={"segment": -1})
    mem = make_manager(config=FAST, model=model)  # max_retries=2: 3 attempts
    mem.remember(say("never segmented"))
    assert mem.wait_idle(30)
    stats = mem.stats()
    assert model.calls["segment"] == 3
    assert stats["model_calls"] == 3 and stats["model_failures"] == 3
    assert stats["model_retries"] == 2  # was 0: the requeued attempts were not counted
    assert "scripted segment failure" in stats["model_last_error"]
    # retried process() calls are counted the same way
    model.fail = {"process": 1}
    mem.remember(say("segmented"))
    assert mem.wait_idle(30)
    stats = mem.stats()
    assert stats["model_failures"] == 4 and stats["model_retries"] == 3


@pytest.fixture
def down_server() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        server.misbehave("status", times=-1, status=500, message="model server down")
        yield server


def test_http_model_down_is_loud_at_once(
    down_server: FakeLLM, data_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The reported case: a real HTTP model server answering 500."""
    caplog.set_level(logging.WARNING, logger="memory_rdf")
    model = OllamaModel("fake-model", down_server.url)
    with MemoryManager("agent", data_dir=data_dir, config=SLOW_RETRY, model=model) as mem:
        mem.remember(say("PostgreSQL for orders"))
        with pytest.raises(TimeoutError, match="HTTP 500: model server down"):
            mem.recall(["PostgreSQL"], timeout=0.5)
        assert any("HTTP 500" in w and "attempt 1 of 4" in w for w in warnings_of(caplog))
        assert mem.wait_idle(30)
        stats = mem.stats()
        assert stats["failed_tasks"] == 1
        assert (stats["model_failures"], stats["model_retries"]) == (4, 3)
    model.close()
