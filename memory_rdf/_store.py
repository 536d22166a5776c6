"""The one module that talks to pyoxigraph.

Everything above it speaks in node ids, strengths and relation names. This module:

* opens an agent's store (translating RocksDB's lock error into :class:`StoreLockedError`),
* serializes terms (:func:`node_ref`, :func:`lit`, ...) — the only way values reach SPARQL text,
* renders the shipped ``.rq`` queries with those terms (see :func:`render`),
* runs queries, materializing rows in the calling thread (SPEC §7: result iterators must not
  cross threads), and runs each atomic write as exactly one ``update()`` (:class:`WriteBatch`),
* answers the user's read-only SPARQL (SPEC §6).
"""

from __future__ import annotations

import contextlib
import gc
import os
import re
import shutil
import threading
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

import pyoxigraph as ox

from memory_rdf import _vocab as V
from memory_rdf._exceptions import (
    SparqlError,
    StoreError,
    StoreLockedError,
    UpdateRefusedError,
)
from memory_rdf._resources import query_text

__all__ = [
    "AgentStore",
    "Term",
    "WriteBatch",
    "link_ref",
    "lit",
    "node_id",
    "node_ref",
    "render",
]


class Term(str):
    """A term serialized by pyoxigraph (escaped N-Triples syntax): safe to splice into SPARQL.

    Only the constructors in this module make them; :func:`render` refuses anything else.
    """

    __slots__ = ()


_NODE_PREFIX_LEN = len(V.NODE)


def node_ref(node: str) -> Term:
    return Term(str(ox.NamedNode(V.NODE + node)))


def link_iri(source: str, target: str) -> str:
    """The IRI of the link from ``source`` to ``target``: derived from the pair (SPEC §2)."""
    return f"{V.LINK}{source}--{target}"


def link_ref(source: str, target: str) -> Term:
    return Term(str(ox.NamedNode(link_iri(source, target))))


def iri_ref(iri: str) -> Term:
    return Term(str(ox.NamedNode(iri)))


def node_id(iri: str) -> str:
    """The id of a ``node:`` IRI (inverse of :func:`node_ref` on the IRI's value)."""
    return iri[_NODE_PREFIX_LEN:] if iri.startswith(V.NODE) else iri


_XSD_DATETIME = ox.NamedNode(V.XSD + "dateTime")


def lit(value: str | int | float | bool | datetime) -> Term:
    """A literal: str → xsd:string, int → xsd:integer, float → xsd:double,
    datetime → xsd:dateTime."""
    if isinstance(value, datetime):
        return Term(str(ox.Literal(value.isoformat(), datatype=_XSD_DATETIME)))
    if isinstance(value, float):
        # repr() round-trips exactly; pyoxigraph would print e.g. "0.5" for 0.5 anyway.
        return Term(str(ox.Literal(repr(value), datatype=ox.NamedNode(V.XSD + "double"))))
    return Term(str(ox.Literal(value)))


# ---------------------------------------------------------------------------------------------
# Rendering the shipped queries
# ---------------------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"(?P<marker>^[ \t]*# @(?P<kind>values|in|contains) (?P<var>\w+) (?P<name>\w+)[ \t]*$)"
    r"|(?P<comment>(?<![<\w])#[^\n]*)"
    r"|\$(?P<param>[A-Za-z_]\w*)",
    re.MULTILINE,
)


