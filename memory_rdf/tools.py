"""The memory as tools an LLM calls: one definition for MCP, OpenAI and Anthropic (SPEC §9).

:func:`openai_tools` and :func:`anthropic_tools` give the tools as function-calling schemas
(JSON Schema parameters) in each API's format; :func:`call_tool` runs one call the model made,
with its arguments as a dict (Anthropic's ``tool_use.input``) or a JSON string (OpenAI's
``function.arguments``), and returns the text to hand back. ``memory-rdf serve`` (an MCP
server, :mod:`memory_rdf.mcp_server`) serves the same tools.

>>> import tempfile
>>> from memory_rdf import MemoryManager
>>> from memory_rdf.tools import anthropic_tools, call_tool
>>> [tool["name"] for tool in anthropic_tools()]
['remember', 'recall', 'memories', 'forget', 'pin', 'stats', 'sparql']
>>> with MemoryManager("bot", data_dir=tempfile.mkdtemp()) as mem:
...     print(call_tool(mem, "remember",
...                     {"messages": [{"role": "user", "content": "My cat is called Miso"}]}))
...     print(call_tool(mem, "recall", '{"keywords": ["cat"]}'))
{"status": "accepted", "agent_id": "bot", "messages": 1}
[memory ...] user: My cat is called Miso
"""

from __future__ import annotations

import contextlib
import copy
import difflib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from memory_rdf._agents import agent_exists, validate_agent_id
from memory_rdf._agents import agents as list_agents
from memory_rdf._exceptions import (
    InvalidInputError,
    InvalidTypeError,
    MemoryRDFError,
    UnknownAgentError,
)
from memory_rdf._manager import MemoryManager, MemorySystem

__all__ = [
    "AGENT_LINE",
    "DEFAULT_AGENT",
    "NOTHING_RECALLED",
    "anthropic_tools",
    "call_tool",
    "openai_tools",
    "tool_names",
]

#: The agent a call on a :class:`~memory_rdf.MemorySystem` uses when it names none.
DEFAULT_AGENT = "default"

#: What ``recall`` answers when nothing matched (an empty tool result confuses models).
NOTHING_RECALLED = "(nothing recalled)"

#: The first line of a ``recall`` answer from the default agent (a call on a
#: :class:`~memory_rdf.MemorySystem` that named no ``agent_id``): which agent it was.
AGENT_LINE = "(agent: {agent_id})"


@dataclass(frozen=True)
class _Tool:
    name: str
    description: str
    properties: dict[str, Any]
    required: tuple[str, ...]
    run: Callable[[MemoryManager, dict[str, Any], float | None], str]
    read_only: bool = True  # MCP tool annotations (hints for clients)
    destructive: bool = False
    #: Whether a call may create the agent it names (remember only, SPEC §9 v3); the other
    #: tools on an agent that has no memory are an error naming it.
    creates: bool = False

    def schema(self, include_agent_id: bool, agents: tuple[str, ...] | None = None,
               default_agent: str | None = None) -> dict[str, Any]:
        properties = copy.deepcopy(self.properties)
        if include_agent_id:
            properties["agent_id"] = (copy.deepcopy(_AGENT_ID) if agents is None
                                      else _allowed_agent_id(agents, default_agent))
        schema: dict[str, Any] = {"type": "object", "properties": properties}
        if self.required:
            schema["required"] = list(self.required)
        schema["additionalProperties"] = False
        return schema


_AGENT_ID: dict[str, Any] = {
    "type": "string",
    "description": "Whose memory to use (1-128 letters, digits, '_', '-', '.'). Leave it out "
                   "for the agent this tool is bound to; the answer then names it (recall: "
                   "a first line '(agent: ID)'; JSON: an agent_id field). Only remember "
                   "creates an agent: the other tools on an agent with no memory are an "
                   "error.",
    "minLength": 1,
    "maxLength": 128,
    "pattern": r"^[\w.-]+$",
}


def _allowed_agent_id(agents: tuple[str, ...], default_agent: str | None) -> dict[str, Any]:
    """``agent_id`` under an allow-list: the ids themselves (``enum``), so that a client sees
    which agents it may name and a schema-validating client refuses the others."""
    default = "the agent this tool is bound to" if default_agent is None else repr(default_agent)
    schema: dict[str, Any] = {
        "type": "string",
        "description": f"Whose memory to use: one of {_quoted(agents)}. Leave it out for "
                       f"{default}; the answer then names it (recall: a first line "
                       "'(agent: ID)'; JSON: an agent_id field). Only remember creates an "
                       "agent: the other tools on an agent with no memory are an error.",
        "enum": list(agents),
    }
    if default_agent is not None:
        schema["default"] = default_agent
    return schema


