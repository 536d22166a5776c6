"""Read-only inspection of an agent's store (the engine of the public
:mod:`memory_rdf.inspect`), safe while another process holds the agent (SPEC §6).

A running agent holds its store's RocksDB lock, so inspection never opens the store for
writing: it opens it read-only (``AgentStore(path, read_only=True)``), which takes no lock,
never writes, creates or migrates anything, and reads a private copy of the agent's files that
the store itself takes and deletes when it is closed or collected
(:mod:`memory_rdf._oxigraph.snapshot`). Nothing here can harm the agent's store.

**Live inspection.** The copy is a *fixed snapshot* of the store as it was when it was taken
(SPEC §7): it does not see later writes. pyoxigraph calls a read-only open of the live
directory beside a writer undefined, and it is: such a reader could loop for ever, growing
without bound. So every inspection is one short *operation* run on a snapshot taken for it and
deleted right after, through :func:`inspect_agent`:

1. take a fresh snapshot (a copy taken again while the writer changes its file set);
2. run the whole operation on it, materializing its result (no lazy iterators escape);
3. on a store failure — :class:`~memory_rdf.StoreError` / :class:`OSError`, or a
   ``RuntimeError`` from RocksDB — drop the snapshot, wait a moment (:data:`RETRY_DELAY`,
   doubling) and start again from 1 with a new snapshot; after :data:`ATTEMPTS` tries in all,
   raise :class:`~memory_rdf.StoreError`.

An operation is all-or-nothing per snapshot, so a retried result is never a mix of two
snapshots. Errors that another snapshot cannot cure — an unknown agent, a bad agent id, a
SPARQL syntax error, a refused update, a store written by a newer schema — are raised at once.

>>> import tempfile
>>> from memory_rdf import MemoryManager
>>> data = tempfile.mkdtemp()
>>> with MemoryManager("agent_007", data_dir=data) as mem:
...     mem.remember([{"role": "user", "content": "PostgreSQL 存订单"}])
...     _ = mem.wait_idle()
>>> inspect_agent("agent_007", data, inspect_stats)["nodes"]
1
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from memory_rdf import _vocab as V
from memory_rdf._agents import (
    STORE_MARKER,
    agent_exists,
    agent_path,
)
from memory_rdf._config import Config
from memory_rdf._exceptions import (
    InvalidInputError,
    MemoryRDFError,
    SchemaVersionError,
    StoreError,
    UnknownAgentError,
)
from memory_rdf._focus import FocusManager
from memory_rdf._journal import Journal, refuse_foreign
from memory_rdf._links import LinkStore
from memory_rdf._nodes import NodeStore
from memory_rdf._oxigraph import AgentStore, MemoryStore, lit, render
from memory_rdf._oxigraph.rdflib_view import rdflib_graph
from memory_rdf._remote import SparqlEndpoint, open_remote_for_inspection

if TYPE_CHECKING:
    import rdflib

__all__ = [
    "ATTEMPTS",
    "IMPORTANCE_BUCKETS",
    "agent_exists",
    "agent_path",
    "importance_summary",
    "inspect_agent",
    "inspect_recall",
    "inspect_stats",
    "open_for_inspection",
    "open_rdflib_graph",
    "validate",
]

T = TypeVar("T")

#: Snapshots tried per inspection before the last error is raised.
ATTEMPTS = 4
#: First pause between attempts (seconds); doubled after each failed attempt.
RETRY_DELAY = 0.05

def open_for_inspection(
    agent_id: str, data_dir: str | os.PathLike[str] | None = None
) -> AgentStore:
    """A read-only snapshot of the agent's store (no lock taken, nothing written or created in
the data directory): ``close()`` it, which deletes its private copy of the agent's files (as
its being garbage-collected does).

    Raises :class:`~memory_rdf.UnknownAgentError` naming the agent when it has no store, and
    :class:`~memory_rdf.InvalidInputError` for an invalid id, before any file is touched.
    Prefer :func:`inspect_agent`, which retries on a fresh snapshot when a live writer
    compacts files away under this one.
    """
    path = agent_path(agent_id, data_dir)
    if not (path / STORE_MARKER).is_file():
        raise UnknownAgentError(f"unknown agent {agent_id!r}: no memory store at {path}")
    store = AgentStore(path, read_only=True)
    try:
        refuse_foreign(store)
    except BaseException:
        store.close()
        raise
    return store


def _retryable(exc: BaseException) -> bool:
    """Failures a fresh snapshot can cure: the store's own I/O errors, and the ``RuntimeError``
    ("Corruption: … No such file …") that RocksDB raises when the writer compacted away a file
    the snapshot's manifest still names."""
    if isinstance(exc, MemoryRDFError):
        return isinstance(exc, StoreError) and not isinstance(exc, SchemaVersionError)
    return isinstance(exc, OSError | RuntimeError) or type(exc).__name__ == "PanicException"


