"""The edges of the tools (SPEC §9 v3): a read tool on an agent that has no memory is an error
naming it, never a new agent (only remember creates one), and an answer from the default agent
says which agent it was. Through ``call_tool`` on embedded and endpoint systems, and through the
official MCP client over stdio."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from memory_rdf import MemoryManager, MemorySystem, UnknownAgentError, inspect
from memory_rdf.tools import NOTHING_RECALLED, call_tool

from helpers import FAST, ScriptedModel, memory_rdf_command, remember
from servers import Server

REPO = Path(__file__).resolve().parent.parent
#: Spawned processes import the checkout under test (as in test_mcp).
CHECKOUT = {"PYTHONPATH": os.pathsep.join(filter(None, [str(REPO),
                                                        os.environ.get("PYTHONPATH")]))}
MESSAGES = [{"role": "user", "content": "We decided to keep the orders in PostgreSQL"}]

#: Every tool but remember, with arguments it accepts.
READS: dict[str, dict[str, Any]] = {
    "recall": {"keywords": ["cat"]},
    "memories": {},
    "stats": {},
    "sparql": {"query": "ASK { ?s ?p ?o }"},
    "forget": {"ids": ["0123456789abcdef0123456789abcdef"]},
}


def _say(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


@pytest.fixture
def endpoint_system(oxigraph_server: Server) -> Any:
    with oxigraph_server.endpoint() as ep, \
            MemorySystem(endpoint=ep, model=ScriptedModel(), config=FAST) as system:
        yield system
    oxigraph_server.clear()


def test_read_tools_on_an_unknown_agent_are_an_error_and_create_nothing(tmp_path: Path) -> None:
    data_dir = tmp_path / "memory_data"
    with MemorySystem(data_dir=data_dir, model=ScriptedModel(), config=FAST) as system:
        for name, arguments in READS.items():
            # the default agent too: no call made it yet
            with pytest.raises(UnknownAgentError, match="no agent 'default' in .*memory_data"):
                call_tool(system, name, arguments)
        assert not data_dir.exists() or list(data_dir.iterdir()) == []
        call_tool(system, "remember", {**_say("My cat is called Miso"), "agent_id": "alice"})
        call_tool(system, "remember", {**_say("Tea, no sugar"), "agent_id": "bob"})
        for name, arguments in READS.items():
            with pytest.raises(UnknownAgentError) as caught:
                call_tool(system, name, {**arguments, "agent_id": "alcie"})
            message = str(caught.value)
            assert "no agent 'alcie'" in message and "did you mean 'alice'?" in message
            assert "known agents: 'alice', 'bob'" in message
        # an allow-list: the agents outside it are never named
        with pytest.raises(UnknownAgentError) as caught:
            call_tool(system, "recall", {"keywords": [], "agent_id": "carol"},
                      agents=["alice", "carol"], default_agent="alice")
        assert "'bob'" not in str(caught.value) and "'alice'" in str(caught.value)
        assert system.agent("alice").wait_idle(30)
        recalled = call_tool(system, "recall", {"keywords": ["cat"], "agent_id": "alice"})
        assert "Miso" in recalled
    assert sorted(p.name for p in data_dir.iterdir() if not p.name.startswith("~")) == [
        "alice", "bob"]


def test_read_tools_on_an_unknown_endpoint_agent_are_an_error(endpoint_system: Any,
                                                              oxigraph_server: Server) -> None:
    system = endpoint_system
    with pytest.raises(UnknownAgentError, match=r"no agent 'ghost' on http://127\.0\.0\.1:"):
        call_tool(system, "stats", {"agent_id": "ghost"})
    call_tool(system, "remember", {**_say("My cat is called Miso"), "agent_id": "alice"})
    for name, arguments in READS.items():
        with pytest.raises(UnknownAgentError, match="known agents: 'alice'"):
            call_tool(system, name, {**arguments, "agent_id": "ghost"})
    assert system.agents() == ["alice"]
    # an agent with memory on the endpoint, not yet open in this process, is found there
    with oxigraph_server.endpoint() as ep, \
            MemorySystem(endpoint=ep, model=ScriptedModel(), config=FAST) as fresh:
        system.agent("alice").close()
        assert json.loads(call_tool(fresh, "stats", {"agent_id": "alice"}))["nodes"] == 1


def test_an_answer_from_the_default_agent_names_it(tmp_path: Path) -> None:
    with MemorySystem(data_dir=tmp_path, model=ScriptedModel(), config=FAST) as system:
        call_tool(system, "remember", _say("My cat is called Miso"), default_agent="bot")
        assert system.agent("bot").wait_idle(30)
        text = call_tool(system, "recall", {"keywords": ["Miso"], "entry": "both"},
                         default_agent="bot")
        first, _, rest = text.partition("\n")
        assert first == "(agent: bot)" and "My cat is called Miso" in rest
        assert call_tool(system, "recall", {"keywords": ["nothing-like-it"]},
                         default_agent="bot") == f"(agent: bot)\n{NOTHING_RECALLED}"
        listed = json.loads(call_tool(system, "memories", {}, default_agent="bot"))
        assert listed["agent_id"] == "bot"
        assert [m["content"] for m in listed["memories"]] == ["My cat is called Miso"]
        asked = json.loads(call_tool(system, "sparql", {"query": "ASK { ?n a memory:Node }"},
                                     default_agent="bot"))
        assert asked == {"agent_id": "bot", "result": True}
        assert json.loads(call_tool(system, "stats", {}, default_agent="bot"))["agent_id"] == "bot"
        forgot = json.loads(call_tool(system, "forget", {"ids": [listed["memories"][0]["id"]]},
                                      default_agent="bot"))
        assert forgot == {"agent_id": "bot", "forgotten": 1, "purge": False}
        # naming the agent: the answers as before
        assert json.loads(call_tool(system, "memories", {"agent_id": "bot"})) == []
        assert call_tool(system, "recall", {"keywords": ["Miso"], "agent_id": "bot"}) == \
            NOTHING_RECALLED


def test_mcp_read_tools_on_an_unknown_agent_are_tool_errors(tmp_path: Path) -> None:
    data_dir = tmp_path / "memory_data"
    params = StdioServerParameters(
        command=memory_rdf_command(),
        args=["serve", "--data-dir", str(data_dir), "--agents", "alice,bob,secret_c",
              "--agent", "alice"],
        env={"MEMORY_RDF_MODEL": "heuristic", **CHECKOUT},
    )
    (data_dir / "zed").mkdir(parents=True)  # a directory that holds no store

    async def main() -> None:
        async with Client(params) as client:
            for name, arguments in READS.items():
                refused = await client.call_tool(name, {**arguments, "agent_id": "bob"})
                assert refused.is_error, name
                assert "no agent 'bob'" in refused.content[0].text  # type: ignore[union-attr]
            ack = await client.call_tool("remember", {"messages": MESSAGES})
            assert json.loads(ack.content[0].text)["agent_id"] == "alice"  # type: ignore[union-attr]
            refused = await client.call_tool("stats", {"agent_id": "bob"})
            text = refused.content[0].text  # type: ignore[union-attr]
            assert refused.is_error and "known agents: 'alice'" in text
            recalled = await client.call_tool("recall", {"keywords": ["PostgreSQL"]})
            text = recalled.content[0].text  # type: ignore[union-attr]
            assert text.startswith("(agent: alice)\n") and "PostgreSQL" in text

    anyio.run(main)
    assert sorted(p.name for p in data_dir.iterdir()) == ["alice", "zed", "~locks"]


# -- memory-rdf recall while another process holds the agent (SPEC §6 v3) ------------------------

TRIP = ("We fly to Osaka on May 3rd, then take the train to Kyoto.",
        "Budget: keep it under 6,000 euros for the whole trip.",
        "In Kyoto we stay at a ryokan near Gion, three nights.",
        "Update: the budget goes up to 7,500 euros.")


def _recall_cli(agent: str, *args: str, where: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **CHECKOUT, "MEMORY_RDF_MODEL": "heuristic"}
    return subprocess.run([memory_rdf_command(), "recall", agent, *args, *where],
                          capture_output=True, text=True, encoding="utf-8", env=env, timeout=120)


def _held_and_recalled(mem: MemoryManager, where: list[str]) -> None:
    """With ``mem`` open here (it holds the agent), ``memory-rdf recall`` in another process
    answers what ``mem.recall`` answers, for each entry."""
    remember(mem, *TRIP)
    assert mem.wait_idle(30)
    assert "7,500" in mem.recall(["budget"], entry="both")
    for entry in ("focus", "keywords", "both"):
        for keywords in (["budget"], ["Kyoto", "stay"], []):
            live = mem.recall(keywords, entry=entry)
            run = _recall_cli(mem.agent_id, *keywords, "--entry", entry, where=where)
            assert run.returncode == 0, run.stderr
            assert run.stdout == (live + "\n" if live else ""), (entry, keywords)
    english = _recall_cli(mem.agent_id, "budget", "--entry", "both", "--max-chars", "80",
                          "--english", where=where)
    assert english.returncode == 0 and "euros" in english.stdout, english.stderr


def test_cli_recall_works_while_another_process_holds_the_agent(tmp_path: Path) -> None:
    data_dir = tmp_path / "memory_data"
    with MemoryManager("trip", data_dir=data_dir, config=FAST, model=ScriptedModel()) as mem:
        _held_and_recalled(mem, ["--data-dir", str(data_dir)])
        # the Python form of the same: a snapshot, as the live recall
        assert inspect.recall("trip", ["budget"], data_dir, entry="both") == \
            mem.recall(["budget"], entry="both")
        unknown = _recall_cli("trp", "budget", where=["--data-dir", str(data_dir)])
        assert unknown.returncode == 2 and "unknown agent 'trp'" in unknown.stderr
    assert sorted(p.name for p in data_dir.iterdir() if not p.name.startswith("~")) == ["trip"]


def test_cli_recall_works_while_another_process_holds_an_endpoint_agent(
    oxigraph_server: Server,
) -> None:
    where = ["--endpoint", oxigraph_server.query_url, "--update-url", oxigraph_server.update_url]
    try:
        with oxigraph_server.endpoint() as ep, \
                MemoryManager("trip", endpoint=ep, config=FAST, model=ScriptedModel()) as mem:
            _held_and_recalled(mem, where)  # the lease is held here all along
    finally:
        oxigraph_server.clear()


class _SlowOffThread(ScriptedModel):
    """A scripted model whose calls run in the model-call threads and take a while: a
    remember is still journalled when its agent closes with a short timeout."""

    calls_off_thread = True


def test_a_read_only_recall_leaves_a_journalled_remember_it_would_refuse_alone(
    data_dir: Path,
) -> None:
    """`inspect.recall` (what `memory-rdf recall` runs) opens a snapshot: a pending remember
    that its Config would refuse (here: longer than its max_remember_chars) is neither marked
    failed (a write on a read-only store: it raised StoreError) nor processed; the holder's
    next open runs it."""
    long_text = "the budget review is on Monday " * 20  # 620 characters
    with MemoryManager("trip", data_dir=data_dir, config=FAST, model=ScriptedModel()) as mem:
        remember(mem, "the hotel in Kyoto is booked")
    slow = MemoryManager("trip", data_dir=data_dir, config=FAST,
                         model=_SlowOffThread(delay=3.0))
    slow.initialize()
    slow.remember([{"role": "user", "content": long_text}])
    slow.close(timeout=0.3)  # the segmentation call is in flight: the remember stays journalled
    small = FAST.replace(max_remember_chars=100)
    assert "hotel in Kyoto" in inspect.recall("trip", ["hotel"], data_dir, entry="both",
                                              config=small)
    (task,) = inspect.tasks("trip", data_dir)
    assert task["status"] == "pending"
    with MemoryManager("trip", data_dir=data_dir, config=FAST, model=ScriptedModel()) as mem:
        assert mem.wait_idle(timeout=30)
        assert any("budget review" in m["content"] for m in mem.memories(limit=None))
