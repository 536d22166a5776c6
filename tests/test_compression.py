"""SPEC §5.2 and §5.3: compression scans, forgetting, slices, preemption, fixed pool."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from memory_rdf import MemoryManager, Processed

from _graph import focus, ids_by_content, links, set_strength
from helpers import FAST, ScriptedModel, remember, undated

#: Each test runs on an embedded store and on a loopback Oxigraph server (SPEC §8).
BACKENDS = ("embedded", "endpoint")

A, B, C = "aaaaaaaaaa first memory", "bbbbbbbbbb second memory", "cccccccccc third memory"


def scans(mem: MemoryManager) -> dict[str, int]:
    rows = mem.sparql("SELECT ?c ?s WHERE { ?n memory:content ?c ; memory:scanCount ?s }")
    return {r["c"]: r["s"] for r in rows}  # type: ignore[index,union-attr]


def test_decay_exact_strengths_and_focus_links_untouched(make_manager) -> None:
    mem = make_manager(config=FAST.replace(focus_limit=1))
    remember(mem, f"{A} | {B}")
    remember(mem, C)  # C ↔ B at 1.0; focus = [C]
    report = mem.run_compression_slice()
    assert report["scanned"] == 2 and report["forgotten"] == 0 and report["compressed"] == 0
    assert report["model_calls"] == 0 and report["preempted"] is False
    got = links(mem)
    # A is scanned first (older): A→B and B→A × 0.97; then B: both again, and B→C × 0.97
    assert got[(A, B)] == (pytest.approx(0.5 * 0.97 * 0.97, abs=1e-12), "下文")
    assert got[(B, A)] == (pytest.approx(0.5 * 0.97 * 0.97, abs=1e-12), "上文")
    assert got[(B, C)] == (pytest.approx(0.97, abs=1e-12), None)
    assert got[(C, B)] == (1.0, None)  # source C is a focus node: never decays
    assert scans(mem) == {A: 1, B: 1, C: 0}  # focus nodes are not scanned
    # strengths are exact products, not rounded on the way through the store
    assert got[(A, B)][0] == 0.5 * 0.97 * 0.97


def test_one_scan_decays_by_exactly_one_step(make_manager) -> None:
    mem = make_manager(config=FAST.replace(focus_limit=1, compression_batch_size=1))
    remember(mem, f"{A} | {B}")
    remember(mem, C)
    mem.run_compression_slice()  # scans A only
    got = links(mem)
    assert got[(A, B)] == (0.485, "下文") and got[(B, A)] == (0.485, "上文")
    assert got[(B, C)] == (1.0, None)
    assert scans(mem) == {A: 1, B: 0, C: 0}
    mem.run_compression_slice()  # B (scanCount 0) comes before A (1)
    got = links(mem)
    assert got[(B, C)][0] == 0.97 and got[(C, B)][0] == 1.0
    assert scans(mem) == {A: 1, B: 1, C: 0}


def test_shrinks_to_20_then_5_characters_then_forgotten(make_manager, model: ScriptedModel) -> None:
    x = "x" * 80
    y = "y" * 30
    z = "z" * 30
    mem = make_manager(config=FAST.replace(focus_limit=1, decay_rate=0.5))
    remember(mem, f"{x} | {y}")
    remember(mem, z)  # focus = [Z]; X ↔ Y at 0.5, Y ↔ Z at 1.0
    lengths = []
    for _ in range(3):
        mem.run_compression_slice()
        contents = [c for c in ids_by_content(mem) if c.startswith("x")]
        lengths.append(len(contents[0]))
    assert lengths == [80, 20, 5]
    assert model.compress_calls == [(x, 20), (x[:20], 5)]
    report = mem.run_compression_slice()
    assert report["forgotten"] == 1
    assert [c for c in ids_by_content(mem) if c.startswith("x")] == []
    assert set(ids_by_content(mem)) == {y, z}


def test_forgetting_keeps_incoming_links_dangling(make_manager) -> None:
    mem = make_manager(config=FAST.replace(focus_limit=1))
    remember(mem, "root content long enough")
    remember(mem, "ab | target node text")  # 'ab' is too short to keep: target 2 < 5
    report = mem.run_compression_slice()
    assert report["forgotten"] == 1
    st = mem.stats()
    assert st["nodes"] == 2 and st["dangling_links"] == 2
    # the forgotten node has no triple left as subject, and no link out of it remains
    assert mem.sparql('ASK { ?n memory:content "ab" }') is False
    gone = mem.sparql(
        "SELECT ?t WHERE { ?l memory:target ?t FILTER NOT EXISTS { ?t memory:content ?c } }"
    )
    (target,) = {r["t"] for r in gone}  # type: ignore[index,union-attr]
    assert mem.sparql(f"ASK {{ <{target}> ?p ?o }}") is False
    assert mem.sparql(f"ASK {{ ?l memory:source <{target}> }}") is False
    # shortcut triples of the dangling links stay, one per link resource
    rows = mem.sparql(f"SELECT ?s WHERE {{ ?s memory:link <{target}> }}")
    assert len(rows) == 2  # type: ignore[arg-type]


def test_importance_zero_forgets(make_manager) -> None:
    mem = make_manager(config=FAST.replace(focus_limit=1))
    remember(mem, f"{A} | {B}")
    remember(mem, C)
    for pair in ((A, B), (B, A)):
        set_strength(mem, *pair, 0.001)  # below link_break_threshold: not live
    report = mem.run_compression_slice()
    assert report["forgotten"] == 1 and A not in ids_by_content(mem)


def test_failed_compression_leaves_content_but_still_decays(
    make_manager, model: ScriptedModel
) -> None:
    x = "x" * 40
    mem = make_manager(config=FAST.replace(focus_limit=1))
    remember(mem, f"{x} | {B}")
    remember(mem, C)
    set_strength(mem, x, B, 0.25)
    set_strength(mem, B, x, 0.25)  # importance 0.5 → target 20 < 40
    model.fail["process"] = -1
    report = mem.run_compression_slice()
    assert report["compressed"] == 0 and report["model_calls"] == 1 + FAST.max_retries
    assert x in ids_by_content(mem)
    assert links(mem)[(x, B)][0] < 0.25  # decayed anyway
    assert scans(mem)[x] == 1


def _weak_node_scanned(make_manager, model: ScriptedModel) -> tuple[Any, str, dict[str, Any]]:  # type: ignore[no-untyped-def]
    """A 40-character node of importance 0.5 (target 20), scanned once with ``model``."""
    x = "x" * 40
    mem = make_manager(model=model, config=FAST.replace(focus_limit=1))
    remember(mem, f"{x} | {B}")
    remember(mem, C)
    set_strength(mem, x, B, 0.25)
    set_strength(mem, B, x, 0.25)
    return mem, x, mem.run_compression_slice()


def test_garbage_compression_answers_are_failed_calls(make_manager) -> None:
    class TooLong(ScriptedModel):
        def process(self, text, target_length=None):  # type: ignore[no-untyped-def]
            p = super().process(text, None)
            return p  # ignores the target: 40 characters for a target of 20

    mem, x, report = _weak_node_scanned(make_manager, TooLong())
    assert report["compressed"] == 0 and x in ids_by_content(mem)


def test_a_compression_answer_with_an_oversized_phrase_is_cut(make_manager) -> None:
    class LongPhrase(ScriptedModel):
        def process(self, text, target_length=None):  # type: ignore[no-untyped-def]
            p = super().process(text, target_length)
            return Processed(p.content, "p" * 10_000, p.keywords) if target_length else p

    mem, x, report = _weak_node_scanned(make_manager, LongPhrase())
    assert report["compressed"] == 1 and x not in ids_by_content(mem)
    phrases = [r["p"] for r in mem.sparql("SELECT ?p WHERE { ?n memory:phrase ?p }")]  # type: ignore[index,union-attr]
    assert "p" * 20 in phrases and all(len(p) <= 20 for p in phrases)


def test_compressed_node_gets_new_phrase_keywords_and_terms(make_manager) -> None:
    x = "KEEPER words here and DROPPED words later on"
    mem = make_manager(config=FAST.replace(focus_limit=1))
    remember(mem, f"{x} | {B}")
    remember(mem, C)
    set_strength(mem, x, B, 0.25)
    set_strength(mem, B, x, 0.25)
    mem.run_compression_slice()
    short = x[: len(x) // 2].strip()  # the target is 22 characters; results are stripped
    rows = mem.sparql(
        f'SELECT ?p ?k WHERE {{ ?n memory:content "{short}" ; memory:phrase ?p ; '
        "memory:keyword ?k }"
    )
    assert {(r["p"], r["k"]) for r in rows} == {(short[:10], "KEEPER")}  # type: ignore[index,union-attr]
    terms = {r["t"] for r in mem.sparql(  # type: ignore[index,union-attr]
        f'SELECT ?t WHERE {{ ?n memory:content "{short}" ; memory:term ?t }}')}
    assert "keeper" in terms and "dropped" not in terms


def _compressor(mem: MemoryManager) -> Any:
    """A compressor over the agent's store (:attr:`MemoryManager.store`), built as the
    manager builds its own: its scan order is the store's."""
    from memory_rdf._compression import Compressor
    from memory_rdf._focus import FocusManager
    from memory_rdf._links import LinkStore
    from memory_rdf._nodes import NodeStore

    store, cfg = mem.store, mem.config
    return Compressor(
        store=store, nodes=NodeStore(store), links=LinkStore(store, cfg.link_break_threshold),
        focus=FocusManager(store, cfg.focus_limit), config=cfg, model=mem.model,
        fallback=mem.model, user_waiting=lambda: False,
    )


