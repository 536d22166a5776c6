"""The ``memory-rdf`` command line (SPEC §6), run as a real process like the installed script:
``python -m memory_rdf.cli …`` with a temporary working directory and ``--data-dir``."""

from __future__ import annotations

import gc
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
COMMANDS = ["demo", "remember", "recall", "sparql", "export", "stats", "validate", "compress"]
MESSAGES = [
    {"role": "user", "content": "今天开会定了用 PostgreSQL 存订单数据，不用 MySQL。"},
    {"role": "assistant", "content": "好的，PostgreSQL 的 JSONB 很适合商品快照。"},
    {"role": "user", "content": "登录方案用 JWT，access token 有效期 2 小时，由张伟负责。"},
]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.pop("MEMORY_RDF_DATA_DIR", None)
    env.pop("MEMORY_RDF_MODEL", None)
    env["PYTHONIOENCODING"] = "utf-8"
    return env


def cli(
    cwd: Path, *args: str, data_dir: Path | None = None, stdin: str | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "memory_rdf.cli", *args]
    if data_dir is not None:
        argv += ["--data-dir", str(data_dir)]
    return subprocess.run(
        argv, cwd=cwd, env=_env(), input=stdin, capture_output=True, text=True,
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
    assert "nodes now" in result.stdout
    return data


def _count_triples(work: Path, data: Path, agent: str) -> int:
    result = cli(work, "sparql", agent, "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }",
                 "--format", "json", data_dir=data)
    assert result.returncode == 0, result.stderr
    return int(json.loads(result.stdout)["results"]["bindings"][0]["n"]["value"])


# -- the main job --------------------------------------------------------------------------------


def test_demo_remembers_compresses_recalls(tmp_path: Path) -> None:
    data = tmp_path / "data"
    result = cli(tmp_path, "demo", data_dir=data)
    assert result.returncode == 0, result.stderr
    assert "[记忆]" in result.stdout
    assert "JWT" in result.stdout and "slice 1" in result.stdout and "nodes" in result.stdout
    # an early memory the focus-only walk misses and the keyword entry finds (SPEC §5.5)
    _, _, rest = result.stdout.partition('recall(["乌龙茶"], depth=1)')
    focus_only, _, by_keywords = rest.partition("entry='keywords'")
    assert "(nothing recalled)" in focus_only
    assert "乌龙茶" in by_keywords.split("Agent stats")[0]
    assert (data / "demo").is_dir()
    again = cli(tmp_path, "demo", "--slices", "1", data_dir=data)  # the agent exists: wiped
    assert again.returncode == 0, again.stderr
    assert "wiping" in again.stdout


# -- remember / recall ---------------------------------------------------------------------------


def test_remember_then_recall_finds_keyword(work: Path, store_dir: Path) -> None:
    result = cli(work, "recall", "bot", "PostgreSQL", data_dir=store_dir)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("[记忆]")
    assert "PostgreSQL" in result.stdout
    assert "╭" not in result.stdout  # plain text, no decoration


def test_remember_from_stdin_and_bad_input(tmp_path: Path) -> None:
    data = tmp_path / "data"
    ok = cli(tmp_path, "remember", "piped", "-", data_dir=data,
             stdin=json.dumps([{"role": "user", "content": "我们用 Kafka 做消息队列"}]))
    assert ok.returncode == 0, ok.stderr
    assert "1 nodes" in ok.stdout
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

    query_file = work / "nodes.rq"
    query_file.write_text(query, encoding="utf-8")
    table = cli(work, "sparql", "bot", f"@{query_file}", data_dir=store_dir)
    assert table.returncode == 0, table.stderr
    assert "node:" in table.stdout and "phrase" in table.stdout


def test_sparql_refuses_updates_and_reports_bad_queries(work: Path, store_dir: Path) -> None:
    before = _count_triples(work, store_dir, "bot")
    update = cli(work, "sparql", "bot", "INSERT DATA { <urn:a> <urn:b> <urn:c> }",
                 data_dir=store_dir)
    assert_one_line_error(update, 1)
    assert "refused" in update.stderr
    bad = cli(work, "sparql", "bot", "SELEC * WHERE {", "--format", "json", data_dir=store_dir)
    assert_one_line_error(bad, 1)
    assert _count_triples(work, store_dir, "bot") == before


# -- stats / export / validate -------------------------------------------------------------------


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


def test_inspection_works_while_another_process_holds_the_agent(tmp_path: Path) -> None:
    data = tmp_path / "data"
    stop = tmp_path / "stop"
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(data), str(stop)], cwd=tmp_path, env=_env(),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, encoding="utf-8",
    )
    try:
        assert writer.stdout is not None
        assert writer.stdout.readline().strip() == "ready", writer.stderr
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
        # Commands that need the agent read-write say it is held, in one line.
        held = cli(tmp_path, "recall", "live", "PostgreSQL", data_dir=data)
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
    assert "[记忆]" in after.stdout


def test_installed_entry_point(tmp_path: Path) -> None:
    """The `memory-rdf` console script (installed by `pip install .`) runs the same CLI."""
    exe = shutil.which("memory-rdf") or str(Path(sys.executable).parent / "memory-rdf")
    if not Path(exe).exists():
        pytest.skip("memory-rdf is not installed in this environment (pip install .)")
    data = tmp_path / "data"
    env = {**_env(), "MEMORY_RDF_DATA_DIR": str(data)}
    done = subprocess.run([exe, "demo", "--slices", "1"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, encoding="utf-8", timeout=120)
    assert done.returncode == 0, done.stderr
    assert "[记忆]" in done.stdout
    stats = subprocess.run([exe, "stats", "demo", "--json"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, encoding="utf-8", timeout=60)
    assert stats.returncode == 0 and json.loads(stats.stdout)["nodes"] > 0
    missing = subprocess.run([exe, "stats", "nobody"], cwd=tmp_path, env=env,
                             capture_output=True, text=True, encoding="utf-8", timeout=60)
    assert missing.returncode == 2 and "nobody" in missing.stderr
    assert "Traceback" not in missing.stderr and not (data / "nobody").exists()
