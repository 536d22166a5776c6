"""RocksDB's block caches let go after a whole-store read (issue 38, ``_oxigraph/block_caches``):
the read mirror's build and the term index's build read the whole store through the agent's
handle, which then kept RocksDB's caches full for its life (+5.2 kB per node at 10k nodes);
the owner closes the handle and opens it again once the mirror serves reads. On real stores:
it happens after each build, never loses a write committed beside a build and its reopen, and
gives up without harm when a read has the store in hand or something else holds the handle."""

from __future__ import annotations

import gc
import shutil
import threading
import time
from functools import partial
from pathlib import Path

import pytest

from memory_rdf import MemoryManager
from memory_rdf import _vocab as V
from memory_rdf._oxigraph import AgentStore, WriteBatch, block_caches
from memory_rdf._oxigraph import mirror as mirror_module

from helpers import FAST, ScriptedModel, quads, remember


def _agent(tmp_path: Path, nodes: int = 200) -> Path:
    from benchmarks._workload import generate

    path = tmp_path / "agent"
    generate(path, nodes, progress=False)
    return path


def _commit_marker(store: AgentStore, i: int) -> None:
    batch = WriteBatch()
    batch.insert([f'<https://example.org/marker{i}> {V.CONTENT} "marker {i}" .'])
    store.commit(batch)


def _markers(store: AgentStore) -> set[str]:
    rows = store.user_query(
        "SELECT ?n WHERE { ?n memory:content ?c FILTER(STRSTARTS(?c, 'marker ')) }")
    assert isinstance(rows, list)
    return {str(r["n"]) for r in rows}  # type: ignore[index]


def _reopen(store: AgentStore) -> bool:
    """The reopen run by the store's owner, as after a whole read."""
    return store.owner.run(partial(block_caches.reopen_handle, store))


def test_the_handle_is_opened_again_after_the_mirror_s_build(tmp_path: Path) -> None:
    path = _agent(tmp_path)
    store = AgentStore(path, mirror=True)
    try:
        assert store.wait_mirror(120)
        store.wait_flush()
        assert store.handle_reopens == 1
        before = quads(store.store)
        assert len(before) > 500  # (the kept triples: no texts, which the table holds)
        _commit_marker(store, 1)  # the new handle takes writes
        assert _markers(store) == {"https://example.org/marker1"}
    finally:
        store.close()
    again = AgentStore(path, mirror=False)
    try:
        assert _markers(again) == {"https://example.org/marker1"}
        assert quads(again.store) >= before
        assert again.handle_reopens == 0  # read from disk: the caches are its reads'
    finally:
        again.close()


def test_the_term_index_s_build_opens_the_handle_again(data_dir: Path,
                                                        model: ScriptedModel) -> None:
    config = FAST.replace(read_mirror=True)
    with MemoryManager("agent", data_dir=data_dir, config=config, model=model) as mem:
        remember(mem, "the JWT token expires at noon | the release is on Friday")
        store = mem.store
        assert isinstance(store, AgentStore) and store.wait_mirror(60)
        store.wait_flush()
        reopens = store.handle_reopens
        builds = store.terms.builds
        answer = mem.recall(["JWT"], entry="both")
        assert "JWT" in answer
        assert store.terms.builds == builds + 1
        store.wait_flush()
        assert store.handle_reopens == reopens + 1
        assert "JWT" in mem.recall(["JWT"], entry="both")  # the index kept: no other build
        store.wait_flush()
        assert store.handle_reopens == reopens + 1


