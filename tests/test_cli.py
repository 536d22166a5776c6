"""The ``memory-rdf`` command line (SPEC §6), run through the installed entry point: the
``memory-rdf`` console script next to the test interpreter (``pip install .`` or ``-e .``
puts it there), as a real process with a temporary working directory and ``--data-dir``."""

from __future__ import annotations

import gc
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

from helpers import memory_rdf_command

REPO = Path(__file__).resolve().parent.parent
COMMANDS = ["demo", "remember", "recall", "sparql", "export", "graph", "stats", "validate",
            "compress", "agents", "import"]
MESSAGES = [
    {"role": "user", "content": "今天开会定了用 PostgreSQL 存订单数据，不用 MySQL。"},
    {"role": "assistant", "content": "好的，PostgreSQL 的 JSONB 很适合商品快照。"},
    {"role": "user", "content": "登录方案用 JWT，access token 有效期 2 小时，由张伟负责。"},
]



def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    # The entry point imports the checkout under test even when the install is not editable.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.pop("MEMORY_RDF_DATA_DIR", None)
    env.pop("MEMORY_RDF_MODEL", None)
    env["PYTHONIOENCODING"] = "utf-8"
    env.update(extra)
    return env


def cli(
    cwd: Path, *args: str, data_dir: Path | None = None, stdin: str | None = None,
    timeout: float = 60, env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``memory-rdf ARGS… [--data-dir DATA_DIR]`` through the installed console script."""
    argv = [memory_rdf_command(), *args]
    if data_dir is not None:
        argv += ["--data-dir", str(data_dir)]
    return subprocess.run(
        argv, cwd=cwd, env=_env(**(env or {})), input=stdin, capture_output=True, text=True,
        encoding="utf-8", timeout=timeout,
    )


def assert_one_line_error(result: subprocess.CompletedProcess[str], code: int) -> None:
    assert result.returncode == code, result
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cli")


@pytest.fixture(scope="module")
def store_dir(work: Path) -> Path:
    """A data dir with agent ``bot`` remembered through the CLI (shared, never modified)."""
    data = work / "data"
    messages = work / "messages.json"
    messages.write_text(json.dumps(MESSAGES, ensure_ascii=False), encoding="utf-8")
    result = cli(work, "remember", "bot", str(messages), data_dir=data)
    assert result.returncode == 0, result.stderr
    assert re.match(r"agent 'bot': [1-9]\d* nodes? now \(", result.stdout), result.stdout
    return data


def _count_triples(work: Path, data: Path, agent: str) -> int:
    result = cli(work, "sparql", agent, "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }",
                 "--format", "json", data_dir=data)
    assert result.returncode == 0, result.stderr
    return int(json.loads(result.stdout)["results"]["bindings"][0]["n"]["value"])


# -- the main job --------------------------------------------------------------------------------


WIDE = {"COLUMNS": "120"}  # the demo's panels and tables at a known width


@pytest.fixture(scope="module")
def demo_run(work: Path) -> tuple[Path, str]:
    """``memory-rdf demo`` once (the bundled Chinese conversation, default slices)."""
    data = work / "demo-data"
    result = cli(work, "demo", data_dir=data, env=WIDE, timeout=180)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return data, result.stdout


def recall_panel(stdout: str, call: str) -> str:
    """The text of the demo's recall panel titled with ``call`` (borders and wrapping gone)."""
    for block in stdout.split("\n\n"):
        head, _, body = block.partition("\n")
        if head.rstrip().endswith(call):
            lines = [line.strip().strip("│").strip() for line in body.splitlines()]
            return "".join(line for line in lines if line and line[0] not in "╭╰")
    raise AssertionError(f"no recall panel {call!r} in the demo output:\n{stdout}")


def test_demo_remembers_compresses_and_forgets(demo_run: tuple[Path, str]) -> None:
    data, out = demo_run
    assert (data / "demo").is_dir()
    # every session but the last (whose questions the recalls ask), each then compressed
    assert "2026-09-07 项目启动" in out and "2026-12-02 代码冻结" in out
    assert "2026-12-14" not in out
    summary = re.search(r"compressed (\d+), forgotten (\d+)\. (\d+) memories left", out)
    assert summary, out
    shortened, forgotten, left = map(int, summary.groups())
    assert shortened > 0 and forgotten > 0 and left > 0
    assert re.search(r"[1-9]\d* links? still lead to forgotten memories", out)
    # a recalled memory tells the agent it once knew more (the ghost of a forgotten one)
    assert "还关联着一段已经遗忘的记忆" in out
    assert "JWT" in recall_panel(out, 'recall(["JWT"])')
    assert "Agent stats" in out and "memory-rdf graph demo" in out


def test_demo_keyword_entry_finds_what_focus_misses(work: Path,
                                                    demo_run: tuple[Path, str]) -> None:
    """SPEC §5.5 / issue 8: at the default depth (2) the focus-only walk does not reach the
    early drink preference; the keyword entry finds it — in the demo and from the CLI."""
    from memory_rdf import Config

    assert Config().default_search_depth == 2
    data, out = demo_run
    assert recall_panel(out, "recall([\"咖啡\"], entry='focus')") == "(nothing recalled)"
    found = recall_panel(out, "recall([\"咖啡\"], entry='keywords')")
    assert "咖啡" in found and found.startswith("[记忆 ")

    focus = cli(work, "recall", "demo", "咖啡", "--entry", "focus", data_dir=data)
    assert focus.returncode == 0, focus.stderr
    assert focus.stdout == "" and "nothing recalled" in focus.stderr
    for entry in ("keywords", "both", None):  # "both" is the default (SPEC §5.5 v3)
        option = ["--entry", entry] if entry else []
        result = cli(work, "recall", "demo", "咖啡", *option, data_dir=data)
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith("[记忆 ") and "咖啡" in result.stdout
    # "both": the focus results and the keyword results together
    focus_jwt = cli(work, "recall", "demo", "JWT", "咖啡", "--entry", "focus", data_dir=data)
    both = cli(work, "recall", "demo", "JWT", "咖啡", "--entry", "both", data_dir=data)
    assert focus_jwt.returncode == both.returncode == 0
    assert "JWT" in focus_jwt.stdout and "咖啡" not in focus_jwt.stdout
    assert "JWT" in both.stdout and "咖啡" in both.stdout
    bad = cli(work, "recall", "demo", "咖啡", "--entry", "everywhere", data_dir=data)
    assert_one_line_error(bad, 2)


def test_demo_in_english(tmp_path: Path) -> None:
    result = cli(tmp_path, "demo", "--english", data_dir=tmp_path / "data", env=WIDE,
                 timeout=180)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "[memory " in out and "[记忆" not in out
    # English sessions are merged as Chinese ones are (benchmarks/RECALL.md, decision 20):
    # before, each of the 70 messages was a memory of its own and 40 were forgotten
    made = re.search(r"\((\d+) messages\) as (\d+) memories", out)
    assert made, out
    messages, memories = map(int, made.groups())
    assert memories <= 0.6 * messages
    forgotten = re.search(r"compressed \d+, forgotten (\d+)\. (\d+) memories left", out)
    assert forgotten, out
    gone, left = map(int, forgotten.groups())
    assert 0 < gone < left
    assert recall_panel(out, "recall([\"coffee\"], entry='focus')") == "(nothing recalled)"
    assert "coffee" in recall_panel(out, "recall([\"coffee\"], entry='keywords')")
    assert "is still linked to a memory I have forgotten" in out


def test_demo_wipes_an_existing_agent_and_reads_data_dir_from_env(
    tmp_path: Path, demo_run: tuple[Path, str]
) -> None:
    data = tmp_path / "data"
    shutil.copytree(demo_run[0], data)
    env = {"MEMORY_RDF_DATA_DIR": str(data), **WIDE}
    again = cli(tmp_path, "demo", "--slices", "0", env=env, timeout=180)
    assert again.returncode == 0, again.stderr
    assert "wiping" in again.stdout and "compressed 0, forgotten 0" in again.stdout
    assert not (tmp_path / "memory_data").exists()  # the environment's data dir was used
    stats = cli(tmp_path, "stats", "demo", "--json", env=env)
    assert stats.returncode == 0, stats.stderr
    assert json.loads(stats.stdout)["nodes"] > 0
    missing = cli(tmp_path, "stats", "nobody", env=env)
    assert_one_line_error(missing, 2)
    assert "nobody" in missing.stderr and not (data / "nobody").exists()


def test_demo_memories_carry_their_sessions_dates(work: Path,
                                                 demo_run: tuple[Path, str]) -> None:
    """The demo's messages carry timestamps (SPEC §5.6): every memory has the said time of its
    session, so --since/--until pick a part of the demo (they had nothing to filter on)."""
    data, _ = demo_run
    listed = cli(work, "memories", "demo", "--json", "--limit", "1000", data_dir=data)
    assert listed.returncode == 0, listed.stderr
    everything = json.loads(listed.stdout)
    said = sorted({m["said_at"][:10] for m in everything if m["said_at"]})
    assert len(said) > 2 and all(m["said_at"] for m in everything), said
    assert said[0] >= "2026-09-07" and said[-1] == "2026-12-02"  # the last remembered session
    since = cli(work, "memories", "demo", "--since", "2026-11-01", "--json", "--limit", "1000",
                data_dir=data)
    assert since.returncode == 0, since.stderr
    recent = json.loads(since.stdout)
    assert 0 < len(recent) < len(everything)
    assert all(m["said_at"] >= "2026-11-01" for m in recent)
    between = cli(work, "recall", "demo", "--since", "2026-11-01", "--until", "2026-12-01",
                  data_dir=data)
    assert between.returncode == 0, between.stderr
    assert between.stdout.startswith("[记忆 ")
    assert "JWT" not in between.stdout  # said on 2026-12-02


def _help_examples() -> list[tuple[str, str]]:
    """(command, example line) of every command's --help that runs on agent ``demo`` (but
    those in a fixed --data-dir; serve and bench have no demo example)."""
    from click.testing import CliRunner

    from memory_rdf.cli import cli as group

    found = []
    for name in [None, *sorted(n for n in group.commands if n not in ("bench", "serve"))]:
        result = CliRunner().invoke(group, [*([name] if name else []), "--help"],
                                    terminal_width=100)
        assert result.exit_code == 0, result.output
        for block in re.findall(r"^  Examples?:\n((?:    .*\n)+)", result.output, flags=re.M):
            for line in block.splitlines():
                line = line.strip()
                if re.search(r"memory-rdf \w+ demo\b", line) and "--data-dir" not in line:
                    found.append((name or "memory-rdf", line))
    return found


@pytest.mark.parametrize(("command", "line"), _help_examples())
def test_help_example_prints_something_on_the_demo(
    tmp_path: Path, demo_run: tuple[Path, str], command: str, line: str
) -> None:
    """Every --help example that reads agent ``demo`` runs, as a shell runs it, on what
    ``memory-rdf demo`` made, and answers something (its keywords and dates exist there;
    a forget finds ids to forget)."""
    for tool, used in (("bash", "memory-rdf"), ("jq", "| jq"), ("cut", "| cut"),
                       ("dot", ".svg")):
        if used in line and shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed")
    data = tmp_path / "data"
    shutil.copytree(demo_run[0], data)  # a copy of its own: some examples forget or compress
    bindir = str(Path(memory_rdf_command()).parent)
    env = _env(MEMORY_RDF_DATA_DIR=str(data),
               PATH=os.pathsep.join([bindir, os.environ.get("PATH", "")]))
    result = subprocess.run(["bash", "-c", f"set -o pipefail; {line}"], cwd=tmp_path, env=env,
                            input="", capture_output=True, text=True, encoding="utf-8",
                            timeout=120)
    said = result.stdout + result.stderr
    assert result.returncode == 0, (line, said)
    if line.startswith("memory-rdf demo "):  # what follows the demo's report (its last line)
        said = said.split("\nNext: ", 1)[1].partition("\n")[2]
    assert said.strip() not in ("", "[]"), line
    for empty in ("(nothing recalled)", "(no memories)", "forgot 0 ", "unknown id", "error"):
        assert empty not in said, (line, said)


# -- remember / recall ---------------------------------------------------------------------------


def test_remember_then_recall_finds_keyword(work: Path, store_dir: Path) -> None:
    result = cli(work, "recall", "bot", "PostgreSQL", data_dir=store_dir)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("[记忆 ")
    assert "PostgreSQL" in result.stdout
    assert "╭" not in result.stdout  # plain text, no decoration


def test_recall_limit_and_max_chars(tmp_path: Path) -> None:
    data = tmp_path / "data"
    messages = [{"role": "user", "content": f"Topic {word}: " + f"{word} " * 30}
                for word in ("apples", "boats", "clouds")]  # ~230 characters each: cut in two
    ok = cli(tmp_path, "remember", "long", "-", data_dir=data, stdin=json.dumps(messages))
    assert ok.returncode == 0, ok.stderr
    whole = cli(tmp_path, "recall", "long", "--depth", "0", "--max-chars", "0", data_dir=data)
    assert whole.returncode == 0, whole.stderr
    parts = whole.stdout.rstrip("\n").split("\n---\n")
    assert len(parts) >= 3
    one = cli(tmp_path, "recall", "long", "--depth", "0", "--limit", "1", "--max-chars", "0",
              data_dir=data)
    assert one.stdout.rstrip("\n") == parts[0]
    two = len(parts[0]) + 5 + len(parts[1])
    for budget, expected in ((1, parts[:1]), (two - 1, parts[:1]), (two, parts[:2])):
        cut = cli(tmp_path, "recall", "long", "--depth", "0", "--max-chars", str(budget),
                  data_dir=data)
        assert cut.stdout.rstrip("\n") == "\n---\n".join(expected)
    for bad in (["--limit", "-1"], ["--max-chars", "-2"], ["--max-chars", "lots"]):
        result = cli(tmp_path, "recall", "long", *bad, data_dir=data)
        assert result.returncode == 2 and "Invalid value" in result.stderr


def test_remember_from_stdin_and_bad_input(tmp_path: Path) -> None:
    data = tmp_path / "data"
    ok = cli(tmp_path, "remember", "piped", "-", data_dir=data,
             stdin=json.dumps([{"role": "user", "content": "我们用 Kafka 做消息队列"}]))
    assert ok.returncode == 0, ok.stderr
    assert "agent 'piped': 1 node now (" in ok.stdout  # one node: not "1 nodes"
    for bad in ("not json", '{"role": "user"}', '[{"role": "user"}]', "[]",
                '[{"role": "robot", "content": "x"}]'):
        result = cli(tmp_path, "remember", "fresh", "-", data_dir=data, stdin=bad)
        assert_one_line_error(result, 1)
    assert not (data / "fresh").exists()  # bad input creates nothing


# -- sparql --------------------------------------------------------------------------------------


def test_sparql_json_csv_and_table(work: Path, store_dir: Path) -> None:
    query = "SELECT ?n ?phrase WHERE { ?n a memory:Node ; memory:phrase ?phrase }"
    result = cli(work, "sparql", "bot", query, "--format", "json", data_dir=store_dir)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["head"]["vars"] == ["n", "phrase"]
    assert doc["results"]["bindings"]
    assert all(b["n"]["type"] == "uri" for b in doc["results"]["bindings"])

    csv_result = cli(work, "sparql", "bot", query, "--format", "csv", data_dir=store_dir)
    assert csv_result.returncode == 0, csv_result.stderr
    lines = csv_result.stdout.splitlines()
    assert lines[0].strip() == "n,phrase"
    assert len(lines) == 1 + len(doc["results"]["bindings"])

    tsv = cli(work, "sparql", "bot", query, "--format", "tsv", data_dir=store_dir)
    assert tsv.returncode == 0, tsv.stderr
    tsv_lines = tsv.stdout.splitlines()
    assert tsv_lines[0] == "?n\t?phrase"  # W3C SPARQL 1.1 TSV: the variables with their "?"
    assert len(tsv_lines) == 1 + len(doc["results"]["bindings"])
    first = tsv_lines[1].split("\t")
    assert first[0].startswith("<https://w3id.org/memory-rdf/node/") and first[0].endswith(">")
    assert first[1].startswith('"')  # literals in SPARQL/Turtle syntax

    query_file = work / "nodes.rq"
    query_file.write_text(query, encoding="utf-8")
    table = cli(work, "sparql", "bot", f"@{query_file}", data_dir=store_dir)
    assert table.returncode == 0, table.stderr
    assert "node:" in table.stdout and "phrase" in table.stdout


def test_sparql_table_runs_a_construct_once(work: Path, store_dir: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """``memory-rdf sparql`` in a table reads a CONSTRUCT's triples from its one run; it ran
    the query a second time for them (a whole copy of the store and the query again)."""
    from click.testing import CliRunner

    import memory_rdf.inspect
    from memory_rdf.cli import cli as group

    query = ("CONSTRUCT { ?n memory:phrase ?p ; memory:createdAt ?c } "
             "WHERE { ?n a memory:Node ; memory:phrase ?p ; memory:createdAt ?c }")
    runs: list[str | None] = []
    real = memory_rdf.inspect.sparql

    def counted(*args: object, **kw: object) -> object:
        runs.append(kw.get("format"))  # type: ignore[arg-type]
        return real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(memory_rdf.inspect, "sparql", counted)
    result = CliRunner().invoke(group, ["sparql", "bot", query, "--data-dir", str(store_dir)])
    assert result.exit_code == 0, result.output
    assert runs == ["json"]
    triples = cli(work, "sparql", "bot", query, "--format", "json", data_dir=store_dir)
    assert triples.returncode == 0, triples.stderr
    count = len(triples.stdout.strip().splitlines())
    assert count > 0 and f"{count} row{'s' if count != 1 else ''}" in result.output
    assert "node:" in result.output and "memory:phrase" in result.output
    assert "memory:createdAt" in result.output


def test_sparql_table_shows_a_constructed_literal_as_a_select_does(work: Path,
                                                                   store_dir: Path) -> None:
    """A CONSTRUCT's table cell of a literal is its stored text, as a SELECT's table shows it
    (not a parser's normalized form of the value)."""
    where = "WHERE { ?n a memory:Node ; memory:createdAt ?c } ORDER BY ?n LIMIT 1"
    chosen = cli(work, "sparql", "bot", f"SELECT ?c {where}", "--format", "json",
                 data_dir=store_dir)
    assert chosen.returncode == 0, chosen.stderr
    stored = json.loads(chosen.stdout)["results"]["bindings"][0]["c"]["value"]
    wide = {"COLUMNS": "200"}
    select = cli(work, "sparql", "bot", f"SELECT ?c {where}", data_dir=store_dir, env=wide)
    construct = cli(work, "sparql", "bot", f"CONSTRUCT {{ ?n memory:createdAt ?c }} {where}",
                    data_dir=store_dir, env=wide)
    assert select.returncode == 0 and construct.returncode == 0, construct.stderr
    assert stored in select.stdout
    assert stored in construct.stdout


def test_sparql_refuses_updates_and_reports_bad_queries(work: Path, store_dir: Path) -> None:
    before = _count_triples(work, store_dir, "bot")
    update = cli(work, "sparql", "bot", "INSERT DATA { <urn:a> <urn:b> <urn:c> }",
                 data_dir=store_dir)
    assert_one_line_error(update, 1)
    assert "refused" in update.stderr
    bad = cli(work, "sparql", "bot", "SELEC * WHERE {", "--format", "json", data_dir=store_dir)
    assert_one_line_error(bad, 1)
    assert "invalid SPARQL at line 1, column 10" in bad.stderr
    # The parser lists every token it expected, Unicode ranges included: the line stays short.
    for fmt in ("table", "csv"):
        unclosed = cli(work, "sparql", "bot", "SELECT * WHERE {\n  ?s ?p ?o", "--format", fmt,
                       data_dir=store_dir)
        assert_one_line_error(unclosed, 1)
        line = unclosed.stderr.strip()
        assert len(line) < 200, line
        assert re.search(r"invalid SPARQL at line 2, column \d+: expected", line), line
        assert "\\u{" not in line and "..=" not in line
    prefix = cli(work, "sparql", "bot", "SELECT ?p WHERE { ?n foo:phrase ?p }",
                 data_dir=store_dir)
    assert_one_line_error(prefix, 1)
    assert prefix.stderr.strip() == (
        "error: invalid SPARQL at line 1, column 32: unknown prefix 'foo:' (predeclared: "
        "memory:, node:, link:, xsd:; declare others with PREFIX)")
    for empty in ("", "  "):
        blank = cli(work, "sparql", "bot", empty, data_dir=store_dir)
        assert_one_line_error(blank, 1)
        assert blank.stderr.strip() == "error: invalid SPARQL: the query is empty"
    assert _count_triples(work, store_dir, "bot") == before


# -- stats / export / validate -------------------------------------------------------------------


def test_agents_lists_the_stores_only(tmp_path: Path) -> None:
    data = tmp_path / "data"
    missing = cli(tmp_path, "agents", data_dir=data)
    assert missing.returncode == 0 and missing.stdout == "" and "no agents" in missing.stderr
    assert not data.exists()
    messages = tmp_path / "m.json"
    messages.write_text(json.dumps(MESSAGES), encoding="utf-8")
    for agent in ("bob", "助手", "alice"):
        assert cli(tmp_path, "remember", agent, str(messages), data_dir=data).returncode == 0
    (data / "notes").mkdir()  # not a store
    (data / "alice~new").mkdir()  # a rewrite's leftover: not an id
    (data / "alice~new" / "CURRENT").write_text("x", encoding="utf-8")
    (data / "readme.txt").write_text("x", encoding="utf-8")
    listed = cli(tmp_path, "agents", data_dir=data)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines() == ["alice", "bob", "助手"]
    as_json = cli(tmp_path, "agents", "--json", data_dir=data)
    assert json.loads(as_json.stdout) == ["alice", "bob", "助手"]


def test_stats_json_counts_nodes(work: Path, store_dir: Path) -> None:
    result = cli(work, "stats", "bot", "--json", data_dir=store_dir)
    assert result.returncode == 0, result.stderr
    stats = json.loads(result.stdout)
    nodes = cli(work, "sparql", "bot", "SELECT (COUNT(?n) AS ?c) WHERE { ?n a memory:Node }",
                "--format", "json", data_dir=store_dir)
    count = int(json.loads(nodes.stdout)["results"]["bindings"][0]["c"]["value"])
    assert stats["nodes"] == count >= 1
    for key in ("links", "dangling_links", "focus", "focus_phrases", "pending_tasks",
                "failed_tasks", "store_path", "store_bytes"):
        assert key in stats
    assert stats["pending_tasks"] == 0 and stats["store_bytes"] > 0
    assert len(stats["focus"]) == len(stats["focus_phrases"]) >= 1


def test_export_turtle_has_the_default_graph(work: Path, store_dir: Path) -> None:
    rdflib = pytest.importorskip("rdflib")
    out = work / "bot.ttl"
    result = cli(work, "export", "bot", "-o", str(out), data_dir=store_dir)
    assert result.returncode == 0, result.stderr
    graph = rdflib.Graph()
    graph.parse(out, format="turtle")
    assert len(graph) == _count_triples(work, store_dir, "bot") > 0
    nquads = cli(work, "export", "bot", "--format", "nquads", data_dir=store_dir)
    assert nquads.returncode == 0, nquads.stderr
    assert "<https://w3id.org/memory-rdf/graph/meta>" in nquads.stdout  # named graphs too


def test_export_ntriples_and_trig_round_trip(work: Path, store_dir: Path) -> None:
    """N-Triples holds the memory graph; TriG adds the journal and metadata named graphs.
    Both parse back (pyoxigraph, and rdflib when installed) with the store's triple count."""
    import pyoxigraph as ox

    triples = _count_triples(work, store_dir, "bot")
    nt_file, trig_file = work / "bot.nt", work / "bot.trig"
    for fmt, target in (("ntriples", nt_file), ("trig", trig_file)):
        result = cli(work, "export", "bot", "--format", fmt, "-o", str(target),
                     data_dir=store_dir)
        assert result.returncode == 0, result.stderr
        assert "wrote" in result.stderr and result.stdout == ""

    nt = list(ox.parse(path=str(nt_file), format=ox.RdfFormat.N_TRIPLES))
    assert len(nt) == triples > 0
    quads = list(ox.parse(path=str(trig_file), format=ox.RdfFormat.TRIG))
    default = [q for q in quads if q.graph_name == ox.DefaultGraph()]
    named = {q.graph_name.value for q in quads if q.graph_name != ox.DefaultGraph()}
    assert len(default) == triples
    assert "https://w3id.org/memory-rdf/graph/meta" in named  # only in the quad formats
    assert "graph/meta" not in nt_file.read_text(encoding="utf-8")
    piped = cli(work, "export", "bot", "--format", "ntriples", data_dir=store_dir)
    assert piped.returncode == 0 and len(piped.stdout.strip().splitlines()) == triples

    rdflib = pytest.importorskip("rdflib")
    assert len(rdflib.Graph().parse(data=nt_file.read_text(encoding="utf-8"),
                                    format="nt")) == triples
    with warnings.catch_warnings():  # rdflib 7's Dataset warns about its own deprecations
        warnings.simplefilter("ignore", DeprecationWarning)
        dataset = rdflib.Dataset()
        dataset.parse(data=trig_file.read_text(encoding="utf-8"), format="trig")
        assert len(dataset.graph(rdflib.graph.DATASET_DEFAULT_GRAPH_ID)) == triples
        assert len(list(dataset.quads((None, None, None, None)))) == len(quads)


def test_validate_healthy_store(work: Path, store_dir: Path) -> None:
    pytest.importorskip("pyshacl")
    result = cli(work, "validate", "bot", data_dir=store_dir)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "conforms" in result.stdout


def test_validate_broken_link_fails_with_report(tmp_path: Path) -> None:
    pytest.importorskip("pyshacl")
    import pyoxigraph as ox

    data = tmp_path / "data"
    made = cli(tmp_path, "remember", "broken", "-", data_dir=data,
               stdin=json.dumps(MESSAGES[:1], ensure_ascii=False))
    assert made.returncode == 0, made.stderr
    store = ox.Store(str(data / "broken"))  # the writer has exited: the lock is free
    store.update(
        "PREFIX memory: <https://w3id.org/memory-rdf/ontology#> "
        "INSERT DATA { <https://w3id.org/memory-rdf/link/ghost--x> a memory:Link ; "
        "memory:source <https://w3id.org/memory-rdf/node/ghost> ; "
        "memory:target <https://w3id.org/memory-rdf/node/x> ; "
        'memory:strength "0.5"^^<http://www.w3.org/2001/XMLSchema#double> }'
    )
    store.flush()
    del store
    gc.collect()
    result = cli(tmp_path, "validate", "broken", data_dir=data)
    assert result.returncode == 1
    assert "Traceback" not in result.stdout + result.stderr
    assert "Conforms: False" in result.stdout
    assert "ghost" in result.stdout
    assert "does not conform" in result.stderr


# -- compress ----------------------------------------------------------------------------------


def _scan_total(work: Path, data: Path, agent: str) -> int:
    result = cli(work, "sparql", agent,
                 "SELECT (SUM(?c) AS ?s) WHERE { ?n a memory:Node ; memory:scanCount ?c }",
                 "--format", "json", data_dir=data)
    assert result.returncode == 0, result.stderr
    return int(json.loads(result.stdout)["results"]["bindings"][0]["s"]["value"])


def test_compress_runs_slices_and_changes_the_store(tmp_path: Path) -> None:
    data = tmp_path / "data"
    chat = REPO / "memory_rdf" / "data" / "demo_conversation.json"
    made = cli(tmp_path, "remember", "busy", str(chat), data_dir=data, timeout=120)
    assert made.returncode == 0, made.stderr
    nodes = json.loads(cli(tmp_path, "stats", "busy", "--json", data_dir=data).stdout)["nodes"]
    assert nodes > 5  # more than the focus: compression has nodes to scan
    before = _scan_total(tmp_path, data, "busy")
    result = cli(tmp_path, "compress", "busy", "--slices", "3", data_dir=data)
    assert result.returncode == 0, result.stderr
    report = re.fullmatch(
        r"3 slices: scanned (\d+), compressed (\d+), forgotten (\d+), links removed (\d+), "
        r"model calls (\d+), \d+ ms; nodes (\d+) → (\d+)", result.stdout.strip())
    assert report, result.stdout
    scanned, _compressed, forgotten, _removed, _calls, first, last = map(int, report.groups())
    assert scanned >= 3 and first == nodes and last == nodes - forgotten
    after = _scan_total(tmp_path, data, "busy")
    assert after > before  # every scan counts (SPEC §5.2 step 8) …
    assert after - before <= scanned  # … minus the scan counts of nodes it forgot
    bad = cli(tmp_path, "compress", "busy", "--slices", "0", data_dir=data)
    assert_one_line_error(bad, 2)


def test_compress_stops_at_a_slice_that_scans_nothing(tmp_path: Path) -> None:
    """Every node in focus: the first slice scans nothing, and so would every later one; it
    ran on through all of --slices (10**12: for ever)."""
    data, chat = tmp_path / "data", tmp_path / "chat.json"
    chat.write_text(json.dumps([{"role": "user", "content": "the deploy key is in vault"}]))
    made = cli(tmp_path, "remember", "few", str(chat), data_dir=data, timeout=120)
    assert made.returncode == 0, made.stderr
    result = cli(tmp_path, "compress", "few", "--slices", str(10**12), data_dir=data)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(
        "1 slices (stopped: nothing to scan, every node left is a focus node): scanned 0,"
    ), result.stdout


# -- errors --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["stats", "ghost"],
        ["sparql", "ghost", "ASK {}"],
        ["export", "ghost"],
        ["validate", "ghost"],
        ["recall", "ghost", "JWT"],
        ["compress", "ghost"],
    ],
)
def test_unknown_agent_exits_2_and_creates_nothing(tmp_path: Path, args: list[str]) -> None:
    data = tmp_path / "data"
    result = cli(tmp_path, *args, data_dir=data)
    assert_one_line_error(result, 2)
    assert "ghost" in result.stderr
    assert not (data / "ghost").exists()
    assert not data.exists()


