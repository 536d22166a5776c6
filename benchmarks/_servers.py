"""SPARQL servers on loopback for the endpoint benchmark and tests (SPEC §8).

``oxigraph serve`` (the ``oxigraph`` package of the test extra) and Virtuoso 7 (Debian's
``virtuoso-opensource``: ``virtuoso-t`` in the foreground with a generated ``virtuoso.ini``),
each on free ports, its data in a directory of the caller's, stopped on exit. Virtuoso's
anonymous SPARQL user is granted SPARQL UPDATE: fine on loopback, never on a shared network.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(url: str, proc: subprocess.Popen[bytes], seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            httpx.post(url, data={"query": "ASK {}"}, timeout=2.0)
            return
        except httpx.TransportError:
            if proc.poll() is not None:
                raise RuntimeError(f"the server exited with {proc.returncode}") from None
            time.sleep(0.1)
    raise RuntimeError(f"no answer on {url} within {seconds} s")


def oxigraph_binary() -> str:
    command = Path(sys.executable).parent / "oxigraph"
    binary = str(command) if command.is_file() else shutil.which("oxigraph")
    if binary is None:
        raise SystemExit("the oxigraph CLI is missing: pip install '.[test]'")
    return binary


def oxigraph_bulk_load(location: Path, nquads: Path) -> None:
    """``oxigraph load`` (the bulk loader) into a server's directory before it starts."""
    subprocess.run([oxigraph_binary(), "load", "--location", str(location), "--file",
                    str(nquads)], check=True, capture_output=True)


@contextmanager
def oxigraph_server(location: Path) -> Iterator[tuple[str, str]]:
    binary = oxigraph_binary()
    port = free_port()
    proc = subprocess.Popen([binary, "serve", "--location", str(location), "--bind",
                             f"127.0.0.1:{port}"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait(f"{base}/query", proc)
        yield f"{base}/query", f"{base}/update"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


VIRTUOSO_INI = """[Database]
DatabaseFile = {d}/virtuoso.db
ErrorLogFile = {d}/virtuoso.log
LockFile = {d}/virtuoso.lck
TransactionFile = {d}/virtuoso.trx
xa_persistent_file = {d}/virtuoso.pxa
ErrorLogLevel = 7
FileExtend = 200
MaxCheckpointRemap = 2000
Striping = 0
TempStorage = TempDatabase
[TempDatabase]
DatabaseFile = {d}/virtuoso-temp.db
TransactionFile = {d}/virtuoso-temp.trx
MaxCheckpointRemap = 2000
Striping = 0
[Parameters]
ServerPort = {sql_port}
NumberOfBuffers = 170000
MaxDirtyBuffers = 130000
DirsAllowed = ., {d}
[HTTPServer]
ServerPort = {http_port}
ServerRoot = /var/lib/virtuoso-opensource-7/vsp
MaxClientConnections = 10
ServerThreads = 10
[SPARQL]
ResultSetMaxRows = 1000000
MaxQueryExecutionTime = 120
MaxQueryCostEstimationTime = 400
DefaultGraph = http://localhost:{http_port}/dataspace
"""


VIRTUOSO_GRANTS = (
    'GRANT SPARQL_UPDATE TO "SPARQL"; '
    'GRANT EXECUTE ON DB.DBA.SPARQL_INSERT_DICT_CONTENT TO "SPARQL"; '
    'GRANT EXECUTE ON DB.DBA.SPARQL_DELETE_DICT_CONTENT TO "SPARQL";'
)


def virtuoso_available() -> str | None:
    return shutil.which("virtuoso-t")


@contextmanager
def virtuoso_server(directory: Path) -> Iterator[tuple[str, str]]:
    """virtuoso-t in the foreground on free ports; SPARQL Update allowed for the anonymous
    SPARQL user (loopback only: never do this on a shared network)."""
    binary = virtuoso_available()
    assert binary is not None
    directory.mkdir(parents=True, exist_ok=True)
    http_port, sql_port = free_port(), free_port()
    ini = directory / "virtuoso.ini"
    ini.write_text(VIRTUOSO_INI.format(d=directory, sql_port=sql_port, http_port=http_port))
    proc = subprocess.Popen([binary, "+foreground", "+configfile", str(ini)], cwd=directory,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    url = f"http://127.0.0.1:{http_port}/sparql"
    try:
        _wait(url, proc, 120)
        isql = shutil.which("isql-vt") or shutil.which("isql")
        if isql is None:
            raise RuntimeError("Virtuoso's isql is missing: cannot grant SPARQL UPDATE")
        subprocess.run(
            [isql, str(sql_port), "dba", "dba", "exec=" + VIRTUOSO_GRANTS],
            check=True, capture_output=True, timeout=60,
        )
        yield url, url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