def test_writes_beside_a_mirror_renewal_and_its_reopen_are_never_lost(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Writers commit without a pause while the mirror is renewed (its dump through the
    # handle, its catch-up, the reopen that follows): every commit is on disk and in the
    # mirror, and still there once the agent is opened again.
    path = _agent(tmp_path)
    store = AgentStore(path, mirror=True)
    stop = threading.Event()
    counter = iter(range(1_000_000))
    lock = threading.Lock()
    written: set[str] = set()

    def write() -> None:
        while not stop.is_set():
            with lock:
                i = next(counter)
            _commit_marker(store, i)
            with lock:
                written.add(f"https://example.org/marker{i}")

    loading = threading.Event()

    def step(name: str) -> None:
        if name == "loading":
            loading.set()
            time.sleep(0.2)  # commits land while the dump reads its snapshot

    try:
        assert store.wait_mirror(120)
        store.wait_flush()
        assert store.handle_reopens == 1
        monkeypatch.setattr(mirror_module, "build_steps", step)
        writers = [threading.Thread(target=write) for _ in range(2)]
        for writer in writers:
            writer.start()
        for _ in range(2):
            loading.clear()
            with store.turn():
                assert store._mirror is not None
                store._mirror.renew()
            assert loading.wait(60)
            assert store.wait_mirror(120)
            time.sleep(0.1)  # more commits after the reopen
        stop.set()
        for writer in writers:
            writer.join(60)
        store.wait_flush()
        assert store.handle_reopens == 3
        assert len(written) > 10
        assert _markers(store) == written
        assert store._mirror is not None and store._mirror.store is not None
        assert quads(store._mirror.store) == quads(store.store)
    finally:
        stop.set()
        store.close()
    again = AgentStore(path, mirror=False)
    try:
        assert _markers(again) == written
    finally:
        again.close()


def test_a_read_in_progress_keeps_the_handle_until_it_ends(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = AgentStore(_agent(tmp_path, 50), mirror=True)
    try:
        assert store.wait_mirror(60)
        store.wait_flush()
        reopens = store.handle_reopens
        monkeypatch.setattr(block_caches, "READERS_WAIT", 0.2)
        with store._users.hold():  # a read longer than the wait: given up, nothing changed
            assert not _reopen(store)
        assert store.handle_reopens == reopens
        assert store._store is not None and not store.parked

        monkeypatch.setattr(block_caches, "READERS_WAIT", 30)
        held = threading.Event()

        def read() -> None:
            with store._users.hold():
                held.set()
                time.sleep(0.3)

        reader = threading.Thread(target=read)
        reader.start()
        assert held.wait(10)
        assert _reopen(store)  # once the read ended
        reader.join(10)
        assert store.handle_reopens == reopens + 1
        _commit_marker(store, 7)
        assert _markers(store) == {"https://example.org/marker7"}
    finally:
        store.close()


class _Spy:
    """A wrapper around the handle, as tests put in its place (test_remember's AfterUpdate)."""

    def __init__(self, inner: object) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)


@pytest.mark.parametrize("holder", ["elsewhere", "wrapper"])
def test_a_handle_held_elsewhere_or_wrapped_is_not_opened_again(tmp_path: Path,
                                                                  holder: str) -> None:
    # elsewhere: closing it would leave RocksDB open (its last reference elsewhere) and the
    # new open refused. wrapper: the wrapper's refcount says nothing of the handle inside it;
    # closing the wrapper left RocksDB open, the new open was refused and the store was left
    # parked (CI: a remember then raised StoreLockedError in test_remember's Ctrl-C test).
    # Either way the reopen gives up and the store goes on.
    store = AgentStore(_agent(tmp_path, 50), mirror=True)
    try:
        assert store.wait_mirror(60)
        store.wait_flush()
        reopens = store.handle_reopens
        real = store._store
        held = _Spy(real) if holder == "wrapper" else real
        store._store = held  # type: ignore[assignment]
        assert not _reopen(store)
        assert store._store is held
        store._store = real
        del held
        assert store.handle_reopens == reopens
        _commit_marker(store, 3)
        assert _markers(store) == {"https://example.org/marker3"}
    finally:
        store.close()


def test_a_parked_or_closed_store_is_not_opened_again(tmp_path: Path) -> None:
    path = _agent(tmp_path, 50)
    store = AgentStore(path, mirror=True)
    try:
        assert store.wait_mirror(60)
        store.wait_flush()
        reopens = store.handle_reopens
        assert store.park()
        assert not _reopen(store)
        assert store.parked and store.handle_reopens == reopens
    finally:
        store.close()
    block_caches.after_whole_read(store)  # after close: nothing is sent, nothing raised
    gc.collect()
    again = AgentStore(path, mirror=False)  # the agent's lock was released
    again.close()


def test_an_export_opens_the_handle_again_when_the_mirror_serves(data_dir: Path,
                                                                 model: ScriptedModel) -> None:
    with MemoryManager("agent", data_dir=data_dir, config=FAST.replace(read_mirror=True),
                       model=model) as mem:
        remember(mem, "the office moves to Berlin")
        store = mem.store
        assert isinstance(store, AgentStore) and store.wait_mirror(60)
        store.wait_flush()
        reopens = store.handle_reopens
        assert b"Berlin" in store.dump("nquads", default_graph_only=False)
        store.wait_flush()
        assert store.handle_reopens == reopens + 1


def test_a_full_disk_keeps_the_handle(small_disk: Path) -> None:
    # RocksDB's open writes a manifest and logs: without room for them the handle is kept
    # (and its caches), rather than closed and left unopenable.
    disk = small_disk
    store = AgentStore(disk / "agent", mirror=True)
    try:
        assert store.wait_mirror(60)
        _commit_marker(store, 1)
        filler = disk / "filler"
        with open(filler, "wb") as f:
            f.write(b"\0" * max(shutil.disk_usage(disk).free - (64 << 10), 0))
        reopens = store.handle_reopens
        assert not _reopen(store)
        assert store.handle_reopens == reopens and not store.parked
        assert _markers(store) == {"https://example.org/marker1"}
        filler.unlink()
        assert _reopen(store)
        assert _markers(store) == {"https://example.org/marker1"}
    finally:
        store.close()


class _CountingHandle:
    """Stands in for the agent's disk handle: counts what reaches it, passes it on."""

    def __init__(self, real: object) -> None:
        self.real = real
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> object:
        attr = getattr(self.real, name)
        if not callable(attr):
            return attr

        def counted(*args: object, **kwargs: object) -> object:
            first = args[0] if args and isinstance(args[0], str) else ""
            self.calls.append(f"{name}: {first[:60]}")
            return attr(*args, **kwargs)

        return counted


def test_a_recall_reads_nothing_from_the_disk_handle_once_the_mirror_serves(
        tmp_path: Path) -> None:
    # Before: a recall with Han keywords asked the disk store which nodes hold them
    # (matching_nodes.rq) and when its results were said (node_dates.rq), refilling the
    # block caches the reopen had let go, recall after recall.
    from memory_rdf import Config

    _agent(tmp_path, 300)
    asked = [(["登录"], 2), (["登录", "数据库"], 4), (["login", "支付"], 2), ([], 2)]
    answers = {}
    for mirror in (False, True):
        with MemoryManager("agent", data_dir=tmp_path,
                           config=Config(auto_compress=False, read_mirror=mirror)) as mem:
            store = mem.store
            assert isinstance(store, AgentStore)
            if mirror:
                assert store.wait_mirror(120) and store.mirrored
            got = [mem.recall(words, depth=depth, entry=entry)
                   for words, depth in asked for entry in ("both", "keywords", "focus")]
            if mirror:  # the term index built, its reopen done: the disk is not read again
                store.wait_flush()
                spy = _CountingHandle(store._store)
                store._store = spy  # type: ignore[assignment]
                try:
                    again = [mem.recall(words, depth=depth, entry=entry)
                             for words, depth in asked for entry in ("both", "keywords", "focus")]
                finally:
                    store._store = spy.real  # type: ignore[assignment]
                assert spy.calls == []
                assert again == got
            answers[mirror] = got
    assert answers[True] == answers[False]
    assert any("登录" in text for text in answers[True])
