"""A SPARQL 1.1 server as the store (SPEC §8), against real ``oxigraph serve`` processes on
loopback: layout, isolation of ``sparql()``, the lease across processes (kill -9), server
faults (down, killed and restarted mid-run), 4xx answers, auth headers. The behaviour tests of
recall, remember, compression and keyword entry run on the endpoint too (``BACKENDS`` in
those modules)."""

from __future__ import annotations

import base64
import contextlib
import http.server
import io
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from memory_rdf import (
    Config,
    InvalidInputError,
    InvalidTypeError,
    MemoryManager,
    MemorySystem,
    SparqlEndpoint,
    SparqlError,
    StoreError,
    StoreLockedError,
    UpdateRefusedError,
)
from memory_rdf._oxigraph import AgentStore
from memory_rdf._remote import RemoteStore

from helpers import FAST, ScriptedModel, memory_rdf_command, remember, say, undated
from servers import Server, loopback, oxigraph_command

pytestmark = pytest.mark.skipif(
    oxigraph_command() is None,
    reason="the oxigraph CLI is not installed (it comes with pip install '.[test]')",
)

AGENT = "https://w3id.org/memory-rdf/agent/"
TESTS = Path(__file__).resolve().parent


@pytest.fixture
def server(oxigraph_server: Server) -> Iterator[Server]:
    yield oxigraph_server
    oxigraph_server.clear()


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[Server]:
    """A server of this test alone, with its data on disk (it gets killed and restarted)."""
    server = Server(tmp_path / "oxigraph").start()
    yield server
    server.stop()


def select(server: Server, query: str) -> list[dict[str, str]]:
    answer = httpx.post(server.query_url, data={"query": query},
                        headers={"Accept": "application/sparql-results+json"}, timeout=30)
    answer.raise_for_status()
    return [{k: v["value"] for k, v in b.items()} for b in answer.json()["results"]["bindings"]]


# ---------------------------------------------------------------------------------------------
# Layout and isolation
# ---------------------------------------------------------------------------------------------


def test_agent_lives_in_its_named_graphs(server: Server) -> None:
    with server.endpoint() as ep, MemoryManager("ann", endpoint=ep, config=FAST,
                                                model=ScriptedModel()) as mem:
        assert isinstance(mem.store, RemoteStore)
        remember(mem, "JWT login | PostgreSQL orders")
        query = "SELECT DISTINCT ?g WHERE { GRAPH ?g { ?s ?p ?o } }"
        graphs = {r["g"] for r in select(server, query)}
        assert graphs == {f"{AGENT}ann", f"{AGENT}ann/meta"}  # the journal emptied again
        # The server's default graph holds nothing of ours; §2's layout holds inside the graph.
        assert select(server, "SELECT * WHERE { ?s ?p ?o } LIMIT 1") == []
        nodes = select(server, f"""SELECT ?c WHERE {{ GRAPH <{AGENT}ann> {{
            ?n a <https://w3id.org/memory-rdf/ontology#Node> ;
               <https://w3id.org/memory-rdf/ontology#content> ?c }} }}""")
        assert sorted(r["c"] for r in nodes) == ["JWT login", "PostgreSQL orders"]
        assert undated(mem.recall(["JWT"])).startswith("[memory] JWT login")
        assert mem.stats()["store_path"] == f"{server.query_url} graph <{AGENT}ann>"


def test_sparql_sees_only_its_agent(server: Server) -> None:
    with server.endpoint() as ep, MemorySystem(endpoint=ep, model=ScriptedModel(),
                                               config=FAST) as system:
        a, b = system.agent("a"), system.agent("b")
        remember(a, "alpha memory")
        remember(b, "beta memory")
        assert a.sparql("SELECT ?c WHERE { ?n memory:content ?c }") == [{"c": "alpha memory"}]
        assert b.sparql("SELECT ?c WHERE { ?n memory:content ?c }") == [{"c": "beta memory"}]
        assert undated(a.recall(["beta"])) == ""
        # a variable named ?graph and a keyword inside a string are not the GRAPH keyword
        assert a.sparql('SELECT ?graph WHERE { ?graph memory:content "GRAPH FROM" }') == []
        for query, word in [
            ("SELECT * WHERE { GRAPH ?g { ?s ?p ?o } }", "GRAPH"),
            (f"SELECT * FROM <{AGENT}b> WHERE {{ ?s ?p ?o }}", "FROM"),
            (f"SELECT * FROM NAMED <{AGENT}b> WHERE {{ ?s ?p ?o }}", "FROM"),
            ("SELECT * WHERE { SERVICE <http://127.0.0.1:1/> { ?s ?p ?o } }", "SERVICE"),
            # as Jena reads it, \u escapes decoded first: a GRAPH after the comment's end
            ("SELECT * WHERE { # \\u000A GRAPH ?g { ?s ?p ?o }\n }", "GRAPH"),
        ]:
            with pytest.raises(SparqlError, match=f"{word} is refused"):
                a.sparql(query)
        with pytest.raises(UpdateRefusedError):
            a.sparql(f"DELETE WHERE {{ GRAPH <{AGENT}b> {{ ?s ?p ?o }} }}")
        with pytest.raises(SparqlError, match="line 1"):
            a.sparql("SELEC ?x WHERE { }")
        # the server's "Prefix not found" named, at the line of the user's own text
        with pytest.raises(SparqlError, match=r"^invalid SPARQL at line 2, column \d+: "
                           r"unknown prefix 'foo:' \(predeclared: memory:, node:, link:, xsd:"):
            a.sparql("SELECT ?p\nWHERE { ?n foo:phrase ?p }")
        assert b.sparql("ASK { ?n memory:content 'beta memory' }") is True


