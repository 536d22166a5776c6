"""Inspection beside a live writer reads a private copy of the store (SPEC §6, §7).

pyoxigraph calls a read-only open of a directory another process is writing undefined, and
it was: with the writer below flushing, about one read-only open in six made a query loop for
ever, holding a core and growing by ~400 MB/s (CI: `memory-rdf recall` hung for 60 s).
"""

from __future__ import annotations

import gc
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from memory_rdf import MemoryManager, inspect
from memory_rdf._inspect import open_for_inspection
from memory_rdf._oxigraph import AgentStore
from memory_rdf._oxigraph.snapshot import copy_store_files
from tests.helpers import FAST, ScriptedModel
from tests.test_cli import _env, start_writer

REPO = Path(__file__).resolve().parents[1]

READER = textwrap.dedent(
    """
    import resource, sys, tempfile
    from pathlib import Path
    resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, resource.RLIM_INFINITY))
    from memory_rdf import inspect
    data = sys.argv[1]
    for i in range(int(sys.argv[2])):
        stats = inspect.stats("live", data)
        assert stats["nodes"] >= 1 and stats["store_path"] == str((Path(data) / "live").resolve())
        assert "PostgreSQL" in inspect.recall("live", ["PostgreSQL"], data)
    left = [p for p in Path(tempfile.gettempdir()).glob("memory-rdf-snapshot-*")]
    print("ok", len(left), flush=True)
    """
)


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS bounds memory on Linux")
def test_forty_inspections_beside_a_flushing_writer_all_answer(tmp_path: Path) -> None:
    # Before: a read-only open of the live directory; with 40 opens the loop above met the
    # endless query nearly every run (measured 2 of 12 single opens), and the reader ran into
    # its 3 GB cap or the timeout.
    data, stop, scratch = tmp_path / "data", tmp_path / "stop", tmp_path / "tmp"
    scratch.mkdir()
    writer = start_writer(tmp_path, data, stop)
    try:
        reader = subprocess.run(
            [sys.executable, "-c", READER, str(data), "40"], cwd=REPO, capture_output=True,
            text=True, encoding="utf-8", timeout=240, env=_env(TMPDIR=str(scratch)),
        )
        assert writer.poll() is None  # the writer held the agent throughout
    finally:
        stop.touch()
        writer.communicate(timeout=60)
    assert reader.returncode == 0, reader.stderr[-2000:]
    assert reader.stdout.split() == ["ok", "0"]  # every snapshot deleted after its use
    assert list(scratch.iterdir()) == []


def _snapshots(scratch: Path) -> list[Path]:
    return sorted(scratch.glob("memory-rdf-snapshot-*"))


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary directory of the test's own, where the read-only stores put their copies."""
    import tempfile

    path = tmp_path / "scratch"
    path.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(path))
    return path


#: The memory of :func:`agent`'s agent.
MEMORY = "PostgreSQL 存订单"


@pytest.fixture
def agent(tmp_path: Path) -> Path:
    """A data directory whose agent "a" has one memory (:data:`MEMORY`), closed."""
    data = tmp_path / "data"
    with MemoryManager("a", data_dir=data, config=FAST, model=ScriptedModel()) as mem:
        mem.remember([{"role": "user", "content": MEMORY}])
        assert mem.wait_idle(30)
    return data


def test_a_read_only_store_reads_a_private_copy_deleted_at_close(
    agent: Path, scratch: Path
) -> None:
    with MemoryManager("a", data_dir=agent, config=FAST, model=ScriptedModel()) as mem:
        store = AgentStore(agent / "a", read_only=True)
        try:
            # the store names the agent's own directory; it reads its copy
            assert store.path == agent / "a" and store.snapshot is not None
            copy = store.snapshot.path
            assert copy != store.path and copy.name == "a" and _snapshots(scratch) == [copy.parent]
            assert store.scalar("SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }") > 0
            if Path("/proc/self/fd").is_dir():  # the snapshot's reads go to the copy
                opened = {os.path.realpath(f"/proc/self/fd/{fd}")
                          for fd in os.listdir("/proc/self/fd")}
                assert any(p.startswith(str(copy.resolve())) for p in opened)
        finally:
            store.close()
        assert not copy.exists() and _snapshots(scratch) == []
        # The agent keeps working on its own directory meanwhile.
        mem.remember([{"role": "user", "content": "Redis 做缓存"}])
        assert mem.wait_idle(30)
        assert inspect.stats("a", agent)["nodes"] == 2
        assert _snapshots(scratch) == []