def inspect_agent(
    agent_id: str,
    data_dir: str | os.PathLike[str] | SparqlEndpoint | None,
    operation: Callable[[MemoryStore], T],
    *,
    attempts: int = ATTEMPTS,
) -> T:
    """Run ``operation`` on a fresh read-only snapshot of the agent's store, retrying the whole
    operation on a new snapshot when the store fails under it (see the module docstring).
    ``data_dir`` may be a :class:`SparqlEndpoint` (SPEC §8): the agent's graphs are read there,
    without taking its lease (the endpoint store retries by itself).

    ``operation`` must return materialized data (lists, dicts, bytes), never a lazy result.
    """
    if isinstance(data_dir, SparqlEndpoint):
        remote = open_remote_for_inspection(data_dir, agent_id)
        try:
            return operation(remote)
        finally:
            remote.close()
    return _on_snapshots(agent_id, data_dir, operation, attempts, keep=False)


def _on_snapshots(
    agent_id: str, data_dir: str | os.PathLike[str] | None,
    operation: Callable[[MemoryStore], T], attempts: int, *, keep: bool,
) -> T:
    """:func:`inspect_agent`'s retries on embedded stores. Each snapshot is closed after its
    attempt, except, with ``keep``, the one whose result is returned: that result owns it."""
    delay = RETRY_DELAY
    attempt = 0
    while True:
        attempt += 1
        store: MemoryStore | None = None
        try:
            store = open_for_inspection(agent_id, data_dir)
            result = operation(store)
            if keep:
                store = None
            return result
        except BaseException as exc:
            if not _retryable(exc):
                raise
            if attempt >= attempts:
                if isinstance(exc, StoreError):
                    raise
                raise StoreError(
                    f"cannot read the memory store {agent_path(agent_id, data_dir)} "
                    f"({_one_line(str(exc)) or type(exc).__name__}); its writer may be "
                    "rewriting files right now: try again"
                ) from exc
        finally:
            if store is not None:
                store.close()
        time.sleep(delay)
        delay *= 2


def _one_line(text: str) -> str:
    return " ".join(text.split())


# ---------------------------------------------------------------------------------------------
# Operations
# ---------------------------------------------------------------------------------------------


def _store_bytes(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):  # a file compacted away while we walked
                total += os.stat(os.path.join(root, name)).st_size
    return total


#: Upper bounds of the importance histogram of :func:`importance_summary` (the last bucket is
#: open). Importance below 1 is what compression shortens (SPEC §5.2), so 1 is a bound.
IMPORTANCE_BUCKETS = (0.5, 1.0, 2.0, 5.0, 10.0, 20.0)


def importance_summary(
    store: MemoryStore, threshold: float | None = None
) -> dict[str, Any]:
    """How important the agent's memories are: every node's importance (the sum of the
    strengths of its live links, SPEC §5.2) from one SPARQL aggregate grouped by node
    (``queries/graph_importance.rq``; it reads every link, which is fine for inspection).

    Returns ``min``, ``median``, ``mean``, ``max`` (``None`` without nodes), ``fading`` (nodes
    below 1: compression shortens them when it scans them) and ``histogram``: a list of
    ``{"range": "1–2", "nodes": n}`` over :data:`IMPORTANCE_BUCKETS`.
    """
    limit = Config().link_break_threshold if threshold is None else threshold
    values = sorted(
        float(v or 0.0)
        for _node, v in store.rows(render("graph_importance", threshold=lit(float(limit))))
    )
    edges = (0.0, *IMPORTANCE_BUCKETS)
    histogram = []
    for i, low in enumerate(edges):
        high = edges[i + 1] if i + 1 < len(edges) else None
        count = sum(1 for v in values if v >= low and (high is None or v < high))
        label = f"<{high:g}" if i == 0 else f"≥{low:g}" if high is None else f"{low:g}–{high:g}"
        histogram.append({"range": label, "nodes": count})
    n = len(values)
    median = None
    if n:
        median = values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2
    return {
        "min": values[0] if n else None,
        "median": median,
        "mean": sum(values) / n if n else None,
        "max": values[-1] if n else None,
        "fading": sum(1 for v in values if v < 1.0),
        "histogram": histogram,
    }


