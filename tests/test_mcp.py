"""memory-rdf serve: the MCP server in real processes, driven by the official SDK's own client
over stdio and over streamable HTTP on loopback (SPEC §9)."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from helpers import memory_rdf_command

REPO = Path(__file__).resolve().parent.parent
#: Spawned servers import the checkout under test, even when the install is not editable.
CHECKOUT = {"PYTHONPATH": os.pathsep.join(filter(None, [str(REPO),
                                                        os.environ.get("PYTHONPATH")]))}
TOKEN = "test-token-0123456789"
NAMES = {"remember", "recall", "memories", "forget", "pin", "stats", "sparql"}
MESSAGES = [{"role": "user", "content": "我们决定用 PostgreSQL 存订单数据"},
            {"role": "assistant", "content": "好的，JWT 登录由张伟负责"}]


def _run(fn: Callable[[], Awaitable[None]]) -> None:
    anyio.run(fn)


def _text(result: Any) -> str:
    assert len(result.content) == 1
    return str(result.content[0].text)


async def _exercise(client: Client) -> None:
    """What every transport must do: list the tools, remember, recall, route by agent_id,
    answer bad arguments with tool errors and keep serving."""
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) >= NAMES
    recall_schema = tools["recall"].input_schema
    assert recall_schema["required"] == ["keywords"]
    assert "agent_id" in recall_schema["properties"]
    assert tools["recall"].annotations.read_only_hint is True
    assert tools["remember"].annotations.read_only_hint is False

    ack = await client.call_tool("remember", {"messages": MESSAGES})
    assert not ack.is_error
    assert json.loads(_text(ack)) == {"status": "accepted", "agent_id": "default", "messages": 2}

    # A bad argument is a tool error naming it; the very next call works.
    bad = await client.call_tool("recall", {"keywords": ["JWT"], "depth": -1})
    assert bad.is_error and "depth" in _text(bad)
    wrong_type = await client.call_tool("recall", {"keywords": "JWT"})
    assert wrong_type.is_error and "keywords" in _text(wrong_type)
    unknown = await client.call_tool("dream", {})
    assert unknown.is_error and "unknown tool" in _text(unknown)
    broken_query = await client.call_tool("sparql", {"query": "SELEC ?x"})
    assert broken_query.is_error

    good = await client.call_tool("recall", {"keywords": ["JWT"]})
    assert not good.is_error
    assert "JWT 登录由张伟负责" in _text(good)
    timed = await client.call_tool("recall", {"keywords": ["JWT"], "until": "2000-01-01"})
    assert _text(timed) == "(agent: default)\n(nothing recalled)"  # the default agent named

    rows = json.loads(_text(await client.call_tool(
        "sparql", {"query": "SELECT (COUNT(?n) AS ?nodes) WHERE { ?n a memory:Node }"})))
    stats = json.loads(_text(await client.call_tool("stats", {})))
    assert rows == {"agent_id": "default", "result": [{"nodes": stats["nodes"]}]}
    assert stats["nodes"] >= 1 and stats["agent_id"] == "default"

    # Pin (SPEC §9 v3): a write, not destructive; memories says it; unpin undoes it.
    assert tools["pin"].annotations.read_only_hint is False
    assert tools["pin"].annotations.destructive_hint is False
    kept = json.loads(_text(await client.call_tool(
        "memories", {"keywords": ["PostgreSQL"]})))["memories"][0]
    pinned = await client.call_tool("pin", {"ids": [kept["id"]]})
    assert json.loads(_text(pinned)) == {"agent_id": "default", "pinned": 1}
    listed = json.loads(_text(await client.call_tool(
        "memories", {"keywords": ["PostgreSQL"]})))["memories"]
    assert [m["pinned"] for m in listed] == [m["id"] == kept["id"] for m in listed]
    bad_pin = await client.call_tool("pin", {"ids": kept["id"]})
    assert bad_pin.is_error and "ids" in _text(bad_pin)
    unpinned = await client.call_tool("pin", {"ids": [kept["id"]], "unpin": True})
    assert json.loads(_text(unpinned)) == {"agent_id": "default", "unpinned": 1}

    # Forget on request: list, forget by id, gone from recall; the server keeps serving.
    assert tools["forget"].annotations.destructive_hint is True
    listed = json.loads(_text(await client.call_tool("memories", {"keywords": ["张伟"]})))
    assert listed["agent_id"] == "default"
    listed = listed["memories"]
    assert listed and all("张伟" in m["content"] for m in listed)
    bad_forget = await client.call_tool("forget", {"ids": "all"})
    assert bad_forget.is_error and "ids" in _text(bad_forget)
    done = await client.call_tool("forget", {"ids": [m["id"] for m in listed]})
    assert json.loads(_text(done)) == {"agent_id": "default", "forgotten": len(listed),
                                       "purge": False}
    assert "张伟" not in _text(await client.call_tool("recall", {"keywords": ["张伟"],
                                                                "entry": "both"}))

    # Another agent through agent_id: none yet, so a tool error naming it (SPEC §9 v3)…
    other = await client.call_tool("recall", {"keywords": ["JWT"], "agent_id": "other"})
    assert other.is_error and "no agent 'other'" in _text(other)
    # …until a remember creates it: its own memory.
    await client.call_tool("remember", {"messages": MESSAGES[:1], "agent_id": "other"})
    other = await client.call_tool("recall", {"keywords": ["JWT"], "agent_id": "other"})
    assert _text(other) == "(nothing recalled)"
    bad_agent = await client.call_tool("stats", {"agent_id": "../escape"})
    assert bad_agent.is_error and "agent_id" in _text(bad_agent)


# -- stdio --------------------------------------------------------------------------------------


def test_stdio_server_spawned_by_the_sdk_client(tmp_path: Path) -> None:
    data_dir = tmp_path / "memory_data"
    params = StdioServerParameters(
        command=memory_rdf_command(), args=["serve", "--data-dir", str(data_dir)],
        env={"MEMORY_RDF_MODEL": "heuristic", **CHECKOUT},
    )

    async def main() -> None:
        async with Client(params) as client:
            await _exercise(client)

    _run(main)
    assert (data_dir / "default").is_dir() and (data_dir / "other").is_dir()
    assert not (tmp_path / "escape").exists()


def test_an_agent_is_opened_when_a_call_first_uses_it(tmp_path: Path) -> None:
    """README: an agent first named by a call is created — the default agent too. A server
    that no call has used holds no agent (it made and locked ``default`` at start), so a
    second server on the same data directory starts, and each serves the agents its calls
    use; the default agent, held by the first, is a tool error in the second."""
    data_dir = tmp_path / "memory_data"
    params = StdioServerParameters(
        command=memory_rdf_command(), args=["serve", "--data-dir", str(data_dir)],
        env={"MEMORY_RDF_MODEL": "heuristic", **CHECKOUT},
    )

    async def main() -> None:
        async with Client(params) as first:
            assert {t.name for t in (await first.list_tools()).tools} >= NAMES
            assert not (data_dir / "default").exists()
            async with Client(params) as second:  # the same data directory
                ack = await first.call_tool("remember", {"messages": MESSAGES[:1]})
                assert json.loads(_text(ack))["agent_id"] == "default"
                assert (data_dir / "default").is_dir()
                held = await second.call_tool("stats", {})
                assert held.is_error and "held by another process" in _text(held), _text(held)
                await second.call_tool("remember", {"messages": MESSAGES[:1],
                                                    "agent_id": "other"})
                other = await second.call_tool("stats", {"agent_id": "other"})
                assert json.loads(_text(other))["agent_id"] == "other"

    _run(main)


def test_a_call_waiting_on_a_model_that_is_down_is_a_tool_error(tmp_path: Path) -> None:
    """The model server is unreachable (a closed loopback port): remember is accepted and
    journalled, a recall behind it answers a tool error within --timeout saying why, and the
    server keeps answering."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    params = StdioServerParameters(
        command=memory_rdf_command(),
        args=["serve", "--data-dir", str(tmp_path / "memory_data"), "--timeout", "1"],
        env={"MEMORY_RDF_MODEL": "ollama:absent-model", **CHECKOUT,
             "MEMORY_RDF_MODEL_URL": f"http://127.0.0.1:{closed_port}"},
    )

    async def main() -> None:
        async with Client(params) as client:
            ack = await client.call_tool("remember", {"messages": MESSAGES})
            assert not ack.is_error
            waited = await client.call_tool("recall", {"keywords": ["JWT"]})
            assert waited.is_error and "timed out" in _text(waited), _text(waited)
            stats = json.loads(_text(await client.call_tool("stats", {})))
            assert stats["pending_tasks"] >= 1 and stats["nodes"] == 0

    _run(main)