def test_agents_on_an_endpoint_are_listed(server: Server) -> None:
    from memory_rdf import inspect

    with server.endpoint() as ep:
        assert inspect.agents(ep) == []
        with MemorySystem(endpoint=ep, model=ScriptedModel(), config=FAST) as system:
            remember(system.agent("zoe"), "alpha memory")
            remember(system.agent("助手"), "beta memory")
        # another application's graph on the same server is not an agent
        httpx.post(server.update_url, data={"update": f"INSERT DATA {{ GRAPH <{AGENT}x/y/meta> "
                   "{ <https://w3id.org/memory-rdf/store> "
                   "<https://w3id.org/memory-rdf/ontology#schemaVersion> 1 } }"},
                   timeout=30).raise_for_status()
        assert inspect.agents(ep) == ["zoe", "助手"]


def test_export_of_an_endpoint_agent_loads_into_an_embedded_store(server: Server,
                                                                   tmp_path: Path) -> None:
    from memory_rdf import inspect

    with server.endpoint() as ep, MemoryManager("exp", endpoint=ep, config=FAST,
                                                model=ScriptedModel()) as mem:
        remember(mem, "exported memory | second one")
        nquads = inspect.export("exp", ep, format="nquads")
        turtle = inspect.export("exp", ep, format="turtle")
    assert b"lease" not in nquads and b"memory:content" in turtle
    (tmp_path / "data.nq").write_bytes(nquads)
    store = AgentStore(tmp_path / "data" / "exp")
    store.bulk_load_nquads(tmp_path / "data.nq")
    store.close()
    with MemoryManager("exp", data_dir=tmp_path / "data", config=FAST,
                       model=ScriptedModel()) as mem:
        assert undated(mem.recall(["exported"])).startswith("[memory] exported memory")
        assert mem.stats()["nodes"] == 2


# ---------------------------------------------------------------------------------------------
# Arguments
# ---------------------------------------------------------------------------------------------


def test_bad_arguments_are_refused_at_the_call(tmp_path: Path) -> None:
    for bad, error in [
        (dict(query_url="localhost:7878/query"), InvalidInputError),
        (dict(query_url=7878), InvalidTypeError),
        (dict(query_url="http://h/q", auth=("user",)), InvalidTypeError),
        (dict(query_url="http://h/q", auth=42), InvalidTypeError),
        (dict(query_url="http://h/q", auth=""), InvalidInputError),
        (dict(query_url="http://h/q", timeout=0), InvalidInputError),
        (dict(query_url="http://h/q", timeout="3"), InvalidTypeError),
        (dict(query_url="http://h/q", headers={"X": 1}), InvalidTypeError),
    ]:
        with pytest.raises(error):
            SparqlEndpoint(**bad)  # type: ignore[arg-type]
    with SparqlEndpoint("http://127.0.0.1:1/query") as ep:
        with pytest.raises(InvalidInputError, match="not both"):
            MemoryManager("x", data_dir=tmp_path, endpoint=ep)
        with pytest.raises(InvalidTypeError):
            MemorySystem(endpoint="http://127.0.0.1:1/query")  # type: ignore[arg-type]
    assert not (tmp_path / "x").exists()


# ---------------------------------------------------------------------------------------------
# The lease: one writer per agent (SPEC §8)
# ---------------------------------------------------------------------------------------------


def test_second_holder_is_refused_naming_the_first_and_close_releases(server: Server) -> None:
    with server.endpoint() as ep1, server.endpoint() as ep2:
        first = MemoryManager("shared", endpoint=ep1, config=FAST, model=ScriptedModel())
        first.initialize()
        assert isinstance(first.store, RemoteStore)
        holder = first.store.holder
        second = MemoryManager("shared", endpoint=ep2, config=FAST, model=ScriptedModel())
        with pytest.raises(StoreLockedError, match=f"held by {holder}"):
            second.initialize()
        second.close()
        first.close()
        with MemoryManager("shared", endpoint=ep2, config=FAST, model=ScriptedModel()) as again:
            assert again.stats()["nodes"] == 0