def inspect_stats(store: MemoryStore) -> dict[str, Any]:
    """The keys of :meth:`MemoryManager.stats` that a store alone can tell, plus a few more.

    ``nodes``, ``links``, ``dangling_links``, ``focus`` (ids, newest first), ``pinned``
    (how many, SPEC §5.6 v3), ``pending_tasks``
    (remembers journalled but not yet processed), ``failed_tasks``; and ``agent_id``,
    ``focus_phrases`` (newest first), ``importance`` (:func:`importance_summary`),
    ``store_path``, ``store_bytes`` (bytes on disk). Model-call counters live in the running
    process and are not included.
    """
    nodes = NodeStore(store)
    links, dangling = LinkStore(store, 0.0).counts()
    focus = FocusManager(store, 1).ids()
    texts = nodes.texts(focus)
    journal = Journal(store)
    path = store.path
    return {
        "agent_id": path.name if path is not None else getattr(store, "agent_id", None),
        "store_path": str(path.resolve()) if path is not None else store.location,
        "nodes": nodes.count(),
        "links": links,
        "dangling_links": dangling,
        "focus": focus,
        "focus_phrases": [texts[nid][1] for nid in focus if nid in texts],
        "pinned": len(nodes.pinned()),
        "pending_tasks": journal.count("pending"),
        "failed_tasks": journal.count("failed"),
        "importance": importance_summary(store),
        "store_bytes": _store_bytes(path) if path is not None else 0,
        "store_read_only": store.read_only,
    }


def inspect_memories(
    keywords: list[str] | None = None,
    since: Any = None,
    until: Any = None,
    limit: int | None = 100,
    offset: int = 0,
) -> Callable[[MemoryStore], list[dict[str, Any]]]:
    """An operation for :func:`inspect_agent`: :meth:`MemoryManager.memories` on a snapshot
    (``importance`` with the default ``link_break_threshold``). Arguments are checked here,
    before any store is opened."""
    from memory_rdf._listing import Listing, make_window

    window = make_window(since, until)
    if limit is not None and limit < 1:
        raise InvalidInputError(f"limit must be >= 1, got {limit}")
    if offset < 0:
        raise InvalidInputError(f"offset must be >= 0, got {offset}")
    kws = [k.strip() for k in keywords or [] if k.strip()] or None

    def run(store: MemoryStore) -> list[dict[str, Any]]:
        threshold = Config().link_break_threshold
        return Listing(store, threshold).page(kws, window, limit, offset)

    return run


def inspect_recall(
    agent_id: str, keywords: Sequence[str], config: Config | None = None,
    embedder: Any = None, **arguments: Any
) -> Callable[[MemoryStore], str]:
    """An operation for :func:`inspect_agent`: :meth:`MemoryManager.recall` on a snapshot
    (SPEC §5.4 rule 5: a recall writes nothing). The agent's own recall machinery runs on the
    read-only store, so the text is the one a live ``recall`` with the same ``config`` gives;
    journalled remembers not processed yet are left to the process that holds the agent.
    ``arguments``: those of :meth:`~memory_rdf.MemoryManager.recall` (``timeout`` aside)."""
    chosen = config or Config()

    def run(store: MemoryStore) -> str:
        mem = _read_only_manager(agent_id, store, chosen, embedder)
        try:
            mem.initialize()
            return mem.recall(keywords, **arguments)
        finally:
            mem.close()

    return run


def _read_only_manager(agent_id: str, store: MemoryStore, config: Config,
                       embedder: Any = None) -> Any:
    """A :class:`~memory_rdf.MemoryManager` of ``agent_id`` over the read-only ``store``: it
    recalls as the live one does, and resumes no journalled remember (the holder runs them)."""
    from memory_rdf._manager import MemoryManager
    from memory_rdf._remote import RemoteStore

    class ReadOnlyManager(MemoryManager):
        def _open_store(self) -> MemoryStore:
            return store

        def _resume_journal(self) -> None:
            return None  # neither queued nor marked failed: the store is read-only

    if isinstance(store, RemoteStore):
        return ReadOnlyManager(agent_id, endpoint=store.endpoint, config=config,
                               embedder=embedder)
    assert store.path is not None
    return ReadOnlyManager(agent_id, data_dir=store.path.parent, config=config,
                           embedder=embedder)


