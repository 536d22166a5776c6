"""Large commits applied to the disk store and to the read mirror at once (issue 16,
``AgentStore._commit_at_once``): on real stores, with the threshold lowered so that every
commit takes that path, both stores end with exactly the same quads through remember,
compression (decay, shortening, forgetting) and forget; a write the disk store refuses is in
neither store afterwards (the mirror, which may have taken it, is built again from disk);
commits from many threads still land one after the other."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from memory_rdf import MemoryManager, StoreError
from memory_rdf import _vocab as V
from memory_rdf._oxigraph import AgentStore, WriteBatch, agent_store, iri_ref, lit, node_ref, triple
from memory_rdf._oxigraph.owner import parallel_writes

from helpers import FAST, ScriptedModel, quads, remember

pytestmark = pytest.mark.skipif(not parallel_writes(),
                                reason="one CPU: commits apply one store after the other")

MIRROR = FAST.replace(read_mirror=True, focus_limit=3, delete_threshold=8, decay_rate=0.6)


@pytest.fixture
def at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every commit large enough to go both ways at once (``AgentStore.commits_at_once``
    counts those that did)."""
    monkeypatch.setattr(agent_store, "PARALLEL_COMMIT_BYTES", 0)


def in_step(mem: MemoryManager) -> AgentStore:
    store = mem.store
    assert isinstance(store, AgentStore)
    assert store.wait_mirror(60), store.mirror_state
    assert store._mirror is not None and store._mirror.store is not None
    assert quads(store._mirror.store) == quads(store.store)
    return store



