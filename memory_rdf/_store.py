"""The one module that talks to pyoxigraph, and the interface every store implements.

Everything above it speaks in node ids, strengths and relation names. This module:

* defines :class:`MemoryStore`, the operations the rest of the library needs (rows, scalar,
  ask, commit a :class:`WriteBatch`, quads, the user's query, dump, ...): the embedded
  :class:`AgentStore` here and the SPARQL endpoint store of ``_remote`` implement it,
* serializes terms (:func:`node_ref`, :func:`lit`, ...) — the only way values reach SPARQL text,
* renders the shipped ``.rq`` queries and ``.ru`` updates with those terms (:func:`render`,
  the one templating path),
* translates every pyoxigraph error at one boundary (:func:`_storage_errors`),
* runs queries, materializing rows in the calling thread (SPEC §7: result iterators must not
  cross threads), and runs each atomic write as exactly one ``update()`` (:class:`WriteBatch`),
* answers the user's read-only SPARQL (SPEC §6; the refusals are
  :func:`~memory_rdf._query_guard.check_user_query`'s).
"""

from __future__ import annotations

import contextlib
import gc
import glob
import io
import logging
import os
import queue
import re
import shutil
import stat
import sys
import tempfile
import threading
import time
import traceback
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO, TypeVar

import pyoxigraph as ox

from memory_rdf import _vocab as V
from memory_rdf._agents import STORE_MARKER, refuse_shared_directory
from memory_rdf._exceptions import (
    InvalidInputError,
    MemoryRDFError,
    QueryLimitError,
    QueryTimeoutError,
    SchemaVersionError,
    SparqlError,
    StoreError,
    StoreLockedError,
)
from memory_rdf._integrity import first_problem
from memory_rdf._interrupts import interrupts_held
from memory_rdf._query_guard import check_user_query, undeclared_prefix
from memory_rdf._resources import query_text, update_text

log = logging.getLogger("memory_rdf")

__all__ = [
    "AgentStore",
    "Graphs",
    "MemoryStore",
    "Term",
    "WriteBatch",
    "check_row_limit",
    "link_ref",
    "lit",
    "restore_backup",
    "node_id",
    "node_ref",
    "render",
    "run_bounded",
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


def link_ends(iri: str) -> tuple[str, str] | None:
    """``(source, target)`` of a link IRI ``link:{source}--{target}`` (SPEC §2; the inverse of
    :func:`link_iri`), or None when the IRI is not of that form (read its ends from the store)."""
    if not iri.startswith(V.LINK):
        return None
    source, sep, target = iri[len(V.LINK):].partition("--")
    if not sep or not source or not target or "--" in target:
        return None
    return source, target


def link_ref(source: str, target: str) -> Term:
    return Term(str(ox.NamedNode(link_iri(source, target))))


def iri_ref(iri: str) -> Term:
    return Term(str(ox.NamedNode(iri)))


def node_id(iri: str) -> str:
    """The id of a ``node:`` IRI (inverse of :func:`node_ref` on the IRI's value)."""
    return iri[_NODE_PREFIX_LEN:] if iri.startswith(V.NODE) else iri


_XSD_DATETIME = ox.NamedNode(V.XSD + "dateTime")
_XSD_DOUBLE = ox.NamedNode(V.XSD + "double")
_DOUBLE_SUFFIX = f'"^^<{V.XSD}double>'
_INTEGER_SUFFIX = f'"^^<{V.XSD}integer>'


def lit(value: str | int | float | bool | datetime) -> Term:
    """A literal: str → xsd:string, int → xsd:integer, float → xsd:double,
    datetime → xsd:dateTime.

    A float or an int (not a bool, not a subclass) is spelled here, exactly as pyoxigraph serializes
    it (``repr()``/``str()`` hold only digits, ``.``, ``e``, ``+``, ``-``: nothing to escape;
    tests/test_store_terms.py compares the two): ~0.15 against ~0.7 µs through
    ``ox.Literal``, and a compression commit writes ~26 of them per scanned node."""
    kind = type(value)
    if kind is float:
        # repr() round-trips exactly; pyoxigraph would print e.g. "0.5" for 0.5 anyway.
        return Term(f'"{value!r}{_DOUBLE_SUFFIX}')
    if kind is int:
        return Term(f'"{value}{_INTEGER_SUFFIX}')
    if isinstance(value, datetime):
        return Term(str(ox.Literal(value.isoformat(), datatype=_XSD_DATETIME)))
    if isinstance(value, float):
        return Term(str(ox.Literal(repr(value), datatype=_XSD_DOUBLE)))
    return Term(str(ox.Literal(value)))


# ---------------------------------------------------------------------------------------------
# Rendering the shipped queries
# ---------------------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"(?P<marker>^[ \t]*# @(?P<kind>values|in|contains) (?P<var>\w+) (?P<name>\w+)[ \t]*$)"
    r"|(?P<with>^[ \t]*# @with (?P<wname>\w+)[ \t]*$)"
    r"|(?P<limit>(?P<lkw>LIMIT|OFFSET) \d+[ \t]*# @(?:limit|offset) (?P<lname>\w+)[ \t]*$)"
    r"|(?P<comment>(?<![<\w])#[^\n]*)"
    r"|\$(?P<param>[A-Za-z_]\w*)",
    re.MULTILINE,
)
_UNION = re.compile(
    r"^[ \t]*# @union (?P<names>\w+(?: \w+)*)[ \t]*\n(?P<block>.*?)^[ \t]*# @end[ \t]*$",
    re.MULTILINE | re.DOTALL,
)

Param = Term | Sequence[Term] | int | None
T = TypeVar("T")

#: Longest ``||`` chain ``# @contains`` renders; longer lists become a linear ``VALUES`` test
#: (a chain is ~2x faster for a few terms, but its parse and plan grow quadratically).
CONTAINS_CHAIN_MAX = 16


_PREFIX_LINE = re.compile(r"^PREFIX[ \t]+\w*:[ \t]*<[^>\s]*>[ \t]*\n", re.MULTILINE)


def render(name_or_text: str, **params: Param) -> str:
    """Fill a query's (or update's) parameters: the one templating path of the library.

    Parameter syntax inside the ``.rq``/``.ru`` files (which stay valid SPARQL on their own, so
    a user can run them unchanged):

    * ``$name`` — replaced by one term (an unbound variable when the file is run as-is);
    * ``# @values var name`` — replaced by ``VALUES ?var { t1 t2 … }``;
    * ``# @in var name`` — replaced by ``FILTER(?var IN (t1, t2, …))``; dropped when ``None``;
    * ``# @contains var name`` — ``FILTER(CONTAINS(?var, t1) || …)``; dropped when ``None``
      (beyond :data:`CONTAINS_CHAIN_MAX` terms, the same test over a ``VALUES`` list);
    * ``# @with name`` — ``WITH <graph>`` before an update operation; dropped when ``None``
      (the embedded store's memory network is its default graph, SPEC §2 and §8);
    * ``LIMIT 10  # @limit name`` / ``OFFSET 0  # @offset name`` — the number set to the
      ``int`` given as ``name``; dropped when ``None`` (no limit);
    * ``# @union a b`` … ``# @end`` — the block between repeated once per element of the
      sequences ``a``, ``b`` (equal lengths), ``$a``/``$b`` meaning that element, the copies
      joined with ``UNION`` (the standard-SPARQL form of a ``LATERAL`` join, SPEC §8).

    Every term must be a :class:`Term` (or a sequence of them): raw strings are refused. The
    text is scanned once, so nothing spliced in is ever read again as a parameter; other
    comments are left as they are. A name ending in ``.ru`` (or a text with an update) is an
    update template from ``queries/``.
    """
    shipped = "\n" not in name_or_text
    text = _template(name_or_text) if shipped else name_or_text
    if "# @union" in text:
        text, params = _expand_unions(text, params)
        shipped = False
    pieces = _cached_pieces(text) if shipped else _scan_pieces(text)

    def replace(match: re.Match[str]) -> str:
        if match.group("param") is not None:
            name = match.group("param")
            if name not in params:
                raise KeyError(f"query parameter ${name} is not given")
            (term,) = _terms(name, params[name], many=False)
            return term
        if match.group("with") is not None:
            graph = params.get(match.group("wname"))
            return "" if graph is None else f"WITH {_terms('with', graph, many=False)[0]}"
        if match.group("limit") is not None:
            value = params.get(match.group("lname"))
            if value is None:
                return ""
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise TypeError(f"{match.group('lname')!r} must be an int >= 0, got {value!r}")
            # Engines read LIMIT/OFFSET as 64-bit (Oxigraph refused 2**64 as a syntax error);
            # beyond 2**63 - 1 no store has rows to skip or to stop at.
            return f"{match.group('lkw')} {min(value, 2**63 - 1)}"
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
        if len(terms) <= CONTAINS_CHAIN_MAX:
            return "FILTER(" + " || ".join(f"CONTAINS(?{var}, {t})" for t in terms) + ")"
        # A long || chain costs the engine quadratic time to parse and plan, and overflowed
        # its stack at 10,000 terms (issue 17); a VALUES list is linear.
        return (f"FILTER EXISTS {{ VALUES ?{var}__needle {{ {' '.join(terms)} }} "
                f"FILTER(CONTAINS(?{var}, ?{var}__needle)) }}")

    out: list[str] = []
    for literal, match in pieces:
        out.append(literal)
        if match is not None:
            out.append(replace(match))
    return "".join(out)


@lru_cache(maxsize=256)
def _template(name: str) -> str:
    """A shipped query (``name``) or update (``name.ru``) as :func:`render` fills it."""
    text = update_text(name[:-3]) if name.endswith(".ru") else query_text(name)
    # The files declare their prefixes so that they run on their own; the stores supply the
    # same ones (V.PREFIXES), and a PREFIX after ";" in a batched update does not parse in
    # Oxigraph: drop the declarations.
    return _PREFIX_LINE.sub("", text)


Pieces = tuple[tuple[str, "re.Match[str] | None"], ...]


def _scan_pieces(text: str) -> Pieces:
    """``text`` cut at its parameters: ``(text before, the parameter's match)`` pairs, the
    last with None; comments stay in the text as they are. A shipped template's are kept
    (:data:`_cached_pieces`): the scan was ~20 µs of every query a recall runs."""
    pieces: list[tuple[str, re.Match[str] | None]] = []
    at = 0
    for match in _TOKEN.finditer(text):
        if match.group("comment") is None:
            pieces.append((text[at : match.start()], match))
            at = match.end()
    pieces.append((text[at:], None))
    return tuple(pieces)


_cached_pieces = lru_cache(maxsize=512)(_scan_pieces)


def _expand_unions(text: str, params: dict[str, Param]) -> tuple[str, dict[str, Param]]:
    """Unroll ``# @union`` blocks (on the template, before any term is spliced)."""
    params = dict(params)
    counter = 0

    def expand(match: re.Match[str]) -> str:
        nonlocal counter
        names = match.group("names").split()
        columns = [_terms(n, params.get(n), many=True) if params.get(n) is not None else []
                   for n in names]
        if len({len(c) for c in columns}) != 1:
            raise ValueError(f"@union parameters {names} must have equal lengths")
        copies: list[str] = []
        for row in zip(*columns, strict=True):
            block = match.group("block")
            for n, term in zip(names, row, strict=True):
                counter += 1
                alias = f"{n}__{counter}"
                params[alias] = term
                block = re.sub(rf"\${n}\b", f"${alias}", block)
            copies.append("{\n" + block + "}")
        if not copies:
            return "FILTER(false)\n"
        return "\nUNION\n".join(copies) + "\n"

    return _UNION.sub(expand, text), params


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

    __slots__ = ("_after", "_ops")

    def __init__(self) -> None:
        #: (verb, body or template name, parameters, graph, index_neutral)
        self._ops: list[tuple[str, str, dict[str, Param], str | None, bool]] = []
        self._after: list[Callable[[], None]] = []

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

    def delete(self, triples: Iterable[str], graph: str | None = None, *,
               index_neutral: bool = False) -> None:
        """``DELETE DATA`` of ``triples``; ``index_neutral`` as for :meth:`insert`."""
        self._data("DELETE DATA", triples, graph, index_neutral)

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
            if target is not None:
                body = f"GRAPH {target} {{\n{body}\n}}"
            out.append(f"{verb} {{\n{body}\n}}")
        return " ;\n".join(out)

    def run_after_commit(self) -> None:
        for fn in self._after:
            fn()


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


