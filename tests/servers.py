"""Real SPARQL servers on loopback for the endpoint tests (SPEC §8): ``oxigraph serve`` (the
``oxigraph`` package of the test extra) always, Virtuoso where Debian's package is installed
(:class:`Virtuoso`, started by ``benchmarks._servers``).

Each server runs as a child process on a free port; :meth:`Server.kill` sends SIGKILL and
:meth:`Server.start` brings it back on the same port and data directory.
"""

from __future__ import annotations

import contextlib
import http.server
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from memory_rdf import SparqlEndpoint


@contextlib.contextmanager
def loopback(handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[str]:
    """Serve ``handler`` on a free loopback port from a thread; yields ``http://127.0.0.1:PORT``
    and stops the server on exit."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


class SparqlRecorder(http.server.BaseHTTPRequestHandler):
    """Records every request as ``"METHOD path"`` (e.g. a SERVICE call that reached the network)
    and answers like a SPARQL endpoint (one empty solution). Subclass it with a fresh
    ``requests`` list per test: ``type("Handler", (SparqlRecorder,), {"requests": []})``."""

    requests: list[str] = []  # noqa: RUF012 - replaced per test

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        self._answer()

    def do_POST(self) -> None:  # noqa: N802
        self._answer()

    def _answer(self) -> None:
        type(self).requests.append(f"{self.command} {self.path}")
        body = b'{"head": {"vars": []}, "results": {"bindings": [{}]}}'
        self.send_response(200)
        self.send_header("Content-Type", "application/sparql-results+json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def oxigraph_command() -> str | None:
    """The ``oxigraph`` CLI next to this interpreter (the test extra installs it), or on PATH."""
    beside = Path(sys.executable).parent / "oxigraph"
    return str(beside) if beside.is_file() else shutil.which("oxigraph")


class Server:
    """One ``oxigraph serve`` process with its data directory (survives kill/start)."""

    def __init__(self, location: Path, port: int | None = None) -> None:
        command = oxigraph_command()
        if command is None:
            raise RuntimeError("the oxigraph CLI is not installed (pip install '.[test]')")
        self.command = command
        self.location = location
        self.port = port or free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.query_url = f"{self.base}/query"
        self.update_url = f"{self.base}/update"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> Server:
        self.process = subprocess.Popen(
            [self.command, "serve", "--location", str(self.location),
             "--bind", f"127.0.0.1:{self.port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                httpx.post(self.query_url, data={"query": "ASK {}"}, timeout=1.0)
                return self
            except httpx.TransportError:
                if self.process.poll() is not None:
                    raise RuntimeError(
                        f"oxigraph serve exited with {self.process.returncode}"
                    ) from None
                time.sleep(0.05)
        raise RuntimeError(f"oxigraph serve did not answer on {self.base} within 30 s")

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
        self.process = None

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()
        self.process = None

    def endpoint(self, **kw: object) -> SparqlEndpoint:
        return SparqlEndpoint(self.query_url, update_url=self.update_url, **kw)  # type: ignore[arg-type]

    def clear(self) -> None:
        """Drop every agent's graphs (and nothing else: Virtuoso keeps system graphs)."""
        answer = httpx.post(
            self.query_url, data={"query": "SELECT DISTINCT ?g WHERE { GRAPH ?g { ?s ?p ?o } }"},
            headers={"Accept": "application/sparql-results+json"}, timeout=60,
        )
        answer.raise_for_status()
        graphs = [b["g"]["value"] for b in answer.json()["results"]["bindings"]]
        ours = [g for g in graphs if g.startswith("https://w3id.org/memory-rdf/agent/")]
        if ours:
            update = " ;\n".join(f"DROP SILENT GRAPH <{g}>" for g in ours)
            httpx.post(self.update_url, data={"update": update}, timeout=60).raise_for_status()

    def graph_count(self) -> int:
        answer = httpx.post(
            self.query_url,
            data={"query": "SELECT (COUNT(DISTINCT ?g) AS ?n) WHERE { GRAPH ?g { ?s ?p ?o } }"},
            headers={"Accept": "application/sparql-results+json"}, timeout=30,
        ).json()
        return int(answer["results"]["bindings"][0]["n"]["value"])


class Virtuoso(Server):
    """A Virtuoso 7 server (``virtuoso-t``) for the session: only started and stopped."""

    def __init__(self, location: Path) -> None:  # noqa: D107 - no oxigraph command needed
        from benchmarks._servers import virtuoso_server

        self._context = virtuoso_server(location)
        self.query_url, self.update_url = self._context.__enter__()
        self.base = self.query_url.rsplit("/", 1)[0]
        self.location = location
        self.process = None

    def start(self) -> Server:
        return self

    def stop(self) -> None:
        self._context.__exit__(None, None, None)