CHILD = """
import sys, time
sys.path.insert(0, {tests!r})
from memory_rdf import Config, MemoryManager, SparqlEndpoint
from helpers import ScriptedModel
ep = SparqlEndpoint({query!r}, update_url={update!r}, lease_seconds={lease})
mem = MemoryManager("leased", endpoint=ep, model=ScriptedModel(delay=3600),
                    config=Config(auto_compress=False))
mem.initialize()
mem.remember([{{"role": "user", "content": "journalled by the child"}}])
print("ready", mem.store.holder, flush=True)
time.sleep(3600)
"""


def test_killed_holder_lease_expires_and_another_process_resumes_its_journal(
    server: Server,
) -> None:
    lease = 2.0
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD.format(tests=str(TESTS), query=server.query_url,
                                            update=server.update_url, lease=lease)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        line = child.stdout.readline() if child.stdout else ""
        assert line.startswith("ready "), line
        holder = line.split()[1]
        assert f":{child.pid}:" in holder
        with server.endpoint(lease_seconds=lease) as ep:
            blocked = MemoryManager("leased", endpoint=ep, config=FAST, model=ScriptedModel())
            with pytest.raises(StoreLockedError, match=f"held by {holder}"):
                blocked.initialize()
            blocked.close()
            os.kill(child.pid, signal.SIGKILL)  # no close, no release: the lease must expire
            child.wait(timeout=10)
            killed = time.monotonic()
            while True:
                mem = MemoryManager("leased", endpoint=ep, config=FAST, model=ScriptedModel())
                try:
                    mem.initialize()
                    break
                except StoreLockedError:
                    mem.close()
                    assert time.monotonic() - killed < lease + 5, "the lease never expired"
                    time.sleep(0.2)
            try:
                assert mem.wait_idle(30)
                assert undated(mem.recall(["child"])) == "[memory] journalled by the child"
                assert mem.failed_tasks() == []
            finally:
                mem.close()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=10)
        if child.stdout is not None:
            child.stdout.close()


class _Partition(http.server.BaseHTTPRequestHandler):
    """A proxy to a real server that can cut its clients off (503 to everything): a network
    partition between one process and the server."""

    target = ""
    cut = False

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if type(self).cut:
            status, headers, content = 503, {}, b"partitioned"
        else:
            answer = httpx.post(self.target + self.path, content=body, timeout=30, headers={
                k: v for k, v in self.headers.items() if k.lower() in ("content-type", "accept")
            })
            status, content = answer.status_code, answer.content
            headers = {"Content-Type": answer.headers.get("content-type", "text/plain")}
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(content)))
        self.end_headers()
        self.wfile.write(content)

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def _through_and_direct(server: Server, handler: type[_Partition],
                        lease: float) -> Iterator[tuple[SparqlEndpoint, SparqlEndpoint]]:
    """Two endpoints of ``server`` with leases of ``lease`` s: one through a proxy made of
    ``handler`` (which can cut it off), one direct."""
    with loopback(handler) as proxy, \
            SparqlEndpoint(f"{proxy}/query", update_url=f"{proxy}/update",
                           lease_seconds=lease) as far, \
            server.endpoint(lease_seconds=lease) as near:
        yield far, near


def test_a_holder_cut_off_past_its_lease_writes_nothing_once_another_took_the_agent(
    server: Server,
) -> None:
    # The holder's renewals fail while it is cut off; the lease expires and another process
    # takes the agent. Back on the network, the old holder's next remember used to be
    # journalled (accepted!) into the agent now held by the other process, which never ran it.
    lease = 3.0
    handler = type("Handler", (_Partition,), {"target": server.base, "cut": False})
    with _through_and_direct(server, handler, lease) as (far, near):
        old = MemoryManager("partitioned", endpoint=far, config=FAST, model=ScriptedModel())
        old.initialize()
        try:
            handler.cut = True
            time.sleep(lease + 0.5)
            with MemoryManager("partitioned", endpoint=near, config=FAST,
                               model=ScriptedModel()) as new:
                handler.cut = False
                with pytest.raises(StoreLockedError, match="the lease was lost: .* is held by"):
                    old.remember(say("written by the old holder"))
                assert new.wait_idle(10)
                journal = select(server, f"SELECT ?t WHERE {{ GRAPH <{AGENT}partitioned/journal> "
                                         "{ ?t ?p ?o } }")
                assert journal == []
        finally:
            old.close(timeout=5)


