"""Writes: :class:`WriteBatch`, the operations that must land together (one update
request), and :class:`Graphs`, where a store keeps an agent's three graphs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from memory_rdf import _vocab as V
from memory_rdf._oxigraph.render import Param, render
from memory_rdf._oxigraph.terms import Term


@dataclass(frozen=True)
class Graphs:
    """Where a store keeps an agent's three graphs, as terms (``memory=None``: the default
    graph, which the embedded store uses for the memory network, SPEC §2; an endpoint store
    names all three, SPEC §8)."""

    memory: Term | None
    journal: Term
    meta: Term
    vectors: Term = Term(f"<{V.VECTOR_GRAPH}>")  # the semantic entry's vectors (SPEC §5.7)

    def params(self) -> dict[str, Param]:
        return {"memory": self.memory, "journal": self.journal, "meta": self.meta,
                "vectors": self.vectors}

    def of(self, graph: str | None) -> Term | None:
        """The term of a graph given by its embedded name (None: the memory network)."""
        if graph is None:
            return self.memory
        if graph == V.JOURNAL_GRAPH:
            return self.journal
        if graph == V.META_GRAPH:
            return self.meta
        if graph == V.VECTOR_GRAPH:
            return self.vectors
        raise ValueError(f"unknown graph {graph!r}")


class WriteBatch:
    """Operations that must land together: committed as ONE update request (SPEC §7, §8).

    The operations are kept as data (triples and template names) and rendered by the store
    that commits them, which knows where the agent's graphs are.
    """

    __slots__ = ("_after", "_ops", "strengths")

    def __init__(self) -> None:
        #: (verb, body or template name, parameters, graph, index_neutral or STRENGTHS)
        self._ops: list[tuple[str, str, dict[str, Param], str | None, bool | str]] = []
        self._after: list[Callable[[], None]] = []
        #: The strength replacements of :meth:`replace_strengths`, as data: (link, old, new)
        #: serialized terms, what the read mirror follows them by (not their text).
        self.strengths: list[tuple[str, str, str]] = []

    def after_commit(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` once the batch has landed (not if the write fails): for in-memory state
        that must follow the store, such as the fixed pool's node count."""
        self._after.append(fn)

    def insert(self, triples: Iterable[str], graph: str | None = None, *,
               index_neutral: bool = False) -> None:
        """``INSERT DATA`` of ``triples`` (one :func:`triple` each). ``index_neutral``: the
        writer vouches that the triples change nothing the read mirror's link index follows —
        no ``memory:source``, ``target`` or ``relation`` triple, and a ``memory:scanCount``
        only where the batch replaces it on a node that stays live (a compression scan) — so
        the mirror does not read them for it (:func:`index_changes`; a compression commit
        holds ~700 kB of strength and text triples, and the scanCount of every node scanned,
        whose liveness it would otherwise look up one by one)."""
        self._data("INSERT DATA", triples, graph, index_neutral)

    def insert_unless(self, triples: Iterable[str], graph: str, absent: str) -> None:
        """Insert ``triples`` into ``graph`` (the journal, the metadata: never the memory
        network, which the read mirror follows) unless ``graph`` holds the triple ``absent``
        when the update runs: an ``INSERT … WHERE { FILTER NOT EXISTS … }``."""
        body = "\n".join(triples)
        if body:
            self._ops.append(("INSERT UNLESS", body, {"absent": Term(absent)}, graph, False))

    def delete(self, triples: Iterable[str], graph: str | None = None, *,
               index_neutral: bool = False) -> None:
        """``DELETE DATA`` of ``triples``; ``index_neutral`` as for :meth:`insert`."""
        self._data("DELETE DATA", triples, graph, index_neutral)

    def replace_strengths(self, changes: Iterable[tuple[str, str, str]]) -> None:
        """Replace link strengths: ``(link, old, new)`` serialized terms, the ``old`` strength
        triple deleted and the ``new`` one inserted (a ``DELETE DATA`` then an ``INSERT DATA``
        of their own). The read mirror takes them from the list, without reading the text
        (a compression commit rewrites ~1,200 of them; issue 38)."""
        rows = list(changes)
        if not rows:
            return
        self.strengths += rows
        for verb, at in (("DELETE DATA", 1), ("INSERT DATA", 2)):
            body = "\n".join(f"{row[0]} {V.STRENGTH} {row[at]} ." for row in rows)
            self._ops.append((verb, body, {}, None, STRENGTHS))

    def update(self, name: str, **params: Param) -> None:
        """The shipped update template ``queries/{name}.ru`` with ``params`` (see :func:`render`;
        the graph parameters ``memory``, ``journal``, ``meta`` are filled in by the store)."""
        self._ops.append(("update", name, params, None, False))

    def _data(self, verb: str, triples: Iterable[str], graph: str | None,
              index_neutral: bool) -> None:
        body = "\n".join(triples)
        if body:
            self._ops.append((verb, body, {}, graph, index_neutral))

    def __bool__(self) -> bool:
        return bool(self._ops)

    def clear(self) -> None:
        self._ops.clear()
        self._after.clear()
        self.strengths.clear()

    def text(self, graphs: Graphs | None = None) -> str:
        """The batch as one SPARQL Update request for a store whose graphs are ``graphs``
        (default: the embedded layout)."""
        graphs = graphs or EMBEDDED_GRAPHS
        out: list[str] = []
        for verb, body, params, graph, _ in self._ops:
            if verb == "update":
                out.append(render(body + ".ru", **{**graphs.params(), **params}).strip())
                continue
            target = graphs.of(graph)
            if verb == "INSERT UNLESS":
                # The one-row VALUES is for Virtuoso 7: a WHERE of a FILTER NOT EXISTS alone
                # (one empty solution, filtered) inserts even when the triple is there.
                out.append(f"INSERT {{ GRAPH {target} {{\n{body}\n}} }}\nWHERE {{ VALUES ?row "
                           f"{{ 1 }} FILTER NOT EXISTS {{ GRAPH {target} {{ {params['absent']} }} "
                           "} }")
                continue
            if target is not None:
                body = f"GRAPH {target} {{\n{body}\n}}"
            out.append(f"{verb} {{\n{body}\n}}")
        return " ;\n".join(out)

    def run_after_commit(self) -> None:
        for fn in self._after:
            fn()


#: The index_neutral mark of the operations of :meth:`WriteBatch.replace_strengths` (truthy:
#: neutral; the read mirror follows :attr:`WriteBatch.strengths` instead of their text).
STRENGTHS = "strengths"


def triple(s: str, p: str, o: str) -> str:
    return f"{s} {p} {o} ."


#: The embedded layout (SPEC §2): memory network in the default graph.
EMBEDDED_GRAPHS = Graphs(
    memory=None, journal=Term(f"<{V.JOURNAL_GRAPH}>"), meta=Term(f"<{V.META_GRAPH}>")
)
