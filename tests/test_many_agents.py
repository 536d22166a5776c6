"""Many agents in one process: RocksDB keeps every file of an open store open (~20 for a new
agent), so a process serving agents under a common limit of 1,024 open files failed with "Too
many open files" from about the 50th. Idle agents' stores are now parked (RocksDB's files
closed, the agent's lock kept) as the limit nears, and opened again at their next use."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from memory_rdf import StoreError, StoreLockedError

from helpers import (
    HEAVY_COUNT,
    fill_for_a_heavy_count,
    open_once_released,
    read_in_another_thread,
)

REPO = Path(__file__).resolve().parent.parent

# Sixty agents under a limit of 256 open files (twelve open stores' worth): each remembers,
# recalls, then four threads remember and query across all of them at once; every memory is
# there when the agents are opened again.
_MANY = r"""
import os, resource, sys, threading
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
from memory_rdf import MemorySystem

data, n = sys.argv[1], 60
with MemorySystem(data_dir=data) as system:
    for i in range(n):
        system.agent(f"a{i}").remember([{"role": "user", "content": f"agent {i} keeps {i * 7}"}])
    for i in range(n):
        mem = system.agent(f"a{i}")
        assert mem.wait_idle(120)
        assert f"agent {i} keeps {i * 7}" in mem.recall([str(i * 7)], entry="both"), i
    parked = sum(system.agent(f"a{i}")._store.parked for i in range(n))
    errors = []

    def work(first):
        try:
            for i in range(first, n, 4):
                mem = system.agent(f"a{i}")
                mem.remember([{"role": "user", "content": f"second fact {i}"}])
                assert mem.sparql("ASK { ?n a memory:Node }")
                assert mem.stats()["nodes"] >= 1
        except Exception as exc:
            errors.append(repr(exc))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for i in range(n):
        assert system.agent(f"a{i}").wait_idle(120)
with MemorySystem(data_dir=data) as system:
    for i in range(n):
        texts = " | ".join(m["content"] for m in system.agent(f"a{i}").memories(limit=None))
        assert f"agent {i} keeps {i * 7}" in texts and f"second fact {i}" in texts, (i, texts)