class _PartitionAtWrite(_Partition):
    """Cuts the clients off as the second update carrying ``marker`` arrives (a remember's
    write, after its journal entry): the write is retried from then on."""

    marker = b""
    seen = 0

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.endswith("/update") and type(self).marker in body:
            type(self).seen += 1
            if type(self).seen == 2:
                type(self).cut = True
        self.rfile = io.BytesIO(body)
        super().do_POST()


def test_a_write_retried_past_its_lease_is_not_sent_once_another_took_the_agent(
    server: Server,
) -> None:
    # The remember's write passed the lease check, then the server was out of reach for
    # longer than the lease; another process took the agent and ran the journalled remember.
    # The old holder's retries went on sending the same write: once the network healed it
    # landed too, and the remember was stored twice, by a process without the lease.
    lease = 3.0
    handler = type("Handler", (_PartitionAtWrite,),
                   {"target": server.base, "cut": False, "marker": b"only+once", "seen": 0})
    config = Config(auto_compress=False, max_retries=40, retry_initial_delay=0.25,
                    retry_max_delay=0.5)
    with _through_and_direct(server, handler, lease) as (far, near):
        old = MemoryManager("retried", endpoint=far, config=config, model=ScriptedModel())
        old.initialize()
        try:
            old.remember(say("only once please"))
            time.sleep(lease + 1.0)  # the write is being retried; the lease expired
            with MemoryManager("retried", endpoint=near, config=FAST,
                               model=ScriptedModel()) as new:
                assert new.wait_idle(10)
                handler.cut = False
                time.sleep(2.0)  # the old holder's retries reach the server again
                assert new.sparql("SELECT ?c WHERE { ?n memory:content ?c }") == [
                    {"c": "only once please"}]
        finally:
            old.close(timeout=5)


@contextlib.contextmanager
def _agent_behind(server: Server, proxy_kind: type[_Partition], marker: bytes, agent: str,
                  config: Config, **endpoint: Any) -> Iterator[tuple[Any, MemoryManager]]:
    """An open agent whose endpoint reaches ``server`` through a proxy of ``proxy_kind``
    watching for ``marker`` (its handler class, to cut or heal, and the manager)."""
    handler: Any = type("Handler", (proxy_kind,),
                        {"target": server.base, "cut": False, "marker": marker, "seen": 0})
    with loopback(handler) as proxy, \
            SparqlEndpoint(f"{proxy}/query", update_url=f"{proxy}/update", **endpoint) as ep:
        mem = MemoryManager(agent, endpoint=ep, config=config, model=ScriptedModel())
        mem.initialize()
        try:
            yield handler, mem
        finally:
            mem.close(timeout=5)


def test_a_remember_waiting_out_an_outage_keeps_the_later_ones_behind_it(
    server: Server, caplog: pytest.LogCaptureFixture,
) -> None:
    # SPEC §5.3: a remember in backoff keeps its agent's later tasks waiting behind it. One
    # whose write met the server away went to the tail of the agent's queue: once the server
    # was back, the next remember ran first (its memory linked to the focus without the
    # first's), and the first was stored after it from a write built before.
    config = Config(auto_compress=False, max_retries=0, retry_initial_delay=1.5,
                    retry_max_delay=2.0)
    with _agent_behind(server, _PartitionAtWrite, b"first+remember", "inorder",
                       config) as (handler, mem):
        mem.remember(say("first remember"))
        mem.remember(say("second remember"))
        deadline = time.monotonic() + 20
        while "trying again in" not in caplog.text:  # the first's write met the outage
            assert time.monotonic() < deadline
            time.sleep(0.01)
        handler.cut = False  # the server is back before the first's backoff ends
        assert mem.wait_idle(30)
        assert mem.sparql("""ASK { ?a memory:content "first remember" .
                                   ?b memory:content "second remember" .
                                   ?l memory:source ?b ; memory:target ?a }""")


# ---------------------------------------------------------------------------------------------
# Server faults (SPEC §8: nothing accepted is lost)
# ---------------------------------------------------------------------------------------------


class _LateWrite(_Partition):
    """A slow server: the first update carrying ``marker`` after its journal entry (the
    remember's write) is applied 4 s late, once its client gave up on it; the retry that
    follows is answered 503 (the server is overloaded)."""

    marker = b""
    seen = 0

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.rfile = io.BytesIO(body)
        if self.path.endswith("/update") and type(self).marker in body:
            type(self).seen += 1
            if type(self).seen == 2:
                time.sleep(4.0)
            elif type(self).seen == 3:
                type(self).cut = True
                try:
                    super().do_POST()
                finally:
                    type(self).cut = False
                return
        with contextlib.suppress(OSError):  # the client of the late write is gone
            super().do_POST()


