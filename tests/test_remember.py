"""SPEC §5.1: remember — nodes, chain links, focus links, focus LRU, fallbacks."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_rdf import Config, MemoryManager, Message, Processed
from memory_rdf._oxigraph import AgentStore

from _graph import created, focus, ids_by_content, links
from helpers import FAST, AfterUpdate, ScriptedModel, remember, say, sigint_once

#: Each test runs on an embedded store and on a loopback Oxigraph server (SPEC §8).
BACKENDS = ("embedded", "endpoint")


def test_chain_links_between_segments_of_one_remember(mem: MemoryManager) -> None:
    remember(mem, "alpha | beta | gamma")
    assert set(ids_by_content(mem)) == {"alpha", "beta", "gamma"}
    assert links(mem) == {
        ("alpha", "beta"): (0.5, "下文"),
        ("beta", "alpha"): (0.5, "上文"),
        ("beta", "gamma"): (0.5, "下文"),
        ("gamma", "beta"): (0.5, "上文"),
    }
    assert focus(mem) == ["gamma", "beta", "alpha"]


def test_new_nodes_link_both_ways_with_every_current_focus_node(
    make_manager, model: ScriptedModel
) -> None:
    model.relations[("new1", "old2")] = "涉及"
    mem = make_manager(config=FAST.replace(link_initial_strength=0.4, focus_link_strength=0.9))
    remember(mem, "old1 | old2")
    remember(mem, "new1 | new2")
    got = links(mem)
    expected = {
        ("old1", "old2"): (0.4, "下文"), ("old2", "old1"): (0.4, "上文"),
        ("new1", "new2"): (0.4, "下文"), ("new2", "new1"): (0.4, "上文"),
        ("new1", "old1"): (0.9, None), ("old1", "new1"): (0.9, None),
        ("new1", "old2"): (0.9, "涉及"), ("old2", "new1"): (0.9, "涉及"),
        ("new2", "old1"): (0.9, None), ("old1", "new2"): (0.9, None),
        ("new2", "old2"): (0.9, None), ("old2", "new2"): (0.9, None),
    }
    assert got == expected
    # an unnamed link has no memory:relation triple at all
    assert mem.sparql("ASK { ?l memory:relation \"\" }") is False
    # one relation call per (new node, focus node) pair
    assert model.calls["relation"] == 4


def test_focus_is_an_lru_of_the_newest_nodes(make_manager) -> None:
    mem = make_manager(config=FAST.replace(focus_limit=5))
    remember(mem, "a | b | c")
    assert focus(mem) == ["c", "b", "a"]
    remember(mem, "d | e | f | g")
    assert focus(mem) == ["g", "f", "e", "d", "c"]
    remember(mem, "h | i | j | k | l | m | n")
    assert focus(mem) == ["n", "m", "l", "k", "j"]
    # focus links go to the focus as it was before the remember, not to nodes that left it
    got = links(mem)
    assert ("h", "g") in got and ("h", "c") in got and ("h", "b") not in got
    # members carry a focusOrder, larger = more recent; dropped nodes carry none
    rows = mem.sparql(
        "SELECT ?c ?o WHERE { ?n memory:focusOrder ?o ; memory:content ?c } ORDER BY DESC(?o)"
    )
    assert [r["c"] for r in rows] == ["n", "m", "l", "k", "j"]  # type: ignore[index]


def test_focus_limit_one(make_manager) -> None:
    mem = make_manager(config=FAST.replace(focus_limit=1))
    remember(mem, "a | b")
    remember(mem, "c")
    assert focus(mem) == ["c"]
    assert ("c", "b") in links(mem) and ("c", "a") not in links(mem)


def test_repeated_content_makes_new_nodes(mem: MemoryManager) -> None:
    remember(mem, "same")
    remember(mem, "same")
    assert mem.stats()["nodes"] == 2


def test_created_at_strictly_increases_in_segment_order(mem: MemoryManager) -> None:
    remember(mem, "s1 | s2 | s3 | s4 | s5 | s6")
    remember(mem, "s7")
    times = created(mem)
    order = sorted(times, key=times.__getitem__)
    assert order == ["s1", "s2", "s3", "s4", "s5", "s6", "s7"]
    assert len(set(times.values())) == 7


def test_node_properties(mem: MemoryManager) -> None:
    remember(mem, "Deploy JWT login SOON")
    rows = mem.sparql(
        """SELECT ?p ?len ?scans WHERE { ?n memory:content "Deploy JWT login SOON" ;
           memory:phrase ?p ; memory:originalLength ?len ; memory:scanCount ?scans }"""
    )
    assert rows == [{"p": "Deploy JWT", "len": 21, "scans": 0}]
    kws = mem.sparql("SELECT ?k WHERE { ?n memory:keyword ?k } ORDER BY ?k")
    assert [r["k"] for r in kws] == ["JWT", "SOON"]  # type: ignore[index]
    terms = mem.sparql("SELECT ?t WHERE { ?n memory:term ?t }")
    assert {r["t"] for r in terms} >= {"jwt", "deploy", "login"}  # type: ignore[index]


def test_message_objects_and_text_given_to_model(make_manager) -> None:
    seen: list[str] = []

    class Recorder(ScriptedModel):
        def segment(self, text: str) -> list[str]:
            seen.append(text)
            return [text]

    mem = make_manager(model=Recorder())
    mem.remember([Message("user", "hello there"), {"role": "assistant", "content": "hi"}])
    assert mem.wait_idle(30)
    assert seen == ["user: hello there\nassistant: hi"]


def test_process_failure_keeps_text_and_uses_builtin_phrase_keywords(
    make_manager, model: ScriptedModel
) -> None:
    model.fail["process"] = -1
    mem = make_manager()
    remember(mem, "张伟负责JWT登录模块的开发工作")
    rows = mem.sparql("SELECT ?c ?p WHERE { ?n memory:content ?c ; memory:phrase ?p }")
    assert rows[0]["c"] == "张伟负责JWT登录模块的开发工作"  # type: ignore[index]
    assert 0 < len(rows[0]["p"]) <= 20  # type: ignore[index]
    kws = {r["k"] for r in mem.sparql("SELECT ?k WHERE { ?n memory:keyword ?k }")}  # type: ignore[index,union-attr]
    assert kws and all(isinstance(k, str) and k for k in kws)
    # 1 + max_retries attempts before falling back
    assert model.calls["process"] == 1 + FAST.max_retries


class Oversized(ScriptedModel):
    """process() answers what its name says for the segment "world": a content 10,000 times
    the segment, or a 10,000-character phrase (single calls and the batched form)."""

    def __init__(self, what: str) -> None:
        super().__init__()
        self.what = what

    def process(self, text: str, target_length: int | None = None) -> Processed:
        p = super().process(text, target_length)
        if text != "world":
            return p
        if self.what == "content":
            return Processed(text * 10_000, p.phrase, p.keywords)
        return Processed(p.content, "p" * 10_000, p.keywords)

    def process_batch(self, texts: list[str]) -> list[Processed]:
        return [self.process(t) for t in texts]


@pytest.mark.parametrize("what", ["content", "phrase"])
def test_an_oversized_process_answer_is_refused_or_cut(make_manager, what: str) -> None:
    """A content far longer than its segment is a failed call (retried, then the text kept
    with the built-in model's phrase and keywords), as a compressed text longer than its
    target is; the batched form is checked the same way. A phrase beyond PHRASE_MAX is cut
    to it (a label: repairing it loses nothing of the memory)."""
    model = Oversized(what)
    mem = make_manager(model=model)
    remember(mem, "hello | world | again")
    rows = mem.sparql("SELECT ?c ?p ?len WHERE { ?n memory:content ?c ; memory:phrase ?p ; "
                      "memory:originalLength ?len } ORDER BY ?c")
    assert [(r["c"], r["len"]) for r in rows] == [  # type: ignore[index]
        ("again", 5), ("hello", 5), ("world", 5)]
    assert all(0 < len(r["p"]) <= 20 for r in rows)  # type: ignore[index]
    if what == "content":
        # the batch (3 calls), then one call each for the others and 1 + max_retries for "world"
        assert model.calls["process"] == 3 + 2 + 1 + FAST.max_retries
    else:
        assert model.calls["process"] == 3  # the batch, taken with the phrase cut
        assert [r["p"] for r in rows][2] == "p" * 20  # type: ignore[index]


def test_an_empty_phrase_is_the_built_in_model_s(make_manager) -> None:
    class NoPhrase(ScriptedModel):
        def process(self, text: str, target_length: int | None = None) -> Processed:
            p = super().process(text, target_length)
            return Processed(p.content, " ", p.keywords)

    mem = make_manager(model=NoPhrase())
    remember(mem, "the deploy key is in vault")
    rows = mem.sparql("SELECT ?p WHERE { ?n memory:phrase ?p }")
    assert len(rows) == 1 and rows[0]["p"].strip()  # type: ignore[index]


def test_relation_failure_leaves_links_unnamed(make_manager, model: ScriptedModel) -> None:
    model.default_relation = "提到"
    model.fail["relation"] = -1
    mem = make_manager()
    remember(mem, "a")
    remember(mem, "b")
    assert links(mem) == {("b", "a"): (1.0, None), ("a", "b"): (1.0, None)}


def test_relation_retried_then_named(make_manager, model: ScriptedModel) -> None:
    model.default_relation = "提到"
    model.fail["relation"] = 1  # first attempt fails, the retry succeeds
    mem = make_manager()
    remember(mem, "a")
    remember(mem, "b")
    assert links(mem)[("b", "a")] == (1.0, "提到")


def test_segmentation_failure_is_retried_then_kept_as_failed(
    make_manager, model: ScriptedModel
) -> None:
    model.fail["segment"] = -1
    mem = make_manager()
    mem.remember(say("lost?"))
    assert mem.wait_idle(30)
    st = mem.stats()
    assert st["failed_tasks"] == 1 and st["nodes"] == 0
    assert model.calls["segment"] == 1 + FAST.max_retries
    failed = mem.failed_tasks()
    assert failed[0]["text"] == "user: lost?" and "segment" in failed[0]["error"]
    # the user can retry it once the model works again
    model.fail["segment"] = 0
    assert mem.retry_failed() == 1
    assert mem.wait_idle(30)
    assert mem.stats()["failed_tasks"] == 0 and mem.stats()["nodes"] == 1


def test_segmentation_failure_goes_to_the_tail_of_the_queue(
    make_manager, model: ScriptedModel
) -> None:
    model.fail["segment"] = 1  # the first remember's first attempt fails
    mem = make_manager(config=FAST.replace(retry_initial_delay=0.2, retry_max_delay=0.2))
    mem.remember(say("first"))
    mem.remember(say("second"))
    assert mem.wait_idle(30)
    times = created(mem)
    assert times["second"] < times["first"]  # the later task ran first


def test_auto_compress_queues_a_slice_after_remember(make_manager) -> None:
    mem = make_manager(config=FAST.replace(auto_compress=True, focus_limit=1))
    remember(mem, "first long segment | second long segment | third long segment")
    # the first two are not focus nodes: the slice queued by the remember scanned them
    rows = mem.sparql("SELECT ?c ?s WHERE { ?n memory:content ?c ; memory:scanCount ?s }")
    scans = {r["c"]: r["s"] for r in rows}  # type: ignore[index,union-attr]
    assert scans == {"first long segment": 1, "second long segment": 1, "third long segment": 0}


def test_no_compression_without_auto_compress(mem: MemoryManager) -> None:
    remember(mem, "a | b | c | d | e | f | g")
    scans = mem.sparql("SELECT ?s WHERE { ?n memory:scanCount ?s }")
    assert {r["s"] for r in scans} == {0}  # type: ignore[index,union-attr]


def test_config_is_validated() -> None:
    for bad in (
        {"decay_rate": 0}, {"decay_rate": 1.01}, {"focus_limit": 0},
        {"delete_threshold": -1}, {"link_break_threshold": -0.1}, {"max_queue_size": 0},
        {"max_nodes": 0}, {"default_search_depth": -1}, {"max_retries": -1},
        {"focus_limit": 2.5}, {"auto_compress": "yes"}, {"model_timeout": 0},
        {"decay_rate": float("nan")},
    ):
        with pytest.raises(ValueError, match=next(iter(bad))):
            Config(**bad)  # type: ignore[arg-type]
    assert Config(decay_rate=1.0).decay_rate == 1.0
    # focus nodes are never forgotten: a pool no larger than the focus cannot hold its cap
    for cap, limit in ((3, 5), (5, 5), (1, 1)):
        with pytest.raises(ValueError, match=r"max_nodes must be None or > focus_limit"):
            Config(max_nodes=cap, focus_limit=limit)
    with pytest.raises(ValueError, match=r"> focus_limit \(8\)"):
        Config(max_nodes=20).replace(focus_limit=8, max_nodes=8)
    assert Config(max_nodes=6).max_nodes == Config(max_nodes=2, focus_limit=1).max_nodes + 4


def test_a_ctrl_c_during_the_journal_write_is_raised_once_the_remember_is_queued(
    data_dir: Path, model: ScriptedModel
) -> None:
    """SIGINT right after the journal's disk write: the remember is still queued and
    processed in this session (it was journalled), and the KeyboardInterrupt is raised once
    it is, its note saying so; nothing is left in the journal."""
    with MemoryManager("agent", data_dir=data_dir, config=FAST, model=model) as mem:
        store = mem.store
        assert isinstance(store, AgentStore)
        real = store._store
        assert real is not None
        store._store = AfterUpdate(real, sigint_once())  # type: ignore[assignment]
        try:
            with pytest.raises(KeyboardInterrupt) as info:
                mem.remember(say("the deploy key is in vault"))
        finally:
            store._store = real
        assert "accepted (journalled and queued)" in " ".join(info.value.__notes__)
        assert mem.wait_idle(30)
        assert set(ids_by_content(mem)) == {"the deploy key is in vault"}
        assert mem.pending_remembers() == 0
        assert mem.stats()["pending_tasks"] == 0


def test_a_ctrl_c_while_remember_waits_for_the_write_lock_raises_with_nothing_stored(
    data_dir: Path, model: ScriptedModel
) -> None:
    """The store's owner may be busy for minutes (a purge's rewrite of a large store): a
    Ctrl-C while remember() waits for its turn raises promptly, before the journal write, and
    nothing is stored; the wait was not held back with the write."""
    import signal
    import threading
    import time

    with MemoryManager("agent", data_dir=data_dir, config=FAST, model=model) as mem:
        store = mem.store
        assert isinstance(store, AgentStore)
        taken, done = threading.Event(), threading.Event()

        def busy_owner() -> None:
            with store.turn():  # as a rewrite keeps the owner
                taken.set()
                done.wait(20)

        holder = threading.Thread(target=busy_owner)
        holder.start()
        assert taken.wait(30)
        interrupt = threading.Timer(0.3, signal.raise_signal, (signal.SIGINT,))
        interrupt.start()
        started = time.monotonic()
        try:
            with pytest.raises(KeyboardInterrupt) as info:
                mem.remember(say("never stored"))
            waited = time.monotonic() - started
        finally:
            interrupt.cancel()
            done.set()
            holder.join()
        assert waited < 10, waited  # not the 20 s the lock stays held
        assert not getattr(info.value, "__notes__", None)  # not "accepted"
        assert mem.wait_idle(30)
        assert ids_by_content(mem) == {}
        assert mem.stats()["pending_tasks"] == 0


def test_an_open_that_fails_after_taking_the_agent_lock_lets_it_go(
    data_dir: Path, model: ScriptedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent's lock is released when the open fails after taking it (a Ctrl-C during
    RocksDB's open), so the next open in the same process (a REPL) is not refused."""
    import memory_rdf._oxigraph.agent_store as store_module

    def interrupted(path: Path) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(store_module, "_prune_info_logs", interrupted)
    with pytest.raises(KeyboardInterrupt):
        MemoryManager("agent", data_dir=data_dir, config=FAST, model=model).initialize()
    monkeypatch.undo()
    with MemoryManager("agent", data_dir=data_dir, config=FAST, model=model) as mem:
        remember(mem, "opened again")
        assert set(ids_by_content(mem)) == {"opened again"}


def test_a_long_phrase_is_cut_at_a_space() -> None:
    from memory_rdf._types import PHRASE_MAX, clip_phrase

    assert clip_phrase("the quarterly  planning meeting notes") == "the quarterly"
    assert clip_phrase("short one") == "short one"
    assert clip_phrase("x" * 50) == "x" * PHRASE_MAX
    assert clip_phrase("a " + "y" * 40) == ("a " + "y" * 40)[:PHRASE_MAX]  # no space past half