# -- HTTP ---------------------------------------------------------------------------------------


@contextmanager
def _http_server(data_dir: Path, *args: str, token: str | None = TOKEN,
                 extra_env: dict[str, str] | None = None,
                 first_line: list[str] | None = None) -> Iterator[str]:
    """``memory-rdf serve --transport http`` on a free loopback port; yields its URL (and
    appends the startup line to ``first_line``)."""
    env = {**os.environ, **CHECKOUT, "MEMORY_RDF_MODEL": "heuristic", **(extra_env or {})}
    env.pop("MEMORY_RDF_TOKEN", None)
    if token is not None:
        env["MEMORY_RDF_TOKEN"] = token
    proc = subprocess.Popen(
        [memory_rdf_command(), "serve", "--transport", "http", "--port", "0",
         "--data-dir", str(data_dir), *args],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        found = re.search(r"(http://127\.0\.0\.1:\d+/mcp)", line)
        assert found, f"no URL in {line!r} (exit {proc.poll()}): {proc.stderr.read()}"
        if first_line is not None:
            first_line.append(line)
        yield found.group(1)
    finally:
        proc.terminate()
        try:
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:  # pragma: no cover
            proc.kill()
            raise
        rest = proc.stderr.read() if proc.stderr else ""
        if proc.stderr:
            proc.stderr.close()
    assert code == 0, f"server exited {code} after SIGTERM: {rest}"
    assert "Traceback" not in rest, rest


async def _with_client(url: str, token: str | None, body: Callable[[Client], Awaitable[None]]
                       ) -> None:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else None
    async with (
        create_mcp_http_client(headers=headers) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        await body(client)


def _post_initialize(url: str, headers: dict[str, str]) -> httpx.Response:
    payload = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"}}}
    return httpx.post(url, json=payload, timeout=10, headers={
        "Accept": "application/json, text/event-stream", **headers})


def test_http_server_with_token(tmp_path: Path) -> None:
    data_dir = tmp_path / "memory_data"
    with _http_server(data_dir) as url:
        _run(lambda: _with_client(url, TOKEN, _exercise))

        # Every request is checked: a wrong or missing token is 401 before MCP sees it…
        for headers in ({"Authorization": "Bearer wrong-token"}, {},
                        {"Authorization": f"Basic {TOKEN}"},
                        {"Authorization": f"Bearer {TOKEN}x"}):
            response = _post_initialize(url, headers)
            assert response.status_code == 401, headers
            assert response.headers["www-authenticate"].startswith("Bearer")
        assert _post_initialize(url, {"Authorization": f"Bearer {TOKEN}"}).status_code == 200
        assert httpx.get(url.replace("/mcp", "/anything"), timeout=10).status_code == 401

        # …and the SDK client with a wrong or no token cannot connect.
        async def never(client: Client) -> None:  # pragma: no cover
            raise AssertionError("connected without the right token")

        for token in ("wrong-token", None):
            with pytest.raises((MCPError, ExceptionGroup)) as caught:
                _run(lambda token=token: _with_client(url, token, never))
            assert "AssertionError" not in repr(caught.value)

        # The server still serves the right token afterwards, with the memory kept.
        async def still(client: Client) -> None:
            result = await client.call_tool("recall", {"keywords": ["PostgreSQL"]})
            assert "PostgreSQL" in _text(result)

        _run(lambda: _with_client(url, TOKEN, still))


def test_http_server_on_loopback_without_token(tmp_path: Path) -> None:
    with _http_server(tmp_path / "memory_data", "--agent", "bot", token=None) as url:
        async def body(client: Client) -> None:
            ack = await client.call_tool("remember", {"messages": MESSAGES[:1]})
            assert json.loads(_text(ack))["agent_id"] == "bot"

        _run(lambda: _with_client(url, None, body))
        # DNS-rebinding protection: a foreign Host header is refused on a loopback server.
        response = _post_initialize(url, {"Host": "evil.example"})
        assert response.status_code in (400, 421), response.status_code


# -- --agents: the allow-list --------------------------------------------------------------------


async def _only_alice_and_bob(client: Client, default: str) -> None:
    """A server run with the allow-list alice, bob: the schema lists them, they work, any other
    id is a tool error (and the server keeps serving)."""
    for tool in (await client.list_tools()).tools:
        agent_id = tool.input_schema["properties"]["agent_id"]
        assert agent_id["enum"] == ["alice", "bob"], tool.name
        assert agent_id["default"] == default
    ack = await client.call_tool("remember", {"messages": MESSAGES[:1]})
    assert json.loads(_text(ack))["agent_id"] == default
    other = "bob" if default == "alice" else "alice"
    await client.call_tool("remember", {"messages": MESSAGES[:1], "agent_id": other})
    stats = await client.call_tool("stats", {"agent_id": other})
    assert not stats.is_error and json.loads(_text(stats))["agent_id"] == other
    for name, arguments in (("remember", {"messages": MESSAGES}), ("recall", {"keywords": []}),
                            ("sparql", {"query": "ASK { ?s ?p ?o }"}), ("stats", {}),
                            ("forget", {"ids": ["x"], "purge": True})):
        for intruder in ("eve", "../escape", "default"):
            refused = await client.call_tool(name, {**arguments, "agent_id": intruder})
            assert refused.is_error, (name, intruder)
            assert (f"agent_id {intruder!r} is not served here: the agent ids are "
                    "'alice', 'bob'") in _text(refused)
    recalled = await client.call_tool("recall", {"keywords": ["PostgreSQL"]})
    assert "PostgreSQL" in _text(recalled)


def test_stdio_server_serves_only_the_listed_agents(tmp_path: Path) -> None:
    data_dir = tmp_path / "memory_data"
    params = StdioServerParameters(
        command=memory_rdf_command(),
        args=["serve", "--agents", "alice,bob", "--agents", "alice", "--data-dir",
              str(data_dir)],
        env={"MEMORY_RDF_MODEL": "heuristic", **CHECKOUT},
    )

    async def main() -> None:
        async with Client(params) as client:  # no --agent: the first listed is the default
            await _only_alice_and_bob(client, "alice")

    _run(main)
    assert sorted(p.name for p in data_dir.iterdir()) == ["alice", "bob", "~locks"]
    assert not (tmp_path / "escape").exists()


def test_http_server_serves_only_the_agents_of_the_environment(tmp_path: Path) -> None:
    data_dir = tmp_path / "memory_data"
    line: list[str] = []
    with _http_server(data_dir, "--agent", "bob", extra_env={"MEMORY_RDF_AGENTS": "alice bob"},
                      first_line=line) as url:
        _run(lambda: _with_client(url, TOKEN, lambda c: _only_alice_and_bob(c, "bob")))
    assert "only agents 'alice', 'bob'; 'bob' by default" in line[0], line
    assert sorted(p.name for p in data_dir.iterdir()) == ["alice", "bob", "~locks"]


def test_agents_are_checked_before_anything_is_opened(tmp_path: Path) -> None:
    data_dir = tmp_path / "d"
    cases = [
        (["--agents", "alice,bob", "--agent", "carol"], "'carol' is not among"),
        (["--agents", "alice,../x"], "'../x' is invalid"),
        (["--agents", "alice,,bob"], "empty agent id"),
        (["--agents", ""], "empty agent id"),
        (["--agents", "alice", "--agent", "../x"], "'../x' is invalid"),
    ]
    for args, message in cases:
        result = _serve(*args, "--data-dir", str(data_dir))
        assert result.returncode == 2, (args, result.stderr)
        assert message in result.stderr and "Traceback" not in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    environment = _serve("--data-dir", str(data_dir), env={"MEMORY_RDF_AGENTS": "a,../x"})
    assert environment.returncode == 2 and "'../x' is invalid" in environment.stderr
    assert not data_dir.exists() and not (tmp_path / "x").exists()


# -- refusals -----------------------------------------------------------------------------------


def _serve(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != "MEMORY_RDF_TOKEN"}
    return subprocess.run([memory_rdf_command(), "serve", *args], capture_output=True,
                          text=True, timeout=60, env={**environ, **CHECKOUT, **(env or {})})


def test_binding_beyond_loopback_needs_a_token(tmp_path: Path) -> None:
    for host in ("0.0.0.0", "192.0.2.7", "example.org", "::"):
        result = _serve("--transport", "http", "--host", host,
                        "--data-dir", str(tmp_path / "d"))
        assert result.returncode == 2, result.stderr
        assert "--token" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "d").exists()  # refused before any store was opened


def test_a_port_in_use_is_named_in_one_line(tmp_path: Path) -> None:
    """It said only "error: [Errno 98] Address already in use"."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = _serve("--transport", "http", "--port", str(port),
                        "--data-dir", str(tmp_path / "d"))
    assert result.returncode == 1, result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error: cannot listen on 127.0.0.1:{port}: "), line
    assert "in use" in line and "Errno" not in line, line
    assert not (tmp_path / "d").exists()  # no agent was opened for it


def test_host_port_and_token_apply_to_http_only(tmp_path: Path) -> None:
    result = _serve("--token", TOKEN, "--data-dir", str(tmp_path / "d"))
    assert result.returncode == 2 and "--transport http" in result.stderr
    result = _serve("--transport", "http", "--token", "has space",
                    "--data-dir", str(tmp_path / "d"))
    assert result.returncode == 2 and "token" in result.stderr


def test_serve_help_has_examples() -> None:
    result = _serve("--help")
    assert result.returncode == 0
    assert "Examples:" in result.stdout
    assert "memory-rdf serve --transport http" in result.stdout
    assert "MEMORY_RDF_TOKEN" in result.stdout
    assert "memory-rdf serve --agents " in result.stdout and "MEMORY_RDF_AGENTS" in result.stdout


def test_missing_sdk_is_a_clear_message(tmp_path: Path) -> None:
    """An environment without the mcp package (simulated by a stand-in that fails to import,
    first on the path): one line saying what to install, no traceback."""
    fake = tmp_path / "fake" / "mcp"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('No module named mcp (test stand-in)')\n")
    env = {"PYTHONPATH": str(tmp_path / "fake")}
    result = _serve("--data-dir", str(tmp_path / "d"), env=env)
    assert result.returncode == 3
    assert 'pip install "memory-rdf[mcp]"' in result.stderr
    assert "Traceback" not in result.stderr
    # The rest of the command line does not need the SDK.
    other = subprocess.run([memory_rdf_command(), "--help"], capture_output=True, text=True,
                           timeout=60, env={**os.environ, **env})
    assert other.returncode == 0 and "serve" in other.stdout
    assert sys.executable  # the tests run the script installed next to this interpreter
