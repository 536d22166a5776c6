"""The ``sparql`` tool's queries on an embedded store, each run in a child process.

Oxigraph computes an ``ORDER BY`` or an aggregate before the first row, inside one call that
nothing in the process can interrupt, and keeps what it sorts in memory: measured, a model's
``SELECT * WHERE { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i } ORDER BY ?a`` over a 700-triple agent
took 2.5 GB within three seconds and then aborted the process (Rust's allocation failure; the
kernel's OOM killer without an address-space limit) — the MCP server and every agent it
served. The tools (:mod:`memory_rdf.tools`, so ``memory-rdf serve`` too) therefore run the
query in a child interpreter that opens the store read-only (as ``memory-rdf sparql`` does,
taking no lock), with at most :data:`CHILD_MEMORY` bytes of address space where the platform
enforces it, killed at the timeout. A query costs ~0.15 s more; :meth:`MemoryManager.sparql`
itself still runs in the calling process.

The children are bounded together too (issue 33 F3: the MCP SDK runs ~40 tool calls at once,
three ORDER BY children took 9.9 GB): at most :func:`max_children` run at once in this process
(:data:`MAX_CHILDREN`, or ``$MEMORY_RDF_SPARQL_CHILDREN``), and that many times the per-child
cap fits in :func:`memory_budget` (half the memory the machine has available when the first
child starts; the per-child cap shrinks to fit, down to :data:`MIN_CHILD_MEMORY`, below which
fewer children run). A call that finds every slot taken waits at most :data:`SLOT_WAIT`
seconds (or its own timeout, if shorter) for one, then is refused with
:class:`~memory_rdf.QueryLimitError` ("too many sparql queries running at once; try again"):
never queued without end.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from memory_rdf import _exceptions as errors

__all__ = ["CHILD_MEMORY", "MAX_CHILDREN", "sparql_in_child"]

#: Most address space of the child (bytes): 4 GiB, or half the machine's memory if less.
CHILD_MEMORY = 4 * 2**30
#: Least address space a child is given (its interpreter, pyoxigraph and RocksDB take ~0.3 GB).
MIN_CHILD_MEMORY = 2**30
#: Children running at once in one process, by default (``$MEMORY_RDF_SPARQL_CHILDREN``).
MAX_CHILDREN = 2
#: Longest wait (seconds) of a call for a free slot before it is refused.
SLOT_WAIT = 5.0


def _available_memory() -> int:
    """The machine's available memory in bytes (Linux's MemAvailable), else its physical
    memory, else 8 GiB when the platform says neither."""
    with contextlib.suppress(OSError, ValueError), open("/proc/meminfo", encoding="ascii") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    with contextlib.suppress(AttributeError, ValueError, OSError):
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return 8 * 2**30


@functools.lru_cache(maxsize=1)
def memory_budget() -> int:
    """Bytes all the children of this process may take together: half the machine's available
    memory when first asked (at least :data:`MIN_CHILD_MEMORY`)."""
    return max(MIN_CHILD_MEMORY, _available_memory() // 2)


@functools.lru_cache(maxsize=1)
def max_children() -> int:
    """How many children may run at once: ``$MEMORY_RDF_SPARQL_CHILDREN`` (an int >= 1) or
    :data:`MAX_CHILDREN`, and no more than :func:`memory_budget` holds at
    :data:`MIN_CHILD_MEMORY` each."""
    count = MAX_CHILDREN
    given = os.environ.get("MEMORY_RDF_SPARQL_CHILDREN", "").strip()
    if given:
        try:
            count = int(given)
        except ValueError:
            raise errors.ConfigError(
                f"MEMORY_RDF_SPARQL_CHILDREN must be a whole number >= 1, got {given!r}"
            ) from None
        if count < 1:
            raise errors.ConfigError(
                f"MEMORY_RDF_SPARQL_CHILDREN must be a whole number >= 1, got {given!r}")
    return max(1, min(count, memory_budget() // MIN_CHILD_MEMORY))


_slots_lock = threading.Lock()
_slots: threading.BoundedSemaphore | None = None


def _child_slots() -> threading.BoundedSemaphore:
    global _slots
    with _slots_lock:
        if _slots is None:
            _slots = threading.BoundedSemaphore(max_children())
        return _slots


def _memory_cap() -> int:
    """:data:`CHILD_MEMORY`, at most this process's own limit and its share of
    :func:`memory_budget` (the budget over :func:`max_children`)."""
    cap = max(MIN_CHILD_MEMORY, min(CHILD_MEMORY, memory_budget() // max_children()))
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft != resource.RLIM_INFINITY:
            cap = min(cap, soft)
    except (ImportError, ValueError, OSError):
        pass
    return cap


def _limit_memory(cap: int) -> None:  # pragma: no cover - runs in the child
    """Set the child's own address-space limit (not through ``preexec_fn``, which is unsafe
    in a process with threads: the serving process has RocksDB's and the scheduler's)."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY:
            cap = min(cap, hard)
        if soft == resource.RLIM_INFINITY or soft > cap:
            resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    except (ImportError, ValueError, OSError):
        pass


