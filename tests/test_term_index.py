"""The derived term index of the keyword entry (SPEC §5.5; memory_rdf._oxigraph.term_index).

The ``memory:term`` triples stay the truth: the in-memory index must hold exactly what a
fresh derivation from the store holds after every write path — remember, compression's
rewrites and forgetting, forget on request, purge, restore — and the keyword entry's seeds
over it must be those of the SPARQL path (``keyword_entry.rq``), which stays the fallback.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from memory_rdf import Config, MemoryManager
from memory_rdf import backup as backup_api
from memory_rdf._oxigraph import AgentStore
from memory_rdf._oxigraph import term_index as ti
from memory_rdf._oxigraph.text_table import TextTable
from memory_rdf._text import UNFOLDED, WIDE_MARKS, fold, fold_class

from _graph import NODE, KeywordEntry, ids_by_content, set_strength
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
    assert kept.unfolded >= fresh.unfolded and kept.marked | kept.unfolded >= fresh.marked
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
        low = fold(str(text).lower())  # as the keyword test compares it
        for needle in {low, *low, *(low[i : i + 2] for i in range(len(low) - 1))}:
            assert kept.may_hold([iri], [needle]) == [iri], (iri, text, needle)
        kind = fold_class(str(text).lower())  # the store's CONTAINS cannot fold it
        if kind == UNFOLDED:
            assert iri in kept.unfolded, (iri, text)
        elif kind == WIDE_MARKS:
            assert iri in kept.marked or iri in kept.unfolded, (iri, text)


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


def _keyword_tests(mem: MemoryManager, monkeypatch: pytest.MonkeyPatch
                   ) -> list[tuple[set[str], bool]]:
    """Each keyword test the agent's store answers from now on (``matching_texts.rq``,
    ``matching_nodes.rq``, or the read mirror's text table in their stead): the ids of the
    nodes it is asked about, and whether it looks for needles in their texts (``CONTAINS``)
    or returns them whole."""
    store = _store(mem)
    asked: list[tuple[set[str], bool]] = []

    def table_spy(real: Any, tested: Callable[[Any], bool]) -> Any:
        def spy(self: TextTable, ids: Any, needles: Any, caseless: bool) -> Any:
            ids = list(ids)
            asked.append((set(ids), tested(needles)))
            return real(self, ids, needles, caseless)
        return spy

    monkeypatch.setattr(TextTable, "matching", table_spy(TextTable.matching, lambda n: True))
    monkeypatch.setattr(TextTable, "matching_texts",
                        table_spy(TextTable.matching_texts, lambda n: n is not None))

    def spying(real: Any) -> Any:
        def spy(query: str) -> Any:
            if query.startswith(("# matching_texts", "# matching_nodes")):
                asked.append((set(re.findall(f"<{re.escape(NODE)}([0-9a-f]+)>", query)),
                              "FILTER(CONTAINS(" in query or "__needle" in query))
            return real(query)
        return spy

    # read as Python values (rows) or as terms (term_rows: matching_texts on this store)
    store.rows = spying(store.rows)  # type: ignore[method-assign]
    store.term_rows = spying(store.term_rows)  # type: ignore[method-assign]
    return asked


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
    asked = _keyword_tests(mem, monkeypatch)

    def nodes_asked(keywords: list[str], entry: str) -> set[str]:
        asked.clear()
        mem.recall(keywords, depth=4, entry=entry, max_chars=None)
        assert asked and all(needles for _, needles in asked)
        return set().union(*(nodes for nodes, _ in asked))

    # a focus-only recall does not build the index for its keyword test: every node reached
    reached = nodes_asked(["retention"], "focus")
    assert _store(mem).terms.builds == 0
    assert reached >= {n for c, n in ids.items() if c.startswith("lunch menu item")}
    mem.recall(["retention"], entry="both")  # the keyword entry builds it
    assert _store(mem).terms.builds == 1
    kept = nodes_asked(["retention"], "focus")
    holding = {n for c, n in ids.items() if "retention" in c.lower()}
    assert holding and holding <= kept
    # "retention" has 8 character pairs: a node without them passes with p < 1e-4
    assert not kept & {n for c, n in ids.items() if c.startswith("lunch menu item")}
    assert nodes_asked(["订单"], "focus") >= {n for c, n in ids.items() if "订单" in c}
    # without the index (another kind of store, or turned off) every node reached is asked
    monkeypatch.setattr(ti, "ENABLED", False)
    assert nodes_asked(["retention"], "focus") == reached


def test_texts_mixing_widths_or_other_compatibility_forms_match_by_their_folded_form(
    make_manager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A text is compared with the keywords NFKC-folded and lower-cased (SPEC §5.4 v3 rule 4,
    §5.5): "postgresql" finds "ＰｏｓｔｇｒｅSQL" (widths mixed inside one word), "finance" finds
    "ﬁnance" (a ligature), "支付页api" finds "支付页ＡPI", "部署:周三" finds "部署：周三"
    (full-width punctuation, the needle's own mixed with ASCII). The store's prefilter compared
    the raw text with the needles and their full-width forms, so these matched nothing; the
    term index now knows the texts that do not fold alike, and the store returns them whole."""
    mem = make_manager(config=Config(auto_compress=False))
    mixed, ligature, han = ("orders moved to ＰｏｓｔｇｒｅSQL last week",
                            "the ﬁnance team owns the budget", "重写了支付页ＡPI的重试")
    marked = "上线定了，部署：周三 v2.0"
    for text in (mixed, ligature, han, marked, *(f"lunch menu item {i}" for i in range(6))):
        remember(mem, text)
    mem.recall(["lunch"], entry="both")  # the keyword entry builds the index
    asked = _keyword_tests(mem, monkeypatch)
    for entry in ("focus", "keywords", "both"):
        for keywords, text in ((["postgresql"], mixed), (["finance"], ligature),
                               (["支付页api"], han), (["budget", "finance"], ligature),
                               (["部署:周三"], marked), (["定了,部署"], marked)):
            got = mem.recall(keywords, depth=2, entry=entry, max_chars=None)
            assert text in got, (entry, keywords, got)
            assert "lunch menu" not in got
    # listed by memories(keywords=) too, in their place among the others (newest first)
    everything = [m["content"] for m in mem.memories(limit=None)]
    for keywords, text in ((["postgresql"], mixed), (["支付页api"], han)):
        assert [m["content"] for m in mem.memories(keywords=keywords)] == [text]
    listed = [m["content"] for m in mem.memories(keywords=["finance", "lunch"], limit=None)]
    assert listed == [c for c in everything if c == ligature or c.startswith("lunch menu")]
    since = mem.memories(keywords=["lunch"], limit=1)[0]["created_at"]
    assert [m["content"] for m in mem.memories(keywords=["finance", "lunch"], since=since)] \
        == listed[:1]
    assert _store(mem).terms.builds == 1
    # the texts that fold alike are still tested by the store: only the others come whole
    ids = ids_by_content(mem)
    whole = set().union(*(nodes for nodes, needles in asked if not needles))
    assert whole == {ids[mixed], ids[ligature], ids[han], ids[marked]}
    # a text whose full-width punctuation is all that differs: tested by the store for a
    # keyword without punctuation
    asked.clear()
    assert marked in mem.recall(["部署", "周三"], depth=2, entry="both", max_chars=None)
    assert asked and not any(ids[marked] in nodes for nodes, needles in asked if not needles)
    _check_texts(_store(mem))


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