def test_a_remember_whose_write_lands_after_its_client_gave_up_is_stored_once(
    server: Server,
) -> None:
    # The write was not answered in time (EndpointUnavailable): the remember stays queued and
    # is tried again. Its check (is the task still in the journal?) ran before the slow server
    # applied the first copy, so the remember ran again with new nodes, and both landed.
    config = Config(auto_compress=False, max_retries=1, retry_initial_delay=0.1,
                    retry_max_delay=0.2)
    with _agent_behind(server, _LateWrite, b"stored+once", "late", config,
                       timeout=1.0) as (_, mem):
        mem.remember(say("stored once"))
        time.sleep(5.0)  # the late copy has landed
        assert mem.wait_idle(10)
        assert mem.sparql("SELECT ?c WHERE { ?n memory:content ?c }") == [
            {"c": "stored once"}]
        assert mem.pending_remembers() == 0



def test_server_down_at_remember_is_a_clear_error_and_nothing_is_accepted(
    own_server: Server,
) -> None:
    config = Config(auto_compress=False, max_retries=2, retry_initial_delay=0.05,
                    retry_max_delay=0.1)
    with own_server.endpoint(timeout=2.0) as ep:
        mem = MemoryManager("down", endpoint=ep, config=config, model=ScriptedModel())
        mem.initialize()
        try:
            remember(mem, "before the outage")
            own_server.kill()
            with pytest.raises(StoreError, match="cannot reach the SPARQL endpoint .* is the "
                                                 "server running"):
                mem.remember(say("during the outage"))
            own_server.start()
            assert mem.pending_remembers() == 0
            assert mem.wait_idle(30)
            assert undated(mem.recall(["during"])) == ""  # refused, so never stored
            assert undated(mem.recall(["before"])) == "[memory] before the outage"
            rows = mem.sparql("SELECT ?c WHERE { ?n memory:content ?c }")
            assert rows == [{"c": "before the outage"}]
        finally:
            mem.close(timeout=5)
    # nothing journalled either
    journal = select(own_server,
                     f"SELECT ?t WHERE {{ GRAPH <{AGENT}down/journal> {{ ?t ?p ?o }} }}")
    assert journal == []


def test_server_killed_and_restarted_mid_run_loses_no_accepted_remember(
    own_server: Server,
) -> None:
    # Retries long enough to span a restart (~0.2–1 s here): 0.1, 0.2, 0.4, 0.8, 1, 1, … s.
    config = Config(auto_compress=True, max_retries=12, retry_initial_delay=0.1,
                    retry_max_delay=1.0)
    texts = [f"memory number {i}" for i in range(30)]
    accepted: list[str] = []
    with own_server.endpoint(timeout=5.0) as ep:
        mem = MemoryManager("crash", endpoint=ep, config=config, model=ScriptedModel())
        mem.initialize()
        try:
            def writer() -> None:
                for text in texts:
                    mem.remember(say(text))
                    accepted.append(text)
                    time.sleep(0.02)

            thread = threading.Thread(target=writer)
            thread.start()
            while len(accepted) < 10:
                time.sleep(0.01)
            own_server.kill()
            time.sleep(0.5)
            own_server.start()
            thread.join(60)
            assert not thread.is_alive()
            assert mem.wait_idle(60)
            rows = mem.sparql("SELECT ?c WHERE { ?n memory:content ?c }")
            stored = {r["c"] for r in rows}  # type: ignore[index]
            assert stored == set(accepted) == set(texts)
            assert mem.failed_tasks() == []
        finally:
            mem.close(timeout=10)


def _reopen(ep: SparqlEndpoint, agent: str, seconds: float = 15.0) -> MemoryManager:
    """The agent opened again once the lease its last holder could not release expired."""
    deadline = time.monotonic() + seconds
    while True:
        mem = MemoryManager(agent, endpoint=ep, config=FAST, model=ScriptedModel())
        try:
            return mem.initialize()
        except StoreLockedError:
            mem.close()
            assert time.monotonic() < deadline, "the lease never expired"
            time.sleep(0.2)


def test_close_while_the_server_is_down_does_not_wait_out_the_retries(
    own_server: Server,
) -> None:
    # The retries of a real deployment: 16 attempts 1, 2, 4, … 30 s apart, ~5 min a request.
    # close() used to sit them out for the remember's write, its mark-failed write and the
    # lease's release, one after another (memory-rdf serve ignored SIGTERM for ~15 minutes).
    config = Config(auto_compress=False, max_retries=15, retry_initial_delay=1.0,
                    retry_max_delay=30.0)
    with own_server.endpoint(timeout=2.0, lease_seconds=2.0) as ep:
        mem = MemoryManager("closing", endpoint=ep, config=config,
                            model=ScriptedModel(delay=0.5))
        mem.initialize()
        mem.remember(say("accepted before the outage"))
        time.sleep(0.1)  # the model call is in flight
        own_server.kill()
        started = time.monotonic()
        mem.close(timeout=1)
        assert time.monotonic() - started < 8
        own_server.start()
        with _reopen(ep, "closing") as again:  # the accepted remember stayed journalled
            assert again.wait_idle(30)
            assert undated(again.recall(["outage"])) == "[memory] accepted before the outage"
            assert again.failed_tasks() == []