def sparql_in_child(
    agent_id: str, data_dir: Path, query: str, *, timeout: float, limit: int | None
) -> Any:
    """:func:`memory_rdf.inspect.sparql` of ``agent_id`` in ``data_dir``, run in a child
    process; its result (JSON-ready Python values), or the memory_rdf exception it raised.

    Raises:
        QueryTimeoutError: no answer within ``timeout`` s (the child is killed).
        QueryLimitError: the child ran out of its memory (or died otherwise), or
            :func:`max_children` children were running and none ended within
            :data:`SLOT_WAIT` s.
        SparqlError, StoreError, …: what the query raised in the child.
    """
    slots = _child_slots()
    if not slots.acquire(timeout=min(SLOT_WAIT, timeout)):
        raise errors.QueryLimitError(
            f"too many sparql queries running at once ({max_children()}, the most this "
            "server runs together); try again in a moment")
    try:
        return _run_child(agent_id, data_dir, query, timeout=timeout, limit=limit)
    finally:
        slots.release()


def _run_child(
    agent_id: str, data_dir: Path, query: str, *, timeout: float, limit: int | None
) -> Any:
    cap = _memory_cap()
    request = json.dumps({"agent": agent_id, "data_dir": str(Path(data_dir).resolve()),
                          "query": query, "timeout": timeout, "limit": limit, "memory": cap})
    # The package this process runs, first on the path; -P: not the working directory, where
    # anyone able to write a memory_rdf/ folder would otherwise choose the child's code.
    package_root = str(Path(__file__).resolve().parents[1])
    # The child's temporary files (the store snapshot it reads) in a directory of its own,
    # deleted here: a child killed at its timeout or memory cap leaves nothing behind.
    scratch = tempfile.mkdtemp(prefix="memory-rdf-sparql-")
    env = dict(os.environ, PYTHONIOENCODING="utf-8", TMPDIR=scratch, TEMP=scratch, TMP=scratch,
               PYTHONPATH=os.pathsep.join(
                   filter(None, [package_root, os.environ.get("PYTHONPATH")])))
    try:
        return _answer(_communicate(env, request, timeout), cap)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _communicate(env: dict[str, str], request: str, timeout: float) -> tuple[bytes, bytes, int]:
    """Run the child with ``request`` on its stdin: its stdout, stderr and exit code."""
    with subprocess.Popen(
        [sys.executable, "-P", "-m", "memory_rdf._sandbox"], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
    ) as child:
        try:
            out, err = child.communicate(request.encode("utf-8"), timeout=timeout + 5)
        except subprocess.TimeoutExpired:
            child.kill()
            child.communicate()
            raise errors.QueryTimeoutError(
                f"the query ran longer than its timeout ({timeout:g} s) and was stopped; "
                "narrow it (LIMIT, more specific patterns)") from None
    return out, err, child.returncode


def _answer(output: tuple[bytes, bytes, int], cap: int) -> Any:
    """The child's result from its ``output``, or the error it reported, raised."""
    out, err, returncode = output
    try:
        answer = json.loads(out.decode("utf-8"))
    except ValueError:
        said = " ".join(err.decode("utf-8", "replace").split())[-300:]
        raise errors.QueryLimitError(
            f"the query was stopped: it needed more than {cap / 2**30:.3g} GB of memory or "
            f"crashed the process running it (exit {returncode}; {said or 'no output'});"
            " narrow it (LIMIT, more specific patterns)") from None
    if "error" in answer:
        kind = getattr(errors, answer["error"], None)
        if not (isinstance(kind, type) and issubclass(kind, errors.MemoryRDFError)):
            kind = errors.SparqlError
        raise kind(answer["message"])
    return answer["result"]


def _main() -> None:  # pragma: no cover - the child (tested through the tools)
    from memory_rdf import inspect
    from memory_rdf.tools import _json_default

    request = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    _limit_memory(int(request["memory"]))
    try:
        result = inspect.sparql(request["agent"], request["query"], request["data_dir"],
                                timeout=request["timeout"], limit=request["limit"])
        text = json.dumps({"result": result}, ensure_ascii=False, default=_json_default)
    except errors.MemoryRDFError as exc:
        text = json.dumps({"error": type(exc).__name__, "message": str(exc)})
    sys.stdout.buffer.write(text.encode("utf-8"))


if __name__ == "__main__":  # pragma: no cover
    _main()
