"""The error boundary around every pyoxigraph call (:func:`_storage_errors`): RocksDB
and engine errors become :class:`StoreError`, parse errors the user's :class:`SparqlError`.
"""

from __future__ import annotations

import contextlib
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pyoxigraph as ox

from memory_rdf import _vocab as V
from memory_rdf._exceptions import (
    MemoryRDFError,
    SparqlError,
    StoreError,
    StoreLockedError,
)
from memory_rdf._oxigraph.open_files import _files_limit, too_many_open_files
from memory_rdf._query_guard import undeclared_prefix

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


def oxigraph_syntax_error(query: str) -> SyntaxError | None:
    """Oxigraph's parse error of ``query`` (the predeclared prefixes given), run on an empty
    in-memory store; None when it parses."""
    try:
        ox.Store().query(query, prefixes=V.PREFIXES)
    except SyntaxError as exc:
        return exc
    return None
