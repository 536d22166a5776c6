"""forget(ids, purge=True) on the embedded store (SPEC §5.6): the forgotten text is in no file
of the agent's store directory afterwards — found by scanning every file's bytes, before and
after close — nor in the journal; an interrupted rewrite is finished at the next open."""

from __future__ import annotations

import os
import shutil
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pyoxigraph as ox
import pytest
from _sst import sst_contents

from memory_rdf import Config, MemoryManager

from helpers import (
    FAST,
    HEAVY_COUNT,
    ScriptedModel,
    fill_for_a_heavy_count,
    read_in_another_thread,
    remember,
    say,
)

ONE_FOCUS = FAST.replace(focus_limit=1)


def said(*contents: str, at: object) -> list[dict[str, object]]:
    return [{"role": "user", "content": c, "timestamp": at} for c in contents]


def _ids(mem: MemoryManager) -> dict[str, str]:
    return {m["content"]: m["id"] for m in mem.memories(limit=None)}  # type: ignore[misc]


# -- purge=True: the bytes go -------------------------------------------------------------------

SECRET = "my home address is 42 Wallaby Way, Sydney (secret 7f3a91)"


def files_holding(root: Path, needle: str) -> list[str]:
    """Every file under ``root`` (recursively) whose bytes contain ``needle`` (UTF-8): as
    they lie on disk, and for RocksDB's table files (``.sst``) also with every block
    decompressed (LZ4 keeps repeated text as back-references: issue 33 F9)."""
    data = needle.encode()

    def holds(path: Path) -> bool:
        raw = path.read_bytes()
        return data in raw or (path.suffix == ".sst" and data in sst_contents(raw))

    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and holds(p))


def test_files_holding_sees_text_inside_compressed_blocks(tmp_path: Path) -> None:
    """A bulk load writes LZ4 tables: the repeated text is not in their raw bytes, yet there."""
    nquads = "".join(f'<http://e/{i}> <http://p> "{SECRET} number {i}" .\n' for i in range(3000))
    store = ox.Store(str(tmp_path / "store"))
    store.bulk_load(input=nquads.encode(), format=ox.RdfFormat.N_QUADS)
    store.flush()
    del store
    tables = list((tmp_path / "store").glob("*.sst"))
    raw = [p for p in tables if SECRET.encode() + b" number 2999" in p.read_bytes()]
    assert raw == []  # the plain byte search would miss it
    assert files_holding(tmp_path / "store", f"{SECRET} number 2999")


def test_purge_erases_the_text_from_every_file(make_manager, data_dir: Path) -> None:
    mem = make_manager(config=ONE_FOCUS)
    remember(mem, f"{SECRET} | the cat is called Miso")
    remember(mem, "we talked about the cat")
    ids = _ids(mem)
    store_dir = data_dir / "agent"
    # a RocksDB store keeps a deleted value in its files: plain forget leaves the bytes
    mem.store.local.flush()  # type: ignore[union-attr]  # as a long-running agent would have
    assert files_holding(store_dir, "Wallaby")
    assert mem.forget([ids[SECRET]]) == 1
    assert files_holding(store_dir, "Wallaby"), "plain forget was expected to leave the bytes"
    # purge: forget has already happened, but purging again of the same (now unknown) id
    # still rewrites the store, so the bytes go
    assert mem.forget([ids[SECRET]], purge=True) == 0
    assert files_holding(data_dir, "Wallaby") == []
    # the rest of the memory is intact and the agent keeps working
    assert "Miso" in mem.recall(["Miso"], depth=2)
    assert "is still linked to a memory I have forgotten" in mem.recall(["Miso"], depth=2)
    remember(mem, "a new memory after the purge")
    assert mem.stats()["nodes"] == 3
    mem.close()
    assert files_holding(data_dir, "Wallaby") == []
    assert sorted(p.name for p in data_dir.iterdir()) == ["agent", "~locks"]  # no copies left