def test_hostile_agent_id_is_refused_before_any_file(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    messages = tmp_path / "m.json"
    messages.write_text(json.dumps(MESSAGES), encoding="utf-8")
    before = sorted(p.name for p in tmp_path.iterdir())
    for args in (["remember", "../x", str(messages)], ["stats", "../x"],
                 ["demo", "--agent", "../x"], ["recall", "../x", "JWT"]):
        result = cli(tmp_path, *args, data_dir=data)
        assert_one_line_error(result, 2)
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert list(data.iterdir()) == []


@pytest.mark.skipif(not hasattr(os, "symlink") or sys.platform == "win32",
                    reason="needs symbolic links")
def test_an_id_reaching_another_agents_directory_exits_2(tmp_path: Path) -> None:
    """SPEC §2: a link (or a case-insensitive file system) making ``bob`` open ``alice``'s
    directory is an invalid agent id here: refused when the store opens, as a usage error
    (exit 2, one line), and neither agent's store is written."""
    data = tmp_path / "data"
    messages = tmp_path / "m.json"
    messages.write_text(json.dumps(MESSAGES), encoding="utf-8")
    assert cli(tmp_path, "remember", "alice", str(messages), data_dir=data).returncode == 0
    os.symlink("alice", data / "bob")
    before = sorted((p.relative_to(data), p.stat().st_size) for p in data.rglob("*")
                    if p.is_file())
    for args in (["stats", "bob"], ["recall", "bob", "JWT"], ["remember", "bob", str(messages)],
                 ["sparql", "bob", "ASK {}"]):
        result = cli(tmp_path, *args, data_dir=data)
        assert_one_line_error(result, 2)
        assert "'alice'" in result.stderr
    after = sorted((p.relative_to(data), p.stat().st_size) for p in data.rglob("*")
                   if p.is_file())
    assert after == before


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_every_command_has_help_with_example(tmp_path: Path, command: str | None) -> None:
    result = cli(tmp_path, *([command] if command else []), "--help")
    assert result.returncode == 0, result.stderr
    assert "Example" in result.stdout
    assert "--data-dir" in result.stdout or command is None


# -- live inspection -----------------------------------------------------------------------------


def test_inspection_retries_on_a_fresh_snapshot(store_dir: Path) -> None:
    from memory_rdf import StoreError
    from memory_rdf._inspect import inspect_agent, inspect_stats

    opened: list[object] = []

    def flaky(store: object) -> dict[str, object]:
        opened.append(store)
        if len(opened) < 3:  # what RocksDB raises when the writer compacted a file away
            raise RuntimeError("Corruption: IO error: No such file or directory: 000042.sst")
        return inspect_stats(store)  # type: ignore[arg-type]

    assert inspect_agent("bot", store_dir, flaky)["nodes"] >= 1
    assert len(opened) == 3 and len({id(s) for s in opened}) == 3  # a new snapshot each time

    def broken(store: object) -> None:
        raise OSError("IO error: always")

    with pytest.raises(StoreError, match="always"):
        inspect_agent("bot", store_dir, broken, attempts=2)

    def bad_query(store: object) -> None:
        raise ValueError("not a store failure")

    calls = len(opened)
    with pytest.raises(ValueError):
        inspect_agent("bot", store_dir, bad_query)
    assert len(opened) == calls

WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from memory_rdf import MemoryManager

    data, stop = sys.argv[1], Path(sys.argv[2])
    with MemoryManager("live", data_dir=data) as mem:
        mem.remember([{"role": "user", "content": "启动：我们用 PostgreSQL"}])
        mem.wait_idle()
        print("ready", flush=True)
        deadline = time.monotonic() + 60
        i = 0
        while not stop.exists() and time.monotonic() < deadline:
            mem.remember([
                {"role": "user", "content": f"第 {i} 次讨论：PostgreSQL 和 Redis，预算 {i} 万元"},
                {"role": "assistant", "content": f"好的，第 {i} 条，JWT 有效期 2 小时"},
            ])
            i += 1
            mem.wait_idle()
            time.sleep(0.02)
        mem.wait_idle()
    print("done", i, flush=True)
    """
)


def start_writer(cwd: Path, data: Path, stop: Path) -> subprocess.Popen[str]:
    """:data:`WRITER` holding agent ``live`` of ``data`` until ``stop`` exists; returned once
    its first memory is stored."""
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(data), str(stop)], cwd=cwd, env=_env(),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, encoding="utf-8",
    )
    try:
        assert writer.stdout is not None
        assert writer.stdout.readline().strip() == "ready", writer.stderr
    except BaseException:
        writer.kill()
        writer.communicate()
        raise
    return writer


def test_inspection_works_while_another_process_holds_the_agent(tmp_path: Path) -> None:
    data = tmp_path / "data"
    stop = tmp_path / "stop"
    writer = start_writer(tmp_path, data, stop)
    try:
        counts = []
        for _ in range(4):
            stats = cli(tmp_path, "stats", "live", "--json", data_dir=data)
            assert stats.returncode == 0, stats.stderr
            counts.append(json.loads(stats.stdout)["nodes"])
            query = cli(tmp_path, "sparql", "live",
                        "SELECT (COUNT(?n) AS ?c) WHERE { ?n a memory:Node }",
                        "--format", "csv", data_dir=data)
            assert query.returncode == 0, query.stderr
            assert query.stdout.splitlines()[0].strip() == "c"
            assert writer.poll() is None  # still holding the agent
        assert counts[-1] >= counts[0] >= 1
        # recall reads a snapshot too (SPEC §6 v3)…
        recalled = cli(tmp_path, "recall", "live", "PostgreSQL", data_dir=data)
        assert recalled.returncode == 0 and "PostgreSQL" in recalled.stdout, recalled.stderr
        # …commands that need the agent read-write say it is held, in one line.
        held = cli(tmp_path, "compress", "live", data_dir=data)
        assert_one_line_error(held, 1)
        assert "held by another process" in held.stderr
        assert writer.poll() is None
    finally:
        stop.touch()
        try:
            _out, err = writer.communicate(timeout=30)  # also closes the pipes
        except subprocess.TimeoutExpired:  # pragma: no cover
            writer.kill()
            _out, err = writer.communicate()
    assert writer.returncode == 0, err
    # The writer released its lock: the agent works read-write again.
    after = cli(tmp_path, "recall", "live", "PostgreSQL", data_dir=data)
    assert after.returncode == 0, after.stderr
    assert "[记忆 " in after.stdout
