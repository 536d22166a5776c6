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
    _check_texts(store)


def _check_texts(store: AgentStore) -> None:
    """Every node's text signature in the index covers its texts in the store: no needle one
    of them holds (itself, a character, a pair of characters) is ruled out. (A Bloom filter
    may keep a node for nothing, never leave out one that matches.)"""
    kept = store.terms.index
    assert kept is not None
    rows = store.rows("SELECT ?n ?t WHERE { { ?n memory:content ?t } UNION "
                      "{ ?n memory:keyword ?t } }")
    assert rows
    for iri, text in rows:
        low = str(text).lower()
        for needle in {low, *low, *(low[i : i + 2] for i in range(len(low) - 1))}:
            assert kept.may_hold([iri], [needle]) == [iri], (iri, text, needle)


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


def test_the_keyword_test_reads_the_texts_of_the_nodes_that_may_match_only(
    make_manager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The recall's keyword test (SPEC §5.4 v3 rule 4) asks the store about the nodes whose
    text signatures may hold a needle: every node that matches, few that do not."""
    mem = make_manager(config=Config(auto_compress=False))
    for i, text in enumerate(TEXTS):
        remember(mem, text)
        remember(mem, f"lunch menu item {i}")
    ids = ids_by_content(mem)
    every = list(ids.values())
    searcher = mem._searcher
    # a focus-only recall does not build the index for its keyword test
    assert "retention" in mem.recall(["retention"], depth=1, entry="focus")
    assert _store(mem).terms.builds == 0
    assert searcher.may_match(every, ["retention"]) == every
    mem.recall(["retention"], entry="both")  # the keyword entry builds it
    assert _store(mem).terms.builds == 1
    kept = set(searcher.may_match(every, ["retention"]))
    holding = {n for c, n in ids.items() if "retention" in c.lower()}
    assert holding and holding <= kept
    # "retention" has 8 character pairs: a node without them passes with p < 1e-4
    assert not kept & {n for c, n in ids.items() if c.startswith("lunch menu item")}
    assert set(searcher.may_match(every, ["订单"])) >= {
        n for c, n in ids.items() if "订单" in c}
    # without the index (another kind of store, or turned off) every node is asked about
    monkeypatch.setattr(ti, "ENABLED", False)
    assert searcher.may_match(every, ["retention"]) == every


def test_the_keyword_test_finds_the_same_nodes_whatever_the_texts_case(
    make_manager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Signatures are of the texts lower-cased as the store's ``LCASE`` lower-cases them:
    capitals, a dotted capital I, a final sigma, full-width letters and Han text match the
    same nodes with the signatures as without them."""
    mem = make_manager(config=Config(auto_compress=False))
    texts = ["İstanbul trip in MAY", "ΟΔΟΣ ΣΟΦΟΚΛΕΟΥΣ address", "ＧＰＵ ｃｌｕｓｔｅｒ budget",
             "DevOps 周会 改到 周三", "Straße renamed; the STRASSE sign"]
    for text in texts:
        remember(mem, text)
    queries = [["istanbul"], ["i̇stanbul"], ["may"], ["οδος"], ["σοφοκλεους"], ["ｇｐｕ"],
               ["gpu"], ["budget"], ["devops", "周会"], ["周三"], ["straße"], ["strasse"], ["ss"]]
    mem.recall(["trip"], entry="both")  # the keyword entry builds the index
    found = set()
    for keywords in queries:
        for entry in ("focus", "both"):
            monkeypatch.setattr(ti, "ENABLED", False)
            before = mem.recall(keywords, depth=2, entry=entry, max_chars=None)
            monkeypatch.setattr(ti, "ENABLED", True)
            assert mem.recall(keywords, depth=2, entry=entry, max_chars=None) == before, keywords
            found |= {t for t in texts if t.split()[-1] in before}  # (stored NFKC)
    assert len(found) == len(texts)  # every text is the answer to one of the queries
    assert _store(mem).terms.builds == 1
    _check_texts(_store(mem))