@contextlib.contextmanager
def _server_killed_mid_remember(server: Server, agent: str,
                                config: Config) -> Iterator[MemoryManager]:
    """An agent whose remember of "accepted before the outage" (journalled on the server) is
    in its model call when the server is killed: its write will meet a closed port."""
    with server.endpoint(timeout=2.0) as ep:
        mem = MemoryManager(agent, endpoint=ep, config=config, model=ScriptedModel(delay=0.5))
        mem.initialize()
        try:
            mem.remember(say("accepted before the outage"))
            time.sleep(0.1)  # the model call is in flight
            server.kill()
            yield mem
        finally:
            mem.close(timeout=5)


def test_a_remember_whose_write_outlasts_the_retries_runs_once_the_server_is_back(
    own_server: Server, caplog: pytest.LogCaptureFixture,
) -> None:
    # The remember was accepted (journalled on the server); its write then found the server
    # gone for longer than the retries. It used to leave the queue, "kept as a failed task"
    # said the log, yet it was neither failed nor done: pending on the server, out of reach
    # of this process's recalls until the agent was opened again.
    config = Config(auto_compress=False, max_retries=1, retry_initial_delay=0.05,
                    retry_max_delay=0.2)
    with _server_killed_mid_remember(own_server, "outage", config) as mem:
        time.sleep(1.5)  # the write's attempts all meet a closed port
        own_server.start()
        assert mem.wait_idle(30)
        assert undated(mem.recall(["outage"])) == "[memory] accepted before the outage"
        assert mem.failed_tasks() == [] and mem.pending_remembers() == 0
        assert len(mem.sparql("SELECT ?n WHERE { ?n a memory:Node }")) == 1
    assert "kept as a failed task" not in caplog.text
    assert "stays journalled and queued, trying again" in caplog.text


def test_a_recall_that_times_out_while_the_server_is_away_says_so(own_server: Server) -> None:
    # A recall queued behind a remember whose write is retrying against a server that went
    # away used to time out saying only "timed out" (MCP's recall: after 120 s).
    config = Config(auto_compress=False, max_retries=30, retry_initial_delay=0.1,
                    retry_max_delay=0.2)
    with _server_killed_mid_remember(own_server, "away", config) as mem:
        with pytest.raises(TimeoutError, match=r"recall on agent 'away' timed out: the "
                           r"SPARQL endpoint http://127\.0\.0\.1:\d+/query is not "
                           r"answering \(no answer for \d+ s, last: Connect"):
            mem.recall(["outage"], timeout=2)
        own_server.start()
        assert mem.wait_idle(30)
        assert undated(mem.recall(["outage"])) == "[memory] accepted before the outage"
        assert mem.store.outage() is None  # answered again


# ---------------------------------------------------------------------------------------------
# 4xx answers and auth: a loopback HTTP server that answers what the test tells it
# ---------------------------------------------------------------------------------------------


class _Refusing(http.server.BaseHTTPRequestHandler):
    status = 401
    seen: list[str | None] = []  # noqa: RUF012 - one list per test, reset by the fixture

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        type(self).seen.append(self.headers.get("Authorization"))
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = b"nope"
        self.send_response(self.status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def refusing() -> Iterator[tuple[str, type[_Refusing]]]:
    handler = type("Handler", (_Refusing,), {"seen": []})
    with loopback(handler) as base:
        yield base, handler


@pytest.mark.parametrize("status, fix", [
    (401, r"check the credentials: SparqlEndpoint\(auth=\(user, password\)\)"),
    (403, "check the credentials"),
    (404, "check the URL: query_url must be the SPARQL query service"),
    (405, "does not take SPARQL updates: give the update service as update_url"),
    (400, "did not accept this standard SPARQL 1.1 update; if this URL is the query service"),
])
def test_4xx_answers_say_what_to_fix(refusing: tuple[str, type[_Refusing]], status: int,
                                     fix: str) -> None:
    url, handler = refusing
    handler.status = status
    with SparqlEndpoint(f"{url}/query") as ep:
        mem = MemoryManager("x", endpoint=ep, config=FAST, model=ScriptedModel())
        with pytest.raises(StoreError, match=fix):
            mem.initialize()
        mem.close()
    assert len(handler.seen) == 1  # a 4xx is not retried


class _Swallowing(http.server.BaseHTTPRequestHandler):
    """An update service in front of a real one that, once ``swallow`` is set, answers every
    update 204 (done) without passing it on: a misrouted proxy, a read-only mirror."""

    target = ""
    swallow = False
    swallow_once = False  # only the next update

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if type(self).swallow or type(self).swallow_once:
            type(self).swallow_once = False
            status, answer = 204, b""
        else:
            sent = httpx.post(type(self).target, content=body,
                              headers={"Content-Type": self.headers["Content-Type"]})
            status, answer = sent.status_code, sent.content
        self.send_response(status)
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: object) -> None:
        pass