def _quoted(agents: Iterable[str]) -> str:
    return ", ".join(repr(a) for a in agents)


def _check_agents(agents: Iterable[str] | None) -> tuple[str, ...] | None:
    """The allow-list as a tuple of valid ids, duplicates dropped (None: every agent)."""
    if agents is None:
        return None
    if isinstance(agents, str | bytes) or not isinstance(agents, Iterable):
        raise InvalidTypeError(
            f"agents must be a list of agent ids, got {type(agents).__name__}")
    allowed = tuple(dict.fromkeys(validate_agent_id(a) for a in agents))
    if not allowed:
        raise InvalidInputError("agents must name at least one agent id (None: every agent)")
    return allowed


_STRING_LIST: dict[str, Any] = {"type": "array", "items": {"type": "string"}}


def _time_bound(which: str) -> dict[str, Any]:
    edge = "at or after" if which == "since" else "before"
    return {
        "type": "string",
        "description": f"Only memories said (or, without a said time, stored) {edge} this "
                       "moment, ISO 8601 (e.g. 2026-11-01 or 2026-11-01T09:00:00Z; without a "
                       "zone it is UTC).",
    }


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=_json_default)


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, tuple | set | frozenset):
        return list(value)
    return str(value)


# -- the tools ----------------------------------------------------------------------------------


def _remember(mem: MemoryManager, args: dict[str, Any], timeout: float | None) -> str:
    messages = args["messages"]
    mem.remember(messages)
    return _json({"status": "accepted", "agent_id": mem.agent_id, "messages": len(messages)})


def _recall(mem: MemoryManager, args: dict[str, Any], timeout: float | None) -> str:
    text = mem.recall(**args, timeout=timeout)
    return text or NOTHING_RECALLED


def _memories(mem: MemoryManager, args: dict[str, Any], timeout: float | None) -> str:
    return _json(mem.memories(**args, timeout=timeout))


def _forget(mem: MemoryManager, args: dict[str, Any], timeout: float | None) -> str:
    purge = args.get("purge", False)
    count = mem.forget(args["ids"], purge=purge, timeout=timeout)
    return _json({"forgotten": count, "purge": bool(purge)})


def _pin(mem: MemoryManager, args: dict[str, Any], timeout: float | None) -> str:
    unpin = args.get("unpin", False)
    if not isinstance(unpin, bool):
        raise InvalidTypeError(f"unpin must be a bool, got {type(unpin).__name__}")
    if unpin:
        return _json({"unpinned": mem.unpin(args["ids"], timeout=timeout)})
    return _json({"pinned": mem.pin(args["ids"], timeout=timeout)})


def _stats(mem: MemoryManager, args: dict[str, Any], timeout: float | None) -> str:
    return _json(mem.stats())


#: Rows the ``sparql`` tool returns at most unless the call asks for more (a model's context
#: is the reader: more rows than this is a query to narrow, and the error says so).
SPARQL_TOOL_LIMIT = 1000
SPARQL_TOOL_MAX_LIMIT = 100_000


def _sparql(mem: MemoryManager, args: dict[str, Any], timeout: float | None) -> str:
    limit = args.get("limit", SPARQL_TOOL_LIMIT)
    if isinstance(limit, int) and not isinstance(limit, bool) and limit > SPARQL_TOOL_MAX_LIMIT:
        raise InvalidInputError(
            f"limit must be at most {SPARQL_TOOL_MAX_LIMIT:,}, got {limit:,}; page with "
            "LIMIT/OFFSET in the query")
    if mem.endpoint is None:
        # A model's ORDER BY over a cross join took the whole process's memory: the query
        # runs in a child process, bounded and killed at the timeout (memory_rdf._sandbox).
        from memory_rdf._query_guard import (
            SPARQL_TIMEOUT,
            check_limit,
            check_timeout,
            check_user_query,
        )
        from memory_rdf._sandbox import sparql_in_child

        # Refused here, no child started for it; the child parses it (the guard's step 3,
        # up to seconds of CPU for a long query) before its engine sees it.
        check_user_query(args["query"], parse=False)
        seconds = check_timeout(timeout) or SPARQL_TIMEOUT
        mem._check_open()
        return _json(sparql_in_child(mem.agent_id, mem.path.parent, args["query"],
                                     timeout=seconds, limit=check_limit(limit)))
    if timeout is None:
        return _json(mem.sparql(args["query"], limit=limit))
    return _json(mem.sparql(args["query"], timeout=timeout, limit=limit))


