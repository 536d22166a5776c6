"""Issue 15's smaller command-line defects, each pinned: output formats follow the file name,
W3C SPARQL results XML, a distinct exit code for a missing optional dependency, .rq files that
run on their own, English templates from the CLI, runnable docs, bench --help anywhere."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pyoxigraph
import pytest
from test_cli import MESSAGES, assert_one_line_error, cli

REPO = Path(__file__).resolve().parent.parent
SPARQL_RESULTS = "{http://www.w3.org/2005/sparql-results#}"


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cli_outputs")


@pytest.fixture(scope="module")
def data(work: Path) -> Path:
    """Agent ``bot`` remembered through the CLI (shared, never modified)."""
    messages = work / "messages.json"
    messages.write_text(json.dumps(MESSAGES, ensure_ascii=False), encoding="utf-8")
    result = cli(work, "remember", "bot", str(messages), data_dir=work / "data")
    assert result.returncode == 0, result.stderr
    return work / "data"


def _parses_as(path: Path, fmt: pyoxigraph.RdfFormat) -> int:
    return len(list(pyoxigraph.parse(path=str(path), format=fmt)))


# -- export -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "fmt"),
    [("bot.nt", pyoxigraph.RdfFormat.N_TRIPLES), ("bot.ttl", pyoxigraph.RdfFormat.TURTLE),
     ("bot.nq", pyoxigraph.RdfFormat.N_QUADS), ("bot.trig", pyoxigraph.RdfFormat.TRIG)],
)
def test_export_takes_the_format_from_the_suffix(
    work: Path, data: Path, name: str, fmt: pyoxigraph.RdfFormat
) -> None:
    target = work / name
    result = cli(work, "export", "bot", "-o", str(target), data_dir=data)
    assert result.returncode == 0, result.stderr
    assert _parses_as(target, fmt) > 0
    if name.endswith(".nt"):  # N-Triples: one triple per line, no prefixes (Turtle has them)
        text = target.read_text(encoding="utf-8")
        assert "@prefix" not in text and "PREFIX" not in text
        assert all(line.endswith(" .") for line in text.splitlines())


def test_export_refuses_a_suffix_that_contradicts_the_format(work: Path, data: Path) -> None:
    target = work / "mismatch.nt"
    result = cli(work, "export", "bot", "-o", str(target), "--format", "turtle", data_dir=data)
    assert_one_line_error(result, 2)
    assert "ntriples" in result.stderr and not target.exists()
    unknown = cli(work, "export", "bot", "-o", str(work / "bot.rdf"), data_dir=data)
    assert_one_line_error(unknown, 2)
    assert ".nt" in unknown.stderr and not (work / "bot.rdf").exists()
    explicit = cli(work, "export", "bot", "-o", str(work / "bot.txt"), "--format", "ntriples",
                   data_dir=data)
    assert explicit.returncode == 0, explicit.stderr  # an unknown suffix with --format is fine
    assert _parses_as(work / "bot.txt", pyoxigraph.RdfFormat.N_TRIPLES) > 0


def test_export_dash_is_stdout(tmp_path: Path, data: Path) -> None:
    """``-o -`` writes to stdout, as ``graph -o -`` does (it wrote a file named ``-``)."""
    result = cli(tmp_path, "export", "bot", "--format", "nquads", "-o", "-", data_dir=data)
    assert result.returncode == 0, result.stderr
    assert not (tmp_path / "-").exists()
    quads = list(pyoxigraph.parse(result.stdout.encode(), format=pyoxigraph.RdfFormat.N_QUADS))
    assert any(q.graph_name != pyoxigraph.DefaultGraph() for q in quads)  # the journal too
    plain = cli(tmp_path, "export", "bot", "-o", "-", data_dir=data)  # no suffix: Turtle
    assert plain.returncode == 0 and "wrote" not in plain.stderr
    assert _parses_as_text(plain.stdout, pyoxigraph.RdfFormat.TURTLE) > 0


def test_export_and_graph_say_why_a_file_cannot_be_written(tmp_path: Path, data: Path) -> None:
    """A file that cannot be written is one line naming it and the reason, alike for export and
    graph (export printed Python's ``[Errno 2] No such file or directory: '…'``)."""
    missing = tmp_path / "no-such-dir"
    for args, target in ((["export", "bot"], missing / "x.ttl"),
                         (["graph", "bot"], missing / "x.html"),
                         (["export", "bot"], tmp_path)):  # a directory
        result = cli(tmp_path, *args, "-o", str(target), data_dir=data)
        assert_one_line_error(result, 1)
        reason = "Is a directory" if target == tmp_path else "No such file or directory"
        assert result.stderr.strip() == f"error: cannot write {target}: {reason}", result.stderr
    assert not missing.exists()


def test_a_store_that_cannot_be_made_says_why(tmp_path: Path) -> None:
    """A data directory below a file: the store cannot be made, said as the reason and the
    file (was Python's ``[Errno 20] Not a directory: '…'``)."""
    (tmp_path / "afile").write_text("not a directory")
    data = tmp_path / "afile" / "data"
    result = cli(tmp_path, "remember", "bot", "-", data_dir=data,
                 stdin=json.dumps(MESSAGES[:1], ensure_ascii=False))
    assert_one_line_error(result, 1)
    assert f"cannot open the memory store {data / 'bot'}: Not a directory (" in result.stderr
    assert "Errno" not in result.stderr


def _parses_as_text(text: str, fmt: pyoxigraph.RdfFormat) -> int:
    return len(list(pyoxigraph.parse(text.encode(), format=fmt)))


# -- graph --------------------------------------------------------------------------------------


def test_graph_refuses_a_suffix_it_cannot_write(work: Path, data: Path) -> None:
    for name in ("bot.png", "bot.pdf"):
        result = cli(work, "graph", "bot", "-o", str(work / name), data_dir=data)
        assert_one_line_error(result, 2)
        assert ".html" in result.stderr and not (work / name).exists()
    mismatch = cli(work, "graph", "bot", "-o", str(work / "bot.html"), "--format", "dot",
                   data_dir=data)
    assert_one_line_error(mismatch, 2)
    dot = cli(work, "graph", "bot", "-o", str(work / "bot.gv"), data_dir=data)
    assert dot.returncode == 0, dot.stderr
    assert (work / "bot.gv").read_text(encoding="utf-8").lstrip().startswith(("digraph", "graph"))


# -- sparql -------------------------------------------------------------------------------------


def test_sparql_xml_is_w3c_sparql_results_xml(work: Path, data: Path) -> None:
    query = "SELECT ?n ?phrase WHERE { ?n a memory:Node ; memory:phrase ?phrase }"
    result = cli(work, "sparql", "bot", query, "--format", "xml", data_dir=data)
    assert result.returncode == 0, result.stderr
    root = ET.fromstring(result.stdout)
    assert root.tag == f"{SPARQL_RESULTS}sparql"
    variables = [v.get("name") for v in root.iter(f"{SPARQL_RESULTS}variable")]
    assert variables == ["n", "phrase"]
    as_json = json.loads(cli(work, "sparql", "bot", query, "--format", "json",
                             data_dir=data).stdout)
    assert len(list(root.iter(f"{SPARQL_RESULTS}result"))) == len(
        as_json["results"]["bindings"]) > 0
    ask = cli(work, "sparql", "bot", "ASK { ?n a memory:Node }", "--format", "xml",
              data_dir=data)
    assert ET.fromstring(ask.stdout).find(f"{SPARQL_RESULTS}boolean").text == "true"


@pytest.mark.parametrize("fmt", ["json", "xml", "csv", "tsv"])
def test_sparql_output_ends_with_a_newline(work: Path, data: Path, fmt: str) -> None:
    result = cli(work, "sparql", "bot", "SELECT ?p WHERE { ?n memory:phrase ?p } LIMIT 1",
                 "--format", fmt, data_dir=data)
    assert result.returncode == 0, result.stderr
    assert result.stdout.endswith("\n") and not result.stdout.endswith("\n\n")


# -- validate without pyshacl -------------------------------------------------------------------


def test_validate_without_pyshacl_exits_3_not_1(work: Path, data: Path, tmp_path: Path) -> None:
    """Exit 1 means "the store violates the shapes"; a missing pyshacl is exit 3 (simulated by
    a stand-in package that fails to import, first on the path)."""
    fake = tmp_path / "fake" / "pyshacl"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('No module named pyshacl (stand-in)')\n")
    pythonpath = os.pathsep.join([str(tmp_path / "fake"), str(REPO)])
    result = cli(work, "validate", "bot", data_dir=data, env={"PYTHONPATH": pythonpath})
    assert_one_line_error(result, 3)
    assert 'pip install "memory-rdf[shacl]"' in result.stderr
    help_text = cli(work, "--help").stdout
    assert re.search(r"3 an optional dependency is missing", help_text)


# -- .rq files ----------------------------------------------------------------------------------


def _query_files() -> list[Path]:
    return sorted((REPO / "memory_rdf" / "queries").glob("*.r[qu]"))


@pytest.mark.parametrize("path", _query_files(), ids=lambda p: p.name)
def test_every_query_file_runs_on_its_own(path: Path) -> None:
    """What the README promises: a shipped query runs unchanged in any SPARQL tool (here a bare
    Oxigraph store, no prefixes given), its parameters left as unbound variables."""
    text = path.read_text(encoding="utf-8")
    store = pyoxigraph.Store()
    try:
        if path.suffix == ".ru":
            store.update(text)
        else:
            store.query(text)
    except SyntaxError as exc:
        pytest.fail(f"{path.name} does not run on its own ({exc}): declare the prefixes it uses "
                    "after its header, e.g. PREFIX memory: <https://w3id.org/memory-rdf/"
                    "ontology#> (render() drops them again)", pytrace=False)


# -- English templates from the CLI -------------------------------------------------------------


def test_recall_english_templates(work: Path, data: Path) -> None:
    chinese = cli(work, "recall", "bot", "JWT", data_dir=data)
    english = cli(work, "recall", "bot", "JWT", "--english", data_dir=data)
    assert chinese.returncode == english.returncode == 0, english.stderr
    assert chinese.stdout.startswith("[记忆 ")
    assert english.stdout.startswith("[memory ") and "[记忆" not in english.stdout
    marker = re.compile(r"^\[(?:记忆|memory) (\d{4}-\d\d-\d\d)\] ", re.MULTILINE)
    assert marker.sub(r"\1 ", english.stdout) == marker.sub(r"\1 ", chinese.stdout)


# -- the docs' examples -------------------------------------------------------------------------


def test_docs_commands_in_a_block_share_the_data_dir() -> None:
    """In a bash block of the docs where one memory-rdf command uses --data-dir DIR, every
    memory-rdf command does (else the example reads another directory than it wrote)."""
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        text = doc.read_text(encoding="utf-8")
        for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
            commands = [line for line in block.splitlines()
                        if line.lstrip().startswith("memory-rdf ") and " --help" not in line]
            dirs = {m.group(1) for c in commands for m in [re.search(r"--data-dir (\S+)", c)]
                    if m}
            if not dirs:
                continue
            for command in commands:
                subcommand = command.split()[1]
                if subcommand in ("bench",):
                    continue
                assert "--data-dir" in command, f"{doc.name}: {command}"


def test_help_examples_are_one_command_a_line() -> None:
    """Every line of a command's help examples is a command (or a continuation of one): a
    backslash at a line's end in a docstring joined two example lines into one that no shell
    runs (serve's token example did)."""
    from click.testing import CliRunner

    from memory_rdf.cli import cli as group

    starts = ("memory-rdf ", "export ", "echo ", "MEMORY_RDF_", "for ")  # for: a shell loop
    for name in [None, *sorted(n for n in group.commands if n != "bench")]:
        result = CliRunner().invoke(group, [*([name] if name else []), "--help"],
                                    terminal_width=100)
        assert result.exit_code == 0, result.output
        blocks = re.findall(r"^  Examples?:\n((?:    .*\n)+)", result.output, flags=re.M)
        assert blocks, f"memory-rdf {name or ''} --help has no examples"
        previous = ""
        for line in blocks[0].splitlines():
            command = line.strip()
            assert command.startswith(starts) or previous.endswith("\\"), (name, line)
            assert not re.search(r"\S {3,}memory-rdf ", command), (name, line)
            previous = command


# -- bench --help outside a checkout ------------------------------------------------------------


def test_bench_help_works_outside_a_checkout(tmp_path: Path) -> None:
    """The package as a wheel installs it (no benchmarks/ next to it), run from a directory
    that is no checkout either: --help explains the command instead of failing."""
    site = tmp_path / "site"
    shutil.copytree(REPO / "memory_rdf", site / "memory_rdf",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "ontology", site / "memory_rdf" / "ontology")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site)}
    run = [sys.executable, "-c", "from memory_rdf.cli import main; main()", "bench"]
    help_result = subprocess.run([*run, "--help"], cwd=elsewhere, env=env, capture_output=True,
                                 text=True, timeout=60)
    assert help_result.returncode == 0, help_result.stderr
    assert "benchmark" in help_result.stdout and "--quick" in help_result.stdout
    assert "Traceback" not in help_result.stderr
    suite = subprocess.run([*run, "--quick"], cwd=elsewhere, env=env, capture_output=True,
                           text=True, timeout=60)
    assert_one_line_error(suite, 2)
    assert "source checkout" in suite.stderr