def test_scan_order_follows_scan_count_then_age(make_manager) -> None:
    mem = make_manager(config=FAST.replace(focus_limit=1, compression_batch_size=2))
    remember(mem, "n1 long text | n2 long text | n3 long text | n4 long text")
    compressor = _compressor(mem)
    order = compressor.next_batch(10)
    names = {v: k for k, v in ids_by_content(mem).items()}
    assert [names[i] for i in order] == ["n1 long text", "n2 long text", "n3 long text"]
    mem.run_compression_slice()  # n1, n2
    assert [names[i] for i in compressor.next_batch(10)] == [
        "n3 long text", "n1 long text", "n2 long text"
    ]
    # the index answer equals the sorted query's
    sorted_rows = mem.sparql(
        "SELECT ?n WHERE { ?n memory:scanOrder ?k FILTER NOT EXISTS { "
        "<https://w3id.org/memory-rdf/focus> memory:member ?n } } ORDER BY ?k"
    )
    assert [r["n"].rsplit("/", 1)[1] for r in sorted_rows] == compressor.next_batch(10)  # type: ignore[index,union-attr]
    assert compressor.index_fallbacks == 0  # endpoints get the ORDER BY form at once


def test_next_batch_skips_focus_nodes_first_in_scan_order(make_manager) -> None:
    """Focus nodes are not candidates (SPEC §5.3) even when they come first in scan order
    (never scanned, scanCount 0): the batch still holds ``limit`` other nodes."""
    mem = make_manager(config=FAST.replace(focus_limit=2, compression_batch_size=3))
    remember(mem, "n1 long text | n2 long text | n3 long text | n4 long text | n5 long text")
    names = {v: k for k, v in ids_by_content(mem).items()}
    assert {names[i] for i in mem.stats()["focus"]} == {"n4 long text", "n5 long text"}
    mem.run_compression_slice()  # n1, n2, n3 scanned once: the focus nodes now lead
    assert [names[i] for i in _compressor(mem).next_batch(2)] == ["n1 long text", "n2 long text"]