_TOOLS: tuple[_Tool, ...] = (
    _Tool(
        name="remember",
        description=(
            "Store chat messages in long-term memory. Pass what is worth keeping from the "
            "conversation (facts, decisions, preferences, plans, names), usually the latest "
            "user and assistant turns, verbatim. The memory splits them into small memories, "
            "summarises and links them to what was discussed just before. Returns at once with "
            "a JSON acknowledgement; a recall made afterwards already sees these messages."
        ),
        properties={
            "messages": {
                "type": "array",
                "minItems": 1,
                "description": "The messages to remember, oldest first.",
                "items": {
                    "type": "object",
                    "properties": {
                        "role": {"type": "string", "enum": ["user", "assistant", "system"],
                                 "description": "Who said it."},
                        "content": {"type": "string", "minLength": 1,
                                    "description": "What was said (not blank)."},
                        "timestamp": {
                            "type": "string",
                            "description": "When it was said, ISO 8601 (e.g. "
                                           "2026-11-24T09:30:00Z). Optional.",
                        },
                    },
                    # no additionalProperties: false: other keys are ignored, as remember()
                    # ignores them (SPEC §9: the arguments are the Python method's)
                    "required": ["role", "content"],
                },
            },
        },
        required=("messages",),
        run=_remember,
        read_only=False,
        creates=True,
    ),
    _Tool(
        name="recall",
        description=(
            "Recall from long-term memory what relates to some keywords. Use it before "
            "answering anything that may depend on earlier conversations (the user's "
            "preferences, past decisions, names, plans). Returns plain text: one entry per "
            "memory, separated by lines of '---', each starting with a marker and the day it "
            "was said, such as [memory 2024-05-01] (or [记忆 2024-05-01] for Chinese text); "
            "of two memories that match alike, the one said later comes first. "
            "An entry may say that a related memory was forgotten. Returns "
            f"'{NOTHING_RECALLED}' when nothing matches. By default the search starts both "
            "from what was discussed most recently and from the memories whose words best "
            "match, so older facts are found too."
        ),
        properties={
            "keywords": {
                **_STRING_LIST,
                "description": "Words or short phrases to look for, in the language of the "
                               "memories (e.g. [\"JWT\", \"login\"]). A memory matches when it "
                               "holds one of them as a word, in any form (case-insensitive: "
                               "\"vacation\" matches \"vacations\" and \"vacationed\"; "
                               "Chinese words as written). Words such as \"in\" or \"we\" are "
                               "ignored. An empty list returns every memory reached.",
            },
            "relations": {
                **_STRING_LIST,
                "description": "Follow only links with these relation names (English or "
                               "Chinese: \"next\" or \"下文\", \"previous\" or \"上文\"). "
                               "Usually left out.",
            },
            "depth": {
                "type": "integer", "minimum": 0,
                "description": "How many links away from the starting memories to search "
                               "(default: the memory's configured depth, usually 2).",
            },
            "query": {
                "type": "string",
                "description": "The question being answered, as written (e.g. \"Where did "
                               "we stay in Kyoto?\"). Where the memory has an embedding "
                               "model, memories close to it in meaning are found even when "
                               "they share no word with it (\"hotel\" finds \"ryokan\"); "
                               "otherwise it is not used. Pass it whenever you have it.",
            },
            "entry": {
                "type": "string", "enum": ["focus", "keywords", "both", "semantic"],
                "description": "Where the search starts: 'both' (default) = the memories "
                               "discussed most recently, those whose words best match the "
                               "keywords and (with an embedding model) those closest in "
                               "meaning to the query; 'focus' = only the memories discussed "
                               "most recently; 'keywords' = only those whose words best "
                               "match; 'semantic' = only those closest in meaning (needs an "
                               "embedding model).",
            },
            "since": _time_bound("since"),
            "until": _time_bound("until"),
            "limit": {"type": "integer", "minimum": 0,
                      "description": "At most this many memories, best first (default: the "
                                     "memory's setting, usually 100; 0 = no limit)."},
            "max_chars": {"type": "integer", "minimum": 0,
                          "description": "Keep the text within this many characters (default: "
                                         "the memory's setting, usually 2000; 0 = no limit). "
                                         "The first memory is always returned whole."},
        },
        required=("keywords",),
        run=_recall,
    ),
    _Tool(
        name="memories",
        description=(
            "List stored memories, newest first, as JSON: each has id, content, phrase "
            "(short summary), keywords, created_at, said_at (when it was said, or null), "
            "scan_count, original_length, importance, in_focus and pinned. Use it to see what is "
            "remembered about something, to cite or page through memories, or to find the ids "
            "to pass to forget. Filters: keywords (a memory matches when it holds one as a "
            "word in any form, case-insensitive, as recall matches), since/until; page with "
            "limit and offset."
        ),
        properties={
            "keywords": {
                **_STRING_LIST,
                "description": "Only memories holding one of these words, in any form "
                               "(case-insensitive). Leave out for all memories.",
            },
            "since": _time_bound("since"),
            "until": _time_bound("until"),
            "limit": {"type": "integer", "minimum": 1,
                      "description": "At most this many memories (default 100)."},
            "offset": {"type": "integer", "minimum": 0,
                       "description": "Skip this many of the newest first (default 0), to page."},
        },
        required=(),
        run=_memories,
    ),
    _Tool(
        name="forget",
        description=(
            "Forget memories on request (e.g. the user asks you to forget something): pass "
            "their ids, found with the memories tool. A forgotten memory is gone from recall, "
            "memories and sparql; memories linked to it only keep the knowledge that something "
            "was forgotten. purge=true leaves no trace: the links to it go too, and its text "
            "is erased from the disk (slower; for privacy requests). Pinned memories are "
            "forgotten too. Returns JSON with how many were forgotten; unknown ids are "
            "ignored. This cannot be undone."
        ),
        properties={
            "ids": {**_STRING_LIST, "minItems": 1,
                    "description": "The ids of the memories to forget (the id field of "
                                   "the memories tool's results)."},
            "purge": {"type": "boolean",
                      "description": "Leave no trace: also remove the links to them and erase "
                                     "the text from every file on disk (default false)."},
        },
        required=("ids",),
        run=_forget,
        read_only=False,
        destructive=True,
    ),
    _Tool(
        name="pin",
        description=(
            "Pin memories that must never fade (e.g. the user's name, or when the user asks "
            "you to always remember something): pass their ids, found with the memories tool. "
            "A pinned memory is never shortened, forgotten or evicted, and every recall "
            "considers it. unpin=true lets them fade again like any other memory. Returns "
            "JSON with how many changed; unknown ids (and ids already in that state) are "
            "ignored. forget still removes a pinned memory."
        ),
        properties={
            "ids": {**_STRING_LIST, "minItems": 1,
                    "description": "The ids of the memories to pin (the id field of the "
                                   "memories tool's results)."},
            "unpin": {"type": "boolean",
                      "description": "Unpin them instead (default false)."},
        },
        required=("ids",),
        run=_pin,
        read_only=False,
    ),
    _Tool(
        name="stats",
        description=(
            "Report the state of the memory as JSON: nodes (memories), links, dangling_links "
            "(links to memories that were forgotten), focus (ids of the memories in focus, "
            "newest first), pinned (how many memories are pinned), pending_tasks, "
            "failed_tasks and model-call counters."
        ),
        properties={},
        required=(),
        run=_stats,
    ),
    _Tool(
        name="sparql",
        description=(
            "Run a read-only SPARQL 1.1 query (SELECT, ASK, CONSTRUCT or DESCRIBE) over the "
            "memory graph; updates are refused. Prefixes memory:, node:, link: and xsd: are "
            "predeclared. Each memory is a memory:Node with memory:content, memory:phrase "
            "(short summary), memory:keyword (several), memory:createdAt (xsd:dateTime); "
            "links are memory:Link with memory:source, memory:target, memory:strength and "
            "memory:relation. Returns JSON: SELECT = a list of rows (variable -> value), "
            "ASK = true/false, CONSTRUCT/DESCRIBE = a list of [subject, predicate, object]. "
            "Example: SELECT ?phrase WHERE { ?n a memory:Node ; memory:phrase ?phrase } LIMIT 20"
        ),
        properties={
            "query": {"type": "string", "minLength": 1,
                      "description": "The SPARQL query text."},
            "limit": {"type": "integer", "minimum": 1, "maximum": SPARQL_TOOL_MAX_LIMIT,
                      "default": SPARQL_TOOL_LIMIT,
                      "description": "Refuse the answer when it has more rows than this "
                                     "(default 1000); add LIMIT to the query to page."},
        },
        required=("query",),
        run=_sparql,
    ),
)

