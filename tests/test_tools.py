"""memory_rdf.tools: function-calling schemas for OpenAI and Anthropic, and call_tool (SPEC §9)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import jsonschema
import pytest

from memory_rdf import (
    InvalidInputError,
    InvalidTypeError,
    MemoryManager,
    MemorySystem,
    QueryLimitError,
    SparqlError,
    UpdateRefusedError,
    inspect,
)
from memory_rdf.tools import NOTHING_RECALLED, anthropic_tools, call_tool, openai_tools, tool_names

from helpers import FAST, ScriptedModel, undated
from servers import Server

NAMES = ["remember", "recall", "memories", "forget", "pin", "stats", "sparql"]
# Both APIs: ^[a-zA-Z0-9_-]{1,64}$ for a function/tool name.
NAME_RULE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def _schemas() -> list[dict[str, object]]:
    return [t["input_schema"] for t in anthropic_tools()]


def test_every_tool_is_listed_in_both_formats() -> None:
    assert tool_names() == NAMES
    assert [t["function"]["name"] for t in openai_tools()] == tool_names()
    assert [t["name"] for t in anthropic_tools()] == tool_names()


@pytest.mark.parametrize("include_agent_id", [True, False])
def test_schemas_are_valid_json_schema_with_described_arguments(include_agent_id: bool) -> None:
    for tool in anthropic_tools(include_agent_id=include_agent_id):
        assert NAME_RULE.match(tool["name"])
        assert len(tool["description"]) >= 80  # enough for a model to choose well
        schema = tool["input_schema"]
        jsonschema.Draft202012Validator.check_schema(schema)
        jsonschema.Draft7Validator.check_schema(schema)
        assert schema["type"] == "object"
        assert schema["additionalProperties"] is False
        assert set(schema.get("required", [])) <= set(schema["properties"])
        for name, prop in schema["properties"].items():
            assert prop.get("description"), f"{tool['name']}.{name} has no description"
        assert ("agent_id" in schema["properties"]) is include_agent_id


def test_openai_format_exactly() -> None:
    for chat, responses, anthropic in zip(
        openai_tools(), openai_tools(api="responses"), anthropic_tools(), strict=True
    ):
        assert set(chat) == {"type", "function"} and chat["type"] == "function"
        assert set(chat["function"]) == {"name", "description", "parameters"}
        assert chat["function"]["parameters"] == anthropic["input_schema"]
        assert set(responses) == {"type", "name", "description", "parameters"}
        assert responses["type"] == "function"
        assert responses["parameters"] == anthropic["input_schema"]
        json.dumps(chat)  # what the SDKs send must be plain JSON
    with pytest.raises(InvalidInputError, match="api"):
        openai_tools(api="assistants")


def test_anthropic_format_exactly() -> None:
    for tool in anthropic_tools():
        assert set(tool) == {"name", "description", "input_schema"}


def test_schemas_accept_what_call_tool_accepts_and_refuse_the_rest() -> None:
    by_name = {t["name"]: t["input_schema"] for t in anthropic_tools()}
    good = {
        "remember": {"messages": [{"role": "user", "content": "hi",
                                   "timestamp": "2026-11-24T09:30:00Z"}]},
        "recall": {"keywords": ["JWT"], "depth": 2, "entry": "both", "agent_id": "bot",
                   "limit": 5, "max_chars": 500, "since": "2026-11-01T00:00:00Z"},
        "memories": {"keywords": ["JWT"], "since": "2026-11-01", "limit": 10, "offset": 0},
        "forget": {"ids": ["0123abcd"], "purge": True},
        "pin": {"ids": ["0123abcd"], "unpin": True},
        "stats": {},
        "sparql": {"query": "ASK { ?s ?p ?o }"},
    }
    bad = {
        "memories": {"limit": 0},
        "forget": {"ids": []},
        "pin": {"ids": ["0123abcd"], "unpin": "yes"},
        "remember": {"messages": [{"role": "robot", "content": "hi"}]},
        "recall": {"keywords": "JWT"},
        "stats": {"verbose": True},
        "sparql": {},
    }
    for name in NAMES:
        jsonschema.validate(good[name], by_name[name])
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad[name], by_name[name])


def test_a_message_s_other_keys_are_ignored_by_schema_call_tool_and_remember(
    mem: MemoryManager
) -> None:
    """remember() ignores a message's keys other than role, content and timestamp (an
    OpenAI-style message's "name"); the tool does the same, and its schema says so (it
    claimed additionalProperties: false, and call_tool and the MCP server accepted them)."""
    extra = {"messages": [{"role": "user", "content": "hi JWT", "name": "li", "extra": 1}]}
    jsonschema.validate(extra, {t["name"]: t for t in anthropic_tools()}["remember"]
                        ["input_schema"])
    assert json.loads(call_tool(mem, "remember", extra))["status"] == "accepted"
    mem.remember(extra["messages"])
    assert mem.wait_idle(30) and mem.stats()["nodes"] == 2


def test_schema_functions_return_fresh_copies() -> None:
    anthropic_tools()[1]["input_schema"]["properties"].clear()
    assert "keywords" in anthropic_tools()[1]["input_schema"]["properties"]


# -- call_tool ----------------------------------------------------------------------------------


def test_call_tool_with_dict_and_json_string_arguments(mem: MemoryManager) -> None:
    ack = json.loads(call_tool(mem, "remember", {"messages": [
        {"role": "user", "content": "We deploy with JWT tokens"}]}))
    assert ack == {"status": "accepted", "agent_id": "agent", "messages": 1}
    as_string = json.dumps({"messages": [{"role": "user", "content": "Coffee without sugar"}]})
    assert json.loads(call_tool(mem, "remember", as_string))["messages"] == 1
    assert mem.wait_idle(timeout=30)
    assert call_tool(mem, "recall", {"keywords": ["JWT"]}) == mem.recall(["JWT"])
    assert "JWT" in call_tool(mem, "recall", '{"keywords": ["JWT"], "depth": 3}')
    assert call_tool(mem, "recall", b'{"keywords": ["Coffee"]}') == mem.recall(["Coffee"])
    assert call_tool(mem, "recall", {"keywords": ["nowhere-to-be-found"]}) == NOTHING_RECALLED
    one = call_tool(mem, "recall", {"keywords": [], "limit": 1})
    assert one == mem.recall([], limit=1) and "---" not in one
    stats = json.loads(call_tool(mem, "stats", ""))
    assert stats["nodes"] == 2 and stats["agent_id"] == "agent"
    assert json.loads(call_tool(mem, "stats", None)) == json.loads(call_tool(mem, "stats", "{}"))


def test_sparql_results_are_json(mem: MemoryManager) -> None:
    call_tool(mem, "remember", {"messages": [{"role": "user", "content": "JWT | PostgreSQL"}]})
    assert mem.wait_idle(timeout=30)
    rows = json.loads(call_tool(mem, "sparql", {
        "query": "SELECT ?c ?t WHERE { ?n memory:content ?c ; memory:createdAt ?t } ORDER BY ?c"}))
    assert [r["c"] for r in rows] == ["JWT", "PostgreSQL"]
    assert all(re.match(r"\d{4}-\d\d-\d\dT", r["t"]) for r in rows)  # datetimes as ISO 8601
    assert json.loads(call_tool(mem, "sparql", {"query": "ASK { ?n a memory:Node }"})) is True
    triples = json.loads(call_tool(mem, "sparql", {
        "query": "CONSTRUCT { ?n memory:content ?c } WHERE { ?n memory:content ?c }"}))
    assert sorted(t[2] for t in triples) == ["JWT", "PostgreSQL"]
    with pytest.raises(SparqlError):
        call_tool(mem, "sparql", {"query": "SELEC nothing"})


def test_sparql_tool_bounds_rows_and_time(mem: MemoryManager) -> None:
    call_tool(mem, "remember", {"messages": [
        {"role": "user", "content": "JWT | PostgreSQL | Redis"}]})
    assert mem.wait_idle(timeout=30)
    query = "SELECT ?c WHERE { ?n memory:content ?c }"
    assert len(json.loads(call_tool(mem, "sparql", {"query": query}))) == 3  # default 1,000
    assert len(json.loads(call_tool(mem, "sparql", {"query": query, "limit": 3}))) == 3
    with pytest.raises(QueryLimitError, match="2"):
        call_tool(mem, "sparql", {"query": query, "limit": 2})
    with pytest.raises(InvalidInputError, match="at most 100,000"):
        call_tool(mem, "sparql", {"query": query, "limit": 100_001})
    with pytest.raises(InvalidInputError, match="limit"):
        call_tool(mem, "sparql", {"query": query, "limit": 0})


SPARQL_TIMEOUT_SCRIPT = """
    import sys, time
    from memory_rdf import MemoryManager, QueryTimeoutError
    from memory_rdf.tools import call_tool
    from tests.helpers import FAST, ScriptedModel
    product = "WHERE { ?a ?p ?b . ?c ?q ?d . ?e ?r ?f . ?g ?s ?h . ?i ?t ?j . ?k ?u ?l }"
    with MemoryManager("h", data_dir=sys.argv[1], config=FAST, model=ScriptedModel()) as mem:
        call_tool(mem, "remember", {"messages": [{"role": "user", "content": "JWT | Redis"}]})
        assert mem.wait_idle(timeout=30)
        start = time.monotonic()
        try:
            call_tool(mem, "sparql", {"query": "SELECT (COUNT(*) AS ?n) " + product},
                      timeout=1.0)
        except QueryTimeoutError:
            print("QueryTimeoutError", round(time.monotonic() - start, 1), flush=True)
