"""The ontology, shapes, .rq queries and demo data ship inside the wheel and load from it."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pyoxigraph import Literal, NamedNode, Store

from memory_rdf import _store
from memory_rdf._resources import query_names, query_text

ROOT = Path(__file__).resolve().parent.parent


def test_every_query_file_parses_and_has_a_header() -> None:
    names = query_names()
    assert {"importance", "outgoing_links", "dangling_targets", "dangling_link_details",
            "scan_order"} <= set(names)
    store = Store()
    for name in names:
        text = query_text(name)
        assert text.startswith(f"# {name} — "), name
        assert "Output" in text or "Outputs" in text, name
        # as shipped (what a user can run as-is) ...
        store.query(text, prefixes=_store.V.PREFIXES)
        # ... and rendered with parameters
        node = _store.node_ref("0" * 32)
        params = {
            "sources": [node], "nodes": [node], "threshold": _store.lit(0.01),
            "relations": [_store.lit("上文")], "keywords": [_store.lit("jwt")], "node": node,
            "links": [_store.link_ref("0" * 32, "1" * 32)], "status": _store.lit("pending"),
            "since": _store.lit(datetime(2024, 1, 1, tzinfo=UTC)),
            "until": _store.lit(datetime(2025, 1, 1, tzinfo=UTC)),
        }
        store.query(_store.render(name, **params), prefixes=_store.V.PREFIXES)


def test_render_refuses_raw_strings() -> None:
    with pytest.raises(TypeError):
        _store.render("importance", node="<x>", threshold=_store.lit(0.1))  # type: ignore[arg-type]
    hostile = _store.lit('"} DELETE WHERE { ?s ?p ?o } #')
    text = _store.render("dangling_links", sources=[hostile], threshold=_store.lit(0.1),
                         relations=[hostile])
    assert str(Literal('"} DELETE WHERE { ?s ?p ?o } #')) in text
    assert str(NamedNode("https://w3id.org/memory-rdf/node/x")) == "<https://w3id.org/memory-rdf/node/x>"


@pytest.mark.slow
def test_wheel_contains_and_loads_the_resources(tmp_path: Path) -> None:
    out = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(ROOT)],
        check=True, capture_output=True, timeout=600,
    )
    (wheel,) = out.glob("memory_rdf-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        zf.extractall(tmp_path / "site")
    for required in (
        "memory_rdf/ontology/memory.ttl",
        "memory_rdf/ontology/shapes.ttl",
        "memory_rdf/queries/importance.rq",
        "memory_rdf/queries/live_outgoing_links.rq",
        "memory_rdf/data/demo_conversation.json",
        "memory_rdf/web/graph.html",
        "memory_rdf/web/graph.css",
        "memory_rdf/web/graph.js",
        "memory_rdf/py.typed",
    ):
        assert required in names, required
    # Loaded from the extracted wheel, not from this checkout.
    probe = (
        "import memory_rdf, memory_rdf._resources as r;"
        "assert 'site' in memory_rdf.__file__, memory_rdf.__file__;"
        "assert 'memory:Node' in r.ontology_text('memory.ttl');"
        "assert 'sh:NodeShape' in r.ontology_text('shapes.ttl');"
        "assert 'SUM' in r.query_text('importance');"
        "assert '$css' in r.web_text('graph.html');"
        "assert 'addEventListener' in r.web_text('graph.js');"
        "print('ok')"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True,
        env={"PYTHONPATH": str(tmp_path / "site"), "PATH": "/usr/bin:/bin"}, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
