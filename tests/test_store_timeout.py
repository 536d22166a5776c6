"""An endpoint store that does not answer (SPEC §8 v3): no call waits longer than
``Config.store_timeout``, it raises the public :class:`StoreUnavailableError` naming the
endpoint and the last error, every retry is logged at WARNING, and what was accepted is still
never lost. Against a real ``oxigraph serve`` that is stopped (SIGSTOP: it accepts connections
and never answers) or killed (connections refused)."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_rdf import (
    Config,
    ConfigError,
    MemoryManager,
    StoreError,
    StoreUnavailableError,
)

from helpers import ScriptedModel, remember, say
from servers import Server, oxigraph_command

pytestmark = pytest.mark.skipif(
    oxigraph_command() is None,
    reason="the oxigraph CLI is not installed (it comes with pip install '.[test]')",
)

#: Slack over store_timeout for a loaded machine (never a speed assertion: the old behaviour
#: blocked for ~5 minutes or more).
SLACK = 12.0


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[Server]:
    server = Server(tmp_path / "oxigraph").start()
    yield server
    with contextlib.suppress(ProcessLookupError, AttributeError):
        os.kill(server.process.pid, signal.SIGCONT)  # type: ignore[union-attr]
    server.stop()


@contextlib.contextmanager
def _silent(server: Server) -> Iterator[None]:
    """The server stopped (SIGSTOP): connections are accepted, nothing is answered."""
    assert server.process is not None
    os.kill(server.process.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(server.process.pid, signal.SIGCONT)


def test_store_timeout_is_validated() -> None:
    assert Config().store_timeout == 30.0
    assert Config(store_timeout=2).store_timeout == 2
    for bad in (0, -1.0, float("inf"), float("nan"), "30", True):
        with pytest.raises(ConfigError, match="store_timeout"):
            Config(store_timeout=bad)  # type: ignore[arg-type]


def test_a_remember_to_a_silent_endpoint_raises_within_store_timeout(
    own_server: Server,
) -> None:
    # The default retries (15, 1 s to 30 s apart) and the endpoint's 30 s per request: a
    # remember to a server that does not answer used to block for minutes, logging nothing.
    timeout = 3.0
    config = Config(auto_compress=False, store_timeout=timeout)
    with own_server.endpoint() as ep:
        mem = MemoryManager("silent", endpoint=ep, config=config, model=ScriptedModel())
        mem.initialize()
        try:
            remember(mem, "before the silence")
            with _silent(own_server):
                started = time.monotonic()
                with pytest.raises(StoreUnavailableError) as caught:
                    mem.remember(say("during the silence"))
                took = time.monotonic() - started
            assert took < timeout + SLACK, took
            assert isinstance(caught.value, StoreError)
            message = str(caught.value)
            assert own_server.update_url in message
            assert "Config.store_timeout" in message and "Timeout" in message
            # Not accepted: the caller must retry. The server, answering again, may apply the
            # unanswered journal write late; it is withdrawn, so nothing of it runs.
            assert mem.wait_idle(30)
            assert mem.pending_remembers() == 0
            assert mem.recall(["silence"], entry="keywords") != ""
            contents = {r["c"] for r in mem.sparql(  # type: ignore[index]
                "SELECT ?c WHERE { ?n memory:content ?c }")}
            assert contents == {"before the silence"}
        finally:
            mem.close(timeout=5)


def test_each_retry_is_logged_with_the_endpoint_and_the_error_names_the_last_one(
    own_server: Server, caplog: pytest.LogCaptureFixture,
) -> None:
    timeout = 3.0
    config = Config(auto_compress=False, store_timeout=timeout, retry_initial_delay=0.2,
                    retry_max_delay=0.5)
    with own_server.endpoint() as ep:
        mem = MemoryManager("down", endpoint=ep, config=config, model=ScriptedModel())
        mem.initialize()
        try:
            own_server.kill()
            caplog.clear()
            started = time.monotonic()
            with caplog.at_level(logging.WARNING, logger="memory_rdf"), \
                    pytest.raises(StoreUnavailableError,
                                  match=r"cannot reach the SPARQL endpoint http://127\.0\.0\.1:"
                                        r"\d+/update .*Config\.store_timeout.*ConnectError"):
                mem.remember(say("while it is down"))
            assert time.monotonic() - started < timeout + SLACK
            retries = [r for r in caplog.records if r.levelno == logging.WARNING
                       and "retrying in" in r.getMessage()]
            assert len(retries) >= 2
            for record in retries:
                assert own_server.update_url in record.getMessage()
                assert "ConnectError" in record.getMessage()
            own_server.start()
            assert mem.pending_remembers() == 0
        finally:
            mem.close(timeout=5)


def test_an_accepted_remember_outlives_store_timeout_and_is_stored_once_the_server_answers(
    own_server: Server, caplog: pytest.LogCaptureFixture,
) -> None:
    # Accepted (journalled on the server) before the silence: its writes time out after
    # store_timeout each, and it keeps being tried in the background (SPEC §8: never lost).
    config = Config(auto_compress=False, store_timeout=1.0, retry_initial_delay=0.1,
                    retry_max_delay=0.3)
    with own_server.endpoint() as ep:
        mem = MemoryManager("kept", endpoint=ep, config=config,
                            model=ScriptedModel(delay=0.5))
        mem.initialize()
        try:
            mem.remember(say("accepted before the silence"))
            time.sleep(0.1)  # the model call is in flight
            with _silent(own_server):
                time.sleep(4.0)  # several store_timeouts
                with pytest.raises(TimeoutError, match="not answering"):
                    mem.recall(["silence"], timeout=0.5)
            assert mem.wait_idle(60)
            assert mem.recall(["silence"], entry="keywords") != ""
            assert "accepted before the silence" in mem.recall(["silence"], entry="keywords")
            assert len(mem.sparql("SELECT ?n WHERE { ?n a memory:Node }")) == 1
            assert mem.failed_tasks() == [] and mem.pending_remembers() == 0
        finally:
            mem.close(timeout=5)
    assert "stays journalled and queued, trying again" in caplog.text
