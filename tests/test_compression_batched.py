"""Batched compression equals scanning node by node (SPEC §5.2, §5.3).

A slice reads the state of a chunk of ``CHUNK_SIZE`` nodes in two queries, computes the scans
on that copy and writes the net change once per chunk. Here real stores several chunks large
(links cross chunk boundaries, chunks end inside a slice, slices end inside a chunk) are
compressed through the public API, and after every slice the whole network — contents,
phrases, keywords, scan counts, link strengths and relations, shortcut triples, forgotten
nodes, dangling links, the focus — must equal :class:`reference.Reference`, which scans one
node at a time over plain dicts; the keyword index must describe each node's current text.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from pyoxigraph import Literal
from test_properties import (
    WORDS,
    OvershootModel,
    check_same,
    local,
    relation_fn,
    rows,
    scripted_process,
)

from memory_rdf import Config, MemoryManager
from memory_rdf._compression import CHUNK_SIZE
from memory_rdf._text import index_terms

from helpers import say
from reference import Reference


def segment(i: int) -> str:
    """A unique text of 20–70 characters with upper-case keywords (the scripted model's)."""
    words = [WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(3 + i % 9)]
    return f"m{i} " + " ".join(words)


def remember(mem: MemoryManager, ref: Reference, model: OvershootModel, segs: list[str]) -> None:
    relation = relation_fn(7, ["", "涉及", "因果"])
    for seg in segs:
        for f in ref.focus_ids():
            model.relations[(seg, ref.nodes[f]["content"])] = relation(seg, ref.nodes[f]["content"])
    before = set(ref.nodes)
    mem.remember(say(" | ".join(segs)))
    assert mem.wait_idle(timeout=60)
    new = sorted((r["t"], local(r["n"])) for r in rows(
        mem, "SELECT ?n ?t WHERE { ?n a memory:Node ; memory:createdAt ?t }")
        if local(r["n"]) not in before)
    ref.remember([scripted_process(s) for s in segs], [n for _, n in new], relation)


@pytest.mark.parametrize(
    ("batch", "overshoot", "decay", "expect"),
    [
        # two full chunks and part of a third: forgetting, links breaking, dangling links
        (CHUNK_SIZE * 2 + 20, 1.0, 0.5, ("forgotten", "links_removed", "compressed")),
        # slices end inside the second chunk; compression on every scan
        (CHUNK_SIZE + 7, 1.0, 0.9, ("compressed",)),
        # every model answer too long: failed calls, the nodes still decay
        (CHUNK_SIZE * 3, 1.5, 0.6, ("forgotten", "links_removed")),
    ],
    ids=["forgetting", "compressing", "failed-calls"],
)
def test_batched_slices_equal_per_node_scans(
    tmp_path: Path, batch: int, overshoot: float, decay: float, expect: tuple[str, ...]
) -> None:
    config = Config(focus_limit=3, decay_rate=decay, delete_threshold=5,
                    compression_batch_size=batch, link_break_threshold=0.05,
                    retry_initial_delay=0.0, retry_max_delay=0.0, max_retries=1,
                    auto_compress=False)
    model = OvershootModel(overshoot=overshoot)
    ref = Reference(config)
    totals: Counter[str] = Counter()
    with MemoryManager("agent", data_dir=tmp_path, config=config, model=model) as mem:
        for r in range((CHUNK_SIZE * 2 + 30) // 5):  # more than two chunks
            remember(mem, ref, model, [segment(r * 5 + k) for k in range(5)])
        check_same(mem, ref)
        for step in range(8):
            if step == 4:  # new nodes (new focus) in the middle of the scanning
                remember(mem, ref, model, [segment(1000), segment(1001)])
            report = mem.run_compression_slice(timeout=60)
            expected = ref.compression_slice(
                lambda text, target: scripted_process(text, target, overshoot))
            assert not report["preempted"]
            for key, count in expected.items():
                assert report[key] == count, (step, key)
                totals[key] += count
            assert report["scanned"] == min(batch, len(ref.nodes) + report["forgotten"]
                                            - len(ref.focus_ids()))
            check_same(mem, ref)
    for key in expect:  # the slices did what this case is about
        assert totals[key] > 0, (key, totals)


def test_index_terms_follow_the_compressed_text(tmp_path: Path) -> None:
    config = Config(focus_limit=3, decay_rate=0.7, compression_batch_size=CHUNK_SIZE * 2,
                    delete_threshold=2, auto_compress=False)
    model = OvershootModel()
    ref = Reference(config)
    with MemoryManager("agent", data_dir=tmp_path, config=config, model=model) as mem:
        for r in range((CHUNK_SIZE * 2 + 20) // 5):
            remember(mem, ref, model, [segment(r * 5 + k) for k in range(5)])
        compressed = sum(mem.run_compression_slice(timeout=60)["compressed"]
                         for _ in range(6))
        assert compressed > CHUNK_SIZE  # rewrites in several chunks
        texts = {r["n"]: r["c"]
                 for r in rows(mem, "SELECT ?n ?c WHERE { ?n memory:content ?c }")}
        keywords: dict[str, list[str]] = {n: [] for n in texts}
        for r in rows(mem, "SELECT ?n ?k WHERE { ?n memory:keyword ?k }"):
            keywords[r["n"]].append(r["k"])
        terms: dict[str, set[str]] = {n: set() for n in texts}
        for r in rows(mem, "SELECT ?n ?t WHERE { ?n memory:term ?t }"):
            terms[r["n"]].add(r["t"])
        counts = {r["n"]: r["c"] for r in rows(
            mem, "SELECT ?n ?c WHERE { ?n memory:termCount ?c }")}
        for n, content in texts.items():
            want = set(index_terms(content, keywords[n]))
            assert terms[n] == want, n
            assert counts.get(n, 0) == len(want), n


def test_a_link_whose_iri_does_not_name_its_ends_is_read_from_the_store() -> None:
    """The chunk read takes a link's ends from its IRI (link:{source}--{target}, SPEC §2);
    a link with another IRI (written by some other tool) is still found, its ends read."""
    from memory_rdf import _vocab as V
    from memory_rdf._compression import _Chunk
    from memory_rdf._oxigraph import AgentStore, WriteBatch, iri_ref, lit, node_ref, triple

    store = AgentStore(None)
    batch = WriteBatch()
    for n in ("a", "b"):
        batch.insert([triple(node_ref(n), V.CONTENT, lit(n)),
                      triple(node_ref(n), V.ORIGINAL_LENGTH, lit(1)),
                      triple(node_ref(n), V.SCAN_COUNT, lit(0)),
                      triple(node_ref(n), V.SCAN_ORDER, lit(0))])
    odd = iri_ref("https://example.org/some-link")
    batch.insert([triple(odd, V.SOURCE, node_ref("b")), triple(odd, V.TARGET, node_ref("a")),
                  triple(odd, V.STRENGTH, lit(0.25))])
    store.commit(batch)
    chunk = _Chunk.read(store, ["a"], keyword_index=False)
    assert chunk.links == {("b", "a"): 0.25}
    assert chunk.ref(("b", "a")) == odd


def test_a_text_literal_of_another_form_is_replaced_too(tmp_path: Path) -> None:
    """A rewrite deletes only the text triples that change, rebuilt from what it reads; a
    literal of a form the library does not write (a language tag, say, added by another tool)
    cannot be rebuilt, so that node's text is deleted by pattern: nothing stale remains."""
    from memory_rdf import _vocab as V
    from memory_rdf._oxigraph import WriteBatch, iri_ref, triple

    from _graph import ids_by_content, set_strength
    from helpers import FAST, ScriptedModel, remember

    x = "ALPHA bravo charlie delta echo foxtrot golf hotel"
    y = "yankee zulu whiskey text"
    with MemoryManager("agent", data_dir=tmp_path, config=FAST.replace(focus_limit=1),
                       model=ScriptedModel()) as mem:
        remember(mem, f"{x} | {y}")
        remember(mem, "focus node here")
        set_strength(mem, x, y, 0.25)  # importance(x) 0.75: shortened to 36 characters
        node = iri_ref(V.NODE + ids_by_content(mem)[x])
        batch = WriteBatch()
        batch.insert([triple(node, V.KEYWORD, str(Literal("hotel", language="en")))])
        mem.store.commit(batch)
        assert mem.run_compression_slice()["compressed"] == 1
        rows_ = mem.sparql(f"SELECT ?p ?o WHERE {{ {node} ?p ?o }}")
        got = {(r["p"].rsplit("#", 1)[1], r["o"]) for r in rows_}  # type: ignore[index,union-attr]
        texts = {(p, o) for p, o in got if p in ("content", "phrase", "keyword", "termCount")}
        assert texts == {("content", x[:36]), ("phrase", x[:10]), ("keyword", "ALPHA"),
                         ("termCount", 6)}


def test_the_read_mirror_is_built_again_after_many_rewrites(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Oxigraph's in-memory store keeps every triple deleted from it, so a mirror kept in step
    with compression's rewrites would grow without end: after enough update text it is built
    again from the disk store, and reads stay exact throughout."""
    from memory_rdf import _vocab as V
    from memory_rdf._oxigraph import AgentStore, WriteBatch, lit, node_ref, triple
    from memory_rdf._oxigraph import mirror as mirror_module

    monkeypatch.setattr(mirror_module, "MIRROR_RENEW_MIN_BYTES", 2000)
    store = AgentStore(tmp_path / "agent", mirror=True)
    try:
        batch = WriteBatch()
        batch.insert([triple(node_ref(f"n{i}"), V.SCAN_COUNT, lit(0)) for i in range(20)])
        store.commit(batch)
        assert store.wait_mirror(30)
        query = "SELECT (SUM(?s) AS ?t) WHERE { ?n memory:scanCount ?s }"
        for k in range(30):  # every node's scanCount k → k + 1, as a scan writes it
            batch = WriteBatch()
            batch.delete([triple(node_ref(f"n{i}"), V.SCAN_COUNT, lit(k)) for i in range(20)])
            batch.insert([triple(node_ref(f"n{i}"), V.SCAN_COUNT, lit(k + 1)) for i in range(20)])
            store.commit(batch)
            assert store.rows(query) == [(20 * (k + 1),)]  # from disk while a copy is built
            # A renewal counts once its copy serves and has applied enough again: wait for a
            # build in progress, so that a slow build (a loaded CI machine) cannot leave
            # the later commits without one.
            assert store.wait_mirror(30)
        assert store.mirror_renewals >= 2
        assert store.wait_mirror(30)
        assert store.mirror_state == "on"
        assert store.rows(query) == [(20 * 30,)]
    finally:
        store.close()
