"""SPEC §4: the public API — bad input, errors, persistence, isolation, lifecycle."""

from __future__ import annotations

import contextlib
import gc
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import memory_rdf
from memory_rdf import (
    Config,
    MemoryClosedError,
    MemoryManager,
    MemoryRDFError,
    MemorySystem,
    Message,
    QueueFullError,
    SparqlError,
    StoreLockedError,
    UpdateRefusedError,
)
from memory_rdf import _vocab as V

from _graph import journalled
from helpers import (
    FAST,
    HEAVY_COUNT,
    ScriptedModel,
    fill_for_a_heavy_count,
    open_once_released,
    read_in_another_thread,
    remember,
    say,
    undated,
)


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


BAD_MESSAGES = [
    ("hello", TypeError, "messages"),
    (b"hello", TypeError, "messages"),
    ({"role": "user", "content": "x"}, TypeError, "messages"),
    (None, TypeError, "messages"),
    (42, TypeError, "messages"),
    ([], ValueError, "empty"),
    ([{"role": "user"}], ValueError, "content"),
    ([{"content": "x"}], ValueError, "role"),
    ([{"role": "tool", "content": "x"}], ValueError, "role"),
    ([{"role": "USER", "content": "x"}], ValueError, "role"),
    ([{"role": 1, "content": "x"}], TypeError, "role"),
    ([{"role": "user", "content": ""}], ValueError, "blank"),
    ([{"role": "user", "content": "   \n\t"}], ValueError, "blank"),
    ([{"role": "user", "content": None}], TypeError, "content"),
    ([{"role": "user", "content": 5}], TypeError, "content"),
    ([{"role": "user", "content": ["a"]}], TypeError, "content"),
    ([{"role": "user", "content": "bad \ud800 surrogate"}], ValueError, "Unicode"),
    ([{"role": "user", "content": "ok"}, "not a message"], TypeError, r"messages\[1\]"),
    ([{"role": "user", "content": "ok", "timestamp": 3}], TypeError, "timestamp"),
]


@pytest.mark.parametrize(("messages", "error", "match"), BAD_MESSAGES)
def test_bad_messages_raise_at_the_call_and_store_nothing(
    mem: MemoryManager, messages: object, error: type[Exception], match: str
) -> None:
    before = mem.stats()
    with pytest.raises(error, match=match) as info:
        mem.remember(messages)  # type: ignore[arg-type]
    assert isinstance(info.value, MemoryRDFError)
    assert mem.wait_idle(10)
    after = mem.stats()
    assert after["nodes"] == before["nodes"] == 0
    assert after["pending_tasks"] == 0 and after["failed_tasks"] == 0
    assert journalled(mem) == []  # nothing journalled either


