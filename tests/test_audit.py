"""Findings of the security and crash review (2026-11-26), each reproduced through the public
API against real parts: temporary Oxigraph stores, a loopback ``oxigraph serve``, loopback HTTP
servers standing in for a proxy or a model server. Each test failed before its fix.
"""

from __future__ import annotations

import base64
import http.server
import json
import os
import shlex
import subprocess
import sys
import textwrap
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from memory_rdf import (
    Config,
    InvalidInputError,
    InvalidTypeError,
    MemoryManager,
    ModelError,
    QueryRefusedError,
    SparqlEndpoint,
    SparqlError,
    StoreError,
    UpdateRefusedError,
)
from memory_rdf._query_guard import check_user_query, keywords, query_form
from memory_rdf._remote import refuse_dataset_escape
from memory_rdf.small_model import OpenAIModel

from helpers import FAST, ScriptedModel, memory_rdf_command
from servers import Server, SparqlRecorder, loopback

# -- an endpoint behind a proxy that starts redirecting --------------------------------------


class _Proxy(http.server.BaseHTTPRequestHandler):
    """Forwards every POST to the upstream server; while ``redirect`` is set, answers 302 to a
    login page instead (what an authenticating proxy does when its session runs out)."""

    upstream = ""
    redirect = False
    garbage: bytes | None = None  # answered instead, as 200 SPARQL JSON, while set
    sent: list[int] = [0]  # noqa: RUF012 - set by the fixture
    hung_up = threading.Event()

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if b"endless" in body:
            self._endless()
            return
        if type(self).garbage is not None:
            self.send_response(200)
            self.send_header("Content-Type", "application/sparql-results+json")
            self.send_header("Content-Length", str(len(type(self).garbage or b"")))
            self.end_headers()
            self.wfile.write(type(self).garbage or b"")
            return
        if type(self).redirect:
            self.send_response(302)
            self.send_header("Location", "http://127.0.0.1:1/login")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        headers = {k: v for k, v in self.headers.items()
                   if k.lower() in ("content-type", "accept")}
        request = urllib.request.Request(type(self).upstream + self.path, data=body,
                                         headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                status, data, kind = answer.status, answer.read(), answer.headers["Content-Type"]
        except urllib.error.HTTPError as exc:
            status, data, kind = exc.code, exc.read(), exc.headers["Content-Type"]
        self.send_response(status)
        self.send_header("Content-Type", kind or "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _endless(self) -> None:
        """An answer that does not end (a cross join streamed by the server) before 160 MB,
        unless the client hangs up: ``sent`` counts its bytes, ``hung_up`` is set then."""
        self.send_response(200)
        self.send_header("Content-Type", "application/sparql-results+json")
        self.end_headers()
        row = b'{"endless": {"type": "literal", "value": "' + b"x" * 1000 + b'"}},'
        try:
            self.wfile.write(b'{"head": {"vars": ["endless"]}, "results": {"bindings": [')
            while type(self).sent[0] < 160 * 2**20:
                self.wfile.write(row * 64)
                type(self).sent[0] += len(row) * 64
        except OSError:
            type(self).hung_up.set()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def proxied(oxigraph_server: Server) -> Iterator[tuple[str, type[_Proxy]]]:
    handler = type("Handler", (_Proxy,), {"upstream": oxigraph_server.base, "redirect": False,
                                          "garbage": None, "sent": [0],
                                          "hung_up": threading.Event()})
    try:
        with loopback(handler) as base:
            yield base, handler
    finally:
        oxigraph_server.clear()


def _server_holds(server: Server, text: str) -> bool:
    query = f'ASK {{ GRAPH ?g {{ ?s ?p ?o FILTER(CONTAINS(STR(?o), "{text}")) }} }}'
    answer = httpx.post(server.query_url, data={"query": query},
                        headers={"Accept": "application/sparql-results+json"}, timeout=30)
    return bool(answer.json()["boolean"])


def test_a_redirected_update_is_an_error_not_an_accepted_remember(
    oxigraph_server: Server, proxied: tuple[str, type[_Proxy]]
) -> None:
    # Before: a 3xx answer counted as success, so remember() returned while its journal entry
    # never reached the server (lost at the next crash), and the store said nothing.
    base, proxy = proxied
    with SparqlEndpoint(f"{base}/query", update_url=f"{base}/update") as ep, MemoryManager(
        "redir", endpoint=ep, config=FAST, model=ScriptedModel()
    ) as mem:
        mem.remember([{"role": "user", "content": "kept before the proxy broke"}])
        assert mem.recall(["kept"]) != ""
        proxy.redirect = True
        with pytest.raises(StoreError, match=r"302 Found \(to http://127.0.0.1:1/login\).*"
                                             r"redirects are not followed"):
            mem.remember([{"role": "user", "content": "told while redirecting"}])
        with pytest.raises(StoreError, match="redirects are not followed"):
            mem.sparql("ASK {}")
        proxy.redirect = False
        assert mem.wait_idle(30)
        assert mem.pending_remembers() == 0
    assert _server_holds(oxigraph_server, "kept before the proxy broke")
    assert not _server_holds(oxigraph_server, "told while redirecting")


def test_an_endpoint_url_that_redirects_is_refused_at_open(
    proxied: tuple[str, type[_Proxy]], tmp_path: Path
) -> None:
    base, proxy = proxied
    proxy.redirect = True
    with SparqlEndpoint(f"{base}/query", update_url=f"{base}/update") as ep:
        mem = MemoryManager("redir2", endpoint=ep, config=FAST, model=ScriptedModel())
        with pytest.raises(StoreError, match="302 Found .*redirects are not followed"):
            mem.initialize()
        mem.close()


# -- credentials written into an endpoint URL ------------------------------------------------


class _Recording(http.server.BaseHTTPRequestHandler):
    """Answers every POST with ``status`` and records its Authorization header."""

    status = 401
    seen: list[str | None] = []  # noqa: RUF012 - one list per test, set by the fixture

    def do_POST(self) -> None:  # noqa: N802
        type(self).seen.append(self.headers.get("Authorization"))
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(type(self).status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def recording() -> Iterator[tuple[str, type[_Recording]]]:
    handler = type("Handler", (_Recording,), {"seen": [], "status": 401})
    with loopback(handler) as base:
        yield base.removeprefix("http://"), handler


def test_a_password_in_the_endpoint_url_is_sent_but_never_shown(
    oxigraph_server: Server, recording: tuple[str, type[_Recording]]
) -> None:
    # Before: the URL, password included, was in every error message, repr(), and
    # stats()["store_path"], which the MCP stats tool hands to the model.
    from memory_rdf import MemorySystem
    from memory_rdf.tools import call_tool

    host, handler = recording
    with SparqlEndpoint(f"http://ann:s3cr%40t@{host}/query") as ep:
        assert "s3cr" not in repr(ep) + ep.query_url + ep.update_url
        mem = MemoryManager("cred", endpoint=ep, config=FAST, model=ScriptedModel())
        with pytest.raises(StoreError, match="check the credentials") as refused:
            mem.initialize()
        mem.close()
        assert "s3cr" not in str(refused.value)
    assert handler.seen == ["Basic " + base64.b64encode(b"ann:s3cr@t").decode()]

    server = oxigraph_server.base.removeprefix("http://")
    with SparqlEndpoint(f"http://ann:s3cret@{server}/query",
                        update_url=f"http://ann:s3cret@{server}/update") as ep:
        with MemorySystem(endpoint=ep, config=FAST, model=ScriptedModel()) as system:
            call_tool(system, "remember", {"messages": [{"role": "user", "content": "hi"}],
                                           "agent_id": "cred"})  # stats needs an agent
            stats = call_tool(system, "stats", {"agent_id": "cred"})
            assert "s3cret" not in stats and server in stats
        oxigraph_server.clear()
    with pytest.raises(ValueError, match="credentials once"):
        SparqlEndpoint(f"http://ann:s3cret@{server}/query", auth="token")


def _use(thing: object) -> None:
    """The first request of a model or an endpoint (what failed before the fix, quoting the
    credential in its error)."""
    if isinstance(thing, SparqlEndpoint):
        with thing, MemoryManager("k", endpoint=thing, config=FAST, model=ScriptedModel()):
            pass
    else:
        assert isinstance(thing, OpenAIModel)
        with thing:
            thing.segment("user: hello")


@pytest.mark.parametrize("make", [
    lambda url: OpenAIModel("m", base_url=f"{url}/v1", api_key="sk-s3cret\n"),
    lambda url: OpenAIModel("m", base_url=f"{url}/v1", api_key="sk-s3crét"),
    lambda url: SparqlEndpoint(f"{url}/query", auth="s3cret\n"),
    lambda url: SparqlEndpoint(f"{url}/query", headers={"X-Key": "s3cret\r\nX-Evil: 1"}),
], ids=["key-newline", "key-non-ascii", "bearer-newline", "header-crlf"])
def test_a_credential_that_cannot_be_a_header_is_refused_without_quoting_it(
    recording: tuple[str, type[_Recording]], make: Callable[[str], object]
) -> None:
    # Before: the first request failed with "Illegal header value b'Bearer sk-s3cret\n'" (a
    # transient error, retried, logged, and kept as stats()["model_last_error"], which the MCP
    # stats tool shows the model) or a bare UnicodeEncodeError.
    host, handler = recording
    with pytest.raises(InvalidInputError, match="cannot be sent in an HTTP header") as refused:
        _use(make(f"http://{host}"))
    assert "s3cr" not in str(refused.value)
    assert handler.seen == []


# -- timeouts beyond what the platform can wait ----------------------------------------------


def test_timeouts_beyond_the_platform_limit_are_refused_before_anything_runs(
    tmp_path: Path,
) -> None:
    # Before: timeout=1e300 (or 1e10) was accepted, then waiting on it raised OverflowError —
    # after forget() had been queued (the memory went while the caller saw an error), and in
    # close() after the manager was marked closed (its store was never closed: the RocksDB
    # lock stayed held). Types were not checked either (forget(timeout="5") forgot, then
    # raised TypeError).
    mem = MemoryManager("t", data_dir=tmp_path, config=FAST, model=ScriptedModel()).initialize()
    mem.remember([{"role": "user", "content": "my locker code is 4711"}])
    (node,) = mem.memories()
    for bad in (1e300, 1e10, float("inf"), -1):
        with pytest.raises(InvalidInputError, match="timeout"):
            mem.forget([node["id"]], timeout=bad)
    with pytest.raises(InvalidTypeError, match="timeout"):
        mem.forget([node["id"]], timeout="5")  # type: ignore[arg-type]
    for call in (lambda: mem.recall(["locker"], timeout=1e300),
                 lambda: mem.memories(timeout=1e300),
                 lambda: mem.sparql("ASK {}", timeout=1e300),
                 lambda: mem.run_compression_slice(timeout=1e300),
                 lambda: mem.wait_idle(1e300),
                 lambda: mem.close(timeout=1e300)):
        with pytest.raises(InvalidInputError, match="at most"):
            call()
    assert [m["id"] for m in mem.memories()] == [node["id"]]  # nothing was forgotten
    assert mem.wait_idle(threading.TIMEOUT_MAX)  # the largest accepted wait works
    mem.close(timeout=threading.TIMEOUT_MAX)
    with MemoryManager("t", data_dir=tmp_path, config=FAST, model=ScriptedModel()) as again:
        assert "4711" in again.recall(["locker"])  # the store was closed, not left locked
    for bad_config in (lambda: Config(model_timeout=1e300),
                       lambda: OpenAIModel("m", base_url="http://127.0.0.1:9/v1", timeout=1e300),
                       lambda: SparqlEndpoint("http://127.0.0.1:9/query", timeout=1e300)):
        with pytest.raises(ValueError, match="timeout"):
            bad_config()


# -- JSON nested too deep for the parser ------------------------------------------------------

DEEP_JSON = "[" * 100_000 + "]" * 100_000


class _Answering(http.server.BaseHTTPRequestHandler):
    """A model server answering every POST with ``body`` (HTTP 200, JSON)."""

    body = b""

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(type(self).body)))
        self.end_headers()
        self.wfile.write(type(self).body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def answering() -> Iterator[tuple[str, type[_Answering]]]:
    handler = type("Handler", (_Answering,), {"body": b""})
    with loopback(handler) as base:
        yield base, handler


def test_json_nested_too_deep_is_a_bad_answer_not_a_recursion_error(
    answering: tuple[str, type[_Answering]], tmp_path: Path
) -> None:
    # Before: json.loads raised RecursionError, which is not the ModelError of a garbage
    # answer (the model's contract), nor the InvalidInputError of bad tool arguments.
    from memory_rdf.small_model import OllamaModel
    from memory_rdf.tools import call_tool

    url, handler = answering
    reply = {"message": {"role": "assistant", "content": DEEP_JSON}, "done": True}
    for body in (DEEP_JSON.encode(), json.dumps(reply).encode()):
        handler.body = body
        with OllamaModel("m", base_url=url, timeout=10) as model, pytest.raises(
            ModelError, match="not JSON"
        ):
            model.segment("user: hello")
    with MemoryManager("j", data_dir=tmp_path, config=FAST, model=ScriptedModel()) as mem:
        with pytest.raises(InvalidInputError, match="not valid JSON"):
            call_tool(mem, "recall", '{"keywords": ' + DEEP_JSON + "}")
        assert mem.stats()["nodes"] == 0
    source = tmp_path / "deep.json"
    source.write_text(DEEP_JSON, encoding="utf-8")
    result = subprocess.run(
        [memory_rdf_command(), "remember", "j", str(source), "--data-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode in (1, 2) and "Traceback" not in result.stderr, result.stderr
    assert "not valid JSON" in result.stderr


# -- an endpoint answering JSON that is not SPARQL results -----------------------------------


@pytest.mark.parametrize("garbage", [
    b'{"status": "ok"}', b"[1, 2]", b'"text"', b"not json at all",
    b'{"head": {"vars": ["s"]}, "results": {"bindings": [5]}}',
    b'{"head": {"vars": ["s"]}, "results": {"bindings": "x"}}',
])
def test_an_answer_that_is_not_sparql_results_is_a_store_error(
    proxied: tuple[str, type[_Proxy]], garbage: bytes
) -> None:
    # Before: KeyError, TypeError, AttributeError or a bare JSONDecodeError from the store's
    # reading code (at open, in recall, in sparql()), instead of a StoreError that says so.
    base, proxy = proxied
    with SparqlEndpoint(f"{base}/query", update_url=f"{base}/update") as ep:
        proxy.garbage = garbage
        mem = MemoryManager("junk", endpoint=ep, config=FAST, model=ScriptedModel())
        with pytest.raises(StoreError, match="did not answer with SPARQL"):
            mem.initialize()
        mem.close()
        proxy.garbage = None
        with MemoryManager("junk", endpoint=ep, config=FAST, model=ScriptedModel()) as mem:
            mem.remember([{"role": "user", "content": "a fact about otters"}])
            assert mem.wait_idle(30)
            proxy.garbage = garbage
            for call in (lambda: mem.sparql("SELECT ?s WHERE { ?s ?p ?o }"),
                         lambda: mem.recall(["otters"]),
                         lambda: mem.memories()):
                with pytest.raises(StoreError, match="did not answer with SPARQL"):
                    call()
            proxy.garbage = None
            assert "otters" in mem.recall(["otters"])


# -- memory text reaching a terminal ----------------------------------------------------------

#: What a chat can carry: OSC 0 (window title), CSI 2J (clear screen), OSC 52 (write the
#: clipboard), an 8-bit CSI, a bidi override.
ESCAPES = "\x1b]0;PWNED\x07 \x1b[2J \x1b]52;c;ZWNobyBoaQ==\x07 \x9b31m \u202e"


def test_the_cli_never_writes_stored_control_characters_raw(tmp_path: Path) -> None:
    # Before: `stats` escaped them (issue 17) but `recall`, `memories` (pipe, table, --json),
    # `sparql`'s table and `tasks` printed them raw, so a remembered chat could retitle,
    # clear or drive the terminal of whoever inspects the memory.
    content = f"otters {ESCAPES} end"
    with MemoryManager("esc", data_dir=tmp_path, config=FAST, model=ScriptedModel()) as mem:
        mem.remember([{"role": "user", "content": content}])
    failing = ScriptedModel(fail={"segment": -1})
    with MemoryManager("esc", data_dir=tmp_path, config=FAST.replace(max_retries=0),
                       model=failing) as mem:
        mem.remember([{"role": "user", "content": f"failed {ESCAPES}"}])
        assert mem.wait_idle(30)
        assert mem.stats()["failed_tasks"] == 1
    where = ["--data-dir", str(tmp_path)]
    for args in (["recall", "esc", "otters"], ["memories", "esc"], ["memories", "esc", "--json"],
                 ["sparql", "esc", "SELECT ?c WHERE { ?n memory:content ?c }"],
                 ["tasks", "esc"], ["tasks", "esc", "--json"]):
        result = subprocess.run([memory_rdf_command(), *args, *where], capture_output=True,
                                text=True, encoding="utf-8", timeout=120)
        assert result.returncode == 0, (args, result.stderr)
        shown = result.stdout
        assert "otters" in shown or "failed" in shown, (args, shown)
        for raw in ("\x1b", "\x07", "\x9b", "\u202e"):
            assert raw not in shown, (args, raw, shown)
        assert "\\x1b" in shown or "\\u001b" in shown, (args, shown)
    listed = json.loads(subprocess.run(
        [memory_rdf_command(), "memories", "esc", "--json", *where], capture_output=True,
        text=True, encoding="utf-8", timeout=120, check=True).stdout)
    assert listed[0]["content"] == content  # --json stays exact JSON


# -- dates at the edges of the calendar -------------------------------------------------------


def test_a_time_that_leaves_the_calendar_in_utc_is_refused_at_the_call(tmp_path: Path) -> None:
    # Before: OverflowError (not the InvalidInputError of a bad date), and through the MCP or
    # tool path an "internal error" with a logged traceback.
    from memory_rdf.tools import call_tool

    with MemoryManager("cal", data_dir=tmp_path, config=FAST, model=ScriptedModel()) as mem:
        for stamp in ("0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"):
            with pytest.raises(InvalidInputError, match="outside the years 1-9999"):
                mem.remember([{"role": "user", "content": "then", "timestamp": stamp}])
            with pytest.raises(InvalidInputError, match="outside the years 1-9999"):
                mem.recall(["then"], since=stamp)
            with pytest.raises(InvalidInputError, match="outside the years 1-9999"):
                call_tool(mem, "memories", {"until": stamp})
        assert mem.stats()["nodes"] == 0 and mem.pending_remembers() == 0
        mem.remember([{"role": "user", "content": "then", "timestamp": "0001-01-01T00:00:00Z"}])
        assert mem.memories()[0]["said_at"].year == 1


# -- page sizes beyond 64 bits -----------------------------------------------------------------


def test_a_page_size_beyond_64_bits_is_no_limit_not_a_broken_query(tmp_path: Path) -> None:
    # Before: memories(limit=10**30) (an int any JSON tool call can carry) and Config sizes
    # like compression_batch_size=10**30 were written into the query as they were; Oxigraph
    # refused the number and the call failed with "internal SPARQL did not parse".
    from memory_rdf.tools import call_tool

    config = FAST.replace(compression_batch_size=10**30, max_entry_nodes=10**30, focus_limit=1)
    with MemoryManager("big", data_dir=tmp_path, config=config, model=ScriptedModel()) as mem:
        mem.remember([{"role": "user", "content": "the heron fishes at dawn"}])
        assert len(mem.memories(limit=10**30)) == 1
        assert mem.memories(offset=10**30) == []
        assert json.loads(call_tool(mem, "memories", '{"limit": 1e400}'
                                    .replace("1e400", "1" + "0" * 40)))[0]["id"]
        assert "heron" in mem.recall(["heron"], entry="keywords")
        mem.remember([{"role": "user", "content": "a newer thought"}])  # the heron leaves focus
        assert mem.run_compression_slice(timeout=60)["scanned"] == 1


# -- the user's SPARQL: what the guard's tokenizer and the engines read differently -----------


def test_a_carriage_return_ends_a_comment_for_the_guard_too(tmp_path: Path) -> None:
    # Before: the guard read "# x\rSERVICE <url> {…}" as one comment, Oxigraph (the grammar's
    # EOL is CR or LF) as a SERVICE call: sparql() sent an HTTP request to the URL.
    handler = type("Handler", (SparqlRecorder,), {"requests": []})
    with loopback(handler) as base:
        url = f"{base}/sparql"
        with MemoryManager("cr", data_dir=tmp_path, config=FAST, model=ScriptedModel()) as mem:
            for query in (f"SELECT * WHERE {{ # hidden\rSERVICE <{url}> {{ ?s ?p ?o }} }}",
                          f"SELECT * WHERE {{ # hidden\r\nSERVICE <{url}> {{ ?s ?p ?o }} }}"):
                with pytest.raises(QueryRefusedError, match="SERVICE is refused"):
                    mem.sparql(query)
            assert mem.sparql("ASK { } # a comment\r") is True
            assert mem.sparql('ASK { FILTER("a # b" != "c") } # SERVICE <x>') is True
    assert handler.requests == []


def test_every_check_reads_the_query_with_one_tokenizer() -> None:
    # The endpoint's FROM/GRAPH/SERVICE refusal and its ASK detection had a tokenizer of their
    # own, and the start-of-query update check a third: the comment and CR fixes had to be
    # made in each. Now all read the guard's keywords.
    assert list(keywords('SELECT ?graph { ?s memory:from "GRAPH" } # FROM\rLIMIT 1')) == [
        "SELECT", "LIMIT"]
    assert query_form("PREFIX a: <urn:x> # SELECT\r BASE <urn:y> ask {}") == "ASK"
    assert query_form('SELECT ("ASK" AS ?x) {}') == "SELECT"
    with pytest.raises(SparqlError, match="GRAPH is refused"):
        refuse_dataset_escape("SELECT * { # x\rGRAPH ?g { ?s ?p ?o } }")
    refuse_dataset_escape('SELECT ?graph WHERE { ?graph memory:content "GRAPH FROM" }')
    # LOAD as the query's operation is an update; LOAD elsewhere reaches outside the store
    for query in ("LOAD <http://x/>", "PREFIX x: <urn:x> # c\n load <http://x/>"):
        with pytest.raises(UpdateRefusedError, match="read-only"):
            check_user_query(query)
    with pytest.raises(QueryRefusedError, match="LOAD is refused"):
        check_user_query("SELECT * WHERE { ?s ?p ?o } LOAD <http://x/>")


def test_update_words_are_refused_anywhere_in_a_query(tmp_path: Path) -> None:
    # Before: only a query *starting* with an update keyword was refused, after comments were
    # stripped — but not a comment holding <, >, " or ', so "# <x>\nDROP ALL" passed.
    with MemoryManager("upd", data_dir=tmp_path, config=FAST, model=ScriptedModel()) as mem:
        mem.remember([{"role": "user", "content": "a fact about moles"}])
        for query in ("# <x>\nDROP ALL", "# 'x'\nINSERT DATA { <urn:a> <urn:b> <urn:c> }",
                      "# <x>\nWITH <urn:g> DELETE { ?s ?p ?o } WHERE { ?s ?p ?o }",
                      "SELECT * WHERE { ?s ?p ?o } ; CLEAR DEFAULT"):
            with pytest.raises(UpdateRefusedError, match="is refused"):
                mem.sparql(query)
        with pytest.raises(QueryRefusedError, match="DEFINE is refused"):
            mem.sparql("DEFINE input:same-as \"yes\" SELECT * WHERE { ?s ?p ?o }")
        with pytest.raises(QueryRefusedError, match="backslash"):
            mem.sparql(r"SELECT * WHERE { ?s ?p ?o } \u0023 x")
        # Words in strings, IRIs, comments, variables and prefixed names still run.
        assert mem.sparql(
            'PREFIX delete: <urn:d/> SELECT ?insert WHERE { BIND("DROP ALL" AS ?insert) '
            "FILTER(?insert != delete:with) } # WITH <x> DELETE") == [{"insert": "DROP ALL"}]
        assert "moles" in mem.recall(["moles"])


def test_a_read_only_sparql_cannot_write_through_a_virtuoso_query_url(virtuoso: Server) -> None:
    # Before: on Virtuoso (one /sparql URL for queries and updates, as SPEC §8 allows) agent
    # "attacker"'s read-only sparql() — the MCP sparql tool, marked read-only — deleted every
    # triple of agent "victim": "# <x>\nWITH <…/agent/victim> DELETE {…} WHERE {…}".
    from memory_rdf import MemorySystem

    with SparqlEndpoint(virtuoso.query_url, update_url=virtuoso.update_url) as ep, \
            MemorySystem(endpoint=ep, config=FAST, model=ScriptedModel()) as system:
        try:
            victim, attacker = system.agent("victim"), system.agent("attacker")
            victim.remember([{"role": "user", "content": "the victim's secret"}])
            attacker.remember([{"role": "user", "content": "hello"}])
            for query in (
                "# <x>\nWITH <https://w3id.org/memory-rdf/agent/victim> "
                "DELETE { ?s ?p ?o } WHERE { ?s ?p ?o }",
                "# <x>\nINSERT DATA { <urn:a> <urn:b> <urn:c> }",
                "# <x>\nCLEAR ALL",
            ):
                with pytest.raises(UpdateRefusedError):
                    attacker.sparql(query)
            # bif:exec ran SQL as the server's SPARQL account (here: a SPARQL update), sql:
            # calls its stored procedures; both also as IRIs and under a prefix of one's own.
            clear = '"SPARQL CLEAR GRAPH <https://w3id.org/memory-rdf/agent/victim>"'
            for query in (f"SELECT ?x WHERE {{ BIND(bif:exec({clear}) AS ?x) }}",
                          f"SELECT ?x WHERE {{ BIND(<bif:exec>({clear}) AS ?x) }}",
                          f"PREFIX b: <bif:> SELECT ?x WHERE {{ BIND(b:exec({clear}) AS ?x) }}",
                          "SELECT ?x WHERE { BIND(<sql:SPARQL_DELETE_DICT_CONTENT>(1, 2) AS ?x) }"):
                with pytest.raises(QueryRefusedError, match="bif: and sql: functions"):
                    attacker.sparql(query)
            assert "secret" in victim.recall(["secret"])
            assert "hello" in attacker.recall(["hello"])
        finally:
            virtuoso.clear()


# -- an endpoint's answer that never ends -----------------------------------------------------


def test_an_endless_answer_is_cut_off_not_read_into_memory(
    proxied: tuple[str, type[_Proxy]]
) -> None:
    # Before: the answer to the user's query was read whole into memory, also after the
    # caller's timeout had passed: a cross join over a 700-triple agent, streamed by
    # oxigraph serve, grew the process by ~100 MB/s until memory ran out (the MCP server
    # of every agent with it). Now reading stops at the timeout or at 64 MB.
    from memory_rdf import QueryLimitError, QueryTimeoutError

    base, proxy = proxied
    with SparqlEndpoint(f"{base}/query", update_url=f"{base}/update") as ep, MemoryManager(
        "stream", endpoint=ep, config=FAST, model=ScriptedModel()
    ) as mem:
        for timeout in (2.0, None):
            proxy.sent[0] = 0
            proxy.hung_up.clear()
            with pytest.raises((QueryTimeoutError, QueryLimitError)):
                mem.sparql("SELECT ?endless WHERE { ?s ?p ?endless }", timeout=timeout)
            assert proxy.hung_up.wait(30), "the client kept reading"
            assert proxy.sent[0] <= 80 * 2**20
        assert mem.sparql("ASK { }") is True


# -- a query the engine cannot interrupt, from the model ---------------------------------------

RUNAWAY = """
    import resource, sys
    resource.setrlimit(resource.RLIMIT_AS, (3 * 2**29, resource.RLIM_INFINITY))
    from memory_rdf import MemoryManager, QueryLimitError, QueryTimeoutError
    from memory_rdf.tools import call_tool
    from tests.helpers import FAST, ScriptedModel
    with MemoryManager("run", data_dir=sys.argv[1], config=FAST, model=ScriptedModel()) as mem:
        mem.remember([{"role": "user", "content": " | ".join(f"fact {i}" for i in range(30))}])
        assert mem.wait_idle(60)
        query = "SELECT * WHERE { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i } ORDER BY ?a"
        try:
            call_tool(mem, "sparql", {"query": query}, timeout=20)
        except (QueryLimitError, QueryTimeoutError) as exc:
            print("stopped:", type(exc).__name__, exc)
        print("count:", call_tool(mem, "sparql", {"query": "SELECT (COUNT(*) AS ?n) { ?s ?p ?o }"}))
        print("recall:", call_tool(mem, "recall", {"keywords": ["fact 29"]}))
"""


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS bounds memory on Linux")
def test_the_sparql_tool_survives_an_order_by_the_engine_cannot_interrupt(tmp_path: Path) -> None:
    # Before: the tool ran the query in the serving process; Oxigraph sorts a cross join in
    # memory inside one uninterruptible call, so one tool call took every byte it could and
    # aborted the process ("memory allocation failed", exit 134) — the MCP server with it.
    # The child interpreter here has 1.5 GB of address space, as a small machine would.
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(RUNAWAY), str(tmp_path)], capture_output=True,
        text=True, encoding="utf-8", timeout=300, cwd=Path(__file__).resolve().parents[1],
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "stopped: QueryLimitError" in result.stdout or "stopped: QueryTimeoutError" in (
        result.stdout), result.stdout
    assert 'count: [{"n": ' in result.stdout
    assert "recall: [memory " in result.stdout and "] fact 29" in result.stdout


def test_a_query_holding_a_lone_surrogate_is_bad_input_not_a_store_error(tmp_path: Path) -> None:
    # Before: StoreError "cannot read the memory store …: 'utf-8' codec can't encode" — the
    # store blamed for a query JSON can carry ("\ud800"), which MCP clients then reported.
    from memory_rdf.tools import call_tool

    with MemoryManager("sur", data_dir=tmp_path, config=FAST, model=ScriptedModel()) as mem:
        query = 'ASK { FILTER("\ud800" = "x") }'
        with pytest.raises(InvalidInputError, match="valid Unicode"):
            mem.sparql(query)
        with pytest.raises(InvalidInputError, match="valid Unicode"):
            call_tool(mem, "sparql", json.dumps({"query": query}))


# -- memory text in the Graphviz picture --------------------------------------------------------


@pytest.mark.parametrize("content", ["a NUL \x00 in a memory",
                                     "a very long memory " + "word " * 5_000])
def test_any_memory_text_draws_with_graphviz(tmp_path: Path, content: str) -> None:
    # Before: Graphviz refused the whole picture — a NUL ends its quoted string, and a quoted
    # string beyond 16,384 bytes is a syntax error — so one memory a chat (or a model that
    # keeps long segments) put there broke `memory-rdf graph -o x.svg` for the agent.
    import shutil

    from memory_rdf import inspect

    if shutil.which("dot") is None:
        pytest.skip("Graphviz's dot is not installed")
    with MemoryManager("dot", data_dir=tmp_path, config=FAST, model=ScriptedModel()) as mem:
        mem.remember([{"role": "user", "content": content}])
        mem.remember([{"role": "user", "content": "a second memory"}])
    picture = inspect.graph("dot", tmp_path, format="svg")
    assert picture.data.startswith(b"<?xml") and picture.nodes == 2
    dot = inspect.graph("dot", tmp_path, format="dot").data.decode("utf-8")
    assert "\x00" not in dot and max(len(line) for line in dot.splitlines()) < 16_384


# -- Chinese text that jieba's HMM takes quadratic time over ------------------------------------


def test_a_long_run_of_han_characters_reaches_jieba_in_pieces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: a remember of 60,000 repeated Han characters (within max_remember_chars) gave
    # jieba's Viterbi the whole run: quadratic, 14 s at 100,000 on the one scheduler thread,
    # every agent's recall waiting; and each such run stayed cached as a key.
    import jieba.finalseg

    from memory_rdf import HeuristicModel
    from memory_rdf._text import jieba_module, tokenize

    jieba_module()
    seen: list[int] = []
    viterbi = jieba.finalseg.viterbi

    def recording(obs: str, *args: object) -> object:
        seen.append(len(obs))
        return viterbi(obs, *args)

    monkeypatch.setattr(jieba.finalseg, "viterbi", recording)
    run = "我" * 60_000  # single-character words: jieba hands the run to its HMM
    tokenize(run)
    with MemoryManager("han", data_dir=tmp_path, config=FAST, model=HeuristicModel()) as mem:
        mem.remember([{"role": "user", "content": run}])
        assert mem.wait_idle(120)
        assert mem.stats()["nodes"] > 0
    assert max(seen, default=0) <= 500


def test_the_sparql_child_runs_this_package_not_one_in_the_working_directory(
    tmp_path: Path,
) -> None:
    # The child was started as `python -m memory_rdf._sandbox`, which puts the working
    # directory first on the path: serving from a directory where someone could write a
    # memory_rdf/ folder ran their code.
    evil = tmp_path / "cwd" / "memory_rdf"
    evil.mkdir(parents=True)
    for name in ("__init__.py", "_sandbox.py"):
        (evil / name).write_text('raise SystemExit("foreign code ran")\n', encoding="utf-8")
    code = textwrap.dedent("""
        import sys
        from memory_rdf import MemoryManager
        from memory_rdf.tools import call_tool
        with MemoryManager("w", data_dir=sys.argv[1]) as mem:
            print(call_tool(mem, "sparql", {"query": "ASK { }"}))
    """)
    repo = str(Path(__file__).resolve().parents[1])
    result = subprocess.run(
        [sys.executable, "-P", "-c", code, str(tmp_path / "data")], cwd=evil.parent,
        capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": repo},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "true"


def test_the_demo_never_wipes_an_oxigraph_store_it_did_not_write(tmp_path: Path) -> None:
    # Before: `memory-rdf demo` wiped data_dir/demo whenever it held a RocksDB store, also
    # someone's own Oxigraph database (which every other command refuses as foreign).
    import pyoxigraph

    own = pyoxigraph.Store(str(tmp_path / "demo"))
    own.add(pyoxigraph.Quad(pyoxigraph.NamedNode("urn:a"), pyoxigraph.NamedNode("urn:b"),
                            pyoxigraph.Literal("precious")))
    own.flush()
    del own
    result = subprocess.run([memory_rdf_command(), "demo", "--data-dir", str(tmp_path)],
                            capture_output=True, text=True, encoding="utf-8", timeout=300)
    assert result.returncode == 1 and "did not write" in result.stderr, result.stderr
    kept = pyoxigraph.Store.read_only(str(tmp_path / "demo"))
    assert [str(q.object) for q in kept] == ['"precious"']


# -- the MCP server opening one store per agent id ---------------------------------------------


@pytest.mark.skipif(sys.platform != "linux", reason="sets the limit with the shell's ulimit")
def test_the_mcp_server_serves_many_agents_under_a_low_open_files_limit(tmp_path: Path) -> None:
    # Before: every agent id a client names opens a store (~18 files) that stays open; with
    # the soft limit of 256 that macOS gives apps starting MCP servers, the 14th agent failed
    # with "Too many open files". `serve` now raises its soft limit to the hard one.
    import anyio
    from mcp import Client, StdioServerParameters

    command = (f"ulimit -Sn 256 && exec {shlex.quote(memory_rdf_command())} serve "
               f"--data-dir {shlex.quote(str(tmp_path))}")
    checkout = str(Path(__file__).resolve().parent.parent)  # the code under test
    params = StdioServerParameters(command="/bin/sh", args=["-c", command],
                                   env={**os.environ, "PYTHONPATH": checkout,
                                        "MEMORY_RDF_MODEL": "heuristic"})
    errors: list[str] = []

    async def main() -> None:
        async with Client(params) as client:
            for i in range(40):  # only remember creates an agent (SPEC §9 v3)
                for name, arguments in (
                        ("remember", {"messages": [{"role": "user", "content": f"hi {i}"}]}),
                        ("stats", {})):
                    result = await client.call_tool(name, {**arguments, "agent_id": f"agent{i}"})
                    if result.is_error:
                        errors.append(str(result.content[0].text))

    anyio.run(main)
    assert errors == []
    # the 40 named; the default agent, which no call used, is not made (README, SPEC §9)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [*(f"agent{i}" for i in range(40)), "~locks"])


def test_a_password_in_a_model_url_is_sent_but_never_shown(
    recording: tuple[str, type[_Recording]]
) -> None:
    # Before: OllamaModel("m", base_url="http://ann:s3cret@host") put the password in repr()
    # and in every ModelError ("cannot reach http://ann:s3cret@…"), which the manager logs and
    # keeps as stats()["model_last_error"] (shown by the MCP stats tool).
    from memory_rdf import PermanentModelError
    from memory_rdf.small_model import OllamaModel

    host, handler = recording
    with OllamaModel("m", base_url=f"http://ann:s3cret@{host}", timeout=10) as model:
        assert "s3cret" not in repr(model)
        with pytest.raises(PermanentModelError, match="refused the credentials") as refused:
            model.segment("user: hello")
        assert "s3cret" not in str(refused.value)
    assert handler.seen == ["Basic " + base64.b64encode(b"ann:s3cret").decode()]
    with pytest.raises(InvalidInputError, match="credentials once"):
        OpenAIModel("m", base_url=f"http://ann:s3cret@{host}/v1", api_key="sk-1")
