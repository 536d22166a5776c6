"""The store interface (:class:`MemoryStore`): what the library needs from a store,
implemented by the embedded :class:`~memory_rdf._oxigraph.agent_store.AgentStore` and by the
SPARQL endpoint store of ``memory_rdf._remote``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO

from memory_rdf._oxigraph.batch import EMBEDDED_GRAPHS, Graphs, WriteBatch
from memory_rdf._oxigraph.render import Param, render
from memory_rdf._oxigraph.terms import Term

Row = tuple[Any, ...]
UserResult = list[dict[str, Any]] | bool | list[tuple[Any, Any, Any]]


class MemoryStore(ABC):
    """What the library needs from a store (embedded: :class:`AgentStore`; a SPARQL 1.1
    endpoint: ``memory_rdf._remote.RemoteStore``). Recall, remember, compression and
    inspection speak only to this interface."""

    #: The directory of an embedded store (None for an endpoint or an in-memory store).
    path: Path | None = None
    read_only: bool = False
    #: Whether a write is local and short (embedded RocksDB): remember() then holds Ctrl-C
    #: back across its journal write and queueing (an endpoint's write may retry for minutes).
    local_writes: bool = False
    #: Writes flushed to disk because FLUSH_AFTER_BYTES piled up (embedded only).
    auto_flushes: int = 0
    #: Where the agent's graphs are.
    graphs: Graphs = EMBEDDED_GRAPHS
    #: Only standard SPARQL 1.1 may be sent (no Oxigraph extensions such as LATERAL, §8).
    standard_only: bool = False

    @property
    @abstractmethod
    def location(self) -> str:
        """The store's directory or endpoint URL, for messages."""

    def render(self, name: str, **params: Param) -> str:
        """:func:`render` with this store's graph parameters, choosing ``{name}_std`` (the
        standard-SPARQL form) when the store takes standard SPARQL only and the file exists."""
        if self.standard_only and "\n" not in name and not name.endswith(".ru"):
            from memory_rdf._resources import query_names

            if f"{name}_std" in query_names():
                name = f"{name}_std"
        return render(name, **{**self.graphs.params(), **params})

    @abstractmethod
    def rows(self, query: str) -> list[Row]:
        """Run a SELECT; rows as tuples of Python values in projection order."""

    def term_rows(self, query: str) -> list[Sequence[Any]] | None:
        """Run a SELECT; rows as pyoxigraph terms (None for an unbound cell), materialized —
        or None when the store has no terms to give (an endpoint: use :meth:`rows`). For hot
        paths that need only some cells as Python values (~0.3 µs a cell for
        :func:`to_python`)."""
        return None

    def index_rows(self, query: str) -> list[Row]:
        """:meth:`rows` of a query that relies on the order of the store's indexes (read
        without ORDER BY, e.g. ``scan_order.rq``): the embedded store answers it from disk
        (RocksDB keeps its indexes sorted; the read mirror, in memory, does not)."""
        return self.rows(query)

    @property
    def mirrored(self) -> bool:
        """Whether a read mirror serves reads now (its link index included; it may go away
        before the next read: :meth:`mirror_rows` then says None)."""
        return False

    @property
    def mirror_building(self) -> bool:
        """Whether a read mirror is being built (at open, after a purge, at a renewal): until
        it serves reads they go to disk, and automatic compression waits for it."""
        return self.mirror_state == "loading"

    @property
    def mirror_state(self) -> str:
        """The read mirror: "on", "loading", "off", "too large" (the automatic choice said
        no) or "failed" (reads go to disk). An endpoint store has none."""
        return "off"

    #: Times the read mirror was built again to shed the triples deleted from it.
    mirror_renewals = 0

    def mirror_rows(self, query: str) -> list[Sequence[Any]] | None:
        """Rows of a query over the read mirror's link index (``mirror_*.rq``), or None when no
        read mirror serves reads (ask the SPEC §2 layout instead). Each row holds pyoxigraph
        terms (their ``value``: the IRI or the literal's lexical form; None when unbound), in
        projection order: the caller knows its columns and reads only what it needs (a
        generic conversion of every term was a fifth of a level's time)."""
        return None

    def column(self, query: str) -> list[Any]:
        return [row[0] for row in self.rows(query)]

    def scalar(self, query: str, default: Any = None) -> Any:
        rows = self.rows(query)
        return rows[0][0] if rows and rows[0][0] is not None else default

    @abstractmethod
    def ask(self, query: str) -> bool: ...

    @abstractmethod
    def commit(self, batch: WriteBatch) -> None:
        """Apply the batch atomically (one update request), then its after-commit hooks."""

    @abstractmethod
    def quads(self, subject: str | None, predicate: str | None, obj: Term | None,
              graph: str | None) -> list[tuple[Any, Any, Any]]:
        """(s, p, o) of the matching triples of one graph (None: the memory network)."""

    @abstractmethod
    def user_query(
        self, query: str, *, timeout: float | None = None, limit: int | None = None
    ) -> UserResult:
        """The user's read-only query over the memory network only (SPEC §6, §8), answered
        within ``timeout`` seconds (:class:`QueryTimeoutError`) and ``limit`` rows
        (:class:`QueryLimitError`); None: no bound."""

    @abstractmethod
    def user_query_serialized(
        self, query: str, fmt: str, *, timeout: float | None = None,
        output: BinaryIO | None = None,
    ) -> bytes | None:
        """The user's query answered in a W3C results format (json, csv, tsv, xml): the
        bytes, or written to ``output`` as the rows come (then None)."""

    @abstractmethod
    def dump(self, fmt: str, *, default_graph_only: bool) -> bytes:
        """The memory network (turtle, ntriples), or every graph of the agent (nquads, trig)."""

    def flush(self) -> None:  # noqa: B027 - nothing to do for an endpoint
        """Make the writes durable (embedded: RocksDB memtables to disk)."""

    def optimize(self) -> None:  # noqa: B027 - nothing to do for an endpoint
        """Compact the store (embedded only)."""

    def rewrite(self) -> None:  # noqa: B027 - an endpoint's files are the server's
        """Make deleted data unrecoverable from the store's files (embedded: a fresh copy,
        forget(purge=True)); on an endpoint, the server's own storage decides."""

    def maybe_optimize_in_background(self) -> bool:
        return False

    def outage(self) -> str | None:
        """Why the store cannot be reached right now (a server that does not answer), for
        the message of a call that timed out waiting; None when nothing is known wrong."""
        return None

    def stop_waiting(self) -> None:  # noqa: B027 - an embedded store does not wait on a server
        """The agent is closing and gives up on its work: requests waiting out retries for a
        server that is away fail now instead (endpoint), so close() is not held for minutes."""

    @abstractmethod
    def close(self) -> None: ...