print("parked", parked)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_NOFILE is POSIX")
def test_sixty_agents_under_a_limit_of_256_open_files(tmp_path: Path) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    run = subprocess.run([sys.executable, "-c", _MANY, str(tmp_path / "data")], env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    parked = int(run.stdout.split("parked")[-1])
    assert parked >= 30, run.stdout  # most of the sixty were parked, and came back


def test_a_parked_store_keeps_its_lock_and_opens_again_at_its_next_use(tmp_path: Path) -> None:
    from memory_rdf import _vocab as V
    from memory_rdf._oxigraph import AgentStore, WriteBatch, lit, node_ref, triple

    path = tmp_path / "data" / "agent"
    store = AgentStore(path, mirror=True)
    assert store.wait_mirror(60)
    batch = WriteBatch()
    batch.insert([triple(node_ref("n1"), V.CONTENT, lit("before the park"))])
    store.commit(batch)
    assert store.park() and store.parked and store.mirror_state == "off"
    assert not store.park()  # already parked
    with pytest.raises(StoreLockedError):  # the agent stays held while parked
        AgentStore(tmp_path / "data" / ".." / "data" / "agent")
    # a read opens it again (from disk while the mirror builds anew)
    assert store.rows("SELECT ?c WHERE { ?n memory:content ?c }") == [("before the park",)]
    assert not store.parked
    assert store.wait_mirror(60) and store.park()  # (not while the build reads the store)
    batch = WriteBatch()  # a write opens it again too
    batch.insert([triple(node_ref("n2"), V.CONTENT, lit("after the park"))])
    store.commit(batch)
    assert store.wait_mirror(60)
    assert sorted(store.rows("SELECT ?c WHERE { ?n memory:content ?c }")) == [
        ("after the park",), ("before the park",)]
    assert store.park()
    store.close()  # closing a parked store releases the agent
    assert not store.park()
    with pytest.raises(StoreError, match="closed"):
        store.rows("SELECT * WHERE { ?s ?p ?o }")
    again = AgentStore(tmp_path / "data" / ".." / "data" / "agent", mirror=False)
    assert len(again.rows("SELECT ?c WHERE { ?n memory:content ?c }")) == 2
    again.close()


def test_a_store_in_use_is_not_parked(tmp_path: Path) -> None:
    """A read in another thread holds the store: park() refuses instead of waiting."""
    from memory_rdf._oxigraph import AgentStore

    store = AgentStore(tmp_path / "agent", mirror=False)
    answer = fill_for_a_heavy_count(store)
    reader, answers = read_in_another_thread(store, lambda: store.user_query(HEAVY_COUNT))
    assert not store.park() and not store.parked
    reader.join(timeout=600)
    assert answers == [answer]
    assert store.park()
    store.close()


def test_the_limit_of_open_files_is_said_plainly() -> None:
    from memory_rdf._oxigraph.errors import _store_message

    said = _store_message("cannot open the memory store d/a",
                          OSError(errno.EMFILE, "Too many open files"))
    assert said.startswith("cannot open the memory store d/a: Too many open files; this "
                           "process is at its limit of open files")
    assert "ulimit -n" in said


def test_a_purge_of_a_parked_agent(tmp_path: Path) -> None:
    """A purge (a rewrite of the store) opens a parked store first and builds one mirror
    after it, as for a store that was never parked; what it erased is in no file."""
    from memory_rdf import MemoryManager

    from helpers import FAST, ScriptedModel, remember

    with MemoryManager("agent", data_dir=tmp_path, config=FAST.replace(read_mirror=True),
                       model=ScriptedModel()) as mem:
        remember(mem, "we chose PostgreSQL | the vault code is Wallaby")
        store = mem.store
        assert store.wait_mirror(60) and store.park()
        ids = {m["content"]: m["id"] for m in mem.memories(limit=None)}
        assert store.wait_mirror(60) and store.park()
        assert mem.forget([ids["the vault code is Wallaby"]], purge=True) == 1
        assert store.wait_mirror(60) and store.park()
        store.rewrite()  # straight on a parked store (a forget commits first, which opens it)
        assert store.wait_mirror(60) and store.mirror_state == "on"
        assert mem.recall(["PostgreSQL"], entry="both").count("PostgreSQL") == 1
        mirrors = [t for t in threading.enumerate() if t.name == "memory-rdf-mirror"]
        assert all(not t.is_alive() for t in mirrors)
    leaked = [p for p in (tmp_path / "agent").rglob("*") if p.is_file()
              and b"Wallaby" in p.read_bytes()]
    assert leaked == []


def park_from_another_thread(store: Any) -> bool:
    """``store.park()`` called by a thread that is not the one holding the owner's turn (as
    ``_OpenStores.make_room`` calls it for another store); it must answer without waiting."""
    answers: list[bool] = []
    parker = threading.Thread(target=lambda: answers.append(store.park()), daemon=True)
    parker.start()
    parker.join(30)
    assert not parker.is_alive(), "park() waited"
    return answers[0]


def test_a_park_as_the_mirror_build_ends_does_not_wait_forever(tmp_path: Path) -> None:
    """A park came as the read mirror's build ended: it held the write lock while it joined
    the build thread, which takes that lock one last time after its state says "on": both
    waited forever. Now a store is parkable only once its build has ended, and a park is the
    owner's message, refused without waiting while the owner is busy. Here the owner is held
    (its turn taken) while a renewal's build waits for it."""
    from memory_rdf._oxigraph import AgentStore

    store = AgentStore(tmp_path / "agent", mirror=True)
    assert store.wait_mirror(60)
    with store.turn():  # no commit, park or build step runs until the block ends
        assert store._mirror is not None
        store._mirror.renew()  # what a commit does once enough text was applied to the copy
        assert not store.parkable  # the renewal's build waits for the owner's turn
        assert not park_from_another_thread(store)
        assert store.mirror_state == "loading"
    assert store.wait_mirror(60) and store.mirror_state == "on"
    assert park_from_another_thread(store) and store.parked
    store.close()


def _probe_closed(path: Path) -> None:
    """RocksDB has let go of the store at ``path`` (it refuses a second open of the same path
    in one process while the first instance lives)."""
    import pyoxigraph as ox

    probe = ox.Store(str(path))
    del probe


def _commit(store: Any, node: str, text: str) -> None:
    from memory_rdf import _vocab as V
    from memory_rdf._oxigraph import WriteBatch, lit, node_ref, triple

    batch = WriteBatch()
    batch.insert([triple(node_ref(node), V.CONTENT, lit(text))])
    store.commit(batch)


@pytest.mark.parametrize("upkeep", ["compaction", "flush"])
def test_upkeep_asked_for_as_the_store_is_parked_does_not_keep_it_open(
        tmp_path: Path, upkeep: str) -> None:
    """A background compaction (the scheduler's on-idle hook) or flush (a commit past
    FLUSH_AFTER_BYTES) that began while the store was being parked had it in hand (its thread
    from its start; a flusher's closure after it cleared the flag a park checks): RocksDB
    stayed open while parked, and the next use could not open it again (StoreLockedError).
    Both are now the owner's messages, as a park is: queued, they refuse a park (without
    waiting), run, and a park after them closes the store for good; asked for once it is
    parked, there is nothing to do."""
    from memory_rdf._oxigraph import AgentStore

    store = AgentStore(tmp_path / "agent", mirror=False)
    store.OPTIMIZE_AFTER_COMMITS = 1  # type: ignore[misc]
    if upkeep == "flush":
        store.FLUSH_AFTER_BYTES = 1  # type: ignore[misc]
    with store.turn():  # the owner held: what is asked for now waits, in order
        _commit(store, "n1", "kept")  # (in this turn: the commit runs here)
        if upkeep == "compaction":
            assert store.maybe_optimize_in_background()
        else:
            assert store.auto_flushes == 1
        assert not store.owner.idle  # the upkeep waits for the owner
        assert not park_from_another_thread(store) and not store.parked
    store.wait_flush()  # the upkeep ran
    assert store.owner.idle
    assert park_from_another_thread(store) and store.parked
    assert not store.maybe_optimize_in_background()  # parked: nothing written since
    _probe_closed(store.path)  # RocksDB let go of the files
    assert store.rows("SELECT ?c WHERE { ?n memory:content ?c }") == [("kept",)]
    store.close()


def test_a_replaced_mirror_build_still_running_keeps_the_agent_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A commit interrupted while the read mirror was being built starts a new build; the old
    one stops only at its next chunk, with the disk store in hand meanwhile. close() released
    the agent's lock beside it (a second instance could open under another spelling); now
    the old build holds the store (StoreUsers) and the lock goes once it has ended."""
    import memory_rdf._oxigraph.mirror as S
    from memory_rdf._oxigraph import AgentStore

    data = tmp_path / "data"
    store = AgentStore(data / "agent", mirror=True)
    assert store.wait_mirror(60)
    store.store.update('INSERT DATA { <urn:a> <urn:b> "c" }')
    reading, go = threading.Event(), threading.Event()

    def step(name: str) -> None:
        # the first build after this: held at its first chunk, the snapshot taken (the
        # owner's turn free again), the disk store in hand
        if name == "loading" and not reading.is_set():
            reading.set()
            assert go.wait(60)

    monkeypatch.setattr(S, "build_steps", step)
    with store.turn():
        store._mirror.rebuild("a test")  # type: ignore[union-attr]
    assert reading.wait(30)
    with store.turn():  # what a commit interrupted by Ctrl-C does
        store._mirror.interrupted()  # type: ignore[union-attr]
    assert store.wait_mirror(60)
    store.close()
    with pytest.raises(StoreLockedError):  # the replaced build still reads the store
        AgentStore(data / ".." / "data" / "agent", mirror=False)
    go.set()  # the replaced build goes on, sees it was cancelled, and lets the store go
    again = open_once_released(lambda: AgentStore(data / ".." / "data" / "agent", mirror=False))
    assert again.rows("SELECT ?o WHERE { <urn:a> <urn:b> ?o }") == [("c",)]
    again.close()