def render(name_or_text: str, **params: Term | Sequence[Term] | None) -> str:
    """Fill a query's parameters with serialized terms.

    Parameter syntax inside the ``.rq`` files (which stay valid SPARQL on their own, so a user
    can run them unchanged):

    * ``$name`` — replaced by one term (an unbound variable when the file is run as-is);
    * ``# @values var name`` — replaced by ``VALUES ?var { t1 t2 … }``;
    * ``# @in var name`` — replaced by ``FILTER(?var IN (t1, t2, …))``; dropped when ``None``;
    * ``# @contains var name`` — ``FILTER(CONTAINS(?var, t1) || …)``; dropped when ``None``.

    Every value must be a :class:`Term` (or a sequence of them): raw strings are refused. The
    text is scanned once, so nothing spliced in is ever read again as a parameter; other
    comments are left as they are.
    """
    text = query_text(name_or_text) if "\n" not in name_or_text else name_or_text

    def replace(match: re.Match[str]) -> str:
        if match.group("comment") is not None:
            return match.group(0)
        if match.group("param") is not None:
            name = match.group("param")
            if name not in params:
                raise KeyError(f"query parameter ${name} is not given")
            (term,) = _terms(name, params[name], many=False)
            return term
        kind, var, name = match.group("kind", "var", "name")
        value = params.get(name)
        if value is None:
            if kind == "values":
                raise KeyError(f"query parameter {name!r} is required")
            return ""
        terms = _terms(name, value, many=True)
        if kind == "values":
            return f"VALUES ?{var} {{ {' '.join(terms)} }}"
        if kind == "in":
            return f"FILTER(?{var} IN ({', '.join(terms)}))"
        return "FILTER(" + " || ".join(f"CONTAINS(?{var}, {t})" for t in terms) + ")"

    return _TOKEN.sub(replace, text)


def _terms(name: str, value: object, *, many: bool) -> list[Term]:
    values: list[object] = (
        list(value) if many and isinstance(value, list | tuple) else [value]
    )
    for v in values:
        if not isinstance(v, Term):
            raise TypeError(f"query parameter {name!r} must be serialized with memory_rdf._store")
    return values  # type: ignore[return-value]


# ---------------------------------------------------------------------------------------------
# Terms back to Python
# ---------------------------------------------------------------------------------------------