def test_time_slice_ends_a_slice(make_manager, model: ScriptedModel) -> None:
    model.compress_delay = 0.05
    mem = make_manager(config=FAST.replace(
        focus_limit=1, link_initial_strength=0.1, time_slice_ms=120))
    remember(mem, " | ".join(f"segment number {i} with text" for i in range(12)))
    report = mem.run_compression_slice()
    assert 1 <= report["scanned"] < 11
    assert report["elapsed_ms"] >= 120


def test_fixed_pool_evicts_the_least_important_non_focus_node(make_manager) -> None:
    mem = make_manager(config=FAST.replace(focus_limit=1, max_nodes=3))
    remember(mem, "n1 long text")
    remember(mem, "n2 long text")  # n1 ↔ n2 at 1.0
    remember(mem, "n3 long text")  # n2 ↔ n3 at 1.0 → importance n1 = 2, n2 = 4
    remember(mem, "n4 long text")  # full: n1 goes
    assert set(ids_by_content(mem)) == {"n2 long text", "n3 long text", "n4 long text"}
    assert focus(mem) == ["n4 long text"]
    assert mem.stats()["dangling_links"] == 1  # n2 → n1 remains
    remember(mem, "n5 long text")
    assert mem.stats()["nodes"] == 3


def test_fixed_pool_with_many_segments(make_manager) -> None:
    mem = make_manager(config=FAST.replace(focus_limit=2, max_nodes=5))
    for i in range(6):
        remember(mem, " | ".join(f"r{i} s{j} text" for j in range(3)))
        assert mem.stats()["nodes"] <= 5
    assert focus(mem) == ["r5 s2 text", "r5 s1 text"]