def inspect_tasks(store: MemoryStore) -> list[dict[str, Any]]:
    """The journalled remembers, pending and failed, in the order accepted: ``id``,
    ``status``, ``text``, ``attempts``, ``error``, ``accepted_at``."""
    return [
        {"id": t.id, "status": t.status, "text": t.text, "attempts": t.attempts,
         "error": t.error, "accepted_at": t.accepted_at}
        for t in Journal(store).tasks()
    ]


def open_rdflib_graph(
    agent_id: str, data_dir: str | os.PathLike[str] | None = None
) -> rdflib.Graph:
    """The agent's memory network as a read-only :class:`rdflib.Graph` (through oxrdflib).

    The graph is the store's *default graph* — nodes, links and the focus list, not the
    journal or metadata graphs — on a read-only snapshot taken now (SPEC §7): it takes no lock,
    works while another process runs the agent, never sees later writes (call again for fresh
    data; keep it short-lived next to a live writer), and refuses writes. The ``memory:``,
    ``node:``, ``link:`` and ``xsd:`` prefixes are bound, so ``graph.query`` can use them.
    The same thing by hand, for an agent directory no process holds (a read-only open of a
    directory a writer is using is undefined in RocksDB; this function reads a private copy)::

        import pyoxigraph, rdflib, oxrdflib
        graph = rdflib.Graph(
            oxrdflib.OxigraphStore(store=pyoxigraph.Store.read_only("memory_data/agent_001")),
            identifier=rdflib.graph.DATASET_DEFAULT_GRAPH_ID,
        )

    ``identifier=DATASET_DEFAULT_GRAPH_ID`` matters: without it rdflib names the graph with a
    fresh blank node, which oxrdflib maps to an (empty) named graph of that name. Plain string
    literals come back typed ``xsd:string`` (RDF 1.1 makes them the same literal; rdflib's
    ``Literal("x")`` does not compare equal to them: compare ``str()`` or ``.toPython()``).
    """
    if isinstance(data_dir, SparqlEndpoint):
        raise InvalidInputError(
            "open_rdflib_graph reads embedded stores; for an agent on a SPARQL endpoint use "
            "rdflib's SPARQLStore on the endpoint URL, graph <https://w3id.org/memory-rdf/"
            f"agent/{agent_id}>"
        )

    def open_graph(store: MemoryStore) -> rdflib.Graph:
        assert isinstance(store, AgentStore)
        graph = rdflib_graph(store)
        for prefix, iri in V.PREFIXES.items():
            graph.bind(prefix, iri)
        len(graph)  # read the snapshot once: a failure here is retried on a fresh one
        return graph

    # The graph owns the snapshot: it closes it (deleting the copy) when it is collected.
    return _on_snapshots(agent_id, data_dir, open_graph, ATTEMPTS, keep=True)


def validate(store: MemoryStore) -> tuple[bool, str]:
    """Check the default graph against the SHACL shapes shipped in ``ontology/shapes.ttl``.

    Returns ``(conforms, report)``, the report being pyshacl's human-readable text. The graph
    is dumped as N-Triples into an in-memory rdflib graph first: faster than validating
    through oxrdflib (SPEC §7, docs/inspecting.md). Needs the ``shacl`` extra.
    """
    import rdflib

    try:
        import pyshacl
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise MemoryRDFError("validation needs pyshacl: pip install 'memory-rdf[shacl]'") from exc
    from memory_rdf._resources import ontology_text

    data = rdflib.Graph()
    data.parse(data=store.dump("ntriples", default_graph_only=True).decode("utf-8"), format="nt")
    shapes = rdflib.Graph()
    shapes.parse(data=ontology_text("shapes.ttl"), format="turtle")
    conforms, _results, text = pyshacl.validate(
        data, shacl_graph=shapes, inference="none", advanced=False, allow_warnings=False
    )
    return bool(conforms), str(text)