def test_message_type_validates_itself() -> None:
    with pytest.raises(ValueError, match="role"):
        Message("robot", "x")
    with pytest.raises(ValueError, match="blank"):
        Message("user", " ")
    assert Message("system", "be brief").role == "system"


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"keywords": "JWT"}, TypeError, "keywords"),
        ({"keywords": None}, TypeError, "keywords"),
        ({"keywords": [1]}, TypeError, "keywords"),
        ({"keywords": ["a"], "relations": "上文"}, TypeError, "relations"),
        ({"keywords": ["a"], "relations": [None]}, TypeError, "relations"),
        ({"keywords": ["a"], "depth": -1}, ValueError, "depth"),
        ({"keywords": ["a"], "depth": 1.5}, TypeError, "depth"),
        ({"keywords": ["a"], "depth": True}, TypeError, "depth"),
        ({"keywords": ["a"], "depth": "2"}, TypeError, "depth"),
        ({"keywords": ["a"], "entry": "everything"}, ValueError, "entry"),
    ],
)
def test_bad_recall_arguments(mem: MemoryManager, kwargs: dict, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        mem.recall(**kwargs)
    with pytest.raises(error, match=match):
        mem.recall_async(**kwargs)


@pytest.mark.parametrize(
    "agent_id",
    ["../x", "..", ".", "", "a/b", "a\\b", "a b", "x" * 129, "a\x00b", "/abs", "~root", "a:b"],
)
def test_hostile_agent_ids_are_rejected_before_any_file_is_touched(
    tmp_path: Path, agent_id: str
) -> None:
    data = tmp_path / "data"
    with pytest.raises(ValueError, match="agent_id"):
        MemoryManager(agent_id, data_dir=data)
    with MemorySystem(data_dir=data) as system, pytest.raises(ValueError, match="agent_id"):
        system.agent(agent_id)
    assert _files(tmp_path) == []


def test_agent_id_type_and_good_ids(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="agent_id"):
        MemoryManager(7, data_dir=tmp_path)  # type: ignore[arg-type]
    for good in ("a", "agent_001", "A-b.c_d", "x" * 128, "助手"):
        MemoryManager(good, data_dir=tmp_path)  # constructing touches no file
    assert _files(tmp_path) == []


def test_two_ids_that_reach_one_directory_are_refused(tmp_path: Path,
                                                      model: ScriptedModel) -> None:
    """SPEC §2: an agent's directory holds its store and nothing of any other agent's. On a
    file system that ignores case (macOS, Windows) ``alice`` opens ``Alice``'s directory;
    here a link makes the second name, and the same check refuses it before anything is
    written, for every way in (manager, system, read-only inspection)."""
    data = tmp_path / "data"
    with MemoryManager("Alice", data_dir=data, config=FAST, model=model) as mem:
        remember(mem, "Alice's private note")
    os.symlink("Alice", data / "alice")
    before = _files(data / "Alice")
    with pytest.raises(ValueError, match="agent_id 'alice' reaches the same directory as "
                                         "'Alice'"):
        MemoryManager("alice", data_dir=data, config=FAST, model=model).initialize()
    with MemorySystem(data_dir=data, model=model, config=FAST) as system, \
            pytest.raises(ValueError, match="same directory as 'Alice'"):
        system.agent("alice").recall(["note"])
    with pytest.raises(ValueError, match="same directory as 'Alice'"):
        memory_rdf.inspect.stats("alice", data)
    # A link makes both names one directory: the first is refused as well, naming the link.
    with pytest.raises(ValueError, match="agent_id 'Alice' reaches the same directory as "
                                         "'alice'"):
        MemoryManager("Alice", data_dir=data, config=FAST, model=model).initialize()
    assert _files(data / "Alice") == before  # nothing was opened, nothing written
    (data / "alice").unlink()
    with MemoryManager("Alice", data_dir=data, config=FAST, model=model) as mem:
        assert undated(mem.recall(["note"])) == "[memory] Alice's private note"


def test_a_store_linked_from_elsewhere_is_still_its_agents_own(
    tmp_path: Path, model: ScriptedModel
) -> None:
    """A link from the data directory to a store kept elsewhere (another disk) is one name for
    one directory: it opens."""
    elsewhere = tmp_path / "big-disk"
    with MemoryManager("bob", data_dir=elsewhere, config=FAST, model=model) as mem:
        remember(mem, "Bob's note")
    data = tmp_path / "data"
    data.mkdir()
    os.symlink(elsewhere / "bob", data / "bob")
    with MemoryManager("bob", data_dir=data, config=FAST, model=model) as mem:
        assert undated(mem.recall(["note"])) == "[memory] Bob's note"


def test_ids_windows_cannot_keep_are_refused_there_only(monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path) -> None:
    """Device names (``CON``, ``nul.txt``, ``COM1``) and a trailing ``.`` (which Windows
    drops, so that ``v2.`` would be ``v2``'s directory) are refused on Windows; elsewhere
    they are ordinary ids, as SPEC §2 allows."""
    from memory_rdf import _agents

    odd = ("CON", "nul.txt", "Com1", "lpt9.log", "aux", "v2.")
    fine = ("console", "nullable", "com10", "v2.0", "agent.v2", "助手")
    for agent_id in (*odd, *fine):
        assert _agents.validate_agent_id(agent_id) == agent_id
    monkeypatch.setattr(_agents, "_WINDOWS", True)
    for agent_id in odd:
        assert _agents.validate_agent_id(agent_id) == agent_id  # an endpoint agent: no directory
        with pytest.raises(ValueError, match=f"agent_id '{agent_id}' cannot be a directory on "
                                             "Windows"):
            MemoryManager(agent_id, data_dir=tmp_path).initialize()
        with pytest.raises(ValueError, match="cannot be a directory on Windows"):
            memory_rdf.inspect.agent_path(agent_id, tmp_path)
    for agent_id in fine:
        assert _agents.validate_agent_id(agent_id) == agent_id
    assert _files(tmp_path) == []


def test_an_id_is_written_in_composed_unicode(tmp_path: Path, model: ScriptedModel) -> None:
    """macOS's file systems take the composed (NFC) and decomposed (NFD) spellings of a name
    for one directory, and HFS+ lists it decomposed: ids must be composed, and a directory
    listed under its decomposed name is still the agent's own."""
    import unicodedata

    composed, decomposed = "한국", unicodedata.normalize("NFD", "한국")
    assert composed != decomposed
    with pytest.raises(ValueError, match="not in Unicode's composed form .* '한국'"):
        MemoryManager(decomposed, data_dir=tmp_path)
    data = tmp_path / "data"
    with MemoryManager("café", data_dir=data, config=FAST, model=model) as mem:
        remember(mem, "un café noir")
    # HFS+'s listing, as far as this file system can show it: the same directory listed
    # under the decomposed spelling of its name.
    os.symlink("café", data / unicodedata.normalize("NFD", "café"))
    with MemoryManager("café", data_dir=data, config=FAST, model=model) as mem:
        assert undated(mem.recall(["café"])) == "[memory] un café noir"


def test_store_layout_one_directory_per_agent(tmp_path: Path, model: ScriptedModel) -> None:
    with MemorySystem(data_dir=tmp_path, model=model, config=FAST) as system:
        system.agent("a").remember(say("one"))
        system.agent("b").remember(say("two"))
        assert system.agent("a").wait_idle(30) and system.agent("b").wait_idle(30)
    assert sorted(os.listdir(tmp_path)) == ["a", "b", "~locks"]  # ~locks: AgentLock
    assert (tmp_path / "a" / "CURRENT").exists()  # the Oxigraph (RocksDB) store itself


def test_persistence_across_close_and_reopen(data_dir: Path, model: ScriptedModel) -> None:
    with MemoryManager("p", data_dir=data_dir, config=FAST, model=model) as mem:
        remember(mem, "first | second")
        remember(mem, "third")
        text = mem.recall([], depth=2)
        focus = mem.stats()["focus"]
    with MemoryManager("p", data_dir=data_dir, config=FAST, model=model) as again:
        assert again.recall([], depth=2) == text
        assert again.stats()["focus"] == focus
        remember(again, "fourth")
        assert again.stats()["nodes"] == 4


def test_two_agents_in_one_system_are_isolated(tmp_path: Path, model: ScriptedModel) -> None:
    with MemorySystem(data_dir=tmp_path, model=model, config=FAST) as system:
        a, b = system.agent("agent_a"), system.agent("agent_b")
        assert system.agent("agent_a") is a
        a.remember(say("alpha secret"))
        b.remember(say("beta secret"))
        assert undated(a.recall(["secret"])) == "[memory] alpha secret"
        assert undated(b.recall(["secret"])) == "[memory] beta secret"
        assert a.stats()["nodes"] == b.stats()["nodes"] == 1
        assert a.sparql("ASK { ?n memory:content \"beta secret\" }") is False
        assert sorted(system.agents()) == ["agent_a", "agent_b"]


def test_an_open_agent_asked_for_with_another_config_is_refused(
    tmp_path: Path, model: ScriptedModel
) -> None:
    """agent(id, config=...) on an agent already open: the same manager for no config or an
    equal one; a different one is refused (it silently returned the manager with its old
    config); after close, the agent opens with the new one."""
    with MemorySystem(data_dir=tmp_path, model=model, config=FAST) as system:
        a = system.agent("a")
        assert system.agent("a", config=FAST.replace()) is a is system.agent("a")
        with pytest.raises(ValueError, match=r"already open with another config \(this one "
                                             r"has focus_limit=1\)"):
            system.agent("a", config=FAST.replace(focus_limit=1))
        with pytest.raises(TypeError, match="config must be a Config"):
            system.agent("a", config={"focus_limit": 1})  # type: ignore[arg-type]
        assert a.config.focus_limit == 5
        a.close()
        b = system.agent("a", config=FAST.replace(focus_limit=1))
        assert b is not a and b.config.focus_limit == 1


def test_use_after_close_raises(data_dir: Path, model: ScriptedModel) -> None:
    mem = MemoryManager("c", data_dir=data_dir, config=FAST, model=model)
    with pytest.raises(MemoryClosedError, match="initialize"):
        mem.remember(say("too early"))
    mem.initialize()
    mem.close()
    mem.close()  # idempotent
    for call in (
        lambda: mem.remember(say("x")),
        lambda: mem.recall(["x"]),
        lambda: mem.stats(),
        lambda: mem.sparql("ASK {}"),
        lambda: mem.run_compression_slice(),
        lambda: mem.initialize(),
    ):
        with pytest.raises(MemoryClosedError):
            call()
    assert isinstance(MemoryClosedError("x"), RuntimeError)


def test_the_store_seam_is_the_open_store_and_closes_with_the_manager(
    data_dir: Path, model: ScriptedModel
) -> None:
    """``MemoryManager.store``: the agent's store through the storage package's interface
    (what tests and tools below the manager use instead of private attributes), only while
    the manager is open."""
    from memory_rdf._oxigraph import AgentStore, MemoryStore

    mem = MemoryManager("s", data_dir=data_dir, config=FAST, model=model)
    with pytest.raises(MemoryClosedError, match="initialize"):
        _ = mem.store
    with mem:
        store = mem.store
        assert isinstance(store, MemoryStore) and isinstance(store, AgentStore)
        assert store is mem.store and store.path is not None and store.path.name == "s"
        remember(mem, "seen through the seam")
        assert store.ask(f"ASK {{ ?n {V.CONTENT} ?c }}")
    with pytest.raises(MemoryClosedError, match="closed"):
        _ = mem.store


def test_store_held_elsewhere_raises_store_locked(data_dir: Path, model: ScriptedModel) -> None:
    with MemoryManager("held", data_dir=data_dir, config=FAST, model=model):
        other = MemoryManager("held", data_dir=data_dir, config=FAST, model=model)
        with pytest.raises(StoreLockedError, match=str(data_dir / "held")):
            other.initialize()
    # close() released the store: it opens again at once
    with MemoryManager("held", data_dir=data_dir, config=FAST, model=model) as again:
        assert again.stats()["nodes"] == 0


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symbolic links")
def test_one_store_under_another_spelling_is_held_too(tmp_path: Path, model: ScriptedModel,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """RocksDB refuses a second open in one process only under the same path string: a
    relative and an absolute data directory, ``d/../d`` or a link to it opened one store
    twice, the two wrote over each other's files, and the agent never opened again. Each
    spelling is now refused while the store is open, before it is touched, and after a
    purge (which swaps the store's directory for a fresh copy) as well."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    os.symlink("data", tmp_path / "linked")
    spellings = [tmp_path / "data", Path("data/../data"), tmp_path / "linked", Path("linked")]
    with MemoryManager("bot", data_dir="data", config=FAST, model=model) as mem:
        remember(mem, "the deploy key is in the vault", "release on friday")
        first = mem.memories()[0]["id"]
        for rounds in range(2):
            for data_dir in spellings:
                other = MemoryManager("bot", data_dir=data_dir, config=FAST, model=model)
                with pytest.raises(StoreLockedError, match="already open in this process"):
                    other.initialize()
                other.close()
            if rounds == 0:
                assert mem.forget([first], purge=True) == 1  # the directory is swapped
        remember(mem, "lunch is at noon")
    for data_dir in spellings:  # released: every spelling opens it, whole
        with MemoryManager("bot", data_dir=data_dir, config=FAST, model=model) as again:
            assert again.stats()["nodes"] == 2
            assert "noon" in again.recall(["noon"])


def test_full_queue_raises_and_journals_nothing(make_manager, model: ScriptedModel) -> None:
    model.delay = 0.3  # keep the scheduler busy with the first task
    mem = make_manager(config=FAST.replace(max_queue_size=2))
    mem.remember(say("running"))
    accepted, refused = 1, 0
    for i in range(6):
        try:
            mem.remember(say(f"queued {i}"))
            accepted += 1
        except QueueFullError:
            refused += 1
    assert refused >= 1
    assert len(journalled(mem)) <= accepted
    assert mem.wait_idle(60)
    assert mem.stats()["nodes"] == accepted


def test_sparql_is_read_only_and_typed(mem: MemoryManager) -> None:
    remember(mem, "JWT login | token expiry")
    rows = mem.sparql(
        "SELECT ?c ?s WHERE { ?n memory:content ?c ; memory:scanCount ?s } ORDER BY ?c"
    )
    assert rows == [{"c": "JWT login", "s": 0}, {"c": "token expiry", "s": 0}]
    assert mem.sparql("ASK { ?n a memory:Node }") is True
    triples = mem.sparql("CONSTRUCT { ?n memory:phrase ?p } WHERE { ?n memory:phrase ?p }")
    assert isinstance(triples, list) and len(triples) == 2
    # unbound variables are absent
    opt = mem.sparql("SELECT ?n ?r WHERE { ?n a memory:Node OPTIONAL { ?n memory:relation ?r } }")
    assert all(set(r) == {"n"} for r in opt)  # type: ignore[arg-type]
    # the journal and metadata graphs are not visible
    assert mem.sparql("ASK { GRAPH ?g { ?s ?p ?o } }") is False
    for update in (
        "DELETE WHERE { ?s ?p ?o }",
        "PREFIX x: <http://x/> INSERT DATA { x:a x:b x:c }",
        "# comment\nCLEAR ALL",
        "  drop default",
    ):
        with pytest.raises(UpdateRefusedError, match="read-only"):
            mem.sparql(update)
    with pytest.raises(SparqlError, match="invalid SPARQL at line 1, column 1") as info:
        mem.sparql("SELEC ?x WHERE {")
    # one short line: the parser's list of every acceptable token is clipped
    assert "\n" not in str(info.value) and len(str(info.value)) < 200
    assert mem.stats()["nodes"] == 2


@pytest.mark.parametrize(("query", "prefix", "where"), [
    ("SELECT ?p WHERE { ?n foo:phrase ?p }", "foo:", "line 1, column 32"),
    ("PREFIX foo: <http://x/>\nSELECT * WHERE { ?n foo:a ?p . ?n rdf:type ?t }", "rdf:",
     "line 2, column 43"),
    ("SELECT * WHERE { ?n Memory:phrase ?p }", "Memory:", "line 1, column 34"),  # case counts
    ("SELECT * WHERE { ?s ?p :x }", ":", "line 1, column 26"),
    # with a blank node label the parser says "expected <unreported>"; _: is no prefix
    ("SELECT * WHERE { _:b memory:phrase ?p . ?n ?q bar:x }", "bar:", "line 1, column 52"),
])
def test_sparql_names_an_unknown_prefix(mem: MemoryManager, query: str, prefix: str,
                                        where: str) -> None:
    """The parser's "expected one of Prefix not found, …" said which prefix, and which are
    there, in so many words (it came out as "… expected one of Prefix not found")."""
    with pytest.raises(SparqlError) as info:
        mem.sparql(query)
    assert str(info.value) == (f"invalid SPARQL at {where}: unknown prefix {prefix!r} "
                               "(predeclared: memory:, node:, link:, xsd:; declare others "
                               "with PREFIX)")


def test_sparql_without_what_the_parser_expected_says_syntax_error(mem: MemoryManager) -> None:
    """Oxigraph's "expected <unreported>" (a blank node label in the query) is no reading."""
    with pytest.raises(SparqlError) as info:
        mem.sparql("SELECT * WHERE { _:b memory:phrase ?p ?q }")
    # Since issue 33 the guard's SPARQL 1.1 parser reads the query first and says where.
    assert str(info.value).startswith("invalid SPARQL at line 1, column 39: expected ")
    assert "unreported" not in str(info.value)


@pytest.mark.parametrize(("query", "said"), [
    ("", "the query is empty"),
    ("  \n\t ", "the query is empty"),
    ("# SELECT * WHERE { ?s ?p ?o }\n", "the query is empty (nothing but comments)"),
])
def test_sparql_says_an_empty_query_is_empty(mem: MemoryManager, query: str, said: str) -> None:
    """The parser's "error at 1:1: expected [_]" came out as "… column 1: expected"."""
    with pytest.raises(SparqlError) as info:
        mem.sparql(query)
    assert str(info.value) == f"invalid SPARQL: {said}"


def test_config_type_checked(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="config"):
        MemoryManager("a", data_dir=tmp_path, config={"focus_limit": 3})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="model"):
        MemoryManager("a", data_dir=tmp_path, model=object())  # type: ignore[arg-type]
    assert Config().focus_limit == 5


def test_default_model_and_data_dir_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORY_RDF_DATA_DIR", str(tmp_path / "env_data"))
    with MemoryManager("envagent") as mem:
        mem.remember(say("张伟负责JWT登录，下周三发布"))
        assert "JWT" in mem.recall(["jwt"])
    assert (tmp_path / "env_data" / "envagent").is_dir()


def test_public_names() -> None:
    for name in ("MemoryManager", "MemorySystem", "Config", "Message", "Processed", "SmallModel",
                 "MemoryRDFError", "QueueFullError", "MemoryClosedError", "StoreLockedError",
                 "HeuristicModel"):
        assert name in memory_rdf.__all__ and hasattr(memory_rdf, name)
    assert memory_rdf.__all__ == sorted(memory_rdf.__all__)
    for exc in (QueueFullError, MemoryClosedError, StoreLockedError, SparqlError):
        assert issubclass(exc, MemoryRDFError)


def test_a_refused_remember_is_never_stored_even_racing_recalls(
    make_manager, model: ScriptedModel
) -> None:
    """Remembers and recalls compete for the last queue slots from several threads: a
    remember that raised QueueFullError is never processed later, one that returned always
    is (the slot check, journal write and enqueue are one step)."""
    import threading

    model.delay = 0.01
    mem = make_manager(config=FAST.replace(max_queue_size=3))
    accepted: list[str] = []
    refused: list[str] = []
    lock = threading.Lock()

    def writer(w: int) -> None:
        for i in range(25):
            marker = f"m{w}x{i}"
            try:
                mem.remember(say(marker))
            except QueueFullError:
                with lock:
                    refused.append(marker)
            else:
                with lock:
                    accepted.append(marker)

    def reader() -> None:
        for _ in range(60):
            with contextlib.suppress(QueueFullError):
                mem.recall_async(["m"])

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(3)]
    threads += [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert mem.wait_idle(120)
    assert refused and accepted
    stored = {r["c"] for r in mem.sparql("SELECT ?c WHERE { ?n memory:content ?c }")}  # type: ignore[index,union-attr]
    assert stored == set(accepted)
    assert journalled(mem) == []


def test_the_writer_flushes_memtables_as_writes_pile_up(mem: MemoryManager) -> None:
    """RocksDB keeps writes in memory until a flush: the store flushes after every
    FLUSH_AFTER_BYTES of updates, so a long-running writer's memory stays bounded."""
    store = mem.store
    store.FLUSH_AFTER_BYTES = 20_000  # type: ignore[misc]
    for i in range(20):
        remember(mem, f"memory number {i} | its neighbour {i}")
        assert store._unflushed < 20_000 + 10_000  # reset at each flush, never piles up
    assert store.auto_flushes >= 2
    assert mem.stats()["nodes"] == 40


def test_the_flush_runs_beside_the_writer_and_close_waits_for_it(tmp_path: Path) -> None:
    """A flush is the store's owner's message, queued after the commit that asked for it:
    the writer does not wait for it, not even while the owner is busy (held here: its turn
    taken, as by a compaction in progress); asked again before it ran, it is queued once;
    close() comes after it, and what was written is there after reopening."""
    from memory_rdf._oxigraph import AgentStore, WriteBatch, lit, node_ref, triple

    store = AgentStore(tmp_path / "a")
    store.FLUSH_AFTER_BYTES = 1  # type: ignore[misc]
    with store.turn():  # the owner held: no flush can start
        for i in range(30):
            batch = WriteBatch()
            batch.insert([triple(node_ref(f"n{i}"), V.CONTENT, lit(f"text {i}"))])
            store.commit(batch)  # each asks for a flush, none waits for one
        assert store.auto_flushes == 30
        assert not store.owner.idle  # one flush, waiting
    store.close()
    assert store.owner.closed
    again = AgentStore(tmp_path / "a")
    assert len(again.rows("SELECT ?n WHERE { ?n memory:content ?c }")) == 30
    again.close()


class _CountingStore:
    """pyoxigraph's Store, counting how many flushes and compactions run at the same time
    (each held a little longer, so that two that overlap are seen)."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self._lock = threading.Lock()
        self.running = 0
        self.most = 0
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def _upkeep(self, call: Any) -> None:
        with self._lock:
            self.running += 1
            self.calls += 1
            self.most = max(self.most, self.running)
        try:
            time.sleep(0.005)
            call()
        finally:
            with self._lock:
                self.running -= 1

    def flush(self) -> None:
        self._upkeep(self._store.flush)

    def optimize(self) -> None:
        self._upkeep(self._store.optimize)


def test_flushes_and_compactions_never_run_at_once(tmp_path: Path) -> None:
    """RocksDB flushes and compactions (background flusher, background compaction, flush(),
    optimize()) run one at a time: two at once can wait forever for each other with
    Oxigraph's RocksDB options (RocksDB issues #12094, #13280)."""
    from memory_rdf._oxigraph import AgentStore, WriteBatch, lit, node_ref, triple

    store = AgentStore(tmp_path / "a")
    counting = _CountingStore(store._store)
    store._store = counting  # type: ignore[assignment]
    store.FLUSH_AFTER_BYTES = 200  # type: ignore[misc]
    store.OPTIMIZE_AFTER_COMMITS = 5  # type: ignore[misc]
    stop = threading.Event()

    def upkeep_by_hand() -> None:
        while not stop.is_set():
            store.flush()
            store.optimize()

    by_hand = threading.Thread(target=upkeep_by_hand)
    by_hand.start()
    try:
        written = 0
        deadline = time.monotonic() + 60
        while counting.calls < 16 and time.monotonic() < deadline:
            batch = WriteBatch()
            batch.insert([triple(node_ref(f"n{written}"), V.CONTENT, lit(f"text {written} " * 10))])
            store.commit(batch)
            store.maybe_optimize_in_background()
            written += 1
    finally:
        stop.set()
        by_hand.join()
    store.close()
    assert counting.most == 1
    assert counting.calls >= 16 and store.auto_flushes > 0
    del counting  # the last reference to the RocksDB store: its lock goes with it
    gc.collect()
    again = AgentStore(tmp_path / "a")
    assert len(again.rows("SELECT ?n WHERE { ?n memory:content ?c }")) == written
    again.close()


def test_a_writer_with_flushes_and_compactions_beside_it_never_hangs(tmp_path: Path) -> None:
    """The hang the counting test above guards against, on the real store: a writer whose
    commits ask for a flush every 20 kB while a compaction starts every 50 commits. Before
    flushes and compactions were taken one at a time, a flush waited forever inside RocksDB
    (`DBImpl::WaitForFlushMemTables`) within ~1,000 commits, and the writer behind it."""
    from memory_rdf._oxigraph import AgentStore, WriteBatch, lit, node_ref, triple

    store = AgentStore(tmp_path / "a")
    store.FLUSH_AFTER_BYTES = 20_000  # type: ignore[misc]
    store.OPTIMIZE_AFTER_COMMITS = 50  # type: ignore[misc]
    commits = 3000

    def write() -> None:
        for i in range(commits):
            batch = WriteBatch()
            batch.insert([triple(node_ref(f"n{i}"), V.CONTENT, lit(f"text {i} " * 20))])
            store.commit(batch)
            store.maybe_optimize_in_background()

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    writer.join(240)
    assert not writer.is_alive(), "the writer hung behind a flush"
    closing = threading.Thread(target=store.close, daemon=True)
    closing.start()
    closing.join(120)
    assert not closing.is_alive(), "close() hung waiting for a flush or a compaction"
    again = AgentStore(tmp_path / "a")
    assert len(again.rows("SELECT ?n WHERE { ?n memory:content ?c }")) == commits
    again.close()


def test_reopening_an_agent_keeps_few_rocksdb_info_logs(tmp_path: Path) -> None:
    """Every read-write open rotates RocksDB's info log (~140 kB); without pruning an agent
    opened once per call (``memory-rdf recall``) grew by that much each time. The memory
    itself survives every open."""
    from memory_rdf._oxigraph import INFO_LOGS_KEPT

    with MemoryManager("logs", data_dir=tmp_path, config=FAST, model=ScriptedModel()) as mem:
        remember(mem, "我们决定用 PostgreSQL")
    for _ in range(INFO_LOGS_KEPT + 4):
        with MemoryManager("logs", data_dir=tmp_path, config=FAST,
                           model=ScriptedModel()) as mem:
            assert "PostgreSQL" in mem.recall(["PostgreSQL"])
    store = tmp_path / "logs"
    old = sorted(p.name for p in store.glob("LOG.old.*"))
    assert len(old) == INFO_LOGS_KEPT, old
    assert (store / "LOG").is_file()


def test_a_query_still_running_after_close_keeps_the_agent_held(tmp_path: Path) -> None:
    """A timed-out aggregate runs on in the background with the store in hand (pyoxigraph
    cannot stop it): after close() the agent stays held until it ends, so a second instance
    of the store cannot open beside it under another spelling; then it opens."""
    from memory_rdf import QueryTimeoutError
    from memory_rdf._oxigraph import AgentStore

    data = tmp_path / "data"
    store = AgentStore(data / "agent", mirror=False)
    fill_for_a_heavy_count(store)
    with pytest.raises(QueryTimeoutError):
        store.user_query(HEAVY_COUNT, timeout=0.05)
    store.close()
    running = [t for t in threading.enumerate() if t.name == "memory-rdf-sparql"]
    assert running and store._users.active, "the aggregate ended in its timeout: make it heavier"
    with pytest.raises(StoreLockedError):
        AgentStore(data / ".." / "data" / "agent", mirror=False)
    for thread in running:
        thread.join(timeout=600)
    again = open_once_released(lambda: AgentStore(data / ".." / "data" / "agent", mirror=False))
    assert again.ask("ASK { <urn:s1> <urn:p> 1 }")
    again.close()


def test_an_untimed_read_in_another_thread_keeps_the_agent_held_after_close(
    tmp_path: Path,
) -> None:
    """An untimed query (read mirror off) running in another thread has the store in hand:
    close() from this thread releases the agent's lock only once it ends, so no second
    instance opens beside the live one under another spelling; the read gets its answer."""
    from memory_rdf._oxigraph import AgentStore

    data = tmp_path / "data"
    store = AgentStore(data / "agent", mirror=False)
    answer = fill_for_a_heavy_count(store)
    reader, answers = read_in_another_thread(store, lambda: store.user_query(HEAVY_COUNT))
    store.close()
    assert reader.is_alive(), "the query ended before close(): make it heavier"
    with pytest.raises(StoreLockedError):
        AgentStore(data / ".." / "data" / "agent", mirror=False)
    reader.join(timeout=600)
    assert answers == [answer]
    again = open_once_released(lambda: AgentStore(data / ".." / "data" / "agent", mirror=False))
    assert again.ask("ASK { <urn:s1> <urn:p> 1 }")
    again.close()


def test_a_data_directory_where_no_lock_can_be_made_is_a_clear_error(tmp_path: Path) -> None:
    """``~locks`` taken by a file (as a read-only data directory would refuse it): a
    StoreError naming the lock and the reason, not "held by another process"."""
    from memory_rdf import StoreError

    data = tmp_path / "data"
    data.mkdir()
    (data / "~locks").write_text("not a directory", encoding="utf-8")
    with pytest.raises(StoreError, match=r"agent: File exists \(.*~locks\)") as info:
        MemoryManager("agent", data_dir=data, config=FAST, model=ScriptedModel()).initialize()
    assert not isinstance(info.value, StoreLockedError)
    assert sorted(p.name for p in data.iterdir()) == ["~locks"]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_holds_none_of_its_parents_agents(tmp_path: Path) -> None:
    """A child forked while an agent is open (multiprocessing's fork, pre-fork servers) does
    not keep the agent held after the parent lets it go, and its releasing does not unlock
    the parent's live store."""
    from memory_rdf._oxigraph import AgentStore

    data = tmp_path / "data"
    store = AgentStore(data / "agent", mirror=False)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: lets go of what it inherited, then lives on a while
        try:
            store._release_agent_lock()
            os.write(write, b"x")
            time.sleep(3)
        finally:
            os._exit(0)
    try:
        assert os.read(read, 1) == b"x"
        # the agent's lock itself, from another process (RocksDB's own lock would refuse an
        # open anyway while the store is open; the agent's lock guards the repair before it)
        other_process = (
            "import fcntl, os, sys\nfd = os.open(sys.argv[1], os.O_RDWR)\n"
            "try:\n    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
            "except OSError:\n    print('held')\nelse:\n    print('free')\n"
        )
        run = subprocess.run([sys.executable, "-c", other_process, str(data / "~locks" / "agent")],
                             capture_output=True, text=True, timeout=60)
        assert run.stdout.strip() == "held", run  # the child's release left the parent's lock
        store.close()
        again = AgentStore(data / "agent", mirror=False)  # the child, still alive, holds none
        again.close()
    finally:
        os.waitpid(pid, 0)
        os.close(read)
        os.close(write)


@pytest.mark.parametrize("said,locked", [
    ("IO error: While lock file: /d/a/LOCK: Resource temporarily unavailable", True),
    ("IO error: Failed to create lock file: C:\\d\\a\\LOCK: The process cannot access the file",
     True),
    ("IO error: lock hold by current process, acquire time 1 acquiring thread 2: /d/a/LOCK: "
     "No locks available", True),
    ("[Errno 20] Not a directory: '/d/~locks/a'", False),
    ("[Errno 30] Read-only file system: '/d/~locks'", False),
    ("Corruption: IO error: While lock file: /d/a/LOCK", False),
])
def test_rocksdb_lock_errors_are_told_by_rocksdb_s_wording(said: str, locked: bool) -> None:
    from memory_rdf._oxigraph import is_lock_error

    assert is_lock_error(OSError(said)) is locked


def test_read_only_inspection_takes_no_lock_and_makes_nothing(tmp_path: Path) -> None:
    """SPEC §6: inspection never writes. It takes no writer's lock either (it works while
    another process holds the agent), so it makes no ``~locks`` entry, nor anything else."""
    from memory_rdf import inspect

    data = tmp_path / "data"
    with MemoryManager("agent", data_dir=data, config=FAST, model=ScriptedModel()) as mem:
        remember(mem, "we chose PostgreSQL | the cat is called Miso")
    shutil.rmtree(data / "~locks")
    before = _files(data)
    assert inspect.agents(data) == ["agent"]
    assert inspect.stats("agent", data)["nodes"] == 2
    assert len(inspect.memories("agent", data)) == 2
    assert inspect.sparql("agent", "ASK { ?n memory:content ?c }", data) is True
    assert inspect.export("agent", data, format="nquads")
    assert inspect.tasks("agent", data) == []
    assert _files(data) == before
