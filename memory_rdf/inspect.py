"""Read-only inspection of an agent's memory: what ``memory-rdf sparql``, ``export``,
``graph``, ``stats``, ``validate``, ``memories`` and ``recall`` do, as functions (SPEC §6, §7).

Every function here opens a fresh read-only snapshot of the agent's store, runs on it and
drops it: no lock is taken and nothing is written, created or migrated, so they work while
another process runs the agent (see ``docs/inspecting.md``). A snapshot does not see later
writes: call again for fresh data.

Every function raises :class:`~memory_rdf.InvalidInputError` for an invalid agent id and
:class:`~memory_rdf.UnknownAgentError` for an agent without a store, before any file is
touched, and :class:`~memory_rdf.StoreError` when the store cannot be read.

>>> import tempfile
>>> from memory_rdf import MemoryManager, inspect
>>> data = tempfile.mkdtemp()
>>> with MemoryManager("agent_007", data_dir=data) as mem:
...     mem.remember([{"role": "user", "content": "PostgreSQL 存订单"}])
...     _ = mem.wait_idle()
>>> inspect.agent_exists("agent_007", data), inspect.stats("agent_007", data)["nodes"]
(True, 1)
>>> inspect.agents(data)
['agent_007']
>>> inspect.sparql("agent_007", "SELECT ?p WHERE { ?n memory:phrase ?p }", data)[0]["p"]
'PostgreSQL 存订单'
>>> inspect.export("agent_007", data, format="ntriples").count(b"\\n") > 5
True
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO, Literal

from memory_rdf import _graphview
from memory_rdf import _vocab as V
from memory_rdf._agents import DATA_DIR_ENV, DEFAULT_DATA_DIR, agent_exists, agent_path, agents
from memory_rdf._config import Config
from memory_rdf._embedders import Embedder
from memory_rdf._exceptions import InvalidInputError, SparqlError, StoreError
from memory_rdf._inspect import (
    inspect_agent,
    inspect_memories,
    inspect_recall,
    inspect_stats,
    inspect_tasks,
    open_rdflib_graph,
)
from memory_rdf._inspect import validate as _validate
from memory_rdf._query_guard import SPARQL_LIMIT, SPARQL_TIMEOUT, check_limit, check_timeout
from memory_rdf._remote import SparqlEndpoint

if TYPE_CHECKING:
    from memory_rdf._store import MemoryStore

__all__ = [
    "DATA_DIR_ENV",
    "DEFAULT_DATA_DIR",
    "EXPORT_FORMATS",
    "GRAPH_DEPTH",
    "GRAPH_FORMATS",
    "GRAPH_LIMIT",
    "GraphPicture",
    "PREFIXES",
    "RESULT_FORMATS",
    "agent_exists",
    "agent_path",
    "agents",
    "export",
    "graph",
    "graphviz_available",
    "memories",
    "open_rdflib_graph",
    "recall",
    "sparql",
    "stats",
    "tasks",
    "validate",
]

#: Where the agents live: a data directory (None: the default one) or a SPARQL endpoint (§8).
DataDir = str | os.PathLike[str] | SparqlEndpoint | None

#: The prefixes predeclared in every query (``memory:``, ``node:``, ``link:``, ``xsd:``).
PREFIXES: dict[str, str] = dict(V.PREFIXES)
#: Formats of :func:`export`: the memory graph (turtle, ntriples) or every graph (nquads, trig).
EXPORT_FORMATS = ("turtle", "ntriples", "nquads", "trig")
#: W3C SPARQL results formats of :func:`sparql`.
RESULT_FORMATS = ("json", "csv", "tsv", "xml")
#: Formats of :func:`graph`: one self-contained HTML page, Graphviz DOT, SVG (needs Graphviz).
GRAPH_FORMATS: tuple[str, ...] = _graphview.FORMATS
#: Hops from the focus drawn by default.
GRAPH_DEPTH = _graphview.DEFAULT_DEPTH
#: Most memories drawn by default.
GRAPH_LIMIT = _graphview.DEFAULT_LIMIT


def stats(agent_id: str, data_dir: DataDir = None) -> dict[str, Any]:
    """Counts and sizes of the agent's memory.

    Keys: ``nodes``, ``links``, ``dangling_links``, ``focus`` (ids, newest first),
    ``focus_phrases``, ``pending_tasks`` (remembers journalled, not yet processed),
    ``failed_tasks``, ``importance`` (min, median, mean, max, ``fading`` and a histogram of
    node importance), ``agent_id``, ``store_path``, ``store_bytes``, ``store_read_only``.
    Model-call counters live in the running process and are not included.

    Raises:
        InvalidInputError, UnknownAgentError, StoreError: see the module docstring.
    """
    return inspect_agent(agent_id, data_dir, inspect_stats)


def memories(
    agent_id: str,
    data_dir: DataDir = None,
    *,
    keywords: list[str] | None = None,
    since: Any = None,
    until: Any = None,
    limit: int | None = 100,
    offset: int = 0,
) -> list[dict[str, Any]]:
    """The agent's memories, newest first, as :meth:`MemoryManager.memories` lists them
    (same keys, same filters; ``importance`` with the default ``link_break_threshold``).

    Raises:
        TypeError, ValueError: bad ``since`` / ``until`` / ``limit`` / ``offset``, before any
            store is opened; and see the module docstring.
    """
    return inspect_agent(
        agent_id, data_dir, inspect_memories(keywords, since, until, limit, offset)
    )


def recall(
    agent_id: str,
    keywords: Sequence[str],
    data_dir: DataDir = None,
    *,
    relations: Sequence[str] | None = None,
    depth: int | None = None,
    entry: str | None = None,
    since: Any = None,
    until: Any = None,
    limit: int | None = None,
    max_chars: int | None = None,
    config: Config | None = None,
    query: str | None = None,
    embedder: Embedder | None = None,
) -> str:
    """What the agent recalls, as :meth:`MemoryManager.recall` gives it (same arguments and
    text; ``entry`` None: recall's default; ``config``: the one whose templates and limits to
    use, default ``Config()``), read from a snapshot: it works while another process holds the
    agent (SPEC §6). Remembers journalled but not processed yet are not in it. ``embedder``
    (with ``query``): the semantic entry as well (SPEC §5.7), from the vectors the agent has
    stored (none are made here: memories still without one are not found by meaning).

    Raises:
        TypeError, ValueError: bad arguments (as recall's); and see the module docstring.
    """
    arguments: dict[str, Any] = {"relations": relations, "depth": depth, "since": since,
                                 "until": until, "limit": limit, "max_chars": max_chars,
                                 "query": query}
    if entry is not None:
        arguments["entry"] = entry
    return inspect_agent(agent_id, data_dir,
                         inspect_recall(agent_id, keywords, config, embedder, **arguments))


def tasks(agent_id: str, data_dir: DataDir = None) -> list[dict[str, Any]]:
    """The agent's journalled remembers in the order accepted: ``pending`` (accepted, not
    processed yet) and ``failed`` (kept after their small-model calls kept failing). Keys:
    ``id``, ``status``, ``text``, ``attempts``, ``error``, ``accepted_at``.

    Raises:
        InvalidInputError, UnknownAgentError, StoreError: see the module docstring.
    """
    return inspect_agent(agent_id, data_dir, inspect_tasks)


def export(agent_id: str, data_dir: DataDir = None, *, format: str = "turtle") -> bytes:
    """The agent's store as RDF: ``turtle``/``ntriples`` hold the memory network (the default
    graph); ``nquads``/``trig`` add the named graphs (task journal, metadata): a backup.

    Raises:
        InvalidInputError: ``format`` is not one of :data:`EXPORT_FORMATS`; and see the
            module docstring.
    """
    if format not in EXPORT_FORMATS:
        raise InvalidInputError(f"format must be one of {EXPORT_FORMATS}, got {format!r}")
    return inspect_agent(agent_id, data_dir, lambda s: s.dump(format, default_graph_only=False))


def sparql(
    agent_id: str, query: str, data_dir: DataDir = None, *, format: str | None = None,
    timeout: float | None = SPARQL_TIMEOUT, limit: int | None = SPARQL_LIMIT,
    output: BinaryIO | None = None,
) -> Any:
    """Run a read-only SPARQL query over the agent's memory graph (:data:`PREFIXES` are
    predeclared).

    With ``format=None``: SELECT → a list of dicts, ASK → a bool, CONSTRUCT/DESCRIBE → a list
    of triples (as :meth:`MemoryManager.sparql`), at most ``limit`` rows. With a
    :data:`RESULT_FORMATS` name: the W3C results document as bytes (CONSTRUCT/DESCRIBE as
    N-Triples), or, with ``output`` (a binary file), written there as the rows come (no row
    limit; returns None). Within ``timeout`` seconds in both cases (what can be interrupted:
    :meth:`MemoryManager.sparql`).

    Raises:
        SparqlError: the query does not parse.
        UpdateRefusedError: the query is a SPARQL Update.
        QueryRefusedError: SERVICE, LOAD, a ``file:`` IRI, or a query beyond the size limits.
        QueryTimeoutError, QueryLimitError: past ``timeout`` seconds, or ``limit`` rows.
        InvalidInputError: an unknown ``format``; and see the module docstring.
    """
    seconds = check_timeout(timeout)
    rows = check_limit(limit)
    if format is None:
        return inspect_agent(
            agent_id, data_dir, lambda s: s.user_query(query, timeout=seconds, limit=rows)
        )
    if format not in RESULT_FORMATS:
        raise InvalidInputError(f"format must be one of {RESULT_FORMATS}, got {format!r}")
    chosen = format
    if output is None:
        return inspect_agent(
            agent_id, data_dir,
            lambda s: s.user_query_serialized(query, chosen, timeout=seconds),
        )
    sink = _Written(output)

    def stream(store: MemoryStore) -> None:
        try:
            store.user_query_serialized(query, chosen, timeout=seconds, output=sink)  # type: ignore[arg-type]
        except StoreError as exc:
            if sink.started:  # a fresh snapshot would write the first rows again
                raise SparqlError(f"the query failed after its first rows: {exc}") from exc
            raise

    inspect_agent(agent_id, data_dir, stream)
    return None


class _Written:
    """A binary output that remembers whether anything was written to it."""

    def __init__(self, output: BinaryIO) -> None:
        self._output = output
        self.started = False

    def write(self, data: bytes) -> int:
        self.started = self.started or bool(data)
        self._output.write(data)
        return len(data)

    def flush(self) -> None:
        self._output.flush()


def validate(agent_id: str, data_dir: DataDir = None) -> tuple[bool, str]:
    """Check the memory graph against the SHACL shapes shipped with the package.

    Returns ``(conforms, report)``, the report being pyshacl's text.

    Raises:
        MemoryRDFError: pyshacl is not installed (``pip install 'memory-rdf[shacl]'``); and
            see the module docstring.
    """
    return inspect_agent(agent_id, data_dir, _validate)


@dataclass(frozen=True)
class GraphPicture:
    """A picture made by :func:`graph`: its bytes and what it shows."""

    data: bytes
    format: str
    nodes: int  #: memories drawn
    total_nodes: int  #: memories the agent has
    connections: int  #: lines drawn (a pair linked both ways is one line)
    dangling: int  #: links drawn to forgotten memories
    left_out: int  #: memories within reach but beyond ``limit``


def graph(
    agent_id: str,
    data_dir: DataDir = None,
    *,
    format: Literal["html", "dot", "svg"] | str = "html",
    depth: int = GRAPH_DEPTH,
    limit: int = GRAPH_LIMIT,
) -> GraphPicture:
    """Draw the memory network within ``depth`` hops of the agent's focus: focus nodes in the
    middle, others on rings by hop distance, sized by importance, lines as thick as the links
    are strong, dashed lines to "forgotten" placeholders (dangling links).

    Raises:
        InvalidInputError: an unknown ``format``, or a negative ``depth`` or ``limit`` below 1.
        MemoryRDFError: ``format="svg"`` without Graphviz's ``dot`` program; and see the
            module docstring.
    """
    if format not in GRAPH_FORMATS:
        raise InvalidInputError(f"format must be one of {GRAPH_FORMATS}, got {format!r}")
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 0:
        raise InvalidInputError(f"depth must be an int >= 0, got {depth!r}")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidInputError(f"limit must be an int >= 1, got {limit!r}")

    def collect(store: MemoryStore) -> _graphview.GraphView:
        return _graphview.collect_view(store, depth=depth, limit=limit)

    view = inspect_agent(agent_id, data_dir, collect)
    return GraphPicture(
        data=_graphview.render_view(view, format), format=format, nodes=len(view.nodes),
        total_nodes=view.total_nodes, connections=len(view.pairs()),
        dangling=len(view.dangling), left_out=view.left_out,
    )


def graphviz_available() -> bool:
    """True when Graphviz's ``dot`` program is on ``PATH`` (needed for SVG pictures)."""
    return _graphview.dot_available()