_BY_NAME: dict[str, _Tool] = {tool.name: tool for tool in _TOOLS}


# -- public functions ---------------------------------------------------------------------------


def tool_names() -> list[str]:
    """The names of the tools, in the order the schema functions list them."""
    return [tool.name for tool in _TOOLS]


def _definitions(include_agent_id: bool, agents: Iterable[str] | None = None
                 ) -> list[dict[str, Any]]:
    allowed = _check_agents(agents)
    return [
        {"name": t.name, "description": t.description,
         "input_schema": t.schema(include_agent_id, allowed)}
        for t in _TOOLS
    ]


def openai_tools(
    *, include_agent_id: bool = True, api: str = "chat", agents: Iterable[str] | None = None
) -> list[dict[str, Any]]:
    """The tools in OpenAI's function-calling format.

    ``api="chat"`` (default): the Chat Completions form, ``{"type": "function", "function":
    {"name", "description", "parameters"}}``; ``api="responses"``: the Responses API form,
    ``{"type": "function", "name", "description", "parameters"}``. ``include_agent_id=False``
    leaves the optional ``agent_id`` argument out (when the calls go to one
    :class:`~memory_rdf.MemoryManager`, the model need not see it). ``agents``: the only ids
    ``agent_id`` may take (its ``enum``), as passed to :func:`call_tool`.

    Raises:
        InvalidInputError: ``api`` is neither ``"chat"`` nor ``"responses"``; ``agents`` is
            empty or holds an invalid id.
        InvalidTypeError: ``agents`` is not a list (or other iterable) of str.

    >>> openai_tools()[1]["function"]["name"]
    'recall'
    >>> openai_tools(agents=["alice", "bob"])[1]["function"]["parameters"]["properties"][
    ...     "agent_id"]["enum"]
    ['alice', 'bob']
    """
    if api not in ("chat", "responses"):
        raise InvalidInputError(f"api must be 'chat' or 'responses', got {api!r}")
    tools = []
    for d in _definitions(include_agent_id, agents):
        function = {"name": d["name"], "description": d["description"],
                    "parameters": d["input_schema"]}
        tools.append({"type": "function", "function": function} if api == "chat"
                     else {"type": "function", **function})
    return tools