class Wrapped:
    """pyoxigraph's store whose update() runs ``before`` first: raising, or waiting, as a
    full, interrupted or slow store would."""

    def __init__(self, real: Any, before: Any) -> None:
        self.real, self.before = real, before

    def update(self, *args: Any, **kwargs: Any) -> None:
        self.before()
        self.real.update(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def marker_batch(text: str) -> tuple[WriteBatch, str]:
    """A commit of one content triple (which the mirror's text table takes) and one the
    mirror's store takes (an original length), and the ASK that finds the first."""
    batch = WriteBatch()
    node = iri_ref(V.NODE + "f00d")
    batch.insert([triple(node, V.CONTENT, lit(text)),
                  triple(node, V.m("originalLength"), lit(len(text)))])
    return batch, f"ASK {{ ?n memory:content {lit(text)} }}"

def test_every_kind_of_write_lands_on_both_stores(
    data_dir: Path, model: ScriptedModel, at_once: None
) -> None:
    with MemoryManager("agent", data_dir=data_dir, config=MIRROR, model=model) as mem:
        in_step(mem)
        remember(mem, "we decided JWT for login | the token expires after two hours")
        remember(mem, "the office moves to Berlin | the new desk is by the window")
        remember(mem, "lunch is at noon | the meeting room is booked")
        remember(mem, "Li Na owns the release | the release is on December 15")
        remember(mem, "the cat is called Miso | Miso likes the JWT talk")
        store = in_step(mem)
        made = store.commits_at_once
        assert made > 0
        reports = [mem.run_compression_slice() for _ in range(12)]
        assert sum(r["compressed"] for r in reports) > 0, reports
        assert sum(r["forgotten"] for r in reports) > 0, reports
        assert store.commits_at_once > made
        in_step(mem)
        node = mem.memories(limit=1)[0]["id"]
        mem.forget([node])
        in_step(mem)
        assert not mem.sparql(f"ASK {{ {node_ref(node)} ?p ?o }}")
        assert store.mirror_state == "on"


def test_a_write_the_disk_refuses_is_in_neither_store(
    data_dir: Path, model: ScriptedModel, at_once: None,
    caplog: pytest.LogCaptureFixture
) -> None:
    failures = [OSError(28, "No space left on device")]

    def full_once() -> None:
        if failures:
            raise failures.pop()

    with MemoryManager("agent", data_dir=data_dir, config=MIRROR, model=model) as mem:
        remember(mem, "we decided JWT for login | the token expires after two hours")
        store = in_step(mem)
        real = store._store
        assert real is not None
        store._store = Wrapped(real, full_once)  # type: ignore[assignment]
        batch, ask = marker_batch("never written")
        with caplog.at_level(logging.WARNING, logger="memory_rdf"), \
                pytest.raises(StoreError, match="No space left on device"):
            store.commit(batch)
        assert "built again after a write that failed on the disk store" in caplog.text
        store = in_step(mem)  # the copy built again from the disk store
        assert store._mirror is not None and store._mirror.store is not None
        assert not store._mirror.store.query(ask, prefixes=V.PREFIXES)
        assert not real.query(ask, prefixes=V.PREFIXES)
        # A write the disk refused leaves RocksDB refusing every later one: the next commit
        # opens the store again (issue 33 F6), which needs this handle gone (RocksDB's lock
        # goes with the last reference).
        del real
        remember(mem, "Li Na owns the release")  # the next writes land on both
        in_step(mem)
        assert "Li Na" in mem.recall(["Li Na"], depth=2)


def test_commits_from_many_threads_land_one_after_the_other(
    data_dir: Path, model: ScriptedModel, at_once: None
) -> None:
    with MemoryManager("agent", data_dir=data_dir, config=MIRROR, model=model) as mem:
        store = in_step(mem)
        subject = iri_ref(V.NODE + "c0ffee")

        def writer(k: int) -> None:
            for i in range(25):
                batch = WriteBatch()
                batch.delete([triple(subject, V.SCAN_COUNT, lit(k * 100 + i - 1))])
                batch.insert([triple(subject, V.SCAN_COUNT, lit(k * 100 + i))])
                store.commit(batch)

        threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert store.commits_at_once >= 100
        in_step(mem)
        counts = store.rows(f"SELECT ?c WHERE {{ {subject} memory:scanCount ?c }}")
        assert sorted(c for (c,) in counts) == [24, 124, 224, 324]


def test_an_interrupted_commit_waits_for_the_disk_and_builds_the_mirror_again(
    data_dir: Path, model: ScriptedModel, at_once: None
) -> None:
    """Ctrl-C while the mirror applies: the disk update in flight is waited for (the write
    lock is not given up under it) and the copy, which may or may not hold the write, is
    built again from the disk store."""

    def interrupt() -> None:
        raise KeyboardInterrupt

    with MemoryManager("agent", data_dir=data_dir, config=MIRROR, model=model) as mem:
        remember(mem, "we decided JWT for login | the token expires after two hours")
        store = in_step(mem)
        assert store._mirror is not None and store._mirror.store is not None
        store._mirror.store = Wrapped(store._mirror.store, interrupt)  # type: ignore[assignment]
        real = store._store
        store._store = Wrapped(real, lambda: time.sleep(0.3))  # type: ignore[assignment]
        batch, ask = marker_batch("written on disk")
        with pytest.raises(KeyboardInterrupt):
            store.commit(batch)
        store._store = real
        assert store.store.query(ask, prefixes=V.PREFIXES)
        store = in_step(mem)
        assert mem.sparql(ask)


def test_a_commit_returns_once_the_disk_store_has_the_write(
    data_dir: Path, model: ScriptedModel, at_once: None
) -> None:
    """The disk store stays the truth and the journal: however slow its update, the commit
    returns only after it is in (what the kill -9 tests rely on for the path that writes one
    store after the other)."""
    with MemoryManager("agent", data_dir=data_dir, config=MIRROR, model=model) as mem:
        store = in_step(mem)
        real = store._store
        store._store = Wrapped(real, lambda: time.sleep(0.3))  # type: ignore[assignment]
        batch, ask = marker_batch("on disk before the commit returns")
        store.commit(batch)
        assert store.commits_at_once
        assert real is not None and real.query(ask, prefixes=V.PREFIXES)
        store._store = real
        in_step(mem)


def test_a_closed_store_is_released_by_its_owner(
    data_dir: Path, model: ScriptedModel, at_once: None
) -> None:
    """The owner keeps no reference to the store it wrote to: closing the agent releases its
    RocksDB lock, and the same process opens it again at once."""
    for text in ("we decided JWT for login", "Li Na owns the release"):
        with MemoryManager("agent", data_dir=data_dir, config=MIRROR, model=model) as mem:
            store = in_step(mem)
            remember(mem, text)
            assert store.commits_at_once >= 1
    with MemoryManager("agent", data_dir=data_dir, config=MIRROR, model=model) as mem:
        assert "Li Na" in mem.recall(["Li Na"], depth=2)
        assert "JWT" in mem.recall(["JWT"], depth=2)