def test_fixed_pool_counts_nodes_once_and_follows_forgetting(make_manager) -> None:
    """The pool's node count is read once and then kept by the writes: remembers (created and
    evicted nodes) and compression (forgotten nodes) — never a COUNT per remember. A count
    that drifted would show: a remember evicts exactly what goes past ``max_nodes``, as
    counted, so the pool would end above or below it."""
    mem = make_manager(config=FAST.replace(
        focus_limit=1, max_nodes=6, link_initial_strength=0.05, decay_rate=0.5))
    forgotten = 0
    for i in range(12):
        before = mem.stats()["nodes"]
        remember(mem, f"memory {i} one | memory {i} two")
        assert mem.stats()["nodes"] == min(6, before + 2)
        if i % 3 == 2:
            report = mem.run_compression_slice()
            assert report["scanned"] > 0
            forgotten += report["forgotten"]
    assert forgotten > 0  # the count followed compression's forgetting too
    assert mem.stats()["dangling_links"] > 0  # nodes were evicted or forgotten


def importances(mem: MemoryManager) -> dict[str, float]:
    """Content → importance (SPEC §5.2 step 2) of every non-focus node: the sum of its live
    links' strengths, computed here from the plain list of links."""
    content = {r["n"]: r["c"] for r in mem.sparql(  # type: ignore[index,union-attr]
        "SELECT ?n ?c WHERE { ?n memory:content ?c }")}
    focused = set(mem.stats()["focus"])
    out = {c: 0.0 for n, c in content.items() if n.rsplit("/", 1)[1] not in focused}
    for r in mem.sparql("SELECT ?s ?t ?w WHERE { ?l memory:source ?s ; memory:target ?t ; "
                        "memory:strength ?w }"):
        for end in {r["s"], r["t"]}:  # type: ignore[index]
            if end in content and content[end] in out and r["w"] >= 0.01:  # type: ignore[index]
                out[content[end]] += r["w"]  # type: ignore[index]
    return out


