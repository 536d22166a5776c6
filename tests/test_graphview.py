"""Pictures of an agent's memory (``memory-rdf graph``), the ``stats`` additions, and the
command-line documentation check (every command has --help with an example and is in the
README's "Command line" section).

The agent is built through the real manager with the scripted model, so the network is known:

    remember "alpha one | alpha two | alpha three"   a1 ⇄ a2 ⇄ a3 (0.5); focus a3, a2
    remember "beta <b>one</b> & \"q\" | beta two"    b1 ⇄ b2 (0.5); b1, b2 ⇄ a2, a3 (1.0)
    remember "gamma </script><x> | gamma two"        g1 ⇄ g2 (0.5); g1, g2 ⇄ b1, b2 (1.0)

focus_limit 2, so the focus is g2, g1. Then a1 is forgotten as compression forgets (SPEC §5.2:
its own triples and the links out of it go; a2 → a1 stays, dangling). Expectations are
computed from the store by SPARQL (a reference walk), not copied from the implementation.
"""

from __future__ import annotations

import dataclasses
import gc
import html
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pyoxigraph as ox
import pytest

from memory_rdf import MemoryManager
from memory_rdf import _graphview as gv
from memory_rdf._inspect import inspect_agent, inspect_stats

from helpers import FAST, ScriptedModel, memory_rdf_command, remember

REPO = Path(__file__).resolve().parent.parent
NODE = "https://w3id.org/memory-rdf/node/"
MEMORY = "https://w3id.org/memory-rdf/ontology#"
AGENT = "pic"



def cli(cwd: Path, *args: str, data_dir: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``memory-rdf …`` through the installed entry point, as a real process (the pattern of
    tests/test_cli.py)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.pop("MEMORY_RDF_DATA_DIR", None)
    env["PYTHONIOENCODING"] = "utf-8"
    argv = [memory_rdf_command(), *args]
    if data_dir is not None:
        argv += ["--data-dir", str(data_dir)]
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                          encoding="utf-8", timeout=120)


def assert_one_line_error(result: subprocess.CompletedProcess[str], code: int) -> None:
    assert result.returncode == code, result
    assert "Traceback" not in result.stderr + result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    data = tmp_path_factory.mktemp("graph") / "data"
    config = dataclasses.replace(FAST, focus_limit=2)
    mem = MemoryManager(AGENT, data_dir=data, config=config,
                        model=ScriptedModel(default_relation="相关"))  # type: ignore[arg-type]
    mem.initialize()
    try:
        remember(mem, "alpha one | alpha two | alpha three")
        remember(mem, 'beta <b>one</b> & "q" | beta two')
        remember(mem, "gamma </script><x> | gamma two")
        a1 = next(r["n"] for r in mem.sparql(  # type: ignore[union-attr]
            'SELECT ?n WHERE { ?n memory:content "alpha one" }'))
    finally:
        mem.close()
    gc.collect()
    _forget(data / AGENT, str(a1))
    yield data


def _forget(path: Path, iri: str) -> None:
    """Forget a node the way compression does (SPEC §5.2), in the stopped agent's store."""
    store = ox.Store(str(path))
    node = str(ox.NamedNode(iri))
    store.update(
        f"PREFIX memory: <{MEMORY}> "
        f"DELETE WHERE {{ ?l memory:source {node} ; ?p ?o }} ; DELETE WHERE {{ {node} ?p ?o }}"
    )
    store.flush()
    del store
    gc.collect()


# -- reference: the network read back by plain SPARQL --------------------------------------------


@dataclasses.dataclass
class Reference:
    phrases: dict[str, str]  # live node id -> phrase
    focus: list[str]  # newest first
    links: dict[tuple[str, str], float]  # (source, target) -> strength, dangling included

    def within(self, depth: int) -> dict[str, int]:
        hop = {f: 0 for f in self.focus}
        frontier = list(self.focus)
        for h in range(depth):
            nxt = []
            for (s, t), _w in self.links.items():
                for a, b in ((s, t), (t, s)):
                    if a in frontier and b in self.phrases and b not in hop:
                        hop[b] = h + 1
                        nxt.append(b)
            frontier = nxt
        return hop

    def pairs(self, depth: int) -> tuple[set[frozenset[str]], set[frozenset[str]]]:
        """(pairs among live nodes in view, pairs view node → forgotten target)."""
        view = self.within(depth)
        live, dangling = set(), set()
        for s, t in self.links:
            if s in view and t in view:
                live.add(frozenset((s, t)))
            elif s in view and t not in self.phrases:
                dangling.add(frozenset((s, t)))
        return live, dangling

    def importance(self, node: str) -> float:
        return sum(w for (s, t), w in self.links.items() if node in (s, t))