def test_updates_answered_but_not_applied_are_a_clear_error(server: Server) -> None:
    """An update service that answers "done" and does not write is found at open (the lease
    written there cannot be read back) and, when it starts doing so later, at the next lease
    renewal: writes are refused from then on instead of being lost."""
    handler = type("Handler", (_Swallowing,), {"target": server.update_url, "swallow": True})
    with loopback(handler) as base, SparqlEndpoint(server.query_url, update_url=base,
                                                   lease_seconds=6) as ep:
        mem = MemoryManager("swallowed", endpoint=ep, config=FAST, model=ScriptedModel())
        with pytest.raises(StoreError, match="do not reach the dataset the queries read .* "
                                             "must name the same dataset"):
            mem.initialize()
        mem.close()
        handler.swallow = False
        # One lost update, as when another holder lets go between our take and our read
        # (the lease then reads back empty): the take is tried once more, and the open works.
        handler.swallow_once = True
        mem = MemoryManager("swallowed", endpoint=ep, config=FAST, model=ScriptedModel())
        mem.initialize()
        assert not handler.swallow_once
        try:
            remember(mem, "written while updates land")
            handler.swallow = True
            deadline = time.monotonic() + 15
            with pytest.raises(StoreError, match="lease was lost: .* do not reach the dataset"):
                while time.monotonic() < deadline:  # renewals every 2 s
                    mem.remember(say("sent after updates stopped landing"))
                    time.sleep(0.1)
        finally:
            handler.swallow = False
            mem.close()
    contents = select(server, "SELECT ?c WHERE { GRAPH ?g { ?n <https://w3id.org/memory-rdf/"
                              "ontology#content> ?c } }")
    assert "written while updates land" in {r["c"] for r in contents}


def test_wrong_path_on_a_real_server_says_what_to_fix(server: Server) -> None:
    with SparqlEndpoint(f"{server.base}/nope") as ep:
        mem = MemoryManager("x", endpoint=ep, config=FAST, model=ScriptedModel())
        with pytest.raises(StoreError, match=r"\(404 Not Found\): check the URL"):
            mem.initialize()
        mem.close()


def test_basic_and_bearer_auth_and_headers_are_sent(
    refusing: tuple[str, type[_Refusing]],
) -> None:
    url, handler = refusing
    handler.status = 401
    for auth, expected in [
        (("ann", "s3cret"), "Basic " + base64.b64encode(b"ann:s3cret").decode()),
        ("tok-123", "Bearer tok-123"),
    ]:
        with SparqlEndpoint(f"{url}/query", auth=auth, headers={"X-Team": "a"}) as ep:
            mem = MemoryManager("x", endpoint=ep, config=FAST, model=ScriptedModel())
            with pytest.raises(StoreError, match="401"):
                mem.initialize()
            mem.close()
        assert handler.seen[-1] == expected


def test_5xx_answers_are_retried_then_reported(
    refusing: tuple[str, type[_Refusing]],
) -> None:
    url, handler = refusing
    handler.status = 503
    config = Config(max_retries=3, retry_initial_delay=0.01, retry_max_delay=0.02)
    with SparqlEndpoint(f"{url}/query") as ep:
        mem = MemoryManager("x", endpoint=ep, config=config, model=ScriptedModel())
        with pytest.raises(StoreError, match=r"kept failing \(503 Service Unavailable\) after "
                                             r"4 attempts"):
            mem.initialize()
        mem.close()
    assert len(handler.seen) == 4


def test_stats_and_json_of_an_endpoint_agent(server: Server) -> None:
    with server.endpoint() as ep, MemoryManager("st", endpoint=ep, config=FAST,
                                                model=ScriptedModel()) as mem:
        remember(mem, "one | two")
        stats = mem.stats()
        assert stats["nodes"] == 2 and stats["links"] == 2
        assert stats["read_mirror"] == "off" and stats["read_mirror_renewals"] == 0
        json.dumps(stats, default=str)