def anthropic_tools(
    *, include_agent_id: bool = True, agents: Iterable[str] | None = None
) -> list[dict[str, Any]]:
    """The tools in Anthropic's Messages API format: ``{"name", "description",
    "input_schema"}`` (pass as ``tools=``). ``include_agent_id`` and ``agents`` as in
    :func:`openai_tools`.

    >>> sorted(anthropic_tools()[0])
    ['description', 'input_schema', 'name']
    """
    return _definitions(include_agent_id, agents)


def call_tool(
    system_or_manager: MemorySystem | MemoryManager,
    name: str,
    arguments: Mapping[str, Any] | str | None = None,
    *,
    default_agent: str = DEFAULT_AGENT,
    timeout: float | None = None,
    agents: Iterable[str] | None = None,
) -> str:
    """Run one tool call and return its result as text (``recall``) or JSON (the others).

    ``arguments`` is a mapping or a JSON object as a string (OpenAI hands over a string,
    Anthropic a dict); ``None``, ``""`` and ``{}`` mean no arguments. An argument given as
    ``null`` counts as left out. With a :class:`~memory_rdf.MemorySystem` the call goes to
    the agent named by the ``agent_id`` argument, else to ``default_agent``; with a
    :class:`~memory_rdf.MemoryManager` it goes to that agent, and an ``agent_id`` naming
    another agent is refused. Only ``remember`` creates an agent: the other tools on an agent
    of a system that has no memory raise :class:`~memory_rdf.UnknownAgentError` (SPEC §9 v3).
    An answer from ``default_agent`` (a call on a system naming no ``agent_id``) names it: a
    recall's text starts with the line ``(agent: ID)`` (:data:`AGENT_LINE`), a JSON object
    gains ``agent_id``, and a list or boolean becomes ``{"agent_id": ID, "memories": …}``
    (``memories``) or ``{"agent_id": ID, "result": …}`` (``sparql``). ``timeout`` (seconds;
    None = no limit) bounds how long ``recall``, ``memories`` and ``forget`` wait behind the
    agent's earlier tasks (e.g. a remember waiting for an unreachable model), and how long
    ``sparql`` runs (None: the 30 s of :meth:`~memory_rdf.MemoryManager.sparql`); ``sparql``
    refuses an answer of more than its ``limit`` argument's rows (default 1,000, at most
    100,000) with :class:`~memory_rdf.QueryLimitError`.

    ``agents`` (None: every agent) is an allow-list: the only agent ids a call may use. A call
    whose ``agent_id`` (or, naming none, ``default_agent``) is not among them is refused
    before anything is opened or created for that id; a server whose clients it does not
    trust with every agent's memory passes it (``memory-rdf serve --agents``).

    Raises:
        InvalidInputError: unknown tool, unknown or missing argument, arguments that are not
            JSON, an agent outside ``agents``, or a value the memory method refuses (a
            ``ValueError``); send the message back to the model as an error result.
        InvalidTypeError: arguments that are not an object, or a value of the wrong type
            (a ``TypeError``).
        TimeoutError: ``timeout`` passed (the message says what the call waited behind).
        UnknownAgentError: a tool other than ``remember`` on an agent that has no memory
            (the message names it and lists a few known agents); nothing is created.
        MemoryRDFError: whatever the memory method raises otherwise (e.g.
            :class:`~memory_rdf.SparqlError` for a query that does not parse,
            :class:`~memory_rdf.QueueFullError`).

    >>> import tempfile
    >>> from memory_rdf import MemorySystem
    >>> with MemorySystem(data_dir=tempfile.mkdtemp()) as system:
    ...     call_tool(system, "remember", {"messages": [{"role": "user", "content": "Hi"}],
    ...                                    "agent_id": "bob"})
    ...     call_tool(system, "recall", {"keywords": ["cat"], "agent_id": "bob"})
    ...     try:
    ...         call_tool(system, "stats", {"agent_id": "eve"}, agents=["bob"])
    ...     except ValueError as exc:
    ...         print(exc)
    '{"status": "accepted", "agent_id": "bob", "messages": 1}'
    '(nothing recalled)'
    agent_id 'eve' is not served here: the agent ids are 'bob'
    """
    if not isinstance(name, str):
        raise InvalidTypeError(f"tool name must be a str, got {type(name).__name__}")
    tool = _BY_NAME.get(name)
    if tool is None:
        raise InvalidInputError(f"unknown tool {name!r}; the tools are {', '.join(tool_names())}")
    allowed = _check_agents(agents)
    args = _parse_arguments(tool, arguments)
    agent_id = args.pop("agent_id", None)
    mem = _manager(system_or_manager, agent_id, default_agent, allowed, creates=tool.creates)
    answer = tool.run(mem, args, timeout)
    if agent_id is None and isinstance(system_or_manager, MemorySystem):
        return _naming(tool.name, answer, mem.agent_id)
    return answer