def test_fixed_pool_evicts_the_least_important_node_the_scans_saw(make_manager) -> None:
    """Once the scans have seen the nodes, eviction takes the least important non-focus node
    of the whole store (a window of 33 similar-age nodes out of 118 would mostly miss it)."""
    n = 120
    mem = make_manager(config=FAST.replace(focus_limit=2, max_nodes=n,
                                           compression_batch_size=n))
    for i in range(n // 4):
        remember(mem, " | ".join(f"memory {i} part {j} with some text" for j in range(4)))
    assert mem.stats()["nodes"] == n
    for _ in range(3):
        assert mem.run_compression_slice()["scanned"] > 0
    before = importances(mem)
    ranked = sorted(before.values())
    assert ranked[0] < ranked[1] < ranked[2]  # one weakest node
    remember(mem, "newcomer with some text")
    gone = set(before) - set(importances(mem))
    assert [before[g] for g in gone] == [ranked[0]]
    assert mem.stats()["nodes"] == n


def test_fixed_pool_skips_a_scanned_candidate_forgotten_on_request(make_manager) -> None:
    """A node the scans kept as an eviction candidate and then forgot on request is no longer
    a candidate (SPEC §5.3): the next eviction takes the least important node still stored,
    and the node count stays at max_nodes."""
    n = 120
    mem = make_manager(config=FAST.replace(focus_limit=2, max_nodes=n,
                                           compression_batch_size=n))
    for i in range(n // 4):
        remember(mem, " | ".join(f"memory {i} part {j} with some text" for j in range(4)))
    for _ in range(3):
        assert mem.run_compression_slice()["scanned"] > 0
    before = importances(mem)
    ranked = sorted(before, key=lambda c: before[c])
    assert before[ranked[0]] < before[ranked[1]] < before[ranked[2]]
    assert mem.forget([ids_by_content(mem)[ranked[0]]]) == 1
    remember(mem, "first newcomer with some text | second newcomer with some text")
    assert set(before) - set(importances(mem)) == {ranked[0], ranked[1]}
    assert mem.stats()["nodes"] == n


def test_fixed_pool_samples_at_least_16_before_the_scans_saw_enough(make_manager) -> None:
    """With fewer scanned candidates than MIN_SAMPLE (16, SPEC §5.3), the sample is filled from
    the store: a weakest node no scan has seen yet is found and evicted (here the window covers
    the whole store; the 4 scanned nodes alone would miss it)."""
    n = 30
    mem = make_manager(config=FAST.replace(focus_limit=2, max_nodes=n,
                                           compression_batch_size=4))
    for i in range(n // 5):
        remember(mem, " | ".join(f"memory {i} part {j} with some text" for j in range(5)))
    assert mem.run_compression_slice()["scanned"] == 4
    ids = ids_by_content(mem)
    unscanned = {r["c"] for r in mem.sparql(  # type: ignore[index,union-attr]
        "SELECT ?c WHERE { ?n memory:content ?c ; memory:scanCount 0 }")}
    weak = next(c for c in sorted(unscanned) if ids[c] not in mem.stats()["focus"])
    for (s, t), _ in links(mem).items():
        if weak in (s, t) and s in ids and t in ids:
            set_strength(mem, s, t, 0.02)
    before = importances(mem)
    ranked = sorted(before.values())
    assert before[weak] == ranked[0] < ranked[1]
    remember(mem, "newcomer with some text")
    assert set(before) - set(importances(mem)) == {weak}
    assert mem.stats()["nodes"] == n


def test_recall_during_a_slow_slice_returns_quickly(make_manager, model: ScriptedModel) -> None:
    model.compress_delay = 0.3
    mem = make_manager(config=FAST.replace(
        focus_limit=1, link_initial_strength=0.1, auto_compress=True))
    mem.remember([{"role": "user", "content": " | ".join(
        f"segment number {i} with some text" for i in range(10))}])
    deadline = time.monotonic() + 10
    while not model.compress_calls and time.monotonic() < deadline:
        time.sleep(0.01)
    assert model.compress_calls, "the automatic slice did not start compressing"
    start = time.monotonic()
    text = mem.recall(["segment number 9"], depth=0)
    took = time.monotonic() - start
    assert undated(text) == "[memory] segment number 9 with some text"
    assert took < 0.9, f"recall waited {took:.2f} s behind compression"
    assert mem.wait_idle(60)  # the preempted slice was queued again and finished


def test_compression_from_many_threads_is_safe(make_manager) -> None:
    mem = make_manager(config=FAST.replace(focus_limit=2))
    for i in range(10):
        remember(mem, f"memory {i} alpha text | memory {i} beta text")
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(5):
                mem.run_compression_slice()
                mem.recall(["memory"], depth=2)
        except BaseException as exc:  # pragma: no cover
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