@pytest.fixture(scope="module")
def ref(data: Path) -> Reference:
    stores = [ox.Store.read_only(str(data / AGENT))]
    prefix = f"PREFIX memory: <{MEMORY}> "

    def rows(query: str) -> list[list[str]]:
        result = stores[0].query(prefix + query)
        return [[t.value for t in row] for row in result]  # type: ignore[union-attr]

    phrases = {n[len(NODE):]: p for n, p in rows("SELECT ?n ?p WHERE { ?n memory:phrase ?p }")}
    focus = [n[len(NODE):] for n, _ in rows(
        "SELECT ?n ?o WHERE { ?f memory:member ?n . ?n memory:focusOrder ?o } ORDER BY DESC(?o)")]
    links = {
        (s[len(NODE):], t[len(NODE):]): float(w)
        for s, t, w in rows("SELECT ?s ?t ?w WHERE { ?l memory:source ?s ; memory:target ?t ; "
                            "memory:strength ?w }")
    }
    stores.clear()
    gc.collect()
    return Reference(phrases, focus, links)


def view(data: Path, depth: int = 2, limit: int = gv.DEFAULT_LIMIT) -> gv.GraphView:
    return inspect_agent(AGENT, data, lambda s: gv.collect_view(s, depth=depth, limit=limit))


# -- what the walk reads --------------------------------------------------------------------------


def test_the_scenario_is_what_the_tests_assume(ref: Reference) -> None:
    assert len(ref.phrases) == 6 and len(ref.focus) == 2
    assert ref.within(0).keys() == set(ref.focus)
    assert len(ref.within(1)) == 4 and len(ref.within(2)) == 6  # every live node
    live, dangling = ref.pairs(2)
    assert len(dangling) == 1 and live


@pytest.mark.parametrize("depth", [0, 1, 2, 3])
def test_view_holds_the_nodes_within_depth_with_their_importance(
    data: Path, ref: Reference, depth: int
) -> None:
    v = view(data, depth)
    expected = ref.within(depth)
    assert {n.id: n.hop for n in v.nodes} == expected
    assert [n.id for n in v.nodes if n.focus_rank is not None] == ref.focus
    for n in v.nodes:
        assert n.phrase == ref.phrases[n.id]
        assert n.importance == pytest.approx(ref.importance(n.id))  # all links, drawn or not
    live, dangling = ref.pairs(depth)
    assert {frozenset((a, b)) for a, b, *_ in v.pairs()} == live | dangling
    assert {frozenset((k.source, k.target)) for k in v.dangling} == dangling
    assert {g.id for g in v.ghosts} == {t for pair in dangling for t in pair
                                         if t not in ref.phrases}
    assert v.total_nodes == len(ref.phrases)


def test_node_limit_keeps_the_focus_and_counts_what_it_left_out(data: Path,
                                                                ref: Reference) -> None:
    v = view(data, depth=2, limit=3)
    assert len(v.nodes) == 3
    assert [n.hop for n in v.nodes][:2] == [0, 0]
    assert v.left_out == len(ref.within(2)) - 3


# -- HTML -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def page(data: Path) -> str:
    return gv.render_html(view(data, depth=2))


def test_html_is_self_contained(page: str) -> None:
    assert page.startswith("<!DOCTYPE html>")
    # nothing is fetched: no external src/href, stylesheet link, import or url()
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", page, re.I)
    assert not re.search(r"<link\b|@import|url\(\s*['\"]?(?:https?:)?//", page, re.I)
    assert not re.search(r"<script[^>]*\bsrc=", page, re.I)
    assert "<style>" in page and "<svg" in page


