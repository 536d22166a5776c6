"""The benchmark suite runs end to end and every engine gives the identical recall text.

Not a timing test: the numbers are not looked at, only that the suite ran, wrote its results,
and that every engine that ran (the library through search and recall(), and each peer that
could run here) answered every query with exactly the same text.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_rdf import Config, MemoryManager

from helpers import ScriptedModel, memory_rdf_command

ROOT = Path(__file__).resolve().parent.parent


def test_the_fast_loader_builds_what_remember_builds(tmp_path: Path) -> None:
    from benchmarks._workload import check_against_remember

    shape = check_against_remember(tmp_path, 60)
    assert shape["nodes"] == 60 and shape["focus"] == 5


@pytest.mark.slow
def test_quick_suite_runs_and_every_engine_answers_identically(tmp_path: Path) -> None:
    """``memory-rdf bench --quick`` (the installed command, run in the checkout), on a smaller
    store and with shorter budgets than the default so the test takes under a minute."""
    out = tmp_path / "results"
    done = subprocess.run(
        [memory_rdf_command(), "bench", "--quick", "--sizes", "2000", "--out", str(out),
         "--work", str(tmp_path / "work"), "--repeat", "3", "--budget", "0.05",
         "--remembers", "10", "--slices", "1", "--check-nodes", "50", "--no-plot"],
        cwd=ROOT, capture_output=True, text=True, timeout=180,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (json_path,) = out.glob("bench-*.json")
    assert json_path.with_suffix(".md").is_file()
    result = json.loads(json_path.read_text(encoding="utf-8"))
    assert result["mismatches"] == []
    assert result["workload_check"]["status"] == "identical"
    (size,) = result["sizes"]
    ran = [name for name, e in size["engines"].items() if e["status"] == "ok"]
    assert {"oxigraph search", "oxigraph recall()", "python dict", "networkx",
            "rdflib (same SPARQL)", "sqlite (CTE+FTS5)"} <= set(ran)
    for name, engine in size["engines"].items():
        assert engine["status"] in ("ok", "skipped"), (name, engine)
    assert len(size["recall"]) == 8
    for row in size["recall"]:
        assert row["identical"], row
        assert set(row["engines"]) == set(ran), (row["query"], row["depth"])
        assert all(e["identical"] for e in row["engines"].values())
    assert any(row["entries"] > 0 for row in size["recall"])
    # entry="both" (SPEC §5.5): the library, with its term index and with the SPARQL entry,
    # and the SQLite peer, for every query with keywords at both depths
    assert len(size["recall_both"]) == 6
    for row in size["recall_both"]:
        assert row["identical"], row
        assert set(row["engines"]) == {"recall() both", "recall() both, SPARQL entry",
                                       "sqlite (CTE+FTS5)"}
    for key in ("compression_fast_model", "compression_builtin_model"):
        timing = size["metrics"][key]
        if timing.get("not_measurable"):  # a machine too loaded for CPU minus model time
            continue
        assert timing["scanned"] > 0 and timing["scans_per_cpu_s_excl_model"] > 0, timing
        # the whole process's CPU (the store owner's and RocksDB's threads too) is at least
        # the scanning thread's
        thread_us = 1e6 / timing["scans_per_cpu_s_excl_model"]
        assert timing["process_cpu_us_per_scan"] == pytest.approx(
            thread_us + timing["others_cpu_us_per_scan"]), timing
        # the process's window holds the thread's: the other threads add, never take away
        assert timing["others_cpu_us_per_scan"] >= 0, timing
        assert timing["ceiling_per_s"] == pytest.approx(
            timing["cpus"] * 1e6 / timing["process_cpu_us_per_scan"]), timing
    assert "most scans/s" in json_path.with_suffix(".md").read_text(encoding="utf-8")
    # the fresh process's RSS row: jieba's dictionary (loaded by the Chinese keyword rows,
    # once a process) measured on its own, apart from what the store costs (issue 38)
    fresh = size["metrics"]["rss_fresh_process"]
    assert fresh["status"] == "ok" and fresh["segmenter"] > 10 * 2**20, fresh
    assert "Chinese word segmenter" in json_path.with_suffix(".md").read_text(encoding="utf-8")
    # the generated store left nothing behind
    assert not any((tmp_path / "work").iterdir())


@pytest.mark.slow
def test_compression_throughput_times_only_scans_that_compress(tmp_path: Path) -> None:
    """The script's figure is the worst case, every timed scan compressing its node: at 10k
    nodes its default slices stay among the workload's aged nodes, and each model scans its
    own fresh copy of the store (taking turns on one store, the second model's timed scans
    went past the aged nodes)."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "compression_throughput.py"),
         "--sizes", "10000", "--read-mirror", "on"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = [line for line in done.stdout.splitlines() if line.lstrip().startswith("scans/s")]
    assert [line.split()[1] for line in lines] == ["FastModel", "built-in"], lines
    for line in lines:
        found = re.search(r"\((\d+) scans, (\d+) model calls\)", line)
        assert found is not None, line
        assert found[1] == found[2] == "600", line
    costs = [line for line in done.stdout.splitlines() if "process CPU" in line]
    assert len(costs) == 2, done.stdout
    for line in costs:
        found = re.search(r"process CPU ([\d,]+) µs a scan, model excluded \(([\d,]+) the "
                          r"compression thread, ([\d,]+) the others: store owner, RocksDB\): "
                          r".* at most ([\d,]+) scans/s on this machine's (\d+) CPUs", line)
        if found is None:
            # a machine too loaded: the model's wall-clock time passed the thread's CPU time,
            # and the figures that subtract it say so instead of a number
            assert "not measurable" in line, line
            assert re.search(r"not measurable: model time \(.*\) exceeded the (compression "
                             r"thread's|process's) CPU time", done.stdout), done.stdout
            continue
        cpu_us, thread_us, others_us, most, n = (int(x.replace(",", "")) for x in found.groups())
        assert abs(cpu_us - thread_us - others_us) <= 2  # rounded parts of one whole
        assert most == pytest.approx(n * 1e6 / cpu_us, rel=0.01)
    assert "next batch (index)" in done.stdout


