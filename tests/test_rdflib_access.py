"""An agent's memory from other RDF tools (SPEC §6): as a read-only rdflib graph through
oxrdflib, exported and parsed back by rdflib, and served to any SPARQL client by Oxigraph's own
server (``oxigraph serve-read-only``, PyPI package ``oxigraph``) once the agent is stopped."""

from __future__ import annotations

import gc
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pyoxigraph as ox
import pytest

from memory_rdf import MemoryManager, UnknownAgentError
from memory_rdf._inspect import open_rdflib_graph

from helpers import FAST, ScriptedModel, remember

rdflib = pytest.importorskip("rdflib")
pytest.importorskip("oxrdflib")

REPO = Path(__file__).resolve().parent.parent
MEMORY = "https://w3id.org/memory-rdf/ontology#"
XSD_STRING = "http://www.w3.org/2001/XMLSchema#string"
AGENT = "reader"


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A stopped agent with a few nodes and links (built through the real manager)."""
    data = tmp_path_factory.mktemp("rdflib") / "data"
    mem = MemoryManager(AGENT, data_dir=data, config=FAST,
                        model=ScriptedModel(default_relation="相关"))  # type: ignore[arg-type]
    mem.initialize()
    try:
        remember(mem, "PostgreSQL 存订单 | JWT 两小时过期 | Redis 缓存")
        remember(mem, "张伟负责登录 | 预算 38 万")
    finally:
        mem.close()
    gc.collect()
    return data


def _default_graph(path: Path) -> set[tuple[str, str, str]]:
    """The store's default graph as N-Triples term strings, read with pyoxigraph directly."""
    store = ox.Store.read_only(str(path))
    triples = {
        (str(q.subject), str(q.predicate), str(q.object))
        for q in store.quads_for_pattern(None, None, None, ox.DefaultGraph())
    }
    del store
    gc.collect()
    return triples


def _node_iris(path: Path) -> set[str]:
    rdf_type = "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>"
    return {s[1:-1] for s, p, o in _default_graph(path) if p == rdf_type and o == f"<{MEMORY}Node>"}


def _plain(graph: object) -> set[tuple[str, str, str]]:
    """Triples with ``xsd:string`` literals made plain (RDF 1.1: the same literal; oxrdflib
    returns them typed, rdflib's Turtle parser plain)."""
    out = set()
    for s, p, o in graph:  # type: ignore[attr-defined]
        if isinstance(o, rdflib.Literal) and str(o.datatype) == XSD_STRING:
            o = rdflib.Literal(str(o))
        out.add((s.n3(), p.n3(), o.n3()))
    return out


# -- the rdflib graph -----------------------------------------------------------------------------


def test_rdflib_graph_is_the_default_graph(data: Path) -> None:
    graph = open_rdflib_graph(AGENT, data)
    assert isinstance(graph, rdflib.Graph)
    expected = _default_graph(data / AGENT)
    assert len(graph) == len(expected) > 0
    assert len(list(graph.triples((None, None, None)))) == len(expected)


def test_sparql_through_rdflib_returns_the_nodes(data: Path) -> None:
    graph = open_rdflib_graph(AGENT, data)
    rows = graph.query("SELECT ?n ?phrase WHERE { ?n a memory:Node ; memory:phrase ?phrase }")
    nodes = {str(row[0]) for row in rows}  # type: ignore[index]
    assert nodes == _node_iris(data / AGENT)
    assert len(nodes) == 5
    # rdflib's own API sees the same nodes
    node_class = rdflib.URIRef(MEMORY + "Node")
    assert {str(s) for s in graph.subjects(rdflib.RDF.type, node_class)} == nodes


def test_rdflib_graph_is_read_only(data: Path) -> None:
    graph = open_rdflib_graph(AGENT, data)
    before = _default_graph(data / AGENT)
    with pytest.raises(Exception):  # noqa: B017 - pyoxigraph refuses writes to a read-only store
        graph.add((rdflib.URIRef("urn:a"), rdflib.URIRef("urn:b"), rdflib.Literal("c")))
    assert _default_graph(data / AGENT) == before


def test_rdflib_graph_while_the_agent_runs(data: Path, tmp_path: Path) -> None:
    live = tmp_path / "live"
    with MemoryManager("busy", data_dir=live, config=FAST,
                       model=ScriptedModel()) as mem:  # type: ignore[arg-type]
        remember(mem, "Kafka 做消息队列")
        graph = open_rdflib_graph("busy", live)  # no lock taken: the agent holds its store
        assert len(list(graph.query("SELECT ?n WHERE { ?n a memory:Node }"))) == 1