#: The key under which an answer that is not a JSON object is given when it names its agent.
_ANSWER_KEYS = {"memories": "memories"}


def _naming(name: str, answer: str, agent_id: str) -> str:
    """``answer`` saying which agent it is about, for a call that named none (SPEC §9 v3: the
    default agent is named in every answer that used it): a JSON object gains ``agent_id``;
    other JSON is ``{"agent_id": …, "memories" | "result": …}``; text (recall) starts with
    the line ``(agent: ID)``."""
    try:
        value = json.loads(answer)
    except ValueError:
        return f"{AGENT_LINE.format(agent_id=agent_id)}\n{answer}"
    if isinstance(value, dict):
        if "agent_id" in value:
            return answer
        return _json({"agent_id": agent_id, **value})
    return _json({"agent_id": agent_id, _ANSWER_KEYS.get(name, "result"): value})


def _parse_arguments(tool: _Tool, arguments: Mapping[str, Any] | str | None) -> dict[str, Any]:
    if arguments is None:
        raw: object = {}
    elif isinstance(arguments, str | bytes | bytearray):
        text = arguments if isinstance(arguments, str) else bytes(arguments).decode("utf-8",
                                                                                 "replace")
        try:
            raw = json.loads(text) if text.strip() else {}
        except (ValueError, RecursionError) as exc:  # RecursionError: nested too deep
            raise InvalidInputError(
                f"arguments of {tool.name} are not valid JSON: {exc}") from None
    else:
        raw = arguments
    if not isinstance(raw, Mapping):
        raise InvalidTypeError(
            f"arguments of {tool.name} must be a JSON object, got {type(raw).__name__}")
    allowed = [*tool.properties, "agent_id"]
    args: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in allowed:
            raise InvalidInputError(
                f"unknown argument {key!r} for {tool.name}; it takes {', '.join(allowed)}")
        if value is not None:
            args[str(key)] = value
    missing = [key for key in tool.required if key not in args]
    if missing:
        raise InvalidInputError(f"{tool.name} needs the argument {', '.join(missing)}")
    return args