def test_purge_in_one_call_and_from_the_journal(make_manager, data_dir: Path) -> None:
    model = ScriptedModel()
    mem = make_manager(model=model)
    remember(mem, SECRET)
    secret_id = _ids(mem)[SECRET]
    # a later remember of the same text whose segmentation keeps failing: journalled, failed
    model.fail["segment"] = -1
    mem.remember(say(f"{SECRET} | and some other words"))
    assert mem.wait_idle(30)
    model.fail["segment"] = 0
    assert mem.stats()["failed_tasks"] == 1
    mem.store.local.flush()  # type: ignore[union-attr]
    assert files_holding(data_dir, "Wallaby")
    assert mem.forget([secret_id], purge=True) == 1
    assert files_holding(data_dir, "Wallaby") == []
    # the failed task stays, without the forgotten text
    (task,) = mem.failed_tasks()
    assert "Wallaby" not in task["text"] and "and some other words" in task["text"]
    mem.close()
    assert files_holding(data_dir, "Wallaby") == []


def test_purge_drops_a_journalled_task_left_blank(make_manager, data_dir: Path) -> None:
    model = ScriptedModel()
    mem = make_manager(model=model)
    remember(mem, SECRET)
    model.fail["segment"] = -1
    mem.remember([{"role": "user", "content": SECRET}, {"role": "assistant", "content": "ok"}])
    mem.remember([{"role": "user", "content": SECRET}])
    assert mem.wait_idle(30)
    assert mem.stats()["failed_tasks"] == 2
    assert mem.forget([_ids(mem)[SECRET]], purge=True) == 1
    # a message left empty goes; a task left with no message goes
    assert [t["text"] for t in mem.failed_tasks()] == ["assistant: ok"]
    assert files_holding(data_dir, "Wallaby") == []


def test_purge_cuts_the_text_out_of_a_failed_task_of_other_wording(
    make_manager, data_dir: Path
) -> None:
    """The built-in model keeps the speaker in the content ("user: …"): the failed task holds
    the same message within other words, not the content itself (issue 33 F9)."""
    with make_manager(model=None) as mem:
        remember(mem, SECRET)
        (secret_id,) = _ids(mem).values()
    assert secret_id  # content "user: <SECRET>"
    failing = ScriptedModel(fail={"segment": -1})
    mem = make_manager(model=failing)
    mem.remember(say(f"FAILME also {SECRET}"))
    assert mem.wait_idle(30)
    assert mem.stats()["failed_tasks"] == 1
    assert mem.forget([secret_id], purge=True) == 1
    (task,) = mem.failed_tasks()
    assert "Wallaby" not in task["text"] and "FAILME also" in task["text"]
    assert files_holding(data_dir, "Wallaby") == []
    mem.close()
    assert files_holding(data_dir, "Wallaby") == []


def test_purge_keeps_a_remember_accepted_after_it(make_manager) -> None:
    """A remember accepted after the forget was queued remembers its text anew: the purge
    leaves it whole (SPEC §5.6)."""
    model = ScriptedModel()
    mem = make_manager(model=model)
    remember(mem, SECRET)
    secret_id = _ids(mem)[SECRET]
    model.delay = 0.5
    mem.remember(say("a slow remember the forget waits behind"))
    done: list[int] = []
    forgetting = threading.Thread(target=lambda: done.append(
        mem.forget([secret_id], purge=True)))
    forgetting.start()
    forgetting.join(0.2)  # queued: the remember below is journalled before the forget runs
    mem.remember(say(SECRET))
    forgetting.join(60)
    assert done == [1]
    model.delay = 0.0
    assert mem.wait_idle(30)
    assert SECRET in _ids(mem)


def _copy_of(store_dir: Path, name: str) -> Path:
    target = store_dir.with_name(store_dir.name + name)
    shutil.copytree(store_dir, target)
    return target


def test_a_purge_interrupted_between_the_renames_is_finished_at_open(
    make_manager, data_dir: Path
) -> None:
    mem = make_manager()
    remember(mem, "survives the crash")
    mem.close()
    store_dir = data_dir / "agent"
    _copy_of(store_dir, "~new")  # the complete copy ...
    os.rename(store_dir, store_dir.with_name("agent~old"))  # ... the first rename, then a crash
    again = make_manager()
    assert [m["content"] for m in again.memories()] == ["survives the crash"]
    assert sorted(p.name for p in data_dir.iterdir()) == ["agent", "~locks"]


def test_a_purge_interrupted_while_copying_is_undone_at_open(make_manager, data_dir: Path) -> None:
    mem = make_manager()
    remember(mem, "the original")
    mem.close()
    half = data_dir / "agent~new"
    half.mkdir()
    (half / "000001.sst").write_bytes(b"half a copy")
    again = make_manager()
    assert [m["content"] for m in again.memories()] == ["the original"]
    assert sorted(p.name for p in data_dir.iterdir()) == ["agent", "~locks"]