"""


def test_sparql_tool_runs_within_the_call_timeout(tmp_path: Path) -> None:
    # In a child: past the timeout the engine finishes an aggregate in the background.
    repo = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(repo)}
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(SPARQL_TIMEOUT_SCRIPT), str(tmp_path)],
        env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    kind, seconds = result.stdout.split()
    assert kind == "QueryTimeoutError" and float(seconds) < 20


def test_optional_arguments_given_as_null_count_as_left_out(mem: MemoryManager) -> None:
    call_tool(mem, "remember", {"messages": [{"role": "user", "content": "JWT"}]})
    assert mem.wait_idle(timeout=30)
    args = {"keywords": ["JWT"], "relations": None, "depth": None, "entry": None}
    assert call_tool(mem, "recall", args) == mem.recall(["JWT"])


@pytest.mark.parametrize(
    ("name", "arguments", "error", "message"),
    [
        ("dream", {}, InvalidInputError, "unknown tool 'dream'"),
        ("recall", {"keyword": ["x"]}, InvalidInputError, "unknown argument 'keyword'"),
        ("recall", {}, InvalidInputError, "needs the argument keywords"),
        ("recall", '{"keywords": [', InvalidInputError, "not valid JSON"),
        ("recall", '["x"]', InvalidTypeError, "must be a JSON object"),
        ("recall", {"keywords": "JWT"}, InvalidTypeError, "not a bare str"),
        ("recall", {"keywords": ["x"], "depth": -1}, InvalidInputError, "depth"),
        ("recall", {"keywords": ["x"], "depth": "2"}, InvalidTypeError, "depth"),
        ("recall", {"keywords": ["x"], "entry": "everywhere"}, InvalidInputError, "entry"),
        ("recall", {"keywords": ["x"], "limit": -1}, InvalidInputError, "limit"),
        ("recall", {"keywords": ["x"], "max_chars": "500"}, InvalidTypeError, "max_chars"),
        ("remember", {"messages": []}, InvalidInputError, "must not be empty"),
        ("remember", {"messages": [{"role": "robot", "content": "hi"}]}, InvalidInputError,
         "role"),
        ("remember", {"messages": "hi"}, InvalidTypeError, "messages"),
        ("sparql", {"query": "DELETE WHERE { ?s ?p ?o }"}, UpdateRefusedError, "refused"),
    ],
)
def test_bad_calls_raise_clear_errors_and_store_nothing(
    mem: MemoryManager, name: str, arguments: object, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        call_tool(mem, name, arguments)  # type: ignore[arg-type]
    stats = mem.stats()
    assert stats["nodes"] == 0 and stats["pending_tasks"] == 0
    assert mem.pending_remembers() == 0


def test_system_routes_by_agent_id_and_manager_refuses_another(
    data_dir: Path, model: ScriptedModel, make_manager: Callable[..., MemoryManager]
) -> None:
    with MemorySystem(data_dir=data_dir, model=model, config=FAST) as system:
        call_tool(system, "remember", {"messages": [{"role": "user", "content": "alpha"}]})
        call_tool(system, "remember", {"messages": [{"role": "user", "content": "beta"}],
                                       "agent_id": "bob"})
        call_tool(system, "remember", '{"messages": [{"role": "user", "content": "gamma"}]}',
                  default_agent="carol")
        for agent in ("default", "bob", "carol"):
            assert system.agent(agent).wait_idle(timeout=30)
        assert undated(call_tool(system, "recall", {"keywords": []})) == \
            "(agent: default)\n[memory] alpha"
        assert undated(call_tool(system, "recall", {"keywords": [], "agent_id": "bob"})) == \
            "[memory] beta"
        assert "gamma" in call_tool(system, "recall", {"keywords": []}, default_agent="carol")
        with pytest.raises(InvalidInputError, match="agent_id"):
            call_tool(system, "stats", {"agent_id": "../etc"})
        with pytest.raises(InvalidTypeError, match="agent_id"):
            call_tool(system, "stats", {"agent_id": 7})
    mem = make_manager("solo")
    assert json.loads(call_tool(mem, "stats", {"agent_id": "solo"}))["agent_id"] == "solo"
    with pytest.raises(InvalidInputError, match="serve agent 'solo'"):
        call_tool(mem, "stats", {"agent_id": "other"})
    with pytest.raises(InvalidTypeError, match="MemorySystem or a MemoryManager"):
        call_tool("solo", "stats", {})  # type: ignore[arg-type]


def test_agents_allow_list_in_the_schemas() -> None:
    """``agents=``: agent_id lists the allowed ids (enum, duplicates dropped), in both formats,
    and a schema-validating client refuses any other id."""
    for schemas in ([t["function"]["parameters"] for t in openai_tools(agents=("alice", "bob",
                                                                                 "alice"))],
                    [t["input_schema"] for t in anthropic_tools(agents=["alice", "bob"])]):
        assert len(schemas) == len(NAMES)
        for schema in schemas:
            jsonschema.Draft202012Validator.check_schema(schema)
            agent_id = schema["properties"]["agent_id"]
            assert agent_id["enum"] == ["alice", "bob"]
            assert "'alice', 'bob'" in agent_id["description"]
        recall = schemas[1]
        jsonschema.validate({"keywords": [], "agent_id": "bob"}, recall)
        for other in ("eve", "../x", "Alice"):
            with pytest.raises(jsonschema.ValidationError):
                jsonschema.validate({"keywords": [], "agent_id": other}, recall)
    assert "agent_id" not in anthropic_tools(include_agent_id=False,
                                             agents=["alice"])[0]["input_schema"]["properties"]
    assert "enum" not in anthropic_tools()[0]["input_schema"]["properties"]["agent_id"]


@pytest.mark.parametrize(
    ("agents", "error", "message"),
    [([], InvalidInputError, "at least one"), (["ok", "../x"], InvalidInputError, "'../x'"),
     ("alice", InvalidTypeError, "list of agent ids"), ([7], InvalidTypeError, "str")],
)
def test_a_bad_allow_list_is_refused(agents: object, error: type[Exception],
                                     message: str) -> None:
    with pytest.raises(error, match=message):
        anthropic_tools(agents=agents)  # type: ignore[arg-type]


def test_call_tool_with_an_allow_list_opens_nothing_for_another_agent(
    data_dir: Path, model: ScriptedModel, make_manager: Callable[..., MemoryManager]
) -> None:
    allowed = ["alice", "bob"]
    with MemorySystem(data_dir=data_dir, model=model, config=FAST) as system:
        ack = call_tool(system, "remember", {"messages": [{"role": "user", "content": "beta"}],
                                             "agent_id": "bob"},
                        default_agent="alice", agents=allowed)
        assert json.loads(ack)["agent_id"] == "bob"
        call_tool(system, "remember", {"messages": [{"role": "user", "content": "alpha"}]},
                  default_agent="alice", agents=allowed)
        for agent in allowed:
            assert system.agent(agent).wait_idle(timeout=30)
        assert undated(call_tool(system, "recall", '{"keywords": [], "agent_id": "bob"}',
                                 default_agent="alice", agents=allowed)) == "[memory] beta"
        assert undated(call_tool(system, "recall", {"keywords": []}, default_agent="alice",
                                 agents=allowed)) == "(agent: alice)\n[memory] alpha"
        calls = {"remember": {"messages": [{"role": "user", "content": "intruder"}]},
                 "recall": {"keywords": []}, "memories": {}, "forget": {"ids": ["x"]},
                 "stats": {}, "sparql": {"query": "ASK { ?s ?p ?o }"}}
        for name, arguments in calls.items():
            for other in ("eve", "../escape", "ALICE"):
                with pytest.raises(InvalidInputError,
                                   match=r"is not served here: the agent ids are 'alice', 'bob'"):
                    call_tool(system, name, {**arguments, "agent_id": other},
                              default_agent="alice", agents=allowed)
            # naming no agent when the default is not allowed is refused the same way
            with pytest.raises(InvalidInputError, match="'default' is not served here"):
                call_tool(system, name, arguments, agents=allowed)
        assert sorted(system.agents()) == allowed
        assert json.loads(call_tool(system, "stats", {"agent_id": "alice"},
                                    agents=allowed))["nodes"] == 1
    # no eve, no default (~locks: the writers' lock files, AgentLock)
    assert sorted(p.name for p in data_dir.iterdir()) == [*allowed, "~locks"]
    assert sorted(p.name for p in (data_dir / "~locks").iterdir()) == allowed
    assert not (data_dir.parent / "escape").exists()
    mem = make_manager("solo")
    assert json.loads(call_tool(mem, "stats", {}, agents=["solo"]))["agent_id"] == "solo"
    with pytest.raises(InvalidInputError, match="'solo' is not served here"):
        call_tool(mem, "stats", {}, agents=["alice"])


def test_an_allow_list_writes_nothing_to_an_endpoint_for_another_agent(
    oxigraph_server: Server, model: ScriptedModel
) -> None:
    """On a SPARQL endpoint (SPEC §8) a refused agent gets no graph, not even its lease."""
    oxigraph_server.clear()
    endpoint = oxigraph_server.endpoint()
    try:
        with MemorySystem(endpoint=endpoint, model=model, config=FAST) as system:
            call_tool(system, "remember", {"messages": [{"role": "user", "content": "alpha"}]},
                      default_agent="alice", agents=["alice"])
            assert system.agent("alice").wait_idle(timeout=30)
            graphs = oxigraph_server.graph_count()
            assert graphs >= 1
            for name, arguments in (("remember", {"messages": [{"role": "user",
                                                                 "content": "x"}]}),
                                    ("stats", {}), ("forget", {"ids": ["x"]})):
                with pytest.raises(InvalidInputError, match="'eve' is not served here"):
                    call_tool(system, name, {**arguments, "agent_id": "eve"},
                              default_agent="alice", agents=["alice"])
            assert system.agents() == ["alice"]
            assert oxigraph_server.graph_count() == graphs
            assert not inspect.agent_exists("eve", endpoint)
    finally:
        endpoint.close()
        oxigraph_server.clear()


def test_memories_and_forget_on_request(mem: MemoryManager) -> None:
    call_tool(mem, "remember", {"messages": [
        {"role": "user", "content": "Home address: 12 Elm Street", "timestamp":
         "2026-01-05T10:00:00Z"},
        {"role": "user", "content": "Favourite drink: green tea"}]})
    listed = json.loads(call_tool(mem, "memories", {}))
    assert [m["content"] for m in listed] == [m["content"] for m in mem.memories()]
    assert {m["content"] for m in listed} == {"Home address: 12 Elm Street",
                                               "Favourite drink: green tea"}
    assert all(re.match(r"\d{4}-\d\d-\d\dT", m["created_at"]) for m in listed)
    (address,) = json.loads(call_tool(mem, "memories", '{"keywords": ["elm"]}'))
    assert address["said_at"].startswith("2026-01-05T10:00:00")
    assert json.loads(call_tool(mem, "memories", {"since": "2026-01-06", "keywords": ["elm"]})) \
        == []
    assert len(json.loads(call_tool(mem, "memories", {"limit": 1, "offset": 1}))) == 1

    done = json.loads(call_tool(mem, "forget", {"ids": [address["id"], "feedbeef" * 4]}))
    assert done == {"forgotten": 1, "purge": False}  # an unknown id is not counted
    with pytest.raises(InvalidInputError, match="'feedbeef' is not a memory id: ids are 32 hex"):
        call_tool(mem, "forget", {"ids": ["feedbeef"]})  # no id at all: a tool error
    assert "Elm" not in call_tool(mem, "recall", {"keywords": ["Elm"], "entry": "both"})
    assert json.loads(call_tool(mem, "memories", {"keywords": ["elm"]})) == []
    assert json.loads(call_tool(mem, "sparql", {
        "query": 'ASK { ?n memory:content ?c FILTER(CONTAINS(?c, "Elm")) }'})) is False
    again = json.loads(call_tool(mem, "forget", json.dumps({"ids": [address["id"]],
                                                            "purge": True})))
    assert again == {"forgotten": 0, "purge": True}
    with pytest.raises(InvalidTypeError):
        call_tool(mem, "forget", {"ids": "all"})
    with pytest.raises(InvalidTypeError):
        call_tool(mem, "forget", {"ids": [address["id"]], "purge": "yes"})
    with pytest.raises(InvalidInputError, match="needs the argument ids"):
        call_tool(mem, "forget", {"purge": True})
    with pytest.raises((InvalidInputError, InvalidTypeError)):
        call_tool(mem, "memories", {"since": "last tuesday"})
    assert len(mem.memories()) == 1


def test_pin_and_unpin_through_call_tool(mem: MemoryManager) -> None:
    """SPEC §9 v3: the tools gain ``pin`` (one tool; ``unpin: true`` undoes it)."""
    call_tool(mem, "remember", {"messages": [
        {"role": "user", "content": "My name is Priya"},
        {"role": "user", "content": "Favourite drink: green tea"}]})
    (name,) = json.loads(call_tool(mem, "memories", {"keywords": ["Priya"]}))
    assert name["pinned"] is False
    assert json.loads(call_tool(mem, "pin", {"ids": [name["id"], "feedbeef" * 4]})) == {
        "pinned": 1}
    assert json.loads(call_tool(mem, "pin", json.dumps({"ids": [name["id"]]}))) == {"pinned": 0}
    assert json.loads(call_tool(mem, "memories", {"keywords": ["Priya"]}))[0]["pinned"] is True
    assert json.loads(call_tool(mem, "stats", {}))["pinned"] == 1
    with pytest.raises(InvalidTypeError, match="ids"):
        call_tool(mem, "pin", {"ids": name["id"]})  # a bare str
    with pytest.raises(InvalidInputError, match="is not a memory id"):
        call_tool(mem, "pin", {"ids": ["feedbeef"]})
    with pytest.raises(InvalidTypeError, match="unpin"):
        call_tool(mem, "pin", {"ids": [name["id"]], "unpin": "yes"})
    with pytest.raises(InvalidInputError, match="needs the argument ids"):
        call_tool(mem, "pin", {"unpin": True})
    assert json.loads(call_tool(mem, "stats", {}))["pinned"] == 1  # bad calls changed nothing
    assert json.loads(call_tool(mem, "pin", {"ids": [name["id"]], "unpin": True})) == {
        "unpinned": 1}
    assert json.loads(call_tool(mem, "memories", {"keywords": ["Priya"]}))[0]["pinned"] is False