def _manager(
    target: MemorySystem | MemoryManager, agent_id: object, default_agent: str,
    allowed: tuple[str, ...] | None = None, *, creates: bool = True,
) -> MemoryManager:
    """The manager a call goes to: the one ``agent_id`` names, else the bound manager or
    ``default_agent``; one outside ``allowed`` is refused before anything is opened (or
    created) for it, and so is one that has no memory yet unless the tool ``creates``."""
    if allowed is not None:
        chosen = agent_id
        if chosen is None:
            chosen = target.agent_id if isinstance(target, MemoryManager) else default_agent
        if chosen not in allowed:
            raise InvalidInputError(
                f"agent_id {chosen!r} is not served here: the agent ids are "
                f"{_quoted(allowed)}")
    if isinstance(target, MemoryManager):
        if agent_id is not None and agent_id != target.agent_id:
            raise InvalidInputError(
                f"agent_id {agent_id!r} is not available here: these tools serve agent "
                f"{target.agent_id!r}")
        return target
    if isinstance(target, MemorySystem):
        chosen = default_agent if agent_id is None else agent_id
        if not isinstance(chosen, str):
            raise InvalidTypeError(f"agent_id must be a str, got {type(chosen).__name__}")
        if not creates and not _has_memory(target, chosen):
            raise _unknown_agent(target, chosen, allowed)
        return target.agent(chosen)
    raise InvalidTypeError(
        "call_tool needs a MemorySystem or a MemoryManager, got "
        f"{type(target).__name__}")


def _has_memory(system: MemorySystem, agent_id: str) -> bool:
    """Whether ``agent_id`` is open in ``system`` or has a store in its data directory (or
    memory on its endpoint). Creates nothing."""
    if agent_id in system.agents():
        return True
    return agent_exists(agent_id, system.endpoint or system.data_dir)


#: Most agent ids an unknown-agent error lists.
_KNOWN_SHOWN = 10


def _unknown_agent(system: MemorySystem, agent_id: str,
                   allowed: tuple[str, ...] | None) -> UnknownAgentError:
    """The error for a call on an agent that has no memory: it names the agent and where it
    was looked for, and lists a few known agents (only allowed ones), the closest first."""
    where = (f"on {system.endpoint.query_url}" if system.endpoint is not None
             else f"in {system.data_dir}")
    known = set(system.agents())
    with contextlib.suppress(MemoryRDFError, OSError):  # the list is a help, not the answer
        known.update(list_agents(system.endpoint or system.data_dir))
    if allowed is not None:
        known &= set(allowed)
    close = difflib.get_close_matches(agent_id, sorted(known), n=3, cutoff=0.6)
    shown = [*close, *sorted(known - set(close))][:_KNOWN_SHOWN]
    if shown:
        more = f" and {len(known) - len(shown)} more" if len(known) > len(shown) else ""
        listing = f"; known agents: {_quoted(shown)}{more}"
    else:
        listing = "; there is no agent yet"
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return UnknownAgentError(
        f"no agent {agent_id!r} {where}{hint}{listing}. Only remember creates an agent."
    )