def test_no_other_open_runs_while_a_purge_swaps_the_store(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A purge copies the store to ``agent~new`` and swaps the directories. An open of the
    agent meanwhile, in this process under another spelling or in another process, ran the
    crash repair first: it deleted the copy, the swap failed, and the agent's memories were
    gone at the next open. The agent's lock is now taken before the repair: the open is
    refused, the purge completes, nothing is lost."""
    import subprocess
    import types

    import memory_rdf._oxigraph.agent_store as store_module
    from memory_rdf import StoreLockedError

    other_process = (
        "import sys; from pathlib import Path; from memory_rdf._oxigraph import AgentStore\n"
        "try:\n    AgentStore(Path(sys.argv[1]))\nexcept Exception as exc:\n"
        "    print(type(exc).__name__)\nelse:\n    print('opened')\n"
    )
    refused: list[str] = []
    real_collect = store_module.gc.collect

    def collect(*args: int) -> int:
        done = real_collect(*args)
        if (data_dir / "agent~new").exists() and not refused:  # the copy made, not swapped
            with pytest.raises(StoreLockedError):
                store_module.AgentStore(data_dir / ".." / data_dir.name / "agent")
            run = subprocess.run([sys.executable, "-c", other_process, str(data_dir / "agent")],
                                 capture_output=True, text=True, timeout=60)
            refused.append(run.stdout.strip())
            assert (data_dir / "agent~new").exists()
        return done

    with MemoryManager("agent", data_dir=data_dir, config=FAST, model=ScriptedModel()) as mem:
        remember(mem, "first fact | second fact | third fact")
        monkeypatch.setattr(store_module, "gc", types.SimpleNamespace(collect=collect))
        assert mem.forget([_ids(mem)["first fact"]], purge=True) == 1
        monkeypatch.undo()
    assert refused == ["StoreLockedError"]
    with MemoryManager("agent", data_dir=data_dir, config=FAST, model=ScriptedModel()) as mem:
        assert sorted(_ids(mem)) == ["second fact", "third fact"]
    assert sorted(p.name for p in data_dir.iterdir()) == ["agent", "~locks"]


def test_a_purge_waits_for_a_timed_out_query_still_running(data_dir: Path) -> None:
    """A timed-out aggregate runs on in the background on the disk store (read mirror off):
    a purge's swap went ahead beside it, the reopen failed, the old instance wrote into the
    fresh copy when it went, and the next open deleted the only good copy. The purge now
    waits for such queries; nothing is lost."""
    from memory_rdf import QueryTimeoutError

    config = FAST.replace(read_mirror=False)
    with MemoryManager("agent", data_dir=data_dir, config=config, model=ScriptedModel()) as mem:
        remember(mem, "we chose PostgreSQL | the cat is called Miso")
        fill_for_a_heavy_count(mem.store)
        with pytest.raises(QueryTimeoutError):
            mem.sparql(HEAVY_COUNT, timeout=0.05)
        assert mem.forget([_ids(mem)["the cat is called Miso"]], purge=True) == 1
        assert sorted(_ids(mem)) == ["we chose PostgreSQL"]
    with MemoryManager("agent", data_dir=data_dir, config=config, model=ScriptedModel()) as mem:
        assert sorted(_ids(mem)) == ["we chose PostgreSQL"]
    assert sorted(p.name for p in data_dir.iterdir()) == ["agent", "~locks"]


def test_a_purge_waits_for_an_untimed_read_in_another_thread(data_dir: Path) -> None:
    """An untimed query (read mirror off) in another thread has the old instance in hand: the
    purge's swap waits for it (before, the reopen met RocksDB's lock on the path the old
    instance still held, and the purge failed). The read gets its answer, the purge erases,
    and reads after the swap see the fresh copy."""
    config = FAST.replace(read_mirror=False)
    with MemoryManager("agent", data_dir=data_dir, config=config, model=ScriptedModel()) as mem:
        remember(mem, "we chose PostgreSQL | the cat is called Miso")
        answer = fill_for_a_heavy_count(mem.store)
        reader, answers = read_in_another_thread(
            mem.store, lambda: mem.sparql(HEAVY_COUNT, timeout=None, limit=None))
        assert mem.forget([_ids(mem)["the cat is called Miso"]], purge=True) == 1
        reader.join(timeout=600)
        assert answers == [answer]
        assert sorted(_ids(mem)) == ["we chose PostgreSQL"]
    assert files_holding(data_dir / "agent", "Miso") == []
    with MemoryManager("agent", data_dir=data_dir, config=config, model=ScriptedModel()) as mem:
        assert sorted(_ids(mem)) == ["we chose PostgreSQL"]


def test_purge_keeps_other_agents_and_stays_valid(
    make_manager: Callable[..., MemoryManager], data_dir: Path
) -> None:
    a = make_manager("a")
    b = make_manager("b", config=Config(auto_compress=False))
    remember(a, SECRET)
    remember(b, "agent b's own memory")
    assert a.forget([_ids(a)[SECRET]], purge=True) == 1
    assert b.memories()[0]["content"] == "agent b's own memory"
    assert a.stats()["nodes"] == 0 and files_holding(data_dir / "a", "Wallaby") == []


def test_the_store_stays_valid_after_forgetting(make_manager, data_dir: Path) -> None:
    pytest.importorskip("pyshacl", reason="SHACL validation needs the shacl extra")
    from memory_rdf import inspect

    mem = make_manager(config=FAST.replace(focus_limit=2))
    mem.remember(said("one | two | three", at="2024-01-01"))
    mem.remember(say("four | five"))
    ids = _ids(mem)
    assert mem.forget([ids["five"], ids["two"]]) == 2  # a focus node and one that is not
    assert mem.forget([ids["one"]], purge=True) == 1
    assert mem.stats()["focus"] == [ids["four"]]
    mem.close()
    conforms, report = inspect.validate("agent", data_dir)
    assert conforms, report


@pytest.mark.parametrize("form", ["rows", "serialized"])
def test_a_purge_right_after_a_read_ended_its_hold(data_dir: Path, form: str) -> None:
    """The user query's result (which has the disk store in hand) stayed in the reading
    frame after the read's hold ended: a purge's swap that came in between met the old
    instance still open (the purge failed, and the store was left closed). The result now
    ends with the hold. The reader is held right after its hold ended, its frame not yet
    returned (``StoreUsers.released``), while the purge runs."""
    from memory_rdf._oxigraph import AgentStore

    store = AgentStore(data_dir / "agent", mirror=False)
    store.store.update("INSERT DATA { <urn:a> <urn:b> 1 }")
    returning, go = threading.Event(), threading.Event()
    answers: list[object] = []

    def read() -> None:
        query = "SELECT ?o WHERE { ?s ?p ?o }"
        answers.append(store.user_query(query) if form == "rows"
                       else store.user_query_serialized(query, "csv"))

    def held_as_the_hold_ends() -> None:
        if threading.current_thread() is reader:
            returning.set()
            assert go.wait(60)

    store._users.released = held_as_the_hold_ends
    reader = threading.Thread(target=read)
    reader.start()
    assert returning.wait(60)
    try:
        store.rewrite()
    finally:
        go.set()
        reader.join()
    store._users.released = None
    assert answers == ([[{"o": 1}]] if form == "rows" else [b"o\r\n1\r\n"])
    assert store.rows("SELECT ?o WHERE { ?s ?p ?o }") == [(1,)]
    store.close()


def test_a_swap_that_cannot_open_the_store_again_leaves_it_to_the_next_use(
        data_dir: Path) -> None:
    """A purge's swap whose reopen failed (here: a reference to the old instance kept
    elsewhere, so RocksDB still holds the path) put the old store back but left it closed
    for the rest of the session: every later call said "closed". The next use now opens it
    again; nothing was purged, nothing lost."""
    from memory_rdf import StoreError
    from memory_rdf._oxigraph import AgentStore

    store = AgentStore(data_dir / "agent", mirror=False)
    store.store.update("INSERT DATA { <urn:a> <urn:b> 1 }")
    kept = store.store  # the old instance, alive across the swap
    with pytest.raises(StoreError, match="cannot rewrite"):
        store.rewrite()
    del kept
    assert store.rows("SELECT ?o WHERE { ?s ?p ?o }") == [(1,)]
    store.rewrite()  # and a purge goes through now
    assert store.rows("SELECT ?o WHERE { ?s ?p ?o }") == [(1,)]
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.rows("SELECT ?o WHERE { ?s ?p ?o }")