def _parse_datetime(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _parse_bool(text: str) -> bool:
    return text in ("true", "1")


_CONVERT: dict[str, Any] = {
    V.XSD + "integer": int,
    V.XSD + "int": int,
    V.XSD + "long": int,
    V.XSD + "nonNegativeInteger": int,
    V.XSD + "double": float,
    V.XSD + "float": float,
    V.XSD + "decimal": float,
    V.XSD + "boolean": _parse_bool,
    V.XSD + "dateTime": _parse_datetime,
}


def to_python(term: object) -> Any:
    """IRIs as ``str``, literals as the Python value of their datatype, blank nodes as ``_:id``."""
    if term is None:
        return None
    if isinstance(term, ox.NamedNode):
        return term.value
    if isinstance(term, ox.Literal):
        convert = _CONVERT.get(term.datatype.value)
        if convert is None:
            return term.value
        try:
            return convert(term.value)
        except ValueError:
            return term.value
    if isinstance(term, ox.BlankNode):
        return f"_:{term.value}"
    if isinstance(term, ox.Triple):
        return (to_python(term.subject), to_python(term.predicate), to_python(term.object))
    return str(term)


# ---------------------------------------------------------------------------------------------
# Writes
# ---------------------------------------------------------------------------------------------


class WriteBatch:
    """Operations that must land together: committed as ONE ``Store.update()`` (SPEC §7)."""

    __slots__ = ("_after", "_ops")

    def __init__(self) -> None:
        self._ops: list[str] = []
        self._after: list[Callable[[], None]] = []

    def after_commit(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` once the batch has landed (not if the write fails): for in-memory state
        that must follow the store, such as the fixed pool's node count."""
        self._after.append(fn)

    def insert(self, triples: Iterable[str], graph: str | None = None) -> None:
        self._data("INSERT DATA", triples, graph)

    def delete(self, triples: Iterable[str], graph: str | None = None) -> None:
        self._data("DELETE DATA", triples, graph)

    def operation(self, rendered: str) -> None:
        """A rendered update operation (DELETE/INSERT … WHERE …)."""
        self._ops.append(rendered)

    def _data(self, verb: str, triples: Iterable[str], graph: str | None) -> None:
        body = "\n".join(triples)
        if not body:
            return
        if graph is not None:
            body = f"GRAPH {iri_ref(graph)} {{\n{body}\n}}"
        self._ops.append(f"{verb} {{\n{body}\n}}")

    def __bool__(self) -> bool:
        return bool(self._ops)

    def clear(self) -> None:
        self._ops.clear()
        self._after.clear()

    def text(self) -> str:
        return " ;\n".join(self._ops)


def triple(s: str, p: str, o: str) -> str:
    return f"{s} {p} {o} ."


# ---------------------------------------------------------------------------------------------
# The store
# ---------------------------------------------------------------------------------------------

_SPARQL_POSITION = re.compile(r"error at (\d+):(\d+):\s*")
# One item of Oxigraph's "expected one of …" list: a quoted token, a character class such as
# ['A' ..= 'Z' | '\u{00C0}'..='\u{00D6}' | …] or [_], or a bare keyword.
_EXPECTED_ITEM = re.compile(r'"(?:\\.|[^"\\])*"|\[(?:\'(?:\\.|[^\'\\])*\'|[^\]\'])*\]|[^,\s][^,]*')
_SPARQL_DETAIL_MAX = 120


def sparql_syntax_error(exc: SyntaxError) -> SparqlError:
    """Oxigraph's parse error as one short line, for ``sparql()`` and the command line alike:
    where, and the start of what it expected.

    The parser lists every token it would accept, Unicode ranges included (hundreds of
    characters); the character classes go, the rest is clipped to about 120 characters.
    """
    text = " ".join(part.strip() for part in str(exc).splitlines() if part.strip())
    where = ""
    found = _SPARQL_POSITION.search(text)
    if found:
        where = f" at line {found[1]}, column {found[2]}"
        text = text[found.end():]
    head, sep, rest = text.partition("expected one of ")
    if sep:
        items = [i.strip() for i in _EXPECTED_ITEM.findall(rest) if not i.startswith("[")]
        text = head + sep + ", ".join(items) if items else (head + "something else").strip()
    text = re.sub(r"\[(?:'(?:\\.|[^'\\])*'|[^\]'])*\]", "", text).strip(" ,")
    if len(text) > _SPARQL_DETAIL_MAX:
        cut = text.rfind(", ", 0, _SPARQL_DETAIL_MAX)
        text = text[: cut if cut > _SPARQL_DETAIL_MAX // 2 else _SPARQL_DETAIL_MAX] + ", …"
    return SparqlError(f"invalid SPARQL{where}: {text}")


_UPDATE_KEYWORDS = re.compile(
    r"^\s*(?:(?:PREFIX\s+\S*\s*<[^>]*>|BASE\s*<[^>]*>)\s*)*"
    r"(INSERT|DELETE|LOAD|CLEAR|CREATE|DROP|COPY|MOVE|ADD|WITH)\b",
    re.IGNORECASE,
)
_COMMENT = re.compile(r"#[^\n<>\"']*$", re.MULTILINE)


class AgentStore:
    """One agent's Oxigraph store (``path=None``: in memory)."""

    def __init__(self, path: Path | None, *, read_only: bool = False) -> None:
        self.path = path
        self.read_only = read_only
        self._write_lock = threading.Lock()
        self._commits_since_optimize = 0
        self._unflushed = 0  # bytes of update text since the last flush()
        self.auto_flushes = 0  # flushes made because FLUSH_AFTER_BYTES were written
        self._optimizer: threading.Thread | None = None
        try:
            if path is None:
                self._store: ox.Store | None = ox.Store()
            elif read_only:
                self._store = ox.Store.read_only(str(path))
            else:
                _finish_rewrite(path)
                path.mkdir(parents=True, exist_ok=True)
                self._store = ox.Store(str(path))
        except OSError as exc:
            if "lock" in str(exc).lower():
                raise StoreLockedError(
                    f"the memory store {path} is held by another process (or is already open "
                    "in this one); close it there first, or inspect it read-only"
                ) from exc
            raise StoreError(f"cannot open the memory store {path}: {exc}") from exc

    # -- lifecycle -----------------------------------------------------------------------------

    @property
    def store(self) -> ox.Store:
        if self._store is None:
            raise StoreError(f"the memory store {self.path} is closed")
        return self._store

    def close(self) -> None:
        """Release the store (and its RocksDB lock): pyoxigraph has no close(), the last
        reference going away is what unlocks it (SPEC §7)."""
        if self._optimizer is not None:
            self._optimizer.join()
            self._optimizer = None
        if self._store is not None:
            if not self.read_only and self.path is not None:
                with contextlib.suppress(OSError):
                    self._store.flush()
            self._store = None
            gc.collect()

    def flush(self) -> None:
        try:
            self.store.flush()
        except OSError as exc:
            raise StoreError(f"cannot flush the memory store {self.path}: {exc}") from exc

    def optimize(self) -> None:
        self.store.optimize()
        self._commits_since_optimize = 0

    #: Writes after which an idle agent's store is compacted in the background. RocksDB keeps
    #: every write in its log until compaction (~23 kB per node written with small updates),
    #: and a read-only open — how live inspection works — replays that log: measured at
    #: 1,800 nodes, an open took 1.1 s before and 0.24 s after an optimize() of 0.3 s.
    OPTIMIZE_AFTER_COMMITS = 1000
    #: Bytes of updates after which the writer flushes RocksDB's memtables to disk. Without
    #: it a store that keeps being written (compression of a busy agent) grew its process's
    #: RSS steadily: benchmarks/soak.py (4 agents × 200 remembers, then compression) went
    #: from 41 MB to a peak of 918 MB (+8 MB/s while compressing); with this flush, to a peak
    #: of 356 MB (+1.2 MB/s while compressing). A flush also makes the writes survive a power
    #: cut (SPEC §7).
    FLUSH_AFTER_BYTES = 4 * 2**20

    def maybe_optimize_in_background(self) -> bool:
        """Compact the store in a background thread once enough writes piled up (RocksDB
        compaction runs concurrently with reads and writes; close() waits for it)."""
        if (
            self.read_only
            or self.path is None
            or self._commits_since_optimize < self.OPTIMIZE_AFTER_COMMITS
            or (self._optimizer is not None and self._optimizer.is_alive())
        ):
            return False
        self._commits_since_optimize = 0
        store = self.store

        def run() -> None:
            with contextlib.suppress(OSError):
                store.optimize()

        self._optimizer = threading.Thread(target=run, name="memory-rdf-optimize", daemon=True)
        self._optimizer.start()
        return True

    def rewrite(self) -> None:
        """Copy the store's current contents into a fresh directory and swap it in, so that
        nothing deleted before survives in any file (forget(purge=True), SPEC §5.6).

        Measured on pyoxigraph 0.5.13: a deleted literal stays in the store's files after
        ``flush()``, ``optimize()`` and even ``clear()`` (Oxigraph never deletes a string from
        its dictionary, and RocksDB recycles write-ahead log files without wiping them); only
        a store that never held it is free of it. Crash-safe: the copy is complete and closed
        before two directory renames (``{agent}`` → ``{agent}~old``, ``{agent}~new`` →
        ``{agent}``); an interrupted swap is finished by the next open. The RocksDB lock is
        released for the few milliseconds of the swap.
        """
        if self.path is None or self.read_only:
            return
        path = self.path
        new, old = _rewrite_dirs(path)
        with self._write_lock:
            if self._optimizer is not None:
                self._optimizer.join()
                self._optimizer = None
            try:
                for leftover in (new, old):
                    if leftover.exists():
                        shutil.rmtree(leftover)
                data = self.store.dump(format=ox.RdfFormat.N_QUADS)
                fresh = ox.Store(str(new))
                if data:
                    fresh.bulk_load(data, format=ox.RdfFormat.N_QUADS)
                fresh.flush()
                del fresh, data
                for extra in path.iterdir():  # files of ours (not RocksDB's) move along
                    if extra.is_file() and not _ROCKSDB_FILE.match(extra.name):
                        shutil.copy2(extra, new / extra.name)
                self.store.flush()
                self._store = None
                gc.collect()  # the last reference going away releases the lock (SPEC §7)
                os.rename(path, old)
                os.rename(new, path)
                self._store = ox.Store(str(path))
                shutil.rmtree(old)
            except OSError as exc:
                if self._store is None and path.exists():
                    with contextlib.suppress(OSError):
                        self._store = ox.Store(str(path))
                raise StoreError(f"cannot rewrite the memory store {path}: {exc}") from exc
            self._commits_since_optimize = 0
            self._unflushed = 0

    def bulk_load_nquads(self, path: Path) -> None:
        """Load an N-Quads file with Oxigraph's bulk loader (not atomic: for fresh stores)."""
        try:
            self.store.bulk_load(path=str(path), format=ox.RdfFormat.N_QUADS)
        except (OSError, SyntaxError) as exc:
            raise StoreError(f"cannot bulk-load {path} into {self.path}: {exc}") from exc

    # -- internal queries ----------------------------------------------------------------------

    def rows(self, query: str) -> list[tuple[Any, ...]]:
        """Run a SELECT; rows as tuples of Python values in projection order."""
        try:
            result = self.store.query(query, prefixes=V.PREFIXES)
        except OSError as exc:
            raise StoreError(f"cannot read the memory store {self.path}: {exc}") from exc
        assert isinstance(result, ox.QuerySolutions)
        width = len(result.variables)
        return [tuple(to_python(sol[i]) for i in range(width)) for sol in result]

    def column(self, query: str) -> list[Any]:
        return [row[0] for row in self.rows(query)]

    def scalar(self, query: str, default: Any = None) -> Any:
        rows = self.rows(query)
        return rows[0][0] if rows and rows[0][0] is not None else default

    def ask(self, query: str) -> bool:
        result = self.store.query(query, prefixes=V.PREFIXES)
        return bool(result)

    def commit(self, batch: WriteBatch) -> None:
        """Apply the batch atomically (one ``update()``)."""
        if not batch:
            return
        text = batch.text()
        with self._write_lock:
            self._commits_since_optimize += 1
            try:
                self.store.update(text, prefixes=V.PREFIXES)
            except SyntaxError as exc:  # a bug of ours, never user input
                raise StoreError(f"internal update did not parse: {exc}\n{text[:2000]}") from exc
            except OSError as exc:
                raise StoreError(f"cannot write the memory store {self.path}: {exc}") from exc
            self._unflushed += len(text)
            if self._unflushed >= self.FLUSH_AFTER_BYTES and self.path is not None:
                self._unflushed = 0
                self.auto_flushes += 1
                with contextlib.suppress(OSError):  # the write landed; flushing is upkeep
                    self.store.flush()
        for fn in batch._after:
            fn()

    def quads(self, subject: str | None, predicate: str | None, obj: Term | None,
              graph: str | None) -> list[tuple[Any, Any, Any]]:
        s = ox.NamedNode(subject) if subject else None
        p = ox.NamedNode(predicate) if predicate else None
        g = ox.NamedNode(graph) if graph else ox.DefaultGraph()
        return [
            (to_python(q.subject), to_python(q.predicate), to_python(q.object))
            for q in self.store.quads_for_pattern(s, p, None, g)
        ]

    # -- the user's SPARQL (SPEC §6) -----------------------------------------------------------

    def user_query(self, query: str) -> list[dict[str, Any]] | bool | list[tuple[Any, Any, Any]]:
        if not isinstance(query, str):
            from memory_rdf._exceptions import InvalidTypeError

            raise InvalidTypeError(f"query must be a str, got {type(query).__name__}")
        if _UPDATE_KEYWORDS.match(_COMMENT.sub("", query)):
            raise UpdateRefusedError(
                "sparql() is read-only: SPARQL Update (INSERT/DELETE/LOAD/CLEAR/…) is refused"
            )
        try:
            result = self.store.query(
                query,
                prefixes=V.PREFIXES,
                default_graph=ox.DefaultGraph(),
                named_graphs=[],
            )
        except SyntaxError as exc:
            raise sparql_syntax_error(exc) from None
        except OSError as exc:
            raise StoreError(f"cannot read the memory store {self.path}: {exc}") from exc
        if isinstance(result, ox.QueryBoolean):
            return bool(result)
        if isinstance(result, ox.QuerySolutions):
            names = [v.value for v in result.variables]
            out: list[dict[str, Any]] = []
            for sol in result:
                row: dict[str, Any] = {}
                for i, name in enumerate(names):
                    term = sol[i]
                    if term is not None:
                        row[name] = to_python(term)
                out.append(row)
            return out
        return [
            (to_python(t.subject), to_python(t.predicate), to_python(t.object)) for t in result
        ]

    def user_query_serialized(self, query: str, fmt: str) -> bytes:
        """The user's query answered in a W3C results format (json, csv, tsv, xml)."""
        if _UPDATE_KEYWORDS.match(_COMMENT.sub("", query)):
            raise UpdateRefusedError("SPARQL Update is refused: inspection is read-only")
        try:
            result = self.store.query(
                query, prefixes=V.PREFIXES, default_graph=ox.DefaultGraph(), named_graphs=[]
            )
        except SyntaxError as exc:
            raise sparql_syntax_error(exc) from None
        formats = {
            "json": ox.QueryResultsFormat.JSON,
            "csv": ox.QueryResultsFormat.CSV,
            "tsv": ox.QueryResultsFormat.TSV,
            "xml": ox.QueryResultsFormat.XML,
        }
        if isinstance(result, ox.QueryTriples):
            data = result.serialize(format=ox.RdfFormat.N_TRIPLES)
        else:
            data = result.serialize(format=formats[fmt])
        assert data is not None
        return data

    # -- export --------------------------------------------------------------------------------

    def dump(self, fmt: str, *, default_graph_only: bool) -> bytes:
        formats = {
            "turtle": ox.RdfFormat.TURTLE,
            "ntriples": ox.RdfFormat.N_TRIPLES,
            "nquads": ox.RdfFormat.N_QUADS,
            "trig": ox.RdfFormat.TRIG,
        }
        kwargs: dict[str, Any] = {"format": formats[fmt]}
        if default_graph_only or fmt in ("turtle", "ntriples"):
            kwargs["from_graph"] = ox.DefaultGraph()
        if fmt in ("turtle", "trig"):
            kwargs["prefixes"] = V.PREFIXES
        data = self.store.dump(**kwargs)
        assert data is not None
        return data


#: Files RocksDB makes in a store directory (anything else there is ours and kept by rewrite).
_ROCKSDB_FILE = re.compile(
    r"^(?:\d+\.(?:sst|log|blob)|CURRENT|IDENTITY|LOCK|LOG(?:\.old\.\d+)?|"
    r"MANIFEST-\d+|OPTIONS-\d+(?:\.dbtmp)?)$"
)


def _rewrite_dirs(path: Path) -> tuple[Path, Path]:
    """Where :meth:`AgentStore.rewrite` builds the fresh copy and parks the old directory.
    ``~`` is not allowed in agent ids, so neither can be taken for an agent's store."""
    return path.with_name(path.name + "~new"), path.with_name(path.name + "~old")


def _finish_rewrite(path: Path) -> None:
    """Complete or undo a :meth:`AgentStore.rewrite` that a crash interrupted."""
    new, old = _rewrite_dirs(path)
    if not path.exists() and old.exists() and new.exists():
        os.rename(new, path)  # the copy was complete before the first rename
    if path.exists():
        for leftover in (new, old):
            if leftover.exists():
                shutil.rmtree(leftover, ignore_errors=True)


@lru_cache(maxsize=1)
def pyoxigraph_version() -> str:
    from importlib.metadata import version

    return version("pyoxigraph")