def test_bench_outside_a_checkout_says_where_the_benchmarks_are(tmp_path: Path) -> None:
    """Installed from a wheel and run elsewhere, the command explains instead of crashing."""
    probe = (
        "import sys, pathlib\n"
        "import memory_rdf.cli as cli\n"
        "cli.__file__ = str(pathlib.Path(sys.argv[1]) / 'site' / 'memory_rdf' / 'cli.py')\n"
        "sys.exit(cli.run(['bench', '--quick']))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe, str(tmp_path)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "source checkout" in done.stderr and "python -m benchmarks" in done.stderr
    assert not list(tmp_path.iterdir())  # nothing created


def test_bench_help_lists_the_suite_options() -> None:
    done = subprocess.run([memory_rdf_command(), "bench", "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: memory-rdf bench")
    for option in ("--quick", "--full", "--sizes", "--out", "--skip"):
        assert option in done.stdout


# -- a run never lost to one measurement (issue 38) -------------------------------------------

#: The smallest suite run worth the name: a 200-node store, no peer but the python dict (the
#: reference), the shortest budgets; ~10 s.
TINY = ["--sizes", "200", "--repeat", "3", "--budget", "0.01", "--remembers", "2",
        "--slices", "1", "--check-nodes", "0", "--no-plot",
        "--skip", "levelgraph,rdflib,networkx,sqlite"]


def test_a_measurement_failing_mid_run_leaves_every_other_row(tmp_path: Path) -> None:
    """``remember`` fails (``--fail-measure``, the suite's own seam: the measurement raises
    inside the suite's loop). Before it: store, opens, peers, recall, importance, next batch;
    after it: disk, reopen, both compression models. All stay in the JSON and the Markdown,
    the error has its own row, and the exit code says a measurement failed."""
    out = tmp_path / "results"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", *TINY, "--out", str(out),
         "--work", str(tmp_path / "work"), "--fail-measure", "remember"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert "remember (memory_rdf) FAILED, the run goes on" in " ".join(done.stderr.split())
    (json_path,) = out.glob("bench-*.json")
    result = json.loads(json_path.read_text(encoding="utf-8"))
    assert result["mismatches"] == []
    (error,) = result["errors"]
    assert error["nodes"] == 200 and error["measure"] == "remember"
    assert error["engine"] == "memory_rdf" and error["type"] == "InjectedFailure"
    assert "--fail-measure remember" in error["message"] and error["traceback"]
    (size,) = result["sizes"]
    assert size.get("status") is None and size["nodes"] > 0
    metrics = size["metrics"]
    assert metrics["remember"] == {"status": "error", "engine": "memory_rdf",
                                   "type": "InjectedFailure", "message": error["message"]}
    # the rows taken before the failure
    assert len(size["recall"]) == 8 and all(row["identical"] for row in size["recall"])
    assert metrics["importance"]["oxigraph"]["p50_ms"] > 0
    assert metrics["next_batch"]["oxigraph"]["p50_ms"] > 0
    assert metrics["open"]["initialize"]["p50_ms"] > 0
    # and after it
    for key in ("disk_after_writes", "disk_after_optimize", "disk_after_reopen"):
        assert metrics[key]["bytes"] > 0, key
    for key in ("compression_fast_model", "compression_builtin_model"):
        assert metrics[key]["scanned"] > 0, key
    md = json_path.with_suffix(".md").read_text(encoding="utf-8")
    assert ("| remember (memory_rdf) | **error**: InjectedFailure: made to fail with "
            "--fail-measure remember |") in md
    assert "## Errors" in md and "200 nodes, remember (memory_rdf): InjectedFailure" in md
    for row in ("| importance p50 |", "| next_batch(100) p50 |", "disk/node after optimize()",
                "compression scans/s, built-in model"):
        assert row in md, row
    assert "| remember, model time excluded |" not in md
    assert not any((tmp_path / "work").iterdir())


def test_fail_measure_names_a_known_measurement(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", *TINY, "--out", str(tmp_path / "r"),
         "--work", str(tmp_path / "w"), "--fail-measure", "remembr"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 2
    assert "unknown measurement remembr" in done.stderr and "remember" in done.stderr
    assert not (tmp_path / "r").exists() and not (tmp_path / "w").exists()


def test_disk_usage_skips_files_that_vanish_while_measured(tmp_path: Path) -> None:
    """RocksDB removes table files as it compacts: a file listed and gone before its size is
    read (FileNotFoundError, which once lost a whole 100k section) is skipped and counted, and
    so is a directory gone before it is listed."""
    from benchmarks.suite import disk_usage

    store = tmp_path / "store"
    (store / "sub").mkdir(parents=True)
    (store / "kept.sst").write_bytes(b"s" * 100)
    (store / "000001.log").write_bytes(b"w" * 10)
    (store / "OPTIONS").write_bytes(b"o" * 5)
    (store / "compacted.sst").write_bytes(b"x" * 1000)
    (store / "sub" / "gone.sst").write_bytes(b"y" * 2000)

    def walk(path: Path) -> Iterator[tuple[str, list[str], list[str]]]:
        for root, dirs, files in os.walk(path):
            if Path(root) == store:
                # listed, then removed before disk_usage reads their sizes
                (store / "compacted.sst").unlink()
                shutil.rmtree(store / "sub")
            yield root, dirs, files

    usage = disk_usage(store, 10, walk=walk)
    assert usage["bytes"] == 115 and usage["sst_bytes"] == 100 and usage["wal_bytes"] == 10
    assert usage["vanished_files"] == 1 and usage["per_node"] == 11.5
    assert disk_usage(store, 10)["vanished_files"] == 0  # os.walk itself


def test_no_ratio_from_model_time_above_cpu_time(tmp_path: Path) -> None:
    """A model whose calls take wall-clock time off the CPU (here it sleeps: on a loaded
    machine the thread is descheduled) makes "thread CPU minus model time" negative. That
    figure was clamped to 1e-9 s and printed as 6e+11 scans/s, ×3e+08 FastModel; now the
    JSON holds null and the reason, and the Markdown says "not measurable" and why."""
    from benchmarks._common import time_compression
    from benchmarks._workload import generate
    from benchmarks.suite import compression_figures, environment, markdown

    generate(tmp_path / "agent", 200, decay=120, progress=False)
    model = ScriptedModel(compress_delay=0.02)
    with MemoryManager("agent", data_dir=tmp_path, model=model,
                       config=Config(auto_compress=False, read_mirror=False)) as mem:
        timing = time_compression(mem, 1, warmup=0)[""]
    assert timing.model_calls > 0 and timing.model_s > timing.cpu_s, timing
    assert timing.per_cpu_s_excl_model is None and timing.thread_cpu_us_per_scan is None
    figures = compression_figures(timing)
    assert figures["scans_per_cpu_s_excl_model"] is None
    assert "exceeded the compression thread's CPU time" in (
        figures["not_measurable"]["scans_per_cpu_s_excl_model"])
    assert figures["scans_per_s"] > 0  # wall-clock time, model included: measurable
    figures = json.loads(json.dumps(figures))  # as the results file holds them
    size = {"nodes": 200, "links": 0, "dangling_links": 0, "engines": {}, "recall": [],
            "metrics": {"compression_fast_model": figures,
                        "compression_builtin_model": figures}}
    md = markdown({"date": "now", "command": "test", "environment": environment(),
                   "sizes": [size], "errors": [], "mismatches": [], "skipped": []})
    (row,) = [line for line in md.splitlines()
              if line.startswith("| compression scans per CPU second of its thread")]
    assert row.count("not measurable (model time") == 2, row
    assert "exceeded the compression thread's CPU time" in row and "×" not in row
    assert not re.search(r"\de\+(0[6-9]|[1-9]\d)", md), md  # no 6e+11 scans/s


def test_the_sqlite_peer_answers_both_from_the_library_s_keyword_seeds(tmp_path: Path) -> None:
    """The SQLite peer's keyword entry (BM25 in SQL over a term table) seeds the walk with the
    nodes and strengths the library's does, and its ``entry="both"`` answer holds the entries
    of the library's (which ranks them: compared as multisets)."""
    from benchmarks._common import FastModel
    from benchmarks._workload import generate
    from benchmarks.peers import Query, Snapshot
    from benchmarks.peers.sqlite_peer import SqlitePeer
    from benchmarks.suite import _same_ranked
    from memory_rdf import Templates

    from _graph import KeywordEntry

    generate(tmp_path / "agent", 600, decay=120, forgotten=0.05)
    config = Config(auto_compress=False,
                    templates=Templates(memory="[记忆] {content}", language="zh"))
    with MemoryManager("agent", data_dir=tmp_path, config=config, model=FastModel()) as mem:
        snapshot = Snapshot.read(mem.store, config.link_break_threshold,  # type: ignore[arg-type]
                                 config.templates)
        peer = SqlitePeer()
        peer.load(snapshot, mem.store, tmp_path)  # type: ignore[arg-type]
        entry = KeywordEntry(mem)
        try:
            asked = 0
            for keywords in (["login"], ["登录", "数据库"], ["login", "支付"], ["deploy"]):
                library = entry.seeds(keywords, 10)
                seeds = peer.keyword_seeds(keywords, 10)
                assert [n for n, _ in seeds] == [s.node for s in library], keywords
                assert [w for _, w in seeds] == pytest.approx([s.strength for s in library])
                asked += bool(seeds)
                for depth in (2, 4):
                    query = Query("q", tuple(keywords), None, depth, config.max_search_results)
                    text = mem.recall(keywords, depth=depth, max_chars=0, entry="both")
                    assert _same_ranked(peer.recall_both(query), text, query.limit, config)
            assert asked >= 3
        finally:
            peer.close()


def test_keyword_entry_cost_counts_the_dated_entries_it_recalls(tmp_path: Path) -> None:
    """benchmarks/keyword_entry_cost.py at a tiny size: its "results f/k" column counts the
    entries that came back (entries are dated, ``[memory 2026-01-01] …``), so a frequent word
    finds some by both entries; it read 0/0 for every query when it looked for ``[记忆]``."""
    done = subprocess.run(
        [sys.executable, "benchmarks/keyword_entry_cost.py", "--sizes", "300", "--repeat", "1",
         "--dir", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = [line for line in done.stdout.splitlines() if re.search(r"\d+/\d+\s*$", line)]
    assert len(rows) == 12, done.stdout  # 6 queries × depth 2 and 4
    results = [tuple(int(n) for n in row.split()[-1].split("/")) for row in rows]
    assert all(f > 0 and k > 0 for f, k in results[2:]), done.stdout  # a frequent word
    assert results[0][1] == results[1][1] == 0, done.stdout  # no note 4242 among 300 nodes
