"""The derived term index of the keyword entry (SPEC §5.5; memory_rdf._oxigraph.term_index).

The ``memory:term`` triples stay the truth: the in-memory index must hold exactly what a
fresh derivation from the store holds after every write path — remember, compression's
rewrites and forgetting, forget on request, purge, restore — and the keyword entry's seeds
over it must be those of the SPARQL path (``keyword_entry.rq``), which stays the fallback.
"""

from __future__ import annotations

import pytest

from memory_rdf import Config, MemoryManager
from memory_rdf import backup as backup_api
from memory_rdf._oxigraph import AgentStore
from memory_rdf._oxigraph import term_index as ti

from _graph import KeywordEntry, ids_by_content, set_strength
from helpers import FAST, remember

QUERIES = [
    ["kafka"], ["kafka", "retention"], ["lunch"], ["lunch", "menu", "kafka"], ["订单"],
    ["postgresql", "订单"], ["alpha", "charlie"], ["brokers"], ["nothing-here"], ["golf"],
    ["consumer", "lag", "alert"], ["retained"], ["deploy", "订单", "lunch", "alpha"],
]

TEXTS = [
    "Kafka retention is seven days", "我们决定用 PostgreSQL 存订单数据",
    "ALPHA bravo charlie delta echo foxtrot golf hotel | yankee zulu whiskey text",
    "deploy Kafka brokers | Kafka consumer lag alert", "Kafka topic naming uses dots",
    "订单 表 的 索引 | lunch and Kafka retention again",
]


def _store(mem: MemoryManager) -> AgentStore:
    assert isinstance(mem.store, AgentStore)
    return mem.store


def _seeds(mem: MemoryManager, keywords: list[str], *, index: bool,
           monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, float, int]]:
    monkeypatch.setattr(ti, "ENABLED", index)
    seeds = KeywordEntry(mem).seeds(keywords, 10)
    monkeypatch.setattr(ti, "ENABLED", True)
    return [(s.node, s.strength, s.rank) for s in seeds]


def _check(mem: MemoryManager, monkeypatch: pytest.MonkeyPatch) -> None:
    """The index equals a fresh derivation from the store, and seeds the walk exactly as the
    SPARQL path does, for every query."""
    for keywords in QUERIES:
        assert _seeds(mem, keywords, index=True, monkeypatch=monkeypatch) == \
            _seeds(mem, keywords, index=False, monkeypatch=monkeypatch), keywords
    store = _store(mem)
    kept = store.terms.index
    assert kept is not None and kept.generation == store.terms.generation
    fresh = ti.build(store.store, 0)  # the terms: on disk only (issue 38)
    assert kept.postings == fresh.postings
    assert kept.lengths == fresh.lengths
    assert {n: set(t) for n, t in kept.terms_of.items()} == \
        {n: set(t) for n, t in fresh.terms_of.items()}


def test_index_follows_every_write_path(make_manager, monkeypatch: pytest.MonkeyPatch) -> None:
    mem = make_manager(config=FAST.replace(focus_limit=1))
    for i, text in enumerate(TEXTS):
        remember(mem, text)
        remember(mem, f"lunch menu item {i}")
    store = _store(mem)
    _check(mem, monkeypatch)
    assert store.terms.builds == 1
    remember(mem, "Kafka brokers retained | lunch again")  # remember: followed in place
    assert mem.recall(["retained"], depth=0, entry="keywords").count("retained") == 1
    _check(mem, monkeypatch)
    # compression rewrites a text (its terms and count) and forgets a short node
    x = "ALPHA bravo charlie delta echo foxtrot golf hotel"
    set_strength(mem, x, "yankee zulu whiskey text", 0.25)
    remember(mem, "ab | target node text")
    for _ in range(3):
        mem.run_compression_slice()
    assert "ab" not in ids_by_content(mem)
    _check(mem, monkeypatch)
    # forget on request
    ids = ids_by_content(mem)
    assert mem.forget([ids["Kafka topic naming uses dots"]]) == 1
    _check(mem, monkeypatch)
    assert store.terms.builds == 1  # every write above was followed, never derived again
    # purge: the store is rewritten and swapped in; the index is derived again when asked
    assert mem.forget([ids["deploy Kafka brokers"]], purge=True) == 1
    _check(mem, monkeypatch)
    assert store.terms.builds == 2


def test_restored_agent_and_reopened_store(make_manager, data_dir,
                                           monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    mem = make_manager()
    for text in TEXTS:
        remember(mem, text)
    expected = {tuple(k): _seeds(mem, k, index=False, monkeypatch=monkeypatch) for k in QUERIES}
    (tmp_path / "b.nq").write_bytes(backup_api.export("agent", data_dir))
    mem.close()
    backup_api.restore("copy", tmp_path / "b.nq", data_dir)
    for agent in ("agent", "copy"):
        with MemoryManager(agent, data_dir=data_dir, config=FAST) as again:
            _check(again, monkeypatch)
            got = {tuple(k): _seeds(again, k, index=True, monkeypatch=monkeypatch)
                   for k in QUERIES}
            assert got == expected


def test_a_write_the_index_cannot_follow_marks_it_stale(
    make_manager, monkeypatch: pytest.MonkeyPatch
) -> None:
    mem = make_manager()
    for text in TEXTS:
        remember(mem, text)
    store = _store(mem)
    _check(mem, monkeypatch)
    # a term triple spelled in a form the index does not read (the explicit xsd:string
    # datatype): the write lands, the index is not followed but marked stale
    from memory_rdf import _vocab as V
    from memory_rdf._oxigraph import WriteBatch

    node = f"<{V.NODE}{ids_by_content(mem)['Kafka topic naming uses dots']}>"
    batch = WriteBatch()
    batch.delete([f'{node} {V.TERM} "kafka"^^<{V.XSD}string> .'])
    store.commit(batch)
    assert store.terms.index is None  # derived again at the next keyword entry
    assert "Kafka topic naming uses dots" not in mem.recall(["kafka"], depth=0,
                                                            entry="keywords")
    assert store.terms.builds == 2
    _check(mem, monkeypatch)

def test_keyword_recall_text_is_the_same_with_and_without_the_index(
    make_manager, monkeypatch: pytest.MonkeyPatch
) -> None:
    mem = make_manager(config=Config(auto_compress=False))
    for i, text in enumerate(TEXTS):
        remember(mem, text)
        remember(mem, f"lunch menu item {i}")
    for keywords in QUERIES:
        for depth in (1, 2, 4):
            monkeypatch.setattr(ti, "ENABLED", False)
            before = mem.recall(keywords, depth=depth, entry="both")
            monkeypatch.setattr(ti, "ENABLED", True)
            assert mem.recall(keywords, depth=depth, entry="both") == before
    assert _store(mem).terms.builds == 1