def sparql_syntax_error(exc: SyntaxError, query: str | None = None) -> SparqlError:
    """Oxigraph's parse error as one short line, for ``sparql()`` and the command line alike:
    where, and the start of what it expected; a prefix the query did not declare (the
    parser's "Prefix not found" among what it expected) by its name, read from ``query``.

    The parser lists every token it would accept, Unicode ranges included (hundreds of
    characters); the character classes go, the rest is clipped to about 120 characters.
    """
    text = " ".join(part.strip() for part in str(exc).splitlines() if part.strip())
    where = ""
    found = _SPARQL_POSITION.search(text)
    if found:
        where = f" at line {found[1]}, column {found[2]}"
        text = text[found.end():]
    # With a blank node label (_:b) in the query the parser reports "expected <unreported>",
    # an unknown prefix included.
    unreported = "<unreported>" in text
    prefix = (undeclared_prefix(query, V.PREFIXES)
              if query is not None and ("Prefix not found" in text or unreported) else None)
    if "Prefix not found" in text or prefix is not None:
        known = ", ".join(f"{p}:" for p in V.PREFIXES)
        name = f" {prefix + ':'!r}" if prefix is not None else ""
        return SparqlError(f"invalid SPARQL{where}: unknown prefix{name} (predeclared: "
                           f"{known}; declare others with PREFIX)")
    if unreported:
        return SparqlError(f"invalid SPARQL{where}: syntax error")
    head, sep, rest = text.partition("expected one of ")
    if sep:
        items = [i.strip() for i in _EXPECTED_ITEM.findall(rest) if not i.startswith("[")]
        text = head + sep + ", ".join(items) if items else (head + "something else").strip()
    text = re.sub(r"\[(?:'(?:\\.|[^'\\])*'|[^\]'])*\]", "", text).strip(" ,")
    if len(text) > _SPARQL_DETAIL_MAX:
        cut = text.rfind(", ", 0, _SPARQL_DETAIL_MAX)
        text = text[: cut if cut > _SPARQL_DETAIL_MAX // 2 else _SPARQL_DETAIL_MAX] + ", …"
    return SparqlError(f"invalid SPARQL{where}: {text}")


def _store_message(what: str, exc: BaseException) -> str:
    """What went wrong, in one line; RocksDB's "Corruption: …" said plainly, and an error of
    the operating system as its reason and file (not Python's ``[Errno 2] …: '…'``)."""
    said = " ".join(str(exc).split())
    if isinstance(exc, OSError) and exc.errno is not None and exc.strerror:
        said = exc.strerror + (f" ({exc.filename})" if exc.filename else "")
    if "Corruption" in said:
        return f"{what}: its files are corrupt ({said}); restore it from a backup"
    if too_many_open_files(exc):
        limit = _files_limit()
        return (f"{what}: {said}; this process is at its limit of open files"
                f"{f' ({limit})' if limit else ''} although idle agents' stores are closed as "
                "it nears: raise the limit (ulimit -n), or close agents it no longer uses")
    return f"{what}: {said}"


def is_lock_error(exc: BaseException) -> bool:
    """RocksDB's refusal of a store another holder has open, not any error whose path holds
    the word (``~locks``)."""
    said = str(exc).lower()
    if "corruption" in said:
        return False
    # POSIX: "While lock file: …/LOCK: Resource temporarily unavailable"; Windows: "Failed to
    # create lock file: …\\LOCK: …"; one process: "lock hold by current process".
    return "lock hold by" in said or "lock file" in said or "/lock:" in said


def disk_refused(exc: BaseException) -> bool:
    """A write the embedded store's disk refused with an I/O error (RocksDB's "IO error: No
    space left on device"): a :class:`StoreError` from an ``OSError`` that is not a lock.
    Such a write is tried again later, not failed (issue 33 F6)."""
    cause = exc.__cause__
    return (isinstance(exc, StoreError) and not isinstance(exc, StoreLockedError)
            and isinstance(cause, OSError) and not is_lock_error(cause))


def _room_to_reopen(path: Path) -> bool:
    """Free space at ``path`` for RocksDB to open the store again: twice its write-ahead logs
    (replayed into a table file at the open) and 4 MiB for the manifest and new logs."""
    try:
        logs = sum(f.stat().st_size for f in path.glob("*.log"))
        return shutil.disk_usage(path).free >= 2 * logs + 4 * 2**20
    except OSError:
        return False


@contextlib.contextmanager
def _storage_errors(what: str, *, user_query: str | None = None) -> Iterator[None]:
    """The error boundary around every pyoxigraph call: RocksDB and engine errors become
    :class:`StoreError` (``what`` says which store and what was being done); a parse error is
    the user's :class:`SparqlError` for the user's query (``user_query``, its text) and a bug
    of ours otherwise."""
    try:
        yield
    except MemoryRDFError:
        raise
    except SyntaxError as exc:
        if user_query is not None:
            raise sparql_syntax_error(exc, user_query) from None
        raise StoreError(f"internal SPARQL did not parse ({what}): {exc}") from exc
    except OSError as exc:
        if is_lock_error(exc):
            raise StoreLockedError(
                f"{what}: held by another process (or already open in this one); close it "
                "there first, or inspect it read-only"
            ) from exc
        raise StoreError(_store_message(what, exc)) from exc
    except (RuntimeError, ValueError) as exc:
        raise StoreError(_store_message(what, exc)) from exc


def run_bounded(run: Callable[[threading.Event], T], timeout: float | None) -> T:
    """``run(cancel)`` within ``timeout`` seconds (None: in the calling thread, unbounded).

    With a timeout it runs in a worker thread (SPEC §7: the query's result iterator is
    created and consumed there, never crossing threads) while the caller waits; past the
    timeout the caller gets :class:`QueryTimeoutError` and ``cancel`` is set, which the
    worker checks between rows. Measured on pyoxigraph 0.5.13: rows are produced lazily
    and stop at the next row, but an aggregate (COUNT, GROUP BY) or ORDER BY is computed
    inside ``Store.query()`` itself, which cannot be interrupted: the worker finishes it in
    the background (the GIL released) and drops the result. A store's owner that must wait
    for such a worker before letting the store go has ``run`` hold it (:class:`StoreUsers`).
    """
    if timeout is None:
        return run(threading.Event())
    cancel = threading.Event()
    box: list[tuple[bool, Any]] = []

    def target() -> None:
        try:
            box.append((True, run(cancel)))
        except BaseException as exc:  # handed to the caller
            # The traceback's frames hold the query's result objects, which pyoxigraph
            # refuses to drop on another thread (a RuntimeError when the caller's thread
            # collects them): drop them here, where they were made.
            _clear_frames(exc)
            box.append((False, exc))

    worker = threading.Thread(target=target, name="memory-rdf-sparql", daemon=True)
    worker.start()
    worker.join(timeout)
    if not box:
        cancel.set()
        raise _timed_out(timeout)
    ok, value = box[0]
    if ok:
        return value
    raise value


class StoreUsers:
    """The calls that have an agent's disk store in hand, counted, so that what lets the
    store go waits for them.

    pyoxigraph has no ``close()``: a store goes (and RocksDB lets go of its files) when the
    last reference to it does (SPEC §7). A read running in another thread holds one for as
    long as it runs: an untimed ``sparql()`` or ``stats()`` with the read mirror off or
    loading, or a timed-out aggregate that pyoxigraph cannot stop (:func:`run_bounded`).
    :meth:`AgentStore.close` therefore releases the agent's lock only once no call holds the
    store (else a second instance could open beside the live one under another spelling of
    its path), and a purge's swap (:meth:`AgentStore._rewrite`) first waits for the calls in
    progress and keeps new ones waiting until the fresh copy is open (else the old instance,
    still alive, writes into the fresh copy when it goes: the agent lost).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._count = 0
        self._closed_to_new = False
        self._idle_waiters = 0  # threads waiting for the count to reach 0

    def hold(self) -> StoreUsers:
        """Count the calling code as holding the store for a ``with`` block (it waits while a
        swap is under way). The object is its own context manager: ~0.4 µs a block, against
        ~3 µs for a generator-based one — a recall holds the store several times."""
        return self

    def __enter__(self) -> None:
        with self._lock:
            while self._closed_to_new:
                self._changed.wait()
            self._count += 1

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc is not None:
            # The traceback's frames hold the store the call had in hand: drop them here, or
            # the store outlives the count (the release would come while it is still open).
            _clear_frames(exc)
        with self._lock:
            self._count -= 1
            if not self._count and self._idle_waiters:
                self._changed.notify_all()

    def _wait_idle(self) -> None:
        """Wait (the lock held) until no call holds the store."""
        self._idle_waiters += 1
        try:
            self._changed.wait_for(lambda: not self._count)
        finally:
            self._idle_waiters -= 1

    @property
    def active(self) -> int:
        """How many calls hold the store now."""
        with self._changed:
            return self._count

    def wait_idle(self) -> None:
        """Wait until no call holds the store."""
        with self._lock:
            self._wait_idle()

    @contextlib.contextmanager
    def alone_if_idle(self) -> Iterator[bool]:
        """Without waiting: when no call holds the store, keep new ones waiting until the
        block ends and give True; else give False (and keep no one waiting)."""
        with self._changed:
            idle = not self._count and not self._closed_to_new
            if idle:
                self._closed_to_new = True
        try:
            yield idle
        finally:
            if idle:
                with self._changed:
                    self._closed_to_new = False
                    self._changed.notify_all()

    @contextlib.contextmanager
    def alone(self) -> Iterator[None]:
        """Wait for the calls in progress, keep new ones waiting until the block ends."""
        with self._changed:
            self._closed_to_new = True
            try:
                self._wait_idle()
            except BaseException:
                self._closed_to_new = False
                self._changed.notify_all()
                raise
        try:
            yield
        finally:
            with self._changed:
                self._closed_to_new = False
                self._changed.notify_all()


def _clear_frames(exc: BaseException) -> None:
    """Clear the local variables of the finished frames in ``exc``'s traceback and in those
    of the exceptions it was raised from or during."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        item = todo.pop()
        if item is None or id(item) in seen:
            continue
        seen.add(id(item))
        traceback.clear_frames(item.__traceback__)
        todo += [item.__cause__, item.__context__]


def _timed_out(timeout: float | None) -> QueryTimeoutError:
    return QueryTimeoutError(
        f"the query ran longer than its timeout ({timeout:g} s); narrow it (LIMIT, more "
        "specific patterns) or give a larger timeout"
    )


def _check_bounds(cancel: threading.Event, timeout: float | None, limit: int | None,
                  rows: int) -> None:
    """Between two rows of the user's query: stop when the caller gave up or the row limit
    is reached."""
    if cancel.is_set():
        raise _timed_out(timeout)
    if limit is not None and rows >= limit:
        check_row_limit(limit, rows + 1)


def check_row_limit(limit: int, rows: int) -> None:
    """:class:`QueryLimitError` when ``rows`` exceed ``limit``."""
    if rows > limit:
        raise QueryLimitError(
            f"the query returns more than {limit:,} rows (its limit); add LIMIT to the query "
            "or give a larger limit"
        )


class _Sink:
    """A binary output the serializer writes to as rows come; stops it once cancelled."""

    def __init__(self, output: BinaryIO, cancel: threading.Event,
                 timeout: float | None) -> None:
        self._output = output
        self._cancel = cancel
        self._timeout = timeout

    def write(self, data: bytes) -> int:
        if self._cancel.is_set():
            raise _timed_out(self._timeout)
        self._output.write(data)
        return len(data)

    def flush(self) -> None:
        self._output.flush()


# ---------------------------------------------------------------------------------------------
# The read mirror
# ---------------------------------------------------------------------------------------------

#: Memory the read mirror takes per memory node: measured on the benchmark suite's workload
#: (pyoxigraph 0.5.13, ~85 triples per node: 12 links out of each node, each a resource of
#: 4–5 triples; terms and keywords) as the process's RSS growth once the mirror is built,
#: divided by the nodes: 39 kB at 10k nodes, 31 kB at 100k (benchmarks/PROFILE.md, "The read
#: mirror"); the mirror's link index (one more triple per link, issue 16) added ~5.5 kB per
#: node at 10k (40.2–40.6 kB). Oxigraph's in-memory store takes ~330 bytes per triple.
MIRROR_BYTES_PER_NODE = 37_000
#: The automatic choice (``Config.read_mirror=None``) mirrors a store when its estimated size
#: (nodes at open × MIRROR_BYTES_PER_NODE) is at most this share of the memory available then:
#: on the 24 GB machine of the benchmarks, with 19 GB available, up to ~150k nodes.
MIRROR_MEMORY_SHARE = 0.25
#: The budget when the available memory cannot be read (not Linux, no sysconf): 1 GiB.
MIRROR_FALLBACK_BUDGET = 1 << 30
#: Bytes of N-Quads loaded into the mirror at a time while it is built (the copy streams:
#: the whole dump is never held in memory, and close() stops the build between two chunks).
MIRROR_CHUNK = 4 << 20
#: Chunks read from the dump and waiting for the loader thread (at most this × MIRROR_CHUNK
#: bytes held in memory besides the mirror).
MIRROR_QUEUED_CHUNKS = 2
#: Oxigraph's in-memory store keeps every triple deleted from it (measured, pyoxigraph
#: 0.5.13: ~0.45 kB per triple deleted and inserted again, never given back, not even by
#: optimize()), so a mirror kept in step with compression — every scan rewrites link
#: strengths and often a text — grew by 9 MB/s at 10k nodes. The mirror is therefore built
#: again from the disk store once the update text applied to it reaches the size of the
#: N-Quads it was built from (the garbage is then ~2.5× that text, about the live copy's own
#: size: the process holds at most ~2 copies' worth), and at least this many bytes (a small
#: store's copy is rebuilt in well under a second; ~40 MB of garbage at most per agent). Half
#: the N-Quads as threshold cost a third of compression's throughput at 10k nodes in rebuilds
#: (reads go to disk during one). (Added by the compression work; benchmarks/README.md, Soak.)
MIRROR_RENEW_MIN_BYTES = 16 << 20
#: Once the copy is in, the updates committed meanwhile are applied to it in rounds without
#: the write lock (``_Mirror._catch_up``); the last ones, at most this many bytes of update
#: text (a few compression commits), under it, as the copy takes over.
MIRROR_CATCH_UP_BYTES = 1 << 20
#: Rounds of that before the rest is applied under the lock whatever its size (each round
#: applies what the writers committed during the previous one: the mirror applies an update
#: several times faster than the writer makes it, so rounds shrink fast).
MIRROR_CATCH_UP_ROUNDS = 8


def available_memory() -> int | None:
    """Bytes of memory available to new allocations (Linux: ``MemAvailable``), or None."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, OSError, ValueError):
        return None


def mirror_fits(nodes: int, available: int | None, reserved: int = 0) -> bool:
    """The automatic choice: does a mirror of ``nodes`` nodes fit the memory budget, next to
    the ``reserved`` bytes the process's other mirrors are estimated to take? The budget is
    MIRROR_MEMORY_SHARE of the memory available without them, so the mirrors of all agents
    of a process together stay within it (not a quarter of what is left, agent after agent)."""
    if available is None:
        budget = float(MIRROR_FALLBACK_BUDGET)
    else:
        budget = (available + reserved) * MIRROR_MEMORY_SHARE
    return reserved + nodes * MIRROR_BYTES_PER_NODE <= budget


class _MirrorBudget:
    """The estimated bytes of every read mirror of the process, by store: what the automatic
    choice of one agent's mirror counts beside its own (a MemorySystem of many agents).

    Held by weak reference: a store dropped without ``close()`` gives its share back when it
    is collected (keyed by ``id()``, its share stayed, and a later store given the same id
    would have taken it over)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reserved: weakref.WeakKeyDictionary[object, int] = weakref.WeakKeyDictionary()

    def claim(self, owner: object, nodes: int, wanted: bool | None) -> bool:
        """Reserve ``owner``'s mirror estimate; with ``wanted=None`` only when it fits."""
        estimate = nodes * MIRROR_BYTES_PER_NODE
        with self._lock:
            others = sum(v for k, v in self._reserved.items() if k is not owner)
            if wanted is None and not mirror_fits(nodes, available_memory(), others):
                return False
            self._reserved[owner] = estimate
            return True

    def release(self, owner: object) -> None:
        with self._lock:
            self._reserved.pop(owner, None)

    def reserved(self) -> int:
        with self._lock:
            return sum(self._reserved.values())


MIRROR_BUDGET = _MirrorBudget()


def _open_files() -> int | None:
    """How many files this process has open (None where that cannot be told cheaply)."""
    for listing in ("/proc/self/fd", "/dev/fd"):
        with contextlib.suppress(OSError):
            return len(os.listdir(listing))
    return None


def _files_limit() -> int | None:
    """The process's soft limit on open files (None: unknown, or none that binds)."""
    try:
        import resource
    except ImportError:  # Windows: handles, no low per-process limit
        return None
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return None if soft == resource.RLIM_INFINITY or soft <= 0 else soft


def too_many_open_files(exc: BaseException) -> bool:
    """``exc`` is the OS refusing a file for the process's open-files limit (EMFILE, as RocksDB
    words it too)."""
    return "Too many open files" in str(exc)


class _OpenStores:
    """The agents' stores open on disk for writing in this process, and the files they keep.

    RocksDB keeps every file of a store open: ~20 for a new agent, more as it grows (one per
    table file). With a common soft limit of 1,024 open files, a process serving many agents
    (a MemorySystem, ``memory-rdf serve``) failed with "Too many open files" from about the
    50th. When the process's open files pass ``HIGH`` of its limit as a store opens, the
    stores used least recently that are idle are parked (:meth:`AgentStore.park`: RocksDB's
    files closed, the agent's lock kept, reopened at their next use) until they are under
    ``LOW``. An open that still meets the limit parks every idle store and tries once more."""

    HIGH = 0.7
    LOW = 0.5

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stores: weakref.WeakSet[AgentStore] = weakref.WeakSet()
        #: One store opened at a time, after the room for it is made: opens in several
        #: threads at once each counted the files before the others' opens took theirs, and
        #: together passed the limit (the sixty-agent test failed 1 run in 7 under load).
        self.opening = threading.Lock()

    def add(self, store: AgentStore) -> None:
        with self._lock:
            self._stores.add(store)

    def discard(self, store: AgentStore) -> None:
        with self._lock:
            self._stores.discard(store)

    def open_with_room(self, opening: AgentStore, open_: Callable[[], T]) -> T:
        """``open_()`` (a store or a lock file of ``opening``), tried once more after every
        idle store is parked when the process's limit of open files refuses it."""
        try:
            return open_()
        except (OSError, StoreError) as exc:
            if not (too_many_open_files(exc) and self.make_room(opening, everything=True)):
                raise
        return open_()

    def make_room(self, opening: AgentStore, *, everything: bool = False) -> int:
        """Park idle stores (least recently used first) when the process is near its limit
        of open files (``everything``: every idle store, whatever the count); returns how
        many were parked."""
        limit = _files_limit()
        if limit is None and not everything:
            return 0
        used = _open_files()
        if not everything and (used is None or limit is None or used <= limit * self.HIGH):
            return 0
        with self._lock:
            candidates = sorted((s for s in self._stores if s is not opening and s.parkable),
                                key=lambda s: s.last_use)
        parked = 0
        for store in candidates:
            if store.park():
                parked += 1
                if not everything:
                    used = _open_files()
                    if used is None or limit is None or used <= limit * self.LOW:
                        break
        if parked:
            log.info("memory_rdf: parked %d idle agent store(s) to stay under the limit of "
                     "%s open files", parked, limit)
        return parked


OPEN_STORES = _OpenStores()

#: Updates of at least this much text are applied to the disk store and to a live read mirror
#: at the same time (AgentStore._commit_at_once): a compression chunk's (360-700 kB of text
#: for 100 scans, decay only or every node shortened). A remember's (~80 kB for 5 segments)
#: stays one store after the other, as measured for issue 16's remember figures.
PARALLEL_COMMIT_BYTES = 256 << 10


@lru_cache(maxsize=1)
def _parallel_writes() -> bool:
    """More than one CPU to run the disk update and the mirror's on."""
    try:
        return len(os.sched_getaffinity(0)) > 1
    except AttributeError:  # pragma: no cover - not Linux
        return (os.cpu_count() or 1) > 1


class _DiskWriter:
    """The thread that applies large updates to the disk stores (AgentStore._commit_at_once),
    one for the process: a commit hands it the update and waits for its answer.

    Started before the first read mirror's build thread, and kept: a writer thread started
    after a build had ended applied the same compression updates ~2.4× slower (0.98 against
    0.41 s for 1,800 scans at 100k nodes, taking turns in one process), which made the two
    stores at once slower than one after the other (PROFILE.md, eleventh pass). The likely
    cause: glibc hands a new thread the allocator arena a finished thread left, here the
    build thread's, which holds the whole in-memory copy.
    """

    def __init__(self) -> None:
        self.pid = os.getpid()
        self._work: queue.SimpleQueue[tuple[ox.Store, str, queue.SimpleQueue[Any]]] = (
            queue.SimpleQueue())
        threading.Thread(target=self._run, name="memory-rdf-disk-write", daemon=True).start()

    def _run(self) -> None:
        while True:
            store, text, answer = self._work.get()
            outcome: BaseException | None = None
            try:
                store.update(text, prefixes=V.PREFIXES)
            except BaseException as exc:  # handed to the committing thread
                outcome = exc
            # Drop the store before answering: once answered, the committer may let the store
            # go (close, a purge's swap), and the last reference closes it (SPEC §7).
            del store, text
            answer.put(outcome)
            del answer, outcome

    def start(self, store: ox.Store, text: str) -> queue.SimpleQueue[Any]:
        """Apply ``text`` to ``store``; the queue answers None, or the exception raised."""
        answer: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._work.put((store, text, answer))
        return answer


_writer: _DiskWriter | None = None
_writer_lock = threading.Lock()


def _disk_writer() -> _DiskWriter:
    """The process's disk writer, made again in a child process (a forked copy has no
    thread)."""
    global _writer
    with _writer_lock:
        if _writer is None or _writer.pid != os.getpid():
            _writer = _DiskWriter()
        return _writer


def _nodes_estimate(disk: ox.Store) -> int:
    """How many nodes the store holds, at most: the agent's node-creation counter (one
    lookup in the meta graph, SPEC §2), else a count of the nodes (~0.1 s at 100k nodes, which
    a close() right after the open would wait for)."""
    counter = ox.NamedNode(V.MEMORY + "nodeSequence")
    for quad in disk.quads_for_pattern(None, counter, None, ox.NamedNode(V.META_GRAPH)):
        value = to_python(quad.object)
        if isinstance(value, int):
            return value
    rows = disk.query(render("node_count"), prefixes=V.PREFIXES)
    assert isinstance(rows, ox.QuerySolutions)
    return int(to_python(next(iter(rows))[0]) or 0)


class _Cancelled(Exception):
    pass


def _release_freed_memory() -> None:
    """Give the memory freed by a dropped mirror back to the system (glibc ``malloc_trim``;
    nothing elsewhere). Without it the freed pages stayed in the allocator's per-thread arenas
    (each build runs in its own thread) and RSS kept climbing across renewals (measured: 10k
    nodes, continuous compression, 1.28 GB after 4 minutes)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


class _LoadSink:
    """Where the disk store's dump (N-Quads) goes while the mirror is built: each full chunk
    (cut at a line end) is handed to a loader thread, which loads it into the mirror while
    the dump reads on (pyoxigraph releases the GIL in both; at 100k nodes the copy took 38
    against 59 s one after the other, benchmarks/PROFILE.md). ``started`` is called at the
    first write: the dump has taken its snapshot by then. :meth:`copy_from` runs the dump
    and always ends with :meth:`close`, which waits for the loader and raises its error."""

    def __init__(self, target: ox.Store, cancel: threading.Event,
                 started: Callable[[], None]) -> None:
        self._target = target
        self._cancel = cancel
        self._started = started
        self._buffer = bytearray()
        self.loaded = 0  # bytes of N-Quads received
        self._chunks: queue.Queue[bytes | None] = queue.Queue(maxsize=MIRROR_QUEUED_CHUNKS)
        self._error: Exception | None = None
        self._loader = threading.Thread(target=self._load, name="memory-rdf-mirror-load",
                                        daemon=True)
        self._loader.start()

    def copy_from(self, source: ox.Store) -> None:
        """Copy every quad of ``source`` into the target, through the loader thread; the
        loader has ended when this returns or raises."""
        try:
            source.dump(self, format=ox.RdfFormat.N_QUADS)  # type: ignore[arg-type]
            self._started()  # a store with nothing to dump never wrote: its snapshot is taken
        finally:
            self.close()

    def _load(self) -> None:
        # Runs until close()'s end mark; after a failure or a cancel it only drains the
        # queue, so that the dump's thread never waits on a full one.
        while (chunk := self._chunks.get()) is not None:
            if self._error is not None or self._cancel.is_set():
                continue
            try:
                self._target.load(chunk, format=ox.RdfFormat.N_QUADS)
            except Exception as exc:
                self._error = exc

    def write(self, data: bytes) -> int:
        self._started()
        if self._cancel.is_set():
            raise _Cancelled
        if self._error is not None:
            raise self._error
        self.loaded += len(data)
        self._buffer += data
        if len(self._buffer) >= MIRROR_CHUNK:
            cut = self._buffer.rfind(b"\n") + 1
            self._chunks.put(bytes(self._buffer[:cut]))
            del self._buffer[:cut]
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        """Load what is left, wait for the loader thread, raise its error."""
        if self._buffer and self._error is None and not self._cancel.is_set():
            self._chunks.put(bytes(self._buffer))
        self._buffer.clear()
        self._chunks.put(None)
        self._loader.join()
        if self._error is not None:
            raise self._error


#: Shipped update templates that touch nothing the read mirror's link index is derived from
#: (a link's source, target or relation, a node's liveness); any other template that is not
#: handled by :func:`index_changes` makes the mirror derive its whole index again.
_INDEX_NEUTRAL = frozenset({"delete_node_text", "delete_node_texts", "remove_task",
                            "release_lease", "take_lease", "clear_creation_marks",
                            "delete_vectors", "clear_vectors"})
_LINK_PREDICATES = {V.SOURCE: "source", V.TARGET: "target", V.RELATION: "relation"}


def _triples(body: str, predicate: str) -> Iterator[tuple[str, str]]:
    """``(subject, object)`` of the triples of ``body`` (one ``s p o .`` a line, as
    :func:`triple` writes them) whose predicate is ``predicate``, as serialized terms: found
    with ``str.find`` (a regex over a compression batch's ~700 kB took 12 ms). An occurrence
    inside a literal is not a triple's predicate: skipped."""
    needle = f" {predicate} "
    at = body.find(needle)
    while at >= 0:
        subject = body[body.rfind("\n", 0, at) + 1 : at]
        end = body.find("\n", at)
        line_end = len(body) if end < 0 else end
        if subject.startswith("<") and subject.endswith(">") and " " not in subject:
            obj = body[at + len(needle) : line_end].rstrip()
            yield subject, obj[:-1].rstrip() if obj.endswith(".") else obj
        at = body.find(needle, at + len(needle))


@dataclass
class IndexChanges:
    """What a :class:`WriteBatch` may change in the read mirror's link index (serialized
    terms), read off its operations by :func:`index_changes`."""

    #: links whose source, target or relation triples it writes or deletes
    links: set[str] = field(default_factory=set)
    #: of those, what its INSERT DATA gives them: link → {"source"|"target"|"relation": [objects]}
    inserted: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    #: of those, the ones it deletes something of (DELETE DATA, delete_link(s))
    deleted: set[str] = field(default_factory=set)
    #: node → the last thing the batch does to its liveness: "insert" (a memory:scanCount),
    #: "delete" (one of its scanCounts) or "forget" (forget_node(s): all its triples)
    liveness: dict[str, str] = field(default_factory=dict)
    #: nodes forgotten (their triples and the links out of them go)
    forgotten: set[str] = field(default_factory=set)
    #: an update the index cannot follow: derive all of it again
    rebuild: bool = False

    def __bool__(self) -> bool:
        return bool(self.links or self.liveness or self.forgotten or self.rebuild)


def index_changes(batch: WriteBatch) -> IndexChanges:
    """What ``batch`` may change in the read mirror's link index, read off its operations:
    the triples of its ``INSERT DATA`` / ``DELETE DATA`` on the memory network (written one a
    line by :func:`triple`) and the parameters of its update templates."""
    out = IndexChanges()
    for verb, body, params, graph, neutral in batch._ops:
        if verb == "update":
            if body in ("forget_node", "forget_nodes"):
                for node in _terms("nodes", params.get("nodes", params.get("node")), many=True):
                    out.forgotten.add(node)
                    out.liveness[node] = "forget"
            elif body in ("delete_link", "delete_links"):
                links = _terms("links", params.get("links", params.get("link")), many=True)
                out.links.update(links)
                out.deleted.update(links)
            elif body not in _INDEX_NEUTRAL:
                out.rebuild = True
            continue
        if graph is not None or neutral:  # the journal, the store's metadata; no index terms
            continue
        inserting = verb == "INSERT DATA"
        for predicate, role in _LINK_PREDICATES.items():
            for link, obj in _triples(body, predicate):
                out.links.add(link)
                if inserting:
                    out.inserted.setdefault(link, {}).setdefault(role, []).append(obj)
                else:
                    out.deleted.add(link)
        for scanned, _count in _triples(body, V.SCAN_COUNT):
            out.liveness[scanned] = "insert" if inserting else "delete"
    return out


_SCAN_COUNT_NODE = ox.NamedNode(V.MEMORY + "scanCount")
_SOURCE_NODE = ox.NamedNode(V.MEMORY + "source")
_TARGET_NODE = ox.NamedNode(V.MEMORY + "target")
_DEFAULT_GRAPH = ox.DefaultGraph()


def _has(mirror: ox.Store, s: str | None, p: ox.NamedNode | None, o: str | None) -> bool:
    """Whether ``mirror``'s memory network holds a triple of the pattern (terms; None: any)."""
    subject = None if s is None else ox.NamedNode(s[1:-1])
    obj = None if o is None else ox.NamedNode(o[1:-1])
    return next(iter(mirror.quads_for_pattern(subject, p, obj, _DEFAULT_GRAPH)), None) is not None


def build_index(mirror: ox.Store) -> None:
    """Derive the read mirror's link index afresh (``mirror_index_all.ru``)."""
    mirror.update(f"DROP SILENT GRAPH <{V.MIRROR_OUT}> ; DROP SILENT GRAPH <{V.MIRROR_LOST}> ;\n"
                  + render("mirror_index_all.ru"), prefixes=V.PREFIXES)


def _entry(target: str, relation: str | None) -> str | None:
    """The index entry literal of a link to ``target`` (an IRI term) with the ``relation``
    literal (serialized, None: unnamed), spliced from the serialized terms (an IRI holds no
    character a literal escapes); None when the relation is not a literal."""
    iri = target[1:-1]
    tid = iri[len(V.NODE):] if iri.startswith(V.NODE) else iri
    if relation is None:
        return f'"{tid}"'
    if not relation.startswith('"'):
        return None
    return f'"{tid} {relation[1 : relation.rindex(chr(34))]}"'


def _new_link_entries(
    mirror: ox.Store, link: str, changes: IndexChanges,
    alive_after: Callable[[str], bool | None], fresh: set[str],
) -> list[tuple[str, str]] | None:
    """``(graph, triple)`` of the index entries of a link the batch creates whole (source,
    target and relation by INSERT DATA, nothing deleted, the link unknown before), or None
    when it does not (then the entries are derived by ``mirror_index.ru``). A link from or to
    one of the ``fresh`` nodes (created by the batch, no link touching them before) is new
    without asking the store."""
    given = changes.inserted.get(link)
    if (not given or link in changes.deleted or not given.get("source")
            or not given.get("target")):
        return None
    if any(source in changes.forgotten for source in given["source"]):
        return None  # mirror_index.ru's deletion of the forgotten node's entries comes after
    ends = (*given["source"], *given["target"])
    if not any(end in fresh for end in ends) and _has(mirror, link, None, None):
        return None
    relations: list[str | None] = [*given.get("relation", [])] or [None]
    made: list[tuple[str, str]] = []
    for target in given["target"]:
        live = alive_after(target) if target.startswith("<") else None
        if live is None:
            return None
        for relation in relations:
            entry = _entry(target, relation)
            if entry is None:
                return None
            graph = V.MIRROR_OUT if live else V.MIRROR_LOST
            made += [(graph, f"{source} {link} {entry} .") for source in given["source"]]
    return made


def apply_indexed(mirror: ox.Store, text: str, changes: IndexChanges | None) -> None:
    """Apply a committed update to the read mirror and keep its link index in step, in one
    request when the batch tells enough (the owner's write lock is held):

    * a link the batch creates whole (its source, target and relation written by INSERT
      DATA, the link unknown before) gets its entry written as data (``INSERT DATA``), in the
      graph of its target's liveness after the batch — what every remember does;
    * the others (a link deleted or changed, the links into a node forgotten or into one
      created while links to it already pointed at it, the links out of a forgotten node)
      are derived again from the store (``mirror_index.ru``). Compression's strength writes
      change nothing: the index holds no strength.

    A node's liveness after the batch is known from its last scanCount write (an insert:
    live; a forget: not); after a bare delete of a scanCount it is read once the update is in.
    """
    if not changes:
        mirror.update(text, prefixes=V.PREFIXES)
        return
    if changes.rebuild:
        mirror.update(text, prefixes=V.PREFIXES)
        build_index(mirror)
        return
    before = {n: _has(mirror, n, _SCAN_COUNT_NODE, None) for n in changes.liveness}
    after: dict[str, bool | None] = {
        n: {"insert": True, "forget": False}.get(op) for n, op in changes.liveness.items()
    }

    def alive_after(node: str) -> bool | None:
        if node not in after:
            after[node] = _has(mirror, node, _SCAN_COUNT_NODE, None)  # the batch leaves it
        return after[node]

    # Nodes the batch creates (not live before, a scanCount written) that no link touched.
    fresh = {n for n, was in before.items() if not was and after[n]
             and not _has(mirror, None, _TARGET_NODE, n)
             and not _has(mirror, None, _SOURCE_NODE, n)}
    entries: dict[str, list[str]] = {V.MIRROR_OUT: [], V.MIRROR_LOST: []}
    general: list[str] = []
    for link in sorted(changes.links):
        made = _new_link_entries(mirror, link, changes, alive_after, fresh)
        if made is None:
            general.append(link)
        else:
            for graph, quad in made:
                entries[graph].append(quad)
    # Nodes whose liveness the batch changes move the entries of the links into them (a
    # fresh node has none but the batch's own, written above).
    changed = [n for n, was in before.items()
               if after[n] is not None and after[n] != was and n not in fresh]
    parts = [text]
    data = "\n".join(f"GRAPH <{g}> {{\n" + "\n".join(q) + "\n}" for g, q in entries.items() if q)
    if data:
        parts.append(f"INSERT DATA {{\n{data}\n}}")
    if general or changed or changes.forgotten:
        parts.append(render(
            "mirror_index.ru", links=[Term(t) for t in general],
            changed=[Term(t) for t in sorted(changed)],
            forgotten=[Term(t) for t in sorted(changes.forgotten)],
        ))
    mirror.update(" ;\n".join(parts), prefixes=V.PREFIXES)
    unsure = [n for n in before if after[n] is None]
    if unsure:  # a scanCount deleted, none written after: is it still a live node?
        moved = [Term(n) for n in unsure if _has(mirror, n, _SCAN_COUNT_NODE, None) != before[n]]
        if moved:
            mirror.update(render("mirror_index.ru", links=[], changed=moved, forgotten=[]),
                          prefixes=V.PREFIXES)


class _Mirror:
    """The read mirror of an :class:`AgentStore`: an in-memory ``pyoxigraph.Store`` holding a
    copy of every graph of the disk store, which then answers the store's reads (``rows``,
    ``ask``, ``quads``, the user's SPARQL) — the same SPARQL on the same data, ~3× cheaper
    per joined row than RocksDB (benchmarks/PROFILE.md).

    Built in a background thread when the store opens (reads go to disk until it is ready):
    the disk store is dumped (N-Quads, streamed in chunks into the mirror) from one snapshot,
    taken while the write lock is held; every update committed after it is queued and applied
    once the copy is in, so the mirror is exactly the disk store from then on. Each commit
    applies its update to the disk store first (the truth, and the journal), then to the
    mirror (:meth:`apply`); a large one (a compression chunk's) to both at once, the mirror
    built again if the disk refuses it (:meth:`AgentStore._commit_at_once`). A mirror that
    fails to apply an update is dropped (reads go back to disk) and rebuilt once; a second
    failure leaves the store without one. Both are logged as warnings.
    """

    def __init__(self, owner: AgentStore, wanted: bool | None, failures: int = 0,
                 renewal: bool = False) -> None:
        self.owner = owner
        self.renewal = renewal  # built again to shed a previous copy's deleted triples
        self.wanted = wanted
        self.failures = failures
        #: The in-memory store, once built (None while loading, or when not kept).
        self.store: ox.Store | None = None
        #: "loading", "on", "too large" (the automatic choice said no), "failed", "off".
        self.state = "loading"
        #: updates committed while loading, with their :class:`IndexChanges`
        self._pending: list[tuple[str, IndexChanges | None]] | None = None
        self.applied = 0  # bytes of update text applied since the build
        self.renew_after = 0  # ... at which the mirror is built again (0: not built yet)
        self._cancel = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._build, name="memory-rdf-mirror",
                                        daemon=True)
        self._thread.start()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the build ended; True when the mirror serves reads."""
        self._done.wait(timeout)
        return self.store is not None

    @property
    def ended(self) -> bool:
        """The build thread is done with the store and its locks: it takes the owner's write
        lock one last time after the state says "on", "too large" or "failed", so what joins
        it under that lock (:meth:`AgentStore.park`) waits for this first."""
        return self._done.is_set()

    def stop(self) -> None:
        """Stop a build in progress (between two chunks) and wait for its thread."""
        self._cancel.set()
        if self._thread is not threading.current_thread():
            self._thread.join()

    def apply(self, text: str, batch: WriteBatch | None = None) -> None:
        """Apply a committed update (the owner's write lock is held); ``batch``: the writes it
        was made of, read for what they may change in the link index (:func:`index_changes`)
        only when a copy is being built or kept — a mirror "too large" or "failed" takes none,
        and reading a compression commit's ~700 kB of text for it is not free."""
        mirror = self.store
        if self._pending is None and mirror is None:
            return
        changes = None if batch is None else index_changes(batch)
        if self._pending is not None:
            self._pending.append((text, changes))
            return
        assert mirror is not None
        try:
            apply_indexed(mirror, text, changes)
            self.applied += len(text)
            if self.renew_after and self.applied >= self.renew_after:
                self.renew()
                return
        except Exception as exc:  # the disk store has the write: only the mirror is behind
            self.store = None
            self.state = "failed"
            again = self.failures == 0
            log.warning(
                "memory_rdf: the read mirror of %s did not apply an update (%s); reads go to "
                "the disk store%s", self.owner.location, exc,
                ", the mirror is rebuilt from it" if again else "",
            )
            if again:
                self.owner._mirror = _Mirror(self.owner, True, self.failures + 1)
            else:
                MIRROR_BUDGET.release(self.owner)

    def renew(self) -> None:
        """Drop this copy (and the deleted triples it keeps) and build a fresh one from the
        disk store in the background (reads go to disk meanwhile); the owner's write lock is
        held. See MIRROR_RENEW_MIN_BYTES."""
        self.owner.mirror_renewals += 1
        self._build_again(renewal=True)

    def rebuild(self, why: str) -> None:
        """Drop this copy, which may differ from the disk store after ``why``, and build a
        fresh one from the disk store in the background (reads go to disk meanwhile); the
        owner's write lock is held."""
        log.warning("memory_rdf: the read mirror of %s is built again after %s",
                    self.owner.location, why)
        self._build_again(renewal=False)

    def interrupted(self) -> None:
        """A commit stopped while it applied an update to the disk store or to this copy (the
        owner's write lock is held): whether either holds the write is unknown, so a copy
        kept or being built is built again from the disk store."""
        if self.store is None and self._pending is None:
            return  # no copy kept ("too large", "failed", "off"), nor one being filled
        self._cancel.set()  # a build in progress stops between two chunks
        self.rebuild("an interrupted write")

    def _build_again(self, renewal: bool) -> None:
        self.store = None
        self.state = "off"
        self.owner._mirror = _Mirror(self.owner, True, self.failures, renewal=renewal)

    def _catch_up(self, mirror: ox.Store) -> None:
        """Apply the updates committed since the snapshot to the new copy, in rounds, without
        the write lock: each round takes what was queued so far and writers go on queueing
        behind it. The last few (at most MIRROR_CATCH_UP_BYTES, or what is left after
        MIRROR_CATCH_UP_ROUNDS) are applied under the lock when the copy takes over. (All of
        them under the lock held every writer ~19 s at 100k nodes after a build that ran
        beside continuous compression.)"""
        for _ in range(MIRROR_CATCH_UP_ROUNDS):
            with self.owner._write_lock:
                queued = self._pending
                assert queued is not None
                if sum(len(text) for text, _ in queued) <= MIRROR_CATCH_UP_BYTES:
                    return
                self._pending = []
            self._replay(mirror, queued)

    def _replay(self, mirror: ox.Store,
                queued: Sequence[tuple[str, IndexChanges | None]]) -> None:
        """Apply updates queued during the build to the new copy, in commit order, stopping
        between two if the build was cancelled."""
        for text, changes in queued:
            if self._cancel.is_set():
                raise _Cancelled
            apply_indexed(mirror, text, changes)

    def _disk(self) -> ox.Store:
        """The owner's disk store, as it is (never opened again if parked: a build of the
        current mirror never runs on a parked store); a build cancelled, or a store closed,
        ends the build (:class:`_Cancelled`)."""
        disk = self.owner._store
        if disk is None or self._cancel.is_set():
            raise _Cancelled
        return disk

    def _build(self) -> None:
        # The disk store is in hand only inside a hold (StoreUsers): close(), a park and a
        # purge's swap wait for it even when this build is no longer the owner's mirror (one
        # a commit interrupted, or a failed write, replaced; it stops at its next chunk). The
        # copy's hold is taken after the write lock, never while waiting for it: a swap holds
        # that lock while it waits for the holds to end.
        owner = self.owner
        try:
            with owner._users.hold():
                nodes = _nodes_estimate(self._disk())
            if not MIRROR_BUDGET.claim(owner, nodes, self.wanted):
                self.state = "too large"
                log.info("memory_rdf: no read mirror for %s: %d nodes would take ~%d MB, "
                         "beside ~%d MB for the process's other mirrors",
                         owner.location, nodes, nodes * MIRROR_BYTES_PER_NODE // 2**20,
                         MIRROR_BUDGET.reserved() // 2**20)
                return
            mirror = ox.Store()
            lock = owner._write_lock
            lock.acquire()
            held = True

            def snapshot_taken() -> None:
                # The dump reads one snapshot, taken before its first write: commits from
                # now on are queued (apply()) and replayed once the copy is in.
                nonlocal held
                if held:
                    held = False
                    lock.release()

            try:
                with owner._users.hold():
                    disk = self._disk()
                    try:
                        for graph in list(disk.named_graphs()):
                            mirror.add_graph(graph)
                        self._pending = []
                        sink = _LoadSink(mirror, self._cancel, snapshot_taken)
                        sink.copy_from(disk)
                    finally:
                        del disk  # before the hold ends
            finally:
                if held:
                    lock.release()
            if self._cancel.is_set():
                raise _Cancelled
            # The link index of the snapshot (the commits queued meanwhile bring theirs).
            build_index(mirror)
            self._catch_up(mirror)
            with owner._write_lock:
                self._replay(mirror, self._pending)
                self._pending = None
                self.renew_after = max(MIRROR_RENEW_MIN_BYTES, sink.loaded)
                self.store = mirror
                self.state = "on"
            if self.renewal:
                _release_freed_memory()
        except Exception as exc:
            if owner._mirror is self:  # not replaced: no mirror of this store is held
                MIRROR_BUDGET.release(owner)
            if self._cancel.is_set():
                self.state = "off"
            else:
                self.state = "failed"
                log.warning("memory_rdf: cannot build the read mirror of %s (%s); reads go to "
                            "the disk store", owner.location, exc)
        finally:
            with owner._write_lock:
                self._pending = None
            self._done.set()


#: The embedded layout (SPEC §2): memory network in the default graph.
EMBEDDED_GRAPHS = Graphs(
    memory=None, journal=Term(f"<{V.JOURNAL_GRAPH}>"), meta=Term(f"<{V.META_GRAPH}>")
)

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


class AgentStore(MemoryStore):
    """One agent's embedded Oxigraph store (``path=None``: in memory).

    ``mirror`` (an on-disk, writable store only): serve reads from an in-memory copy of the
    store, the *read mirror* (see :class:`_Mirror`): True always, None when its estimated size
    fits the memory available (:func:`mirror_fits`), False never. The disk store stays the
    truth: every write lands there first, then on the mirror — or, for a large one, on both at
    once (:meth:`_commit_at_once`).
    """

    local_writes = True

    def __init__(self, path: Path | None, *, read_only: bool = False,
                 mirror: bool | None = False, origin: Path | None = None) -> None:
        self.path = path
        #: The agent directory this store reads: ``path``, or the one a read-only snapshot
        #: (``path``, a private copy: :func:`memory_rdf._inspect.copy_store_files`) was taken of.
        self.origin = origin if origin is not None else path
        self.read_only = read_only
        self._write_lock = threading.Lock()
        self._commits_since_optimize = 0
        self._unflushed = 0  # bytes of update text since the last flush()
        self.auto_flushes = 0
        self._optimizer: threading.Thread | None = None
        self._flusher: threading.Thread | None = None  # a background flush (commit)
        self._flush_wanted = False  # the flusher flushes again before it ends
        self._flusher_lock = threading.Lock()  # guards the two above
        #: One RocksDB flush or compaction at a time: two at once can wait forever for each
        #: other with Oxigraph's options (min_write_buffer_number_to_merge = 2 and several
        #: column families: RocksDB issues #12094, #12166, #13280).
        self._upkeep = threading.Lock()
        self._mirror_wanted = mirror
        self._mirror: _Mirror | None = None
        self.mirror_renewals = 0  # mirrors built again to shed deleted triples
        #: The agent's writer lock (a writable store on disk), held until the store is gone.
        self._agent_lock: AgentLock | None = None
        #: The calls that have the disk store in hand (close and a purge's swap wait for them).
        self._users = StoreUsers()
        #: Parked (:meth:`park`): RocksDB's files closed while idle, reopened at the next use.
        self._parked = False
        self._closing = False  # close() began: never parked nor opened again
        self._park_lock = threading.Lock()  # a park, an unpark and close(), one at a time
        #: RocksDB refused a write with an I/O error (a full disk): the handle is opened
        #: again before the next write (:meth:`_reopen_after_refusal`).
        self._write_refused = False
        self.last_use = time.monotonic()  # of the disk store: what parking goes by
        what = f"cannot open the memory store {path}"
        with _storage_errors(what):
            if path is not None:
                refuse_shared_directory(path)
            if path is None:
                self._store: ox.Store | None = ox.Store()
            elif read_only:
                self._store = ox.Store.read_only(str(path))
            else:
                # The lock first: the crash repair and the checks below must not run while
                # another writer (a purge's swap, above all) is at work in the directory.
                self._agent_lock = OPEN_STORES.open_with_room(
                    self, lambda: AgentLock(path, what))
                try:
                    _finish_rewrite(path)
                    _refuse_foreign_directory(path)
                    _private_directory(path)
                    self._store = self._open_disk_store(path)
                except BaseException:
                    self._store = None
                    gc.collect()
                    self._agent_lock.release()
                    self._agent_lock = None
                    raise
                OPEN_STORES.add(self)
        try:
            self._start_mirror()
        except BaseException:
            self.close()
            raise

    @property
    def location(self) -> str:
        return str(self.path) if self.path is not None else "(in memory)"

    # -- the read mirror -----------------------------------------------------------------------

    def _start_mirror(self) -> None:
        if (self._mirror_wanted is False or self.path is None or self.read_only
                or self._store is None):
            return
        if _parallel_writes():
            _disk_writer()  # before the mirror's build thread: see _DiskWriter
        self._mirror = _Mirror(self, self._mirror_wanted)

    def _stop_mirror(self) -> None:
        mirror = self._mirror
        self._mirror = None
        if mirror is not None:
            mirror.stop()
        MIRROR_BUDGET.release(self)

    @property
    def mirror_state(self) -> str:
        mirror = self._mirror
        return "off" if mirror is None else mirror.state

    def wait_mirror(self, timeout: float | None = None) -> bool:
        """Wait until the read mirror is built (or given up); True when it serves reads."""
        mirror = self._mirror
        return mirror is not None and mirror.wait(timeout)

    def _reads(self) -> ox.Store:
        """The store that answers reads: the mirror when it is ready, else the disk store."""
        mirror = self._mirror
        store = self.store
        if mirror is not None:
            copy = mirror.store
            if copy is not None:
                return copy
        return store

    # -- lifecycle -----------------------------------------------------------------------------

    @property
    def store(self) -> ox.Store:
        store = self._store
        if store is None:
            return self._unpark()
        self.last_use = time.monotonic()
        return store

    def _open_disk_store(self, path: Path) -> ox.Store:
        """RocksDB's store at ``path`` (the agent's lock is held). Refused for the process's
        limit of open files, it is tried once more after every idle store is parked."""
        with OPEN_STORES.opening:
            OPEN_STORES.make_room(self)
            store = OPEN_STORES.open_with_room(self, lambda: ox.Store(str(path)))
        _prune_info_logs(path)
        return store

    # -- parking (many agents in one process) ------------------------------------------------

    @property
    def parked(self) -> bool:
        """RocksDB's files are closed while the agent is idle (:meth:`park`)."""
        return self._parked

    @property
    def parkable(self) -> bool:
        """Open on disk for writing, and not building its read mirror (whose thread reads
        the disk store, and takes the write lock that :meth:`park` holds as it stops the
        mirror, until it has ended) nor without the mirror it wants (a purge or a bulk load
        stopped it while it works on the store; an unpark would start one beside it)."""
        mirror = self._mirror
        return (self._store is not None and self.path is not None and not self.read_only
                and (mirror.ended if mirror is not None
                     else self._mirror_wanted is False))

    def park(self, *, flush: bool = True) -> bool:
        """Close RocksDB's files while no call uses the store (``_OpenStores``): the read
        mirror is dropped, the agent's lock stays held (no one else opens the agent), and the
        next use opens the store again (~50 ms for a small agent) and builds the mirror anew.
        Returns False, changing nothing, when the store is in use (a call holding it, a
        commit, a flush or compaction running, the mirror being built). ``flush`` False: the
        memtables are not flushed first (the write-ahead log holds them; a full disk would
        refuse the flush)."""
        if not self.parkable or not self._write_lock.acquire(blocking=False):
            return False
        # Without waiting for the park lock either: an unpark holds it while it waits for
        # OPEN_STORES.opening, which the caller (make_room) may hold.
        if not self._park_lock.acquire(blocking=False):
            self._write_lock.release()
            return False
        try:
            with self._users.alone_if_idle() as idle:
                if self._closing or not idle or not self.parkable or self._busy_upkeep():
                    return False
                self._stop_mirror()
                try:
                    if flush:
                        with self._upkeep, _storage_errors(f"cannot flush {self.path}"):
                            self.store.flush()
                except StoreError:
                    self._start_mirror()
                    return False
                self._store = None
                self._parked = True
                gc.collect()  # the last reference going away closes RocksDB (SPEC §7)
                return True
        finally:
            self._park_lock.release()
            self._write_lock.release()

    def _busy_upkeep(self) -> bool:
        optimizer = self._optimizer
        with self._flusher_lock:
            flushing = self._flusher is not None
        return flushing or (optimizer is not None and optimizer.is_alive())

    def _unpark(self) -> ox.Store:
        """The disk store opened again after :meth:`park` (StoreError when it is closed)."""
        with self._park_lock:
            store = self._store
            if store is None:
                if self._closing or not self._parked or self.path is None:
                    raise StoreError(f"the memory store {self.path} is closed")
                with _storage_errors(f"cannot open the memory store {self.path} again"):
                    store = self._open_disk_store(self.path)
                self._store = store
                self._parked = False
                self._start_mirror()
        self.last_use = time.monotonic()
        return store

    def close(self) -> None:
        """Release the store (and its RocksDB lock): pyoxigraph has no close(), the last
        reference going away is what unlocks it (SPEC §7)."""
        with self._park_lock:
            self._closing = True  # no park, and no call opens it again
            self._parked = False
        OPEN_STORES.discard(self)
        self._stop_mirror()
        if self._optimizer is not None:
            self._optimizer.join()
            self._optimizer = None
        self.wait_flush()  # the flusher clears _flusher as it ends
        if self._store is not None:
            if not self.read_only and self.path is not None:
                with contextlib.suppress(StoreError):
                    self.flush()
            self._store = None
            gc.collect()
        self._release_agent_lock()

    def keep_agent_lock(self) -> AgentLock | None:
        """Take the agent's writer lock out of this store, so that :meth:`close` leaves it
        held: the caller works on the directory after the store is let go (the demo wipes
        it) and releases the lock itself."""
        lock, self._agent_lock = self._agent_lock, None
        return lock

    def _release_agent_lock(self) -> None:
        """Release the writer lock once no call holds the disk store: a read in another thread
        (an untimed query with the mirror off, or a timed one that timed out: an aggregate
        finishes in the background, :func:`run_bounded`) may still have it in hand, and a
        second instance of the store in this process must not open beside it. Then the lock
        goes, from a thread of its own, when the last such call ends."""
        lock, self._agent_lock = self._agent_lock, None
        if lock is None:
            return
        if not self._users.active:
            lock.release()
            return

        def release_later() -> None:
            self._users.wait_idle()
            gc.collect()
            lock.release()

        threading.Thread(target=release_later, name="memory-rdf-release", daemon=True).start()

    def flush(self) -> None:
        if self._parked:
            return  # flushed when it was parked; nothing written since
        with (self._users.hold(), self._upkeep,
              _storage_errors(f"cannot flush the memory store {self.path}")):
            self.store.flush()

    def optimize(self) -> None:
        with (self._users.hold(), self._upkeep,
              _storage_errors(f"cannot compact the memory store {self.path}")):
            self.store.optimize()
        self._commits_since_optimize = 0

    #: Writes after which an idle agent's store is compacted in the background. RocksDB keeps
    #: every write in its log until compaction, and a read-only open — how live inspection
    #: works — replays that log (measurements: README, "Fixed pool").
    OPTIMIZE_AFTER_COMMITS = 1000
    #: Bytes of updates after which the writer flushes RocksDB's memtables to disk: without it
    #: a busy agent's process grew its RSS steadily (benchmarks/soak.py). A flush also makes
    #: the writes survive a power cut (SPEC §7).
    FLUSH_AFTER_BYTES = 4 * 2**20

    def maybe_optimize_in_background(self) -> bool:
        """Compact the store in a background thread once enough writes piled up (RocksDB
        compaction runs concurrently with reads and writes; close() waits for it)."""
        if (
            self.read_only
            or self.path is None
            or self._commits_since_optimize < self.OPTIMIZE_AFTER_COMMITS
            or (self._optimizer is not None and self._optimizer.is_alive())
            or self._store is None  # parked (nothing written since) or closed
        ):
            return False
        self._commits_since_optimize = 0

        def run() -> None:
            self._upkeep_if_open("optimize", "background compaction")

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
        dump = _rewrite_dump(path)
        # The read mirror is built again from the fresh copy: an in-memory store keeps the
        # strings of what was deleted from it, too (reads go to disk meanwhile). A parked
        # store is opened first: opened during the rewrite, it would start a mirror of its own.
        self.store  # noqa: B018
        self._stop_mirror()
        try:
            self._rewrite(path, new, old, dump)
        finally:
            self._start_mirror()

    def _rewrite(self, path: Path, new: Path, old: Path, dump: Path) -> None:
        with self._write_lock:
            if self._optimizer is not None:
                self._optimizer.join()
                self._optimizer = None
            self.wait_flush()
            try:
                for leftover in (new, old):
                    if leftover.exists():
                        shutil.rmtree(leftover)
                dump.unlink(missing_ok=True)
                # Through a file, not memory: N-Quads run to ~16 kB per node (measured at 10k
                # nodes: 157 MB), and both calls stream it. The file holds every memory and
                # sits beside the agents' directories: readable by the owner only.
                os.close(os.open(dump, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
                self.store.dump(output=str(dump), format=ox.RdfFormat.N_QUADS)
                new.mkdir()  # the copy keeps the permissions of the directory it replaces
                os.chmod(new, stat.S_IMODE(path.stat().st_mode))
                fresh = ox.Store(str(new))
                fresh.bulk_load(path=str(dump), format=ox.RdfFormat.N_QUADS)
                fresh.flush()
                del fresh
                dump.unlink()
                for extra in path.iterdir():  # files of ours (not RocksDB's) move along
                    if extra.is_file() and not _ROCKSDB_FILE.match(extra.name):
                        shutil.copy2(extra, new / extra.name)
                # No call may have the old instance in hand across the swap (a read in
                # another thread: an untimed query with the mirror off, a timed-out aggregate
                # still running): alive, it writes into the fresh copy when it goes, and the
                # reopen fails meanwhile. Reads that come meanwhile wait for the fresh copy.
                with self._users.alone():
                    self._swap(path, new, old)
                shutil.rmtree(old)
            except OSError as exc:
                raise StoreError(f"cannot rewrite the memory store {path}: {exc}") from exc
            self._commits_since_optimize = 0
            self._unflushed = 0

    def _swap(self, path: Path, new: Path, old: Path) -> None:
        """Put the complete copy ``new`` in the place of the store at ``path`` (the write lock
        is held, no call holds the store). On an error the store at ``path`` is open again."""
        try:
            with self._upkeep:
                self.store.flush()
            self._store = None
            gc.collect()  # the last reference going away releases the lock (SPEC §7)
            os.rename(path, old)
            os.rename(new, path)
            try:
                self._store = ox.Store(str(path))
            except OSError:
                # Put the old store back (the next open would take the copy as the store and
                # delete the old one): nothing purged, nothing lost.
                os.rename(path, new)
                os.rename(old, path)
                raise
        except OSError:
            if self._store is None and path.exists():
                with contextlib.suppress(OSError):
                    self._store = ox.Store(str(path))
                if self._store is None:
                    # Not open again now (the old instance still alive, the open-files
                    # limit): parked, so that the next use tries again (the agent's lock is
                    # still held), instead of a store closed for the rest of the session.
                    with self._park_lock:
                        self._parked = not self._closing
            raise

    def bulk_load_nquads(self, path: Path) -> None:
        """Load an N-Quads file with Oxigraph's bulk loader (not atomic: for fresh stores)."""
        self.store  # noqa: B018 - opened first if parked (opening starts a mirror: stopped here)
        self._stop_mirror()  # the load bypasses commit(): the mirror is built again after it
        try:
            with (self._users.hold(),
                  _storage_errors(f"cannot bulk-load {path} into {self.path}")):
                self.store.bulk_load(path=str(path), format=ox.RdfFormat.N_QUADS)
        finally:
            self._start_mirror()

    # -- internal queries ----------------------------------------------------------------------

    def rows(self, query: str) -> list[Row]:
        with self._users.hold(), _storage_errors(f"cannot read the memory store {self.path}"):
            return self._rows(self._reads(), query)

    @staticmethod
    def _rows(store: ox.Store, query: str) -> list[Row]:
        result = store.query(query, prefixes=V.PREFIXES)
        assert isinstance(result, ox.QuerySolutions)
        width = len(result.variables)
        return [tuple(to_python(sol[i]) for i in range(width)) for sol in result]

    def term_rows(self, query: str) -> list[Sequence[Any]] | None:
        with self._users.hold():
            return self._solutions(self._reads(), query, f"the memory store {self.path}")

    @staticmethod
    def _solutions(store: ox.Store, query: str, what: str) -> list[Sequence[Any]]:
        """A SELECT's rows as pyoxigraph terms, materialized here, in the calling thread
        (SPEC §7)."""
        with _storage_errors(f"cannot read {what}"):
            result = store.query(query, prefixes=V.PREFIXES)
            assert isinstance(result, ox.QuerySolutions)
            return list(result)

    def index_rows(self, query: str) -> list[Row]:
        with self._users.hold(), _storage_errors(f"cannot read the memory store {self.path}"):
            return self._rows(self.store, query)

    @property
    def mirrored(self) -> bool:
        mirror = self._mirror
        return mirror is not None and mirror.store is not None

    def mirror_rows(self, query: str) -> list[Sequence[Any]] | None:
        mirror = self._mirror
        copy = None if mirror is None else mirror.store
        if copy is None:
            return None
        return self._solutions(copy, query, f"the read mirror of {self.path}")

    def ask(self, query: str) -> bool:
        with self._users.hold(), _storage_errors(f"cannot read the memory store {self.path}"):
            return bool(self._reads().query(query, prefixes=V.PREFIXES))

    def commit(self, batch: WriteBatch) -> None:
        """Apply ``batch`` to the disk store, then to the read mirror, then run its
        after-commit steps. A Ctrl-C in the main thread is held back until all of it is done
        (:func:`interrupts_held`), so it does not leave the mirror or the in-memory state
        behind the disk store; anything else that stops the commit after it started (an
        exception raised by another signal's handler) has the mirror built again from the
        disk store, as :meth:`_commit_at_once` does."""
        if not batch:
            return
        text = batch.text()
        if self._write_refused:
            self._reopen_after_refusal()
        with interrupts_held() as held:
            # The wait for the write lock (a purge's rewrite holds it for minutes on a large
            # store) stays open to Ctrl-C: it raises there, before anything is written.
            while not self._write_lock.acquire(timeout=0.05):
                held.deliver()
            try:
                self._commits_since_optimize += 1
                self._write(text, batch)
                self._unflushed += len(text)
                if self._unflushed >= self.FLUSH_AFTER_BYTES and self.path is not None:
                    self._flush_in_background()
            finally:
                self._write_lock.release()
            batch.run_after_commit()

    def _reopen_after_refusal(self) -> None:
        """RocksDB keeps the I/O error a write met (a full disk) and refuses every later
        write on that handle, even once the disk has room again (Oxigraph has no
        ``DB::Resume``): the handle is closed, without a flush (the write-ahead log holds
        every write that landed), and the write opens the store again (issue 33 F6). Only
        once the disk has room for the open (which replays the log into a new table file):
        opened on a full disk, the store could not be read either. Until then, or while
        another call holds the store, the write is refused again, and a remember tries again
        after a backoff (``MemoryManager``)."""
        if self.path is not None and _room_to_reopen(self.path) and self.park(flush=False):
            self._write_refused = False

    def _refused(self, exc: StoreError) -> None:
        """Note a write the disk store refused with an I/O error (see above)."""
        if self.path is not None and disk_refused(exc):
            self._write_refused = True

    def _write(self, text: str, batch: WriteBatch) -> None:
        """The update applied to both stores (the write lock is held: a purge's swap, which
        holds it too, cannot be under way)."""
        with self._users.hold():
            self.store  # noqa: B018 - opened again first if parked, with its mirror loading
            mirror = self._mirror
            if (mirror is not None and mirror.store is not None
                    and len(text) >= PARALLEL_COMMIT_BYTES and _parallel_writes()):
                self._commit_at_once(text, batch, mirror)
            else:
                self._commit_in_turn(text, batch, mirror)

    def _commit_in_turn(self, text: str, batch: WriteBatch, mirror: _Mirror | None) -> None:
        """The update applied to the disk store, then to the read mirror (the write lock is
        held). Stopped in between (or in either, whether the disk store has the write is then
        unknown), the mirror is built again from the disk store, the truth; a write the disk
        store refused (StoreError) is in neither."""
        try:
            with _storage_errors(f"cannot write the memory store {self.path}"):
                self.store.update(text, prefixes=V.PREFIXES)
            if mirror is not None:  # disk first: the disk store is the truth
                mirror.apply(text, batch)
        except StoreError as exc:
            self._refused(exc)
            raise
        except BaseException:
            if mirror is not None and self._mirror is mirror:
                mirror.interrupted()
            raise

    def _commit_at_once(self, text: str, batch: WriteBatch, mirror: _Mirror) -> None:
        """A large update applied to the disk store (in a writer thread) and to the live read
        mirror (here) at the same time: pyoxigraph releases the GIL in both, so on two CPUs a
        compression commit costs the calling thread the longer of the two instead of their
        sum (benchmarks/PROFILE.md, eleventh pass). The write lock is held until both are in,
        so commits still land one after the other, in order, on both stores. If the disk
        update fails, the mirror (which may hold the write) is dropped and built again from
        the disk store, which stays the truth; a reader of the mirror may have seen the
        failed write in between, as it sees any write before this call returns."""
        answer = _disk_writer().start(self.store, text)
        try:
            mirror.apply(text, batch)
        except BaseException:  # interrupted: whether the copy has the write is unknown
            answer.get()
            if self._mirror is mirror:
                mirror.interrupted()
            raise
        try:
            with _storage_errors(f"cannot write the memory store {self.path}"):
                failed = answer.get()
                if failed is not None:
                    raise failed
        except StoreError as exc:
            self._refused(exc)
            current = self._mirror
            if current is not None and current.store is not None:
                current.rebuild("a write that failed on the disk store")
            raise

    def _flush_in_background(self) -> None:
        """Have RocksDB's memtables flushed by a background thread (the write lock is held):
        the writer goes on meanwhile (a flush took 60-90 ms at 100k nodes, 50-130 µs of every
        compression scan when the writer waited for it). One flusher at a time: asked again
        while it runs, it flushes once more before it ends; it waits for a compaction in
        progress (``_upkeep``), the writer never does."""
        self._unflushed = 0
        self.auto_flushes += 1

        def run() -> None:
            while True:
                with self._flusher_lock:
                    if not self._flush_wanted:
                        self._flusher = None
                        return
                    self._flush_wanted = False
                # the write landed; flushing is upkeep
                self._upkeep_if_open("flush", "background flush")

        with self._flusher_lock:
            self._flush_wanted = True
            if self._flusher is None:
                self._flusher = threading.Thread(target=run, name="memory-rdf-flush",
                                                 daemon=True)
                self._flusher.start()

    def _upkeep_if_open(self, name: str, what: str) -> None:
        """``Store.flush`` or ``Store.optimize`` (``name``) run by a background thread, holding
        the store (:class:`StoreUsers`) and only while it is open: parked meanwhile, nothing
        is left to do. The thread never keeps the store past its hold: one captured when the
        thread started kept a store that was parked in between open (its next use could not
        open it again), and a flusher's closure outlived the ``_flusher`` that park checks."""
        with self._users.hold():
            store = self._store
            if store is None:  # parked (flushed as it was) or closed
                return
            call = getattr(store, name)
            del store
            try:
                self._background_upkeep(call, what)
            finally:
                del call

    def _background_upkeep(self, call: Callable[[], None], what: str) -> None:
        """A RocksDB flush or compaction run by a background thread: one at a time with every
        other (``_upkeep``), its errors dropped (the writes it tidies have landed)."""
        with self._upkeep, contextlib.suppress(StoreError), _storage_errors(what):
            call()

    def wait_flush(self) -> None:
        """Wait for the background flusher (see :meth:`_flush_in_background`) to end."""
        with self._flusher_lock:
            flusher = self._flusher
        if flusher is not None:
            flusher.join()

    def quads(self, subject: str | None, predicate: str | None, obj: Term | None,
              graph: str | None) -> list[tuple[Any, Any, Any]]:
        s = ox.NamedNode(subject) if subject else None
        p = ox.NamedNode(predicate) if predicate else None
        g = ox.NamedNode(graph) if graph else ox.DefaultGraph()
        with self._users.hold(), _storage_errors(f"cannot read the memory store {self.path}"):
            return [
                (to_python(q.subject), to_python(q.predicate), to_python(q.object))
                for q in self._reads().quads_for_pattern(s, p, None, g)
            ]

    # -- the user's SPARQL (SPEC §6) -----------------------------------------------------------

    def _user_result(self, query: str) -> ox.QuerySolutions | ox.QueryBoolean | ox.QueryTriples:
        return self._reads().query(
            query, prefixes=V.PREFIXES, default_graph=ox.DefaultGraph(), named_graphs=[]
        )

    def user_query(
        self, query: str, *, timeout: float | None = None, limit: int | None = None
    ) -> UserResult:
        check_user_query(query)

        def run(cancel: threading.Event) -> UserResult:
            # The result (which has the store in hand) lives in a frame of its own, ended
            # before the hold is: here it outlived the hold, and a purge's swap or close()
            # could go ahead with the store still open.
            with (self._users.hold(), _storage_errors(f"cannot read the memory store {self.path}",
                                                      user_query=query)):
                return self._user_rows(query, cancel, timeout, limit)

        return run_bounded(run, timeout)

    def _user_rows(self, query: str, cancel: threading.Event, timeout: float | None,
                   limit: int | None) -> UserResult:
        result = self._user_result(query)
        if isinstance(result, ox.QueryBoolean):
            return bool(result)
        out: list[Any] = []
        if isinstance(result, ox.QuerySolutions):
            names = [v.value for v in result.variables]
            for sol in result:
                _check_bounds(cancel, timeout, limit, len(out))
                row: dict[str, Any] = {}
                for i, name in enumerate(names):
                    term = sol[i]
                    if term is not None:
                        row[name] = to_python(term)
                out.append(row)
            return out
        for t in result:
            _check_bounds(cancel, timeout, limit, len(out))
            out.append((to_python(t.subject), to_python(t.predicate), to_python(t.object)))
        return out

    def user_query_serialized(
        self, query: str, fmt: str, *, timeout: float | None = None,
        output: BinaryIO | None = None,
    ) -> bytes | None:
        formats = {
            "json": ox.QueryResultsFormat.JSON,
            "csv": ox.QueryResultsFormat.CSV,
            "tsv": ox.QueryResultsFormat.TSV,
            "xml": ox.QueryResultsFormat.XML,
        }
        check_user_query(query)

        def serialize(sink: Any) -> bytes | None:  # the result ends with this frame
            result = self._user_result(query)
            if isinstance(result, ox.QueryTriples):
                return result.serialize(sink, format=ox.RdfFormat.N_TRIPLES)
            return result.serialize(sink, format=formats[fmt])

        def run(cancel: threading.Event) -> bytes | None:
            sink: Any = None if output is None else _Sink(output, cancel, timeout)
            with (self._users.hold(), _storage_errors(f"cannot read the memory store {self.path}",
                                                      user_query=query)):
                return serialize(sink)

        return run_bounded(run, timeout)

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
        with self._users.hold(), _storage_errors(f"cannot export the memory store {self.path}"):
            data = self.store.dump(**kwargs)
        assert data is not None
        return data


#: Files RocksDB makes in a store directory (anything else there is ours and kept by rewrite).
_ROCKSDB_FILE = re.compile(
    r"^(?:\d+\.(?:sst|log|blob)|CURRENT|IDENTITY|LOCK|LOG(?:\.old\.\d+)?|"
    r"MANIFEST-\d+|OPTIONS-\d+(?:\.dbtmp)?)$"
)


#: The agents open for writing in this process, by the (device, inode) of their lock file: the
#: path each was opened by. See :class:`AgentLock`.
_OPEN_AGENTS: dict[tuple[int, int], str] = {}
_OPEN_AGENTS_LOCK = threading.Lock()


#: The directory of the agents' lock files in a data directory ('~' is in no agent id).
LOCKS_DIR = "~locks"


def _lock_path(path: Path) -> Path:
    """``{data_dir}/~locks/{agent}``: the agent's lock file, outside its directory."""
    return path.parent / LOCKS_DIR / path.name


class AgentLock:
    """The one writer of an agent's directory, in any process, under any spelling.

    RocksDB's own lock lives inside the store directory, which a purge swaps for a fresh copy
    (:meth:`AgentStore.rewrite`), and it refuses a second open in one process only when the
    path is spelled the same: ``data`` and ``/abs/data``, ``data/../data`` or a link opened one
    store twice (the two instances wrote over each other's files, and the store never opened
    again), and a second opener during a purge finished or undid the swap under it (the
    agent's memories lost). This lock is taken before anything in the directory is read or
    repaired and held until the store is released: an exclusive ``flock`` (Windows: a byte
    lock) on the file ``~locks/{agent}`` of the data directory, which no swap touches, plus an
    in-process table by the file's device and inode, for file systems whose ``flock`` is per
    process (NFS). Raises :class:`StoreLockedError` when another holder has it.
    """

    def __init__(self, path: Path, what: str) -> None:
        lock_path = _lock_path(path)
        self._key: tuple[int, int] | None = None
        self._release_lock = threading.Lock()
        try:
            # The data directory, when this makes it, and ~locks: readable by the owner only.
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            lock_path.parent.mkdir(mode=0o700, exist_ok=True)
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:  # a read-only data directory, ~locks taken by a file, …
            raise StoreError(_store_message(what, exc)) from exc
        try:
            st = os.fstat(fd)
            key = (st.st_dev, st.st_ino)
            with _OPEN_AGENTS_LOCK:
                holder = _OPEN_AGENTS.get(key)
                if holder is not None:
                    raise StoreLockedError(
                        f"{what}: already open in this process (as {holder}): close that "
                        "MemoryManager or MemorySystem first (close(), or open it in a `with` "
                        "block), or keep using it; MemorySystem.agent() gives the open one"
                    )
                _OPEN_AGENTS[key] = str(path)
                self._key = key
            try:
                _lock_file(fd)
            except OSError as exc:
                self._forget_key()
                raise StoreLockedError(
                    f"{what}: held by another process (or already open in this one); close "
                    "it there first, or inspect it read-only"
                ) from exc
        except BaseException:
            self._forget_key()
            os.close(fd)
            raise
        self._fd: int | None = fd
        _LIVE_LOCKS.add(self)

    def _forget_key(self) -> None:
        with _OPEN_AGENTS_LOCK:
            if self._key is not None:
                _OPEN_AGENTS.pop(self._key, None)
            self._key = None

    def release(self) -> None:
        """Let the next writer in (idempotent). The file stays: deleting a lock file another
        process may have just opened would let two writers in."""
        with self._release_lock:
            fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            _unlock_file(fd)
        os.close(fd)
        self._forget_key()

    def _forsake(self) -> None:
        """In a forked child: the lock is the parent's. Close this copy of the descriptor
        without unlocking (the lock belongs to the parent's open file) and hold nothing."""
        # No lock taken here: a thread of the parent may have held it as the process forked.
        self._release_lock = threading.Lock()
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._key = None


#: Every AgentLock held in this process (for a fork's child to let go of its copies).
_LIVE_LOCKS: weakref.WeakSet[AgentLock] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    """A forked child holds none of its parent's agents: an inherited ``flock`` would keep
    the agent held after the parent ends, and a child's release would unlock the parent's
    live store."""
    global _OPEN_AGENTS_LOCK
    _OPEN_AGENTS_LOCK = threading.Lock()  # a parent's thread may have held it at the fork
    for lock in list(_LIVE_LOCKS):
        lock._forsake()
    _LIVE_LOCKS.clear()
    _OPEN_AGENTS.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
    import msvcrt

    def _lock_file(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)

    def _unlock_file(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
else:
    import fcntl

    def _lock_file(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)

    def _unlock_file(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)


#: RocksDB's info logs that a read-write open keeps: ``LOG`` and this many ``LOG.old.*``.
INFO_LOGS_KEPT = 2


def _prune_info_logs(path: Path) -> None:
    """Delete all but the newest :data:`INFO_LOGS_KEPT` of RocksDB's old info logs.

    Every read-write open renames ``LOG`` to ``LOG.old.{microseconds}`` and starts a new one
    (~140 kB: the options of Oxigraph's column families), and RocksDB keeps 1,000 of them
    (``keep_log_file_num``, which pyoxigraph does not expose): an agent opened once per
    ``memory-rdf recall`` grew by that much every call. The info logs hold RocksDB's
    messages, never a triple; the database's own files (``*.log`` write-ahead logs,
    ``MANIFEST``, ``*.sst``) are not touched."""
    old = sorted(
        (p for p in path.glob("LOG.old.*") if _ROCKSDB_FILE.match(p.name)),
        key=lambda p: int(p.name.rpartition(".")[2]),
    )
    for stale in old[:-INFO_LOGS_KEPT] if INFO_LOGS_KEPT else old:
        with contextlib.suppress(OSError):  # another process pruned it first
            stale.unlink()


_BACKUP_FORMATS = {"nquads": ox.RdfFormat.N_QUADS, "trig": ox.RdfFormat.TRIG}


#: A restore's progress: (bytes of the backup read, its size).
RestoreProgress = Callable[[int, int], None]


def restore_backup(path: Path, source: Path, fmt: str, agent_id: str,
                   progress: RestoreProgress | None = None, *,
                   max_chars: int = 100_000) -> None:
    """Make the agent directory ``path`` from the backup ``source`` (``fmt``: ``nquads`` or
    ``trig``), checked to be one agent's store of this schema version, its metadata taking
    ``agent_id`` (:func:`memory_rdf.backup.restore`). Under the agent's writer lock from the
    first check to the rename: no other open or restore of the agent runs meanwhile. The
    store is built in a directory of its own (``{agent}~restore-…``, made for this call) and
    renamed into place once complete; an error removes it and leaves no agent behind.
    ``progress`` is told how much of the file is loaded as the load goes. A backup holding
    anything this memory_rdf would not have written (:mod:`memory_rdf._integrity`; texts
    longer than ``max_chars``) is refused before the agent exists."""
    lock = AgentLock(path, f"cannot restore agent {agent_id!r}")
    try:
        if (path / STORE_MARKER).is_file():
            raise InvalidInputError(
                f"agent {agent_id!r} already has a memory store at {path}: restore into a new "
                "agent id (or delete that directory first)"
            )
        if path.is_dir() and any(path.iterdir()):
            raise InvalidInputError(f"{path} is not empty and not a memory store: left untouched")
        # Copies an interrupted restore of this agent left (only ever made under this lock):
        # they hold whole memories that nothing else would erase.
        for leftover in path.parent.glob(f"{glob.escape(path.name)}~restore-*"):
            shutil.rmtree(leftover, ignore_errors=True)
        building = Path(tempfile.mkdtemp(prefix=f"{path.name}~restore-", dir=path.parent))
        try:
            _load_backup(building, source, fmt, agent_id, progress, max_chars)
            if path.is_dir():
                path.rmdir()  # the empty directory checked above (Windows renames onto nothing)
            os.rename(building, path)
        finally:
            if building.exists():
                shutil.rmtree(building, ignore_errors=True)
    finally:
        lock.release()


def _load_backup(building: Path, source: Path, fmt: str, agent_id: str,
                 progress: RestoreProgress | None, max_chars: int) -> None:
    """Load and check the backup in the fresh directory ``building``; the store is released
    (its RocksDB lock gone) when this returns, whether or not it raised."""
    store: ox.Store | None = None
    try:
        try:
            store = ox.Store(str(building))
        except OSError as exc:
            raise StoreError(f"cannot make the store {building}: {exc}") from exc
        try:
            if progress is None:
                store.bulk_load(path=str(source), format=_BACKUP_FORMATS[fmt])
            else:
                with open(source, "rb", buffering=0) as raw:
                    counted = io.BufferedReader(_ReadCounter(raw, progress), _ReadCounter.STEP)
                    store.bulk_load(input=counted, format=_BACKUP_FORMATS[fmt])
        except SyntaxError as exc:
            raise InvalidInputError(
                f"{source} is not a memory_rdf backup: not valid {fmt} ({exc})"
            ) from exc
        except MemoryError as exc:
            if "buffer maximal size" not in str(exc):
                raise
            # Oxigraph's parser holds one term in a buffer of 16 MiB at most (issue 33 F7)
            raise InvalidInputError(
                f"{source} holds what memory_rdf does not write, nothing was restored: a "
                f"term longer than the parser's limit ({exc})"
            ) from exc
        except OSError as exc:
            raise StoreError(f"cannot read the backup {source}: {exc}") from exc
        _check_backup(store, source, agent_id, max_chars)
        store.flush()
    except BaseException as exc:
        # The traceback's frames hold the store: cleared, so the lock goes with it below and
        # the caller can remove the directory.
        _clear_frames(exc)
        raise
    finally:
        store = None
        gc.collect()  # the last reference going away releases the lock (SPEC §7)


class _ReadCounter(io.RawIOBase):
    """A file read by the bulk loader, telling ``progress`` how far it got at every read.
    Read through a buffer of STEP bytes: the loader asks for ~2 kB at a time, a Python call
    each (114,485 calls and 13.6–14.3 s against 12.0–13.3 s for the loader reading the file
    itself, on a 231 MB N-Quads file); through the buffer, 224 calls and no time measurably
    lost (9.4–9.8 s against 8.9–11.2 s)."""

    STEP = 2**20

    def __init__(self, raw: io.FileIO, progress: RestoreProgress) -> None:
        super().__init__()
        self._raw = raw
        self._progress = progress
        self._size = os.fstat(raw.fileno()).st_size
        self._read = 0
        progress(0, self._size)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = self._raw.readinto(buffer) or 0
        self._read += n
        self._progress(self._read, max(self._size, self._read))
        return n


def _check_backup(store: ox.Store, source: Path, agent_id: str, max_chars: int) -> None:
    result = store.query("SELECT DISTINCT ?g WHERE { GRAPH ?g { ?s ?p ?o } }")
    assert isinstance(result, ox.QuerySolutions)
    graphs = {str(row["g"].value) for row in result}
    other = sorted(graphs - {V.META_GRAPH, V.JOURNAL_GRAPH, V.VECTOR_GRAPH})
    if other:
        shown = ", ".join(f"<{g}>" for g in other[:3]) + (", …" if len(other) > 3 else "")
        raise InvalidInputError(
            f"{source} is not a memory_rdf backup: it has graphs an agent's store does not "
            f"have ({shown})"
        )
    meta = ox.NamedNode(V.META_GRAPH)
    subject = ox.NamedNode(V.META_SUBJECT)
    versions = [q.object for q in store.quads_for_pattern(
        subject, ox.NamedNode(V.MEMORY + "schemaVersion"), None, meta)]
    if len(versions) != 1:
        raise InvalidInputError(
            f"{source} is not a memory_rdf backup: it has no memory_rdf store metadata "
            "(schema version), as 'memory-rdf export AGENT -o FILE.nq' writes"
        )
    version = versions[0]
    shown = version.value if isinstance(version, ox.Literal) else str(version)
    if not (isinstance(version, ox.Literal) and version.value.isdigit()
            and int(version.value) == V.SCHEMA_VERSION):
        raise SchemaVersionError(
            f"{source} holds a store of schema version {shown}; this memory_rdf "
            f"reads version {V.SCHEMA_VERSION}"
        )
    try:
        problem = first_problem(store, max_chars)
    except (OSError, RuntimeError, ValueError) as exc:  # a store error while checking
        raise StoreError(f"cannot check the backup {source}: {exc}") from exc
    if problem is not None:
        raise InvalidInputError(
            f"{source} holds what memory_rdf does not write, nothing was restored: {problem}")
    agent = ox.NamedNode(V.MEMORY + "agentId")
    for quad in list(store.quads_for_pattern(subject, agent, None, meta)):
        store.remove(quad)
    store.add(ox.Quad(subject, agent, ox.Literal(agent_id), meta))


def _rewrite_dirs(path: Path) -> tuple[Path, Path]:
    """Where :meth:`AgentStore.rewrite` builds the fresh copy and parks the old directory.
    ``~`` is not allowed in agent ids, so neither can be taken for an agent's store."""
    return path.with_name(path.name + "~new"), path.with_name(path.name + "~old")


def _rewrite_dump(path: Path) -> Path:
    """The N-Quads file a rewrite copies the store through (deleted before it returns)."""
    return path.with_name(path.name + "~copy.nq")


def _refuse_foreign_directory(path: Path) -> None:
    """A directory that is not a store (no RocksDB ``CURRENT``) and holds files RocksDB did
    not make is the user's: refuse it rather than write RocksDB files beside them (issue 17;
    RocksDB renames a file named ``LOG`` that is in its way)."""
    if not path.is_dir() or (path / "CURRENT").is_file():
        return
    foreign = sorted(p.name for p in path.iterdir() if not _ROCKSDB_FILE.match(p.name))
    if foreign:
        shown = ", ".join(foreign[:3]) + (", …" if len(foreign) > 3 else "")
        raise StoreError(
            f"{path} is not a memory store: it holds other files ({shown}); it is left "
            "untouched: choose another agent id or data directory"
        )


def _private_directory(path: Path) -> None:
    """Create an agent's store directory readable by its owner only (``0700``: it holds
    someone's conversations), and the data directory as well when this creates it. A
    directory that exists already keeps its permissions."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # an existing one: unchanged
    path.mkdir(mode=0o700, exist_ok=True)


def _finish_rewrite(path: Path) -> None:
    """Complete or undo a :meth:`AgentStore.rewrite` that a crash interrupted."""
    new, old = _rewrite_dirs(path)
    _rewrite_dump(path).unlink(missing_ok=True)
    if not path.exists() and old.exists() and new.exists():
        os.rename(new, path)  # the copy was complete before the first rename
    if path.exists():
        for leftover in (new, old):
            if leftover.exists():
                shutil.rmtree(leftover, ignore_errors=True)


def parse_ntriples(data: bytes) -> list[tuple[Any, Any, Any]]:
    """(s, p, o) Python values of an N-Triples document (what an endpoint's CONSTRUCT sends)."""
    with _storage_errors("cannot read the endpoint's N-Triples answer"):
        return [
            (to_python(t.subject), to_python(t.predicate), to_python(t.object))
            for t in ox.parse(data, format=ox.RdfFormat.N_TRIPLES)
        ]


def reserialize(data: bytes, fmt: str) -> bytes:
    """N-Quads (or N-Triples) bytes in another RDF format (turtle, trig, ntriples, nquads)."""
    formats = {"turtle": ox.RdfFormat.TURTLE, "trig": ox.RdfFormat.TRIG,
               "ntriples": ox.RdfFormat.N_TRIPLES, "nquads": ox.RdfFormat.N_QUADS}
    with _storage_errors(f"cannot convert the endpoint's answer to {fmt}"):
        quads = list(ox.parse(data, format=ox.RdfFormat.N_QUADS))
        kwargs: dict[str, Any] = {"format": formats[fmt]}
        if fmt in ("turtle", "trig"):
            kwargs["prefixes"] = V.PREFIXES
        if fmt in ("turtle", "ntriples"):
            out = ox.serialize([q.triple for q in quads], **kwargs)
        else:
            out = ox.serialize(quads, **kwargs)
    assert out is not None
    return out


def term_from_json(binding: dict[str, str]) -> Term:
    """A SPARQL JSON results binding (``{"type": "uri", "value": …}``) as a serialized term."""
    kind = binding.get("type")
    value = binding.get("value", "")
    if kind == "uri":
        return iri_ref(value)
    if kind == "bnode":
        return Term(str(ox.BlankNode(value)))
    lang = binding.get("xml:lang")
    if lang:
        return Term(str(ox.Literal(value, language=lang)))
    datatype = binding.get("datatype")
    if datatype:
        return Term(str(ox.Literal(value, datatype=ox.NamedNode(datatype))))
    return Term(str(ox.Literal(value)))


def python_from_json(binding: dict[str, str] | None) -> Any:
    """A SPARQL JSON results binding as :func:`to_python` would give it."""
    if binding is None:
        return None
    kind = binding.get("type")
    value = binding.get("value", "")
    if kind == "uri":
        return value
    if kind == "bnode":
        return f"_:{value}"
    convert = _CONVERT.get(binding.get("datatype", ""))
    if convert is None:
        return value
    try:
        return convert(value)
    except ValueError:
        return value


@lru_cache(maxsize=1)
def pyoxigraph_version() -> str:
    from importlib.metadata import version

    return version("pyoxigraph")
