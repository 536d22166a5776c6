"""The store interface (:class:`MemoryStore`): what the library needs from a store,
implemented by the embedded :class:`~memory_rdf._oxigraph.agent_store.AgentStore` and by the
SPARQL endpoint store of ``memory_rdf._remote``. What only the embedded store has (upkeep
of its files, its read mirror) is on :class:`AgentStore`, reached through
:attr:`MemoryStore.local`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from memory_rdf._oxigraph.batch import EMBEDDED_GRAPHS, Graphs, WriteBatch
from memory_rdf._oxigraph.render import Param, render
from memory_rdf._oxigraph.terms import Term

if TYPE_CHECKING:
    from memory_rdf._oxigraph.agent_store import AgentStore
    from memory_rdf._oxigraph.text_table import TextTable

Row = tuple[Any, ...]
UserResult = list[dict[str, Any]] | bool | list[tuple[Any, Any, Any]]


class MemoryStore(ABC):
    """What the library needs from a store (embedded: :class:`AgentStore`; a SPARQL 1.1
    endpoint: ``memory_rdf._remote.RemoteStore``). Recall, remember, compression and
    inspection speak only to this interface."""

    #: The directory of an embedded store (None for an endpoint or an in-memory store).
    path: Path | None = None
    read_only: bool = False
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

    def text_table(self) -> TextTable | None:
        """The nodes' texts and times held in memory (the read mirror's
        :class:`~.text_table.TextTable`), which answers the text reads (``node_texts``,
        ``node_dates``, ``node_entries``, ``matching_nodes``, ``matching_texts``,
        ``scan_state``'s content) as those queries would; None (the default: an endpoint, a
        store whose mirror is not serving): run the queries."""
        return None

    @property
    def local(self) -> AgentStore | None:
        """The embedded store behind this interface, for what only it has — its upkeep
        (``flush``, ``optimize``, ``rewrite``, ``maybe_optimize_in_background``) and its read
        mirror (``mirrored``, ``mirror_rows``, ``mirror_state``, ``mirror_building``,
        ``mirror_renewals``); None for an endpoint, whose files and caches are the server's."""
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

    def outage(self) -> str | None:
        """Why the store cannot be reached right now (a server that does not answer), for
        the message of a call that timed out waiting; None when nothing is known wrong."""
        return None

    def stop_waiting(self) -> None:  # noqa: B027 - an embedded store does not wait on a server
        """The agent is closing and gives up on its work: requests waiting out retries for a
        server that is away fail now instead (endpoint), so close() is not held for minutes."""

    @abstractmethod
    def close(self) -> None: ...