def test_a_signature_keeps_a_node_when_it_has_every_bit_of_one_needle() -> None:
    """``may_hold`` keeps, in order, exactly the nodes whose signature (of any size) has every
    bit of one needle's characters pairs (its one character): the Bloom filter's definition,
    tested bit by bit here; a node without texts is left out, an empty needle keeps every
    node."""
    import random

    rnd = random.Random(11)
    index = ti.TermIndex(0)
    alphabet = "abcdefghij登录数据库支付用户 "
    nodes = [f"urn:n{i}" for i in range(300)]
    for node in nodes[:-5]:
        length = rnd.choice((1, 3, 10, 40, 120, 400))
        index.add_texts(node, ["".join(rnd.choice(alphabet) for _ in range(length))])
    assert {bits.bit_length() - 1 for bits in index.texts.values()} == set(ti._SIZES)

    def holds(bits: int, needle: str) -> bool:
        grams = ti.needle_grams(needle)
        assert grams is not None
        return all(bits >> (h & (bits.bit_length() - 2)) & 1 for h in grams)

    for needles in (["a"], ["登录"], ["数据库", "abc"], ["支付", "j"], ["hij用户"], ["zz"]):
        expected = [n for n in nodes if n in index.texts
                    and any(holds(index.texts[n], needle) for needle in needles)]
        assert index.may_hold(nodes, needles) == expected, needles
    assert index.may_hold(nodes, ["登录", ""]) == nodes


def test_han_needles_are_looked_for_in_the_texts_as_they_are(make_manager) -> None:
    """A keyword test of Han needles only asks the store's ``CONTAINS`` on the texts as they
    are (``?raw``, before ``LCASE``; issue 38) and finds what it found on the lower-cased
    texts, also where lower-casing changes the text around or inside the keyword (final
    sigma, dotted capital I, full-width letters); a needle of another script is still looked
    for in the lower-cased texts."""
    from memory_rdf._nodes import NodeStore, _needles
    from memory_rdf._oxigraph import lit, node_id, node_ref, render
    from memory_rdf._text import keyword_rules

    mem = make_manager(config=Config(auto_compress=False))
    for text in ("ΣΑΣ登录ΣΑΣ", "İ登录", "登İ录", "ＡＢ登录", "LOGIN 登录", "数据库 OK", "登 录",
                 "Login only", "nothing here"):
        remember(mem, text)
    ids = sorted(ids_by_content(mem).values())
    store, nodes = mem.store, NodeStore(mem.store)
    asked: list[str] = []
    real_rows, real_terms = store.rows, store.term_rows

    def spy(real: Any) -> Any:
        def read(query: str) -> Any:
            asked.append(query)
            return real(query)
        return read

    queries = ((["登录"], True), (["登录", "数据库"], True), (["登录", "login"], False))
    # the read mirror's text table (where one serves) answers as the queries below
    table = [(nodes.matching(ids, k), nodes.match_details(ids, k)) for k, _ in queries]
    store.rows, store.term_rows = spy(real_rows), spy(real_terms)  # type: ignore[method-assign]
    store.text_table = lambda: None  # type: ignore[method-assign]  # the SPARQL path
    for (keywords, caseless), (table_found, table_details) in zip(queries, table, strict=True):
        # what the lower-cased texts hold (the filter as it was)
        before = render("matching_nodes", nodes=[node_ref(i) for i in ids],
                        keywords=[lit(n) for n in _needles(keyword_rules(keywords), None)])
        expected = {node_id(row[0]) for row in real_rows(before)}
        assert nodes.match_details(ids, keywords) == table_details
        asked.clear()
        assert set(nodes.match_details(ids, keywords)) <= expected
        found = nodes.matching(ids, keywords)
        assert asked and all(("CONTAINS(?raw" in q) is caseless for q in asked)
        assert all(("CONTAINS(?text" in q) is not caseless for q in asked)
        assert found == table_found
        if caseless:
            assert found == expected and len(found) >= 4, keywords