def test_the_documented_one_liner(data: Path) -> None:
    import oxrdflib
    import pyoxigraph
    import rdflib as r

    path = str(data / AGENT)
    graph = r.Graph(oxrdflib.OxigraphStore(store=pyoxigraph.Store.read_only(path)),
                    identifier=r.graph.DATASET_DEFAULT_GRAPH_ID)
    assert len(graph) == len(_default_graph(data / AGENT))
    # the pitfall the docs warn about: without the identifier rdflib picks a blank-node name
    unnamed = r.Graph(oxrdflib.OxigraphStore(store=pyoxigraph.Store.read_only(path)))
    assert len(unnamed) == 0


def test_unknown_agent(data: Path) -> None:
    with pytest.raises(UnknownAgentError, match="ghost"):
        open_rdflib_graph("ghost", data)
    assert not (data / "ghost").exists()


def test_rdflib_and_oxrdflib_are_core_dependencies() -> None:
    """The design names rdflib and oxrdflib as the project's packages: a plain install has
    them (pyshacl stays an extra)."""
    from importlib.metadata import requires

    core = [r for r in requires("memory-rdf") or [] if "extra ==" not in r]
    assert any(r.startswith("rdflib") for r in core), core
    assert any(r.startswith("oxrdflib") for r in core), core
    assert not any(r.startswith("pyshacl") for r in core), core


def test_export_turtle_parses_back_with_rdflib(data: Path, tmp_path: Path) -> None:
    out = tmp_path / "reader.ttl"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    result = subprocess.run(
        [sys.executable, "-m", "memory_rdf.cli", "export", AGENT, "--format", "turtle",
         "-o", str(out), "--data-dir", str(data)],
        cwd=tmp_path, env=env, capture_output=True, text=True, encoding="utf-8", timeout=60,
    )
    assert result.returncode == 0, result.stderr
    parsed = rdflib.Graph()
    parsed.parse(out, format="turtle")
    graph = open_rdflib_graph(AGENT, data)
    assert len(parsed) == len(graph) == len(_default_graph(data / AGENT))
    assert _plain(parsed) == _plain(graph)  # the same triples, not just as many


# -- a SPARQL endpoint with Oxigraph's server -----------------------------------------------------


def _oxigraph_cli() -> str | None:
    """The ``oxigraph`` program of the PyPI package ``oxigraph`` (beside this Python first)."""
    beside = Path(sys.executable).with_name("oxigraph")
    if beside.is_file():
        return str(beside)
    return shutil.which("oxigraph")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def server(data: Path) -> Iterator[str]:
    exe = _oxigraph_cli()
    if exe is None:
        pytest.skip("the oxigraph server is not installed (pip install oxigraph)")
    help_text = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=30)
    if "serve-read-only" not in help_text.stdout:
        pytest.skip("this oxigraph has no serve-read-only command")
    port = _free_port()
    proc = subprocess.Popen(
        [exe, "serve-read-only", "--location", str(data / AGENT), "--bind", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                pytest.fail(f"oxigraph serve-read-only exited: {proc.stderr.read()!r}")  # type: ignore[union-attr]
            try:
                httpx.get(f"{base}/query", params={"query": "ASK {}"}, timeout=2)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    pytest.fail("oxigraph serve-read-only did not answer within 30 s")
                time.sleep(0.1)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover
            proc.kill()
            proc.wait()
        assert proc.stderr is not None
        proc.stderr.close()


def test_oxigraph_serves_a_stopped_agent_over_the_sparql_protocol(
    server: str, data: Path
) -> None:
    query = f"SELECT (COUNT(?n) AS ?count) WHERE {{ ?n a <{MEMORY}Node> }}"
    response = httpx.get(f"{server}/query", params={"query": query},
                         headers={"Accept": "application/sparql-results+json"}, timeout=30)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/sparql-results+json")
    count = int(json.loads(response.text)["results"]["bindings"][0]["count"]["value"])
    assert count == len(_node_iris(data / AGENT)) == 5
    # the same by POST (application/sparql-query), as SPARQL clients send long queries
    posted = httpx.post(f"{server}/query", content=query.encode("utf-8"),
                        headers={"Content-Type": "application/sparql-query",
                                 "Accept": "application/sparql-results+json"}, timeout=30)
    assert posted.status_code == 200
    assert json.loads(posted.text)["results"]["bindings"][0]["count"]["value"] == str(count)
    # read-only: the update endpoint does not exist
    update = httpx.post(f"{server}/update", content=b"INSERT DATA { <urn:a> <urn:b> <urn:c> }",
                        headers={"Content-Type": "application/sparql-update"}, timeout=30)
    assert update.status_code >= 400