def test_page_files_are_package_data_the_page_fills_in(page: str) -> None:
    """The page's HTML, CSS and JavaScript are files in memory_rdf/web/ (editors and linters
    see them); every placeholder of the template is filled, and the script parses."""
    from string import Template

    from memory_rdf._resources import web_text

    template = web_text("graph.html")
    assert Template(template).get_identifiers()  # $title, $css, ... (nothing else uses $)
    assert "$" not in page.split("<script>")[0]  # every placeholder before the script filled
    assert web_text("graph.css").strip() in page
    assert web_text("graph.js").strip() in page
    node = shutil.which("node")
    if node is None:
        pytest.skip("Node.js is not installed: the script's syntax check needs it")
    checked = subprocess.run([node, "--check", str(_web_dir() / "graph.js")],
                             capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stderr


def _web_dir() -> Path:
    return Path(gv.__file__).resolve().parent.parent / "web"


def test_html_shows_every_focus_phrase_escaped(page: str, ref: Reference) -> None:
    for nid in ref.focus:
        assert html.escape(ref.phrases[nid]) in page
    # user text never becomes markup: no stray tags, and only our own two scripts close
    assert "<b>one</b>" not in page and "<x>" not in page
    assert page.count("</script>") == 2
    data = json.loads(re.search(r'id="graph-data">(.*?)</script>', page, re.S).group(1))
    assert "gamma </script><x>" in {n["content"] for n in data["nodes"]}


def test_html_marks_dangling_links_and_ghosts(page: str, ref: Reference) -> None:
    _live, dangling = ref.pairs(2)
    assert page.count('class="link dangling"') == len(dangling) == 1
    assert page.count('class="node ghost"') == 1
    assert "forgotten" in page
    assert page.count('class="node focus"') == len(ref.focus)


def test_html_for_an_agent_that_remembers_nothing(tmp_path: Path) -> None:
    with MemoryManager("blank", data_dir=tmp_path, model=ScriptedModel()):  # type: ignore[arg-type]
        pass
    gc.collect()
    v = inspect_agent("blank", tmp_path, gv.collect_view)
    assert v.nodes == [] and v.links == []
    assert "remembers nothing yet" in gv.render_html(v)
    assert gv.render_dot(v).startswith("digraph")


# -- DOT / SVG ------------------------------------------------------------------------------------


def test_dot_has_one_edge_per_connected_pair(data: Path, ref: Reference) -> None:
    text = gv.render_dot(view(data, depth=2))
    assert text.startswith("digraph ") and text.rstrip().endswith("}")
    assert text.count("{") == text.count("}")
    live, dangling = ref.pairs(2)
    edges = [line for line in text.splitlines() if " -> " in line]
    assert len(edges) == len(live) + len(dangling)
    assert sum("style=dashed" in line for line in edges) == len(dangling)
    both = sum(1 for p in live if len(p) == 2 and tuple(p) in ref.links
               and tuple(reversed(tuple(p))) in ref.links)
    assert sum("dir=both" in line for line in edges) == both
    for nid in ref.focus:  # DOT-escaped phrase as the node label
        phrase = ref.phrases[nid].replace("\\", "\\\\").replace('"', '\\"')
        assert phrase.split()[0] in text


def test_dot_escapes_quotes_and_backslashes() -> None:
    node = gv.ViewNode(id="x", hop=0, phrase='say "hi" \\N', content="a\nb", focus_rank=0,
                       importance=1.0)
    text = gv.render_dot(gv.GraphView(agent_id='a"b', depth=0, nodes=[node], total_nodes=1))
    assert '"say \\"hi\\" \\\\N"' in text
    assert 'digraph "memory of a\\"b"' in text


def test_svg_through_graphviz(data: Path) -> None:
    if not gv.dot_available():
        pytest.skip("Graphviz's dot program is not installed")
    svg = gv.render_svg(view(data, depth=2)).decode("utf-8")
    assert "<svg" in svg and "forgotten" in svg


def test_wrap_label_fits_and_marks_cuts() -> None:
    assert gv.wrap_label("上线") == ["上线"]
    lines = gv.wrap_label("建议把这次排查过程写进复盘文档", width=22)
    assert len(lines) == 2 and "".join(lines) == "建议把这次排查过程写进复盘文档"
    long = gv.wrap_label("x" * 100, width=10)
    assert len(long) == 2 and long[-1].endswith("…")
    assert gv.wrap_label("note 191: the cache service", width=22) == [
        "note 191: the", "cache service"]


# -- the command ----------------------------------------------------------------------------------


def test_graph_command_writes_html_dot_and_stdout(tmp_path: Path, data: Path,
                                                  ref: Reference) -> None:
    out = tmp_path / "pic.html"
    result = cli(tmp_path, "graph", AGENT, "-o", str(out), data_dir=data)
    assert result.returncode == 0, result.stderr
    assert "wrote" in result.stderr and "1 link to forgotten" in result.stderr
    page = out.read_text(encoding="utf-8")
    assert all(html.escape(ref.phrases[f]) in page for f in ref.focus)

    dot = tmp_path / "pic.gv"  # format from the suffix
    result = cli(tmp_path, "graph", AGENT, "-o", str(dot), "--depth", "1", data_dir=data)
    assert result.returncode == 0, result.stderr
    assert dot.read_text(encoding="utf-8").startswith("digraph")

    piped = cli(tmp_path, "graph", AGENT, "-o", "-", "--format", "dot", data_dir=data)
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout.startswith("digraph")

    default = cli(tmp_path, "graph", AGENT, data_dir=data)
    assert default.returncode == 0, default.stderr
    assert (tmp_path / f"{AGENT}-graph.html").is_file()


def test_graph_command_svg_or_clean_error(tmp_path: Path, data: Path) -> None:
    out = tmp_path / "pic.svg"
    result = cli(tmp_path, "graph", AGENT, "-o", str(out), data_dir=data)
    if gv.dot_available():
        assert result.returncode == 0, result.stderr
        assert "<svg" in out.read_text(encoding="utf-8")
    else:
        assert_one_line_error(result, 1)
        assert "graphviz" in result.stderr.lower() and not out.exists()


def test_graph_command_unknown_agent_and_bad_options(tmp_path: Path) -> None:
    data = tmp_path / "data"
    out = tmp_path / "ghost.html"
    result = cli(tmp_path, "graph", "ghost", "-o", str(out), data_dir=data)
    assert_one_line_error(result, 2)
    assert "ghost" in result.stderr
    assert not out.exists() and not data.exists()
    assert_one_line_error(cli(tmp_path, "graph", "../x", data_dir=data), 2)
    assert_one_line_error(cli(tmp_path, "graph", "ghost", "--depth", "-1", data_dir=data), 2)
    assert_one_line_error(cli(tmp_path, "graph", "ghost", "-f", "png", data_dir=data), 2)


# -- stats ----------------------------------------------------------------------------------------


def test_stats_shows_importance_distribution_and_store_path(tmp_path: Path, data: Path,
                                                            ref: Reference) -> None:
    stats = inspect_agent(AGENT, data, inspect_stats)
    values = sorted(ref.importance(n) for n in ref.phrases)
    imp = stats["importance"]
    assert imp["min"] == pytest.approx(values[0]) and imp["max"] == pytest.approx(values[-1])
    assert imp["median"] == pytest.approx((values[2] + values[3]) / 2)
    assert sum(b["nodes"] for b in imp["histogram"]) == len(values)
    assert imp["fading"] == sum(v < 1 for v in values)

    result = cli(tmp_path, "stats", AGENT, data_dir=data)
    assert result.returncode == 0, result.stderr
    flat = " ".join(result.stdout.split())
    assert "importance" in flat and "median" in flat and "fading" in flat
    assert "store path" in flat
    assert str((data / AGENT).resolve()).replace(" ", "") in result.stdout.replace("\n", "")
    for key in ("pending tasks", "failed tasks", "on disk", "focus phrases"):
        assert key in flat


# -- every command documented ---------------------------------------------------------------------


def _commands() -> list[str]:
    from memory_rdf.cli import cli as group

    return sorted(group.commands)


def _readme_commands() -> set[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    match = re.search(r"^## Command line\n(.*?)(?=^## )", text, re.S | re.M)
    assert match, "README.md has no '## Command line' section"
    return set(re.findall(r"\bmemory-rdf ([a-z][a-z-]*)\b", match.group(1)))


@pytest.mark.parametrize("command", _commands())
def test_every_command_has_an_example_and_readme_documentation(command: str) -> None:
    result = subprocess.run(
        [memory_rdf_command(), command, "--help"], cwd=REPO,
        capture_output=True, text=True, encoding="utf-8", timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "Example" in result.stdout and f"memory-rdf {command}" in result.stdout
    assert "--data-dir" in result.stdout
    assert command in _readme_commands(), f"README's Command line lacks `memory-rdf {command}`"


def test_readme_documents_no_command_that_does_not_exist() -> None:
    assert _readme_commands() <= set(_commands())
