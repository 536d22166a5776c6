"""The benchmark suite runs end to end and every engine gives the identical recall text.

Not a timing test: the numbers are not looked at, only that the suite ran, wrote its results,
and that every engine that ran (the library through search and recall(), and each peer that
could run here) answered every query with exactly the same text.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import memory_rdf_command

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
    for key in ("compression_fast_model", "compression_builtin_model"):
        timing = size["metrics"][key]
        assert timing["scanned"] > 0 and timing["scans_per_cpu_s_excl_model"] > 0, timing
        # the whole process's CPU (the disk writer's and RocksDB's threads too) is at least
        # the scanning thread's
        thread_us = 1e6 / timing["scans_per_cpu_s_excl_model"]
        assert timing["process_cpu_us_per_scan"] == pytest.approx(
            thread_us + timing["others_cpu_us_per_scan"]), timing
        # the process's window holds the thread's: the other threads add, never take away
        assert timing["others_cpu_us_per_scan"] >= 0, timing
        assert timing["ceiling_per_s"] == pytest.approx(
            timing["cpus"] * 1e6 / timing["process_cpu_us_per_scan"]), timing
    assert "most scans/s" in json_path.with_suffix(".md").read_text(encoding="utf-8")
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
    ceilings = re.findall(r"process CPU ([\d,]+) µs a scan, model excluded \(([\d,]+) the "
                          r"compression thread, ([\d,]+) the others: disk writer, RocksDB\): "
                          r".* at most "
                          r"([\d,]+) scans/s on this machine's (\d+) CPUs", done.stdout)
    assert len(ceilings) == 2, done.stdout
    for cpu_us, thread_us, others_us, most, n in (
            [int(x.replace(",", "")) for x in found] for found in ceilings):
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