def test_an_endpoint_store_has_no_embedded_part_and_a_purge_still_forgets(
    server: Server, tmp_path: Path
) -> None:
    """The store interface holds what both stores mean (issue 36): the upkeep of files and
    the read mirror are the embedded store's alone, asked for through ``store.local``."""
    with server.endpoint() as ep, MemoryManager("np", endpoint=ep, config=FAST,
                                                model=ScriptedModel()) as mem:
        assert mem.store.local is None
        for member in ("flush", "optimize", "rewrite", "maybe_optimize_in_background",
                       "mirrored", "mirror_rows", "mirror_state", "mirror_building",
                       "auto_flushes"):
            assert not hasattr(mem.store, member), member
        remember(mem, "JWT login | PostgreSQL orders")
        listed = {e["content"]: e["id"] for e in mem.memories()}
        assert mem.forget([listed["JWT login"]], purge=True) == 1
        assert "JWT login" not in mem.recall(["JWT", "PostgreSQL"], entry="keywords")
        assert "PostgreSQL orders" in mem.recall(["PostgreSQL"], entry="keywords")
    with MemoryManager("np", data_dir=tmp_path, config=FAST, model=ScriptedModel()) as mem:
        assert mem.store.local is mem.store


# ---------------------------------------------------------------------------------------------
# The command line: --endpoint wherever --data-dir is taken
# ---------------------------------------------------------------------------------------------


def test_cli_demo_and_inspection_on_a_running_server(server: Server, tmp_path: Path) -> None:
    cmd = memory_rdf_command()
    where = ["--endpoint", server.query_url, "--update-url", server.update_url]
    checkout = os.pathsep.join(filter(None, [str(TESTS.parent), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": checkout, "MEMORY_RDF_MODEL": "heuristic"}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([cmd, *args], capture_output=True, text=True, timeout=120,
                              env=env, cwd=tmp_path)

    demo = run("demo", *where, "--slices", "2")
    assert demo.returncode == 0, demo.stderr
    assert f"--endpoint {server.query_url}" in demo.stdout  # the "Next:" line
    stats = run("stats", "demo", "--json", *where)
    assert stats.returncode == 0, stats.stderr
    assert json.loads(stats.stdout)["nodes"] > 5
    table = run("stats", "demo", *where)
    assert table.returncode == 0, table.stderr
    assert re.search(r"on disk\s*│\s*n/a \(on the SPARQL endpoint\)", table.stdout), table.stdout
    assert "0 B" not in table.stdout  # the bytes are the server's, not a local directory's
    assert not (tmp_path / "memory_data").exists()  # nothing written locally
    recall = run("recall", "demo", "JWT", *where)
    assert recall.returncode == 0 and "JWT" in recall.stdout, recall.stderr
    query = run("sparql", "demo", "SELECT (COUNT(?n) AS ?c) WHERE { ?n a memory:Node }",
                "--format", "csv", *where)
    assert query.stdout.splitlines()[1] == str(json.loads(stats.stdout)["nodes"])
    valid = run("validate", "demo", *where)
    assert valid.returncode == 0 and "conforms" in valid.stdout, valid.stderr
    exported = run("export", "demo", "--format", "nquads", *where)
    assert exported.returncode == 0 and "memory-rdf/graph/meta" in exported.stdout
    picture = run("graph", "demo", "-o", str(tmp_path / "demo.html"), *where)
    assert picture.returncode == 0 and (tmp_path / "demo.html").stat().st_size > 1000
    refused = run("sparql", "demo", "SELECT * WHERE { GRAPH ?g { ?s ?p ?o } }", *where)
    assert refused.returncode != 0 and "GRAPH is refused" in refused.stderr
    unknown = run("stats", "nobody", *where)
    assert unknown.returncode == 2 and "unknown agent 'nobody'" in unknown.stderr
    alone = run("stats", "demo", "--update-url", server.update_url)
    assert alone.returncode == 2 and "--update-url needs --endpoint" in alone.stderr
    no_update_url = run("compress", "demo", "--endpoint", server.query_url)
    assert no_update_url.returncode != 0
    assert "give the update service as update_url (--update-url)" in no_update_url.stderr


@pytest.mark.slow
def test_endpoint_benchmark_runs_small(tmp_path: Path) -> None:
    """benchmarks/endpoint.py end to end at a tiny size (its figures are in ENDPOINT.md)."""
    root = TESTS.parent
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.endpoint", "--nodes", "200", "--repeat", "2",
         "--remembers", "3", "--slices", "1", "--workers", "1", "--scale-remembers", "3",
         "--scale-recalls", "3", "--skip-virtuoso"],
        cwd=root, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "oxigraph serve" in result.stdout and "remembers/s" in result.stdout
    assert "NOTE" not in result.stdout  # both stores recalled the same texts
