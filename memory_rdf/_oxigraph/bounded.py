"""Bounded queries: a query run within a timeout (:func:`run_bounded`) and a row
limit, its rows checked as they come.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, BinaryIO, TypeVar

from memory_rdf._exceptions import (
    QueryLimitError,
    QueryTimeoutError,
)
from memory_rdf._oxigraph.holds import _clear_frames

T = TypeVar("T")


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
