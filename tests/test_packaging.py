"""The ontology, shapes, .rq queries and demo data ship inside the wheel and load from it."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pyoxigraph import Literal, NamedNode, Store

from memory_rdf import _oxigraph
from memory_rdf import _vocab as V
from memory_rdf._resources import query_names, query_text, update_names, update_text

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
        store.query(text, prefixes=V.PREFIXES)
        # ... and rendered with parameters
        node = _oxigraph.node_ref("0" * 32)
        params = {
            "sources": [node], "nodes": [node], "threshold": _oxigraph.lit(0.01),
            "relations": [_oxigraph.lit("上文")], "keywords": [_oxigraph.lit("jwt")], "node": node,
            "links": [_oxigraph.link_ref("0" * 32, "1" * 32)], "status": _oxigraph.lit("pending"),
            "since": _oxigraph.lit(datetime(2024, 1, 1, tzinfo=UTC)),
            "until": _oxigraph.lit(datetime(2025, 1, 1, tzinfo=UTC)),
            "terms": [_oxigraph.lit("jwt")], "lease": node, **_oxigraph.EMBEDDED_GRAPHS.params(),
        }
        store.query(_oxigraph.render(name, **params), prefixes=V.PREFIXES)


@pytest.mark.parametrize("graphs", [_oxigraph.EMBEDDED_GRAPHS, _oxigraph.Graphs(
    memory=_oxigraph.iri_ref("https://w3id.org/memory-rdf/agent/a"),
    journal=_oxigraph.iri_ref("https://w3id.org/memory-rdf/agent/a/journal"),
    meta=_oxigraph.iri_ref("https://w3id.org/memory-rdf/agent/a/meta"),
)], ids=["embedded", "endpoint"])
def test_every_update_file_parses_and_has_a_header(graphs: _oxigraph.Graphs) -> None:
    names = update_names()
    assert {"forget_node", "delete_link", "delete_node_text", "remove_task",
            "clear_creation_marks"} <= set(names)
    store = Store()
    for name in names:
        text = update_text(name)
        assert text.startswith(f"# {name} — "), name
        assert "Output" in text, name
        store.update(text, prefixes=V.PREFIXES)  # as shipped
        if graphs.memory is None and "$memory" in text:
            continue  # names the memory graph: for endpoints only (wipe_agent)
        node = _oxigraph.node_ref("0" * 32)
        params = {"node": node, "link": _oxigraph.link_ref("0" * 32, "1" * 32), "nodes": [node],
                  "links": [_oxigraph.link_ref("0" * 32, "1" * 32)],
                  "task": _oxigraph.iri_ref(V.TASK + "0" * 32), "lease": node,
                  "holder": _oxigraph.lit("me"), "now": _oxigraph.lit(1),
                  "expires": _oxigraph.lit(2),
                  "changed": [node], "forgotten": [node]}
        batch = _oxigraph.WriteBatch()
        batch.update(name, **params)
        rendered = batch.text(graphs)
        assert ("WITH" in rendered) == (graphs.memory is not None and "@with" in text)
        store.update(rendered, prefixes=V.PREFIXES)


def test_standard_forms_of_lateral_queries_give_the_same_answers() -> None:
    store = _oxigraph.AgentStore(None)
    batch = _oxigraph.WriteBatch()
    for i, terms in enumerate([("jwt", "login"), ("jwt",), ("login", "v2"), ("v2",)]):
        node = _oxigraph.node_ref(f"{i:032x}")
        batch.insert([_oxigraph.triple(node, V.TERM, _oxigraph.lit(t)) for t in terms])
        batch.insert([_oxigraph.triple(node, V.TERM_COUNT, _oxigraph.lit(len(terms)))])
    store.commit(batch)
    terms = [_oxigraph.lit(t) for t in ("jwt", "v2", "absent")]
    df = {"keywords": terms, "terms": terms, "postings": 3}
    assert sorted(store.rows(_oxigraph.render("keyword_entry_df", **df))) == sorted(
        store.rows(_oxigraph.render("keyword_entry_df_std", **df))
    ) == [("jwt", 2), ("v2", 2)]
    entries = [_oxigraph.lit(f"{idf!r} 1.5 {t}") for idf, t in ((0.7, "jwt"), (0.9, "v2"))]
    entry = {"keywords": entries, "terms": [_oxigraph.lit("jwt"), _oxigraph.lit("v2")],
             "postings": 10, "candidates": 10, "results": 3}
    lateral = store.rows(_oxigraph.render("keyword_entry", **entry))
    assert len(lateral) == 3
    assert lateral == store.rows(_oxigraph.render("keyword_entry_std", **entry))


def test_render_refuses_raw_strings() -> None:
    with pytest.raises(TypeError):
        _oxigraph.render("importance", node="<x>", threshold=_oxigraph.lit(0.1))  # type: ignore[arg-type]
    hostile = _oxigraph.lit('"} DELETE WHERE { ?s ?p ?o } #')
    text = _oxigraph.render("dangling_links", sources=[hostile], threshold=_oxigraph.lit(0.1),
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
        "memory_rdf/queries/forget_node.ru",
        "memory_rdf/data/demo_conversation.json",
        "memory_rdf/data/english_frequencies.txt",
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
        "assert '7.6 the' in r.data_text('english_frequencies.txt');"
        "print('ok')"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True,
        env={"PYTHONPATH": str(tmp_path / "site"), "PATH": "/usr/bin:/bin"}, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