def test_an_abandoned_read_only_store_leaves_no_copy_after_gc(
    agent: Path, scratch: Path
) -> None:
    # Before: the copy was deleted by close_snapshot() only (or by a finalizer an rdflib graph
    # had to be given by hand): a read-only store dropped without close() left it behind.
    stores = [AgentStore(agent / "a", read_only=True), open_for_inspection("a", agent)]
    assert all(s.scalar("SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }") > 0 for s in stores)
    assert len(_snapshots(scratch)) == 2
    del stores
    gc.collect()
    assert _snapshots(scratch) == []


def test_an_rdflib_graph_out_of_scope_leaves_no_copy_after_gc(
    agent: Path, scratch: Path
) -> None:
    pytest.importorskip("oxrdflib")

    def phrases() -> list[str]:
        graph = inspect.open_rdflib_graph("a", agent)
        assert len(_snapshots(scratch)) == 1  # the graph reads its snapshot's copy
        return [str(row[0]) for row in graph.query("SELECT ?c WHERE { ?n memory:content ?c }")]

    assert phrases() == [MEMORY]
    gc.collect()
    assert _snapshots(scratch) == []


def test_a_copy_left_by_a_process_exiting_without_close_is_deleted(
    agent: Path, tmp_path: Path
) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    code = ("import sys; from pathlib import Path; from memory_rdf._oxigraph import AgentStore\n"
            "KEPT = AgentStore(Path(sys.argv[1]), read_only=True)\n"
            "print(len(list(Path(sys.argv[2]).iterdir())), flush=True)\n")
    done = subprocess.run(
        [sys.executable, "-c", code, str(agent / "a"), str(scratch)], cwd=REPO,
        capture_output=True, text=True, timeout=120, env=_env(TMPDIR=str(scratch)),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["1"]  # the copy existed while the store was open
    assert list(scratch.iterdir()) == []


def test_a_copy_taken_while_the_writer_changes_its_files_is_taken_again(
    agent: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A flush between reading the manifest and copying the files (simulated: a record
    # appended to the manifest right after the directory is listed): the first copy is
    # dropped, and the second holds the manifest as it is now.
    live = agent / "a"
    manifest = live / (live / "CURRENT").read_text().strip()
    original = manifest.read_bytes()
    listed = []
    real_listdir = os.listdir

    def listdir(path: str) -> list[str]:
        names = real_listdir(path)
        if Path(path) == live and not listed:
            listed.append(path)
            manifest.write_bytes(original + b"\0")
        return names

    monkeypatch.setattr(os, "listdir", listdir)
    copy = copy_store_files(live)
    monkeypatch.undo()
    try:
        assert listed and (copy / manifest.name).read_bytes() == original + b"\0"
    finally:
        shutil.rmtree(copy.parent)


def test_a_cli_query_stopped_at_its_timeout_leaves_no_copy(
    agent: Path, tmp_path: Path
) -> None:
    # Before: `memory-rdf sparql` left at its --timeout (or Ctrl-C) with the query thread
    # still inside the engine, and the copy that thread read stayed in the temporary
    # directory; now the store's finalizer deletes it as the process exits.
    from tests.helpers import memory_rdf_command
    from tests.test_hostile import COUNT

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    result = subprocess.run(
        [memory_rdf_command(), "sparql", "a", COUNT, "--timeout", "1",
         "--data-dir", str(agent)], capture_output=True, text=True, encoding="utf-8",
        timeout=120, env=_env(TMPDIR=str(scratch)),
    )
    assert result.returncode == 1 and "ran longer than --timeout 1 s" in result.stderr, result
    assert list(scratch.iterdir()) == []
