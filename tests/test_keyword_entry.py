"""SPEC §5.5: index terms on every node, and the keyword entry into the network.

``recall(..., entry="keywords" | "both")`` seeds the §5.4 walk with the nodes whose
``memory:term`` index terms best match the query's terms (BM25, ranked in SPARQL).
"""

from __future__ import annotations

import math

import pytest

from memory_rdf import Config, MemoryManager
from memory_rdf import _search as search
from memory_rdf._text import index_terms, tokenize

from _graph import NODE, KeywordEntry, ids_by_content, set_strength, stored_quads
from helpers import FAST, ScriptedModel, remember, with_undated_entries

#: Each test runs on an embedded store and on a loopback Oxigraph server (SPEC §8).
BACKENDS = ("embedded", "endpoint")

SEP = "\n---\n"


@pytest.fixture
def make_manager(make_manager):  # type: ignore[no-untyped-def]
    """The shared fixture, with undated entries (helpers.UNDATED) unless a test sets its
    templates."""
    return with_undated_entries(make_manager)


def entries(*contents: str) -> str:
    return SEP.join(f"[记忆] {c}" for c in contents)


def terms_of(mem: MemoryManager) -> dict[str, tuple[set[str], int | None]]:
    """``content → (memory:term values, memory:termCount)`` of every node."""
    rows = mem.sparql(
        """SELECT ?c ?t ?k WHERE { ?n a memory:Node ; memory:content ?c .
             OPTIONAL { ?n memory:term ?t } OPTIONAL { ?n memory:termCount ?k } }"""
    )
    out: dict[str, tuple[set[str], int | None]] = {}
    for r in rows:  # type: ignore[union-attr]
        terms, count = out.setdefault(r["c"], (set(), r.get("k")))  # type: ignore[index,union-attr]
        if "t" in r:  # type: ignore[operator]
            terms.add(r["t"])  # type: ignore[index]
    return out


FILLERS = [f"lunch menu item {i}" for i in range(30)]
OLD_EN = "Kafka retention is seven days"
OLD_ZH = "我们决定用 PostgreSQL 存订单数据"


# -- index terms: written at remember, rewritten by compression, gone with the node ---------


def test_terms_written_at_remember(make_manager, model: ScriptedModel) -> None:
    mem = make_manager()
    remember(mem, f"ALPHA bravo the Charlie | {OLD_ZH}")
    got = terms_of(mem)
    # The scripted model's keywords are the upper-case words; terms are lower-cased tokens of
    # content and keywords, stop words dropped, Chinese cut into words.
    assert got["ALPHA bravo the Charlie"] == ({"alpha", "bravo", "charlie"}, 3)
    zh_terms, zh_count = got[OLD_ZH]
    assert zh_terms == set(index_terms(OLD_ZH, [])) and zh_count == len(zh_terms)
    assert {"postgresql", "订单", "数据"} <= zh_terms and "我们" not in zh_terms


def test_no_terms_without_the_keyword_index(make_manager) -> None:
    mem = make_manager(config=FAST.replace(keyword_index=False))
    remember(mem, f"{OLD_EN} | other words")
    assert terms_of(mem)[OLD_EN] == (set(), None)
    # keyword_index=False: the keyword entry finds nothing; "both" is the focus entry
    assert mem.recall(["Kafka"], depth=2, entry="keywords") == ""
    assert mem.recall(["Kafka"], depth=2, entry="both") == mem.recall(["Kafka"], depth=2)
    assert mem.recall(["Kafka"], depth=2, entry="both") == entries(OLD_EN)


def test_terms_rewritten_on_compression(make_manager) -> None:
    x = "ALPHA bravo charlie delta echo foxtrot golf hotel"  # 49 characters
    y = "yankee zulu whiskey text"
    mem = make_manager(config=FAST.replace(focus_limit=1))
    remember(mem, f"{x} | {y}")
    remember(mem, "focus node here")
    set_strength(mem, x, y, 0.25)  # importance(x) = 0.25 + 0.5 → target floor(49 × 0.75) = 36
    assert terms_of(mem)[x] == (
        {"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"}, 8
    )
    report = mem.run_compression_slice()
    assert report["compressed"] == 1
    short = x[:36]
    assert short == "ALPHA bravo charlie delta echo foxtr"
    assert terms_of(mem)[short] == ({"alpha", "bravo", "charlie", "delta", "echo", "foxtr"}, 6)
    assert mem.recall(["golf"], depth=0, entry="keywords") == ""
    assert mem.recall(["charlie"], depth=0, entry="keywords") == entries(short)


def test_terms_removed_on_forgetting(make_manager) -> None:
    mem = make_manager(config=FAST.replace(focus_limit=1))
    remember(mem, "root content long enough")
    remember(mem, "ab | target node text")
    gone = ids_by_content(mem)["ab"]
    assert mem.sparql('ASK { ?n memory:term "ab" }') is True
    assert mem.run_compression_slice()["forgotten"] == 1
    assert mem.sparql('ASK { ?n memory:term "ab" }') is False
    assert mem.sparql(f"ASK {{ <{NODE}{gone}> ?p ?o }}") is False
    assert mem.recall(["ab"], depth=3, entry="keywords") == ""


# -- the keyword entry ------------------------------------------------------------------------


def test_old_memory_found_by_keywords_not_by_focus(make_manager) -> None:
    mem = make_manager()  # focus_limit 5: 30 remembers later the memory is ~6 hops away
    remember(mem, OLD_EN)
    for filler in FILLERS:
        remember(mem, filler)
    assert mem.recall(["retention"], depth=2, entry="focus") == ""
    assert mem.recall(["retention"], depth=2, entry="focus") == ""
    assert mem.recall(["retention"], depth=2, entry="keywords") == entries(OLD_EN)
    assert mem.recall(["Kafka", "retention"], depth=0, entry="keywords") == entries(OLD_EN)
    # The entry only seeds the walk: matching is still §5.4 rule 4 (v3: by words, every word of
    # a keyword a word of the node — "retention days" matches, "retention week" does not).
    assert mem.recall(["retention days"], depth=0, entry="keywords") == entries(OLD_EN)
    assert mem.recall(["retention week"], depth=0, entry="keywords") == ""


@pytest.fixture
def kafka(make_manager) -> MemoryManager:
    """O1, fillers, O2, fillers, then "D | F" (two segments; focus = [F], focus_limit 1).

    Links: consecutive remembers are linked both ways at 1.0 (through the one focus node);
    D ↔ F at 0.5 (上文 / 下文).
    """
    mem = make_manager(config=FAST.replace(focus_limit=1))
    remember(mem, OLD_EN)  # O1: kafka retention seven days (4 terms)
    for filler in FILLERS[:4]:
        remember(mem, filler)
    remember(mem, "Kafka topic naming uses dots")  # O2: 5 terms
    for filler in FILLERS[4:8]:
        remember(mem, filler)
    remember(mem, "deploy Kafka brokers | Kafka consumer lag alert")  # D (3 terms) | F (4)
    return mem


def _seeds(mem: MemoryManager, keywords: list[str], limit: int = 10,
           entry: KeywordEntry | None = None) -> list[tuple[str, float]]:
    names = {v: k for k, v in ids_by_content(mem).items()}
    seeds = (entry or KeywordEntry(mem)).seeds(keywords, limit)
    assert [s.rank for s in seeds] == list(range(len(seeds)))
    return [(names[s.node], s.strength) for s in seeds]


def test_seeds_are_ranked_by_bm25_with_strength_score_over_best(kafka: MemoryManager) -> None:
    seeds = _seeds(kafka, ["Kafka", "retention"])
    assert [c for c, _ in seeds] == [
        OLD_EN, "deploy Kafka brokers", "Kafka consumer lag alert", "Kafka topic naming uses dots"
    ]
    # BM25 recomputed here from the store's own terms: N = 14 nodes, avgdl over all of them.
    got = terms_of(kafka)
    n = len(got)
    avgdl = sum(k or 0 for _, k in got.values()) / n

    def idf(term: str) -> float:
        df = sum(term in t for t, _ in got.values())
        return math.log(1 + (n - df + 0.5) / (df + 0.5))

    def score(content: str) -> float:
        terms, dl = got[content]
        weight = sum(idf(q) for q in ("kafka", "retention") if q in terms)
        return weight * 2.2 / (1 + 1.2 * (0.25 + 0.75 * (dl or 0) / avgdl))

    best = score(OLD_EN)
    for content, strength in seeds:
        assert strength == pytest.approx(score(content) / best, rel=1e-12)
    assert seeds[0][1] == 1.0


def test_entry_modes_and_both_merges_best_first(kafka: MemoryManager) -> None:
    o1, o2, d, f = OLD_EN, "Kafka topic naming uses dots", "deploy Kafka brokers", (
        "Kafka consumer lag alert"
    )
    # Strengths: keyword seeds O1 1.0, D 0.42, F 0.38, O2 0.34 (previous test); the focus F
    # 1.0 reaches D at 0.5 and the last filler at 1.0. Depth 1.
    assert kafka.recall(["Kafka", "retention"], depth=1, entry="focus") == entries(f, d)
    # keywords: O1 matches both keywords; D, F and O2 one each, at path strengths within a
    # factor of 4: alike, the later said first (SPEC §5.4 v3)
    assert kafka.recall(["Kafka", "retention"], depth=1, entry="keywords") == entries(o1, f, d, o2)
    # both: F (focus, 1.0, rank 0) · O1 (keyword, 1.0, after the focus) · D via the focus at
    # 0.5 (its own seed, 0.42, comes later) · O2 (keyword, 0.34) is the walk's order; ranked
    # (SPEC §5.4 v2), O1 matches both keywords and comes first, the rest match one each and
    # keep the walk's order
    assert kafka.recall(["Kafka", "retention"], depth=1, entry="both") == entries(o1, f, d, o2)
    # the keyword seeds are not matched for free: only nodes containing a keyword appear
    assert kafka.recall(["retention"], depth=1, entry="both") == entries(o1)
    # no keywords: every reached node matches; no query terms means no keyword seeds
    assert kafka.recall([], depth=0, entry="keywords") == ""
    assert kafka.recall([], depth=0, entry="both") == kafka.recall([], depth=0, entry="focus")
    assert kafka.recall([], depth=0) == entries(f)


def test_max_entry_nodes_limits_the_seeds(make_manager, kafka: MemoryManager) -> None:
    assert len(_seeds(kafka, ["Kafka"], limit=2)) == 2
    assert len(_seeds(kafka, ["Kafka"], limit=10)) == 4
    assert kafka.recall(["Kafka"], depth=0, entry="keywords").count("[记忆]") == 4


def test_max_entry_nodes_from_config(make_manager) -> None:
    mem = make_manager(config=FAST.replace(max_entry_nodes=1))
    remember(mem, f"{OLD_EN} | Kafka topic naming uses dots | unrelated words")
    assert mem.recall(["Kafka"], depth=0, entry="keywords") == entries(OLD_EN)


def test_chinese_and_english_queries(make_manager) -> None:
    mem = make_manager()
    remember(mem, f"{OLD_ZH} | 周五下午开会讨论预算")
    for i in range(30):
        remember(mem, f"今天中午吃{i}号套餐")
    for keywords in (["订单"], ["订单数据"], ["PostgreSQL"], ["postgresql", "订单"]):
        assert mem.recall(keywords, depth=2, entry="focus") == "", keywords
        assert mem.recall(keywords, depth=0, entry="keywords") == entries(OLD_ZH), keywords
    # "午开" is no word, so no index term: only the old node is a seed; the walk reaches
    # its neighbour segment (下文, 0.5), which matches "午开" as a substring.
    assert mem.recall(["订单", "午开"], depth=0, entry="keywords") == entries(OLD_ZH)
    assert mem.recall(["订单", "午开"], depth=1, entry="keywords") == entries(
        OLD_ZH, "周五下午开会讨论预算"
    )
    # both nodes are seeds, with 6 terms each and the same idf: a tie, both at strength 1.0
    assert [s for _, s in _seeds(mem, ["预算", "订单"])] == [1.0, 1.0]
    text = mem.recall(["预算", "订单"], depth=0, entry="keywords")
    assert sorted(text.split(SEP)) == sorted(entries("周五下午开会讨论预算", OLD_ZH).split(SEP))
    # stop words only: no query terms, nothing found
    assert mem.recall(["我们", "的"], depth=3, entry="keywords") == ""


def test_a_part_of_a_chinese_compound_finds_the_node(make_manager) -> None:
    # jieba's precise mode keeps "车牌号" and "开会讨论" whole; a query for a part of them
    # must still find the node: index terms are cut in search mode, which adds the words
    # inside a compound, while a query is cut in precise mode.
    plate, meeting = "我的车牌号是京A5Q728，别忘了帮我登记", "周五下午开会讨论预算"
    assert "车牌" not in tokenize(plate) and "开会" not in tokenize(meeting)
    assert {"车牌", "牌号", "车牌号", "a5q728"} <= set(index_terms(plate, []))
    assert {"开会", "讨论", "开会讨论"} <= set(index_terms(meeting, []))
    assert tokenize("车牌") == ["车牌"] and tokenize("车牌号") == ["车牌号"]
    mem = make_manager()
    remember(mem, f"{plate} | {meeting}")
    for i in range(30):
        remember(mem, f"车子今天洗了{i}次")  # distractors: 车子, 洗, no plate
    for keywords in (["车牌"], ["车牌号"], ["牌号"], ["车牌", "登记"]):
        assert mem.recall(keywords, depth=2, entry="focus") == "", keywords
        assert mem.recall(keywords, depth=0, entry="keywords") == entries(plate), keywords
    assert mem.recall(["开会"], depth=0, entry="keywords") == entries(meeting)
    # memory:termCount counts the search-mode terms (stop words dropped, duplicates once)
    got = terms_of(mem)
    assert got[plate] == (set(index_terms(plate, [])), len(index_terms(plate, [])))
    assert not {"我", "的", "是"} & got[plate][0]
    # English is cut exactly as before: no parts of words
    remember(mem, "the retention-policy of node.js logs")
    assert terms_of(mem)["the retention-policy of node.js logs"][0] == {
        "retention-policy", "node.js", "logs"
    }
    assert mem.recall(["retention"], depth=0, entry="keywords") == ""


def test_the_default_entry_is_both(kafka: MemoryManager, make_manager) -> None:
    """SPEC §5.5 v3: "both" with the keyword index on, the focus alone with it off."""
    for keywords in ([], ["Kafka"], ["lunch", "retention"]):
        for depth in (0, 1, 3):
            assert kafka.recall(keywords, depth=depth, entry="both") == kafka.recall(
                keywords, depth=depth
            )
    assert kafka.recall(["retention"], depth=0) == entries(OLD_EN)
    assert kafka.recall(["retention"], depth=0, entry="focus") == ""
    plain = make_manager("plain", config=FAST.replace(keyword_index=False))
    remember(plain, OLD_EN)
    remember(plain, "x1 | x2 | x3 | x4 | x5 | x6")
    assert plain.recall(["retention"], depth=0) == plain.recall(
        ["retention"], depth=0, entry="focus"
    ) == ""


def test_recall_by_keywords_changes_nothing(kafka: MemoryManager) -> None:
    before = stored_quads(kafka)
    for entry in ("keywords", "both"):
        for depth in (0, 1, 4):
            kafka.recall(["Kafka", "lunch", "订单"], relations=["上文"], depth=depth, entry=entry)
    assert stored_quads(kafka) == before


@pytest.mark.parametrize(
    "hostile",
    [
        '"}) } DELETE WHERE {?s ?p ?o} #',
        "') } ; DROP ALL ; #",
        '\\" . } INSERT DATA { <a> <b> <c> } #',
        "<https://w3id.org/memory-rdf/node/x>",
        "?node",
        "$node",
        "\n}\nDELETE WHERE { ?s ?p ?o }",
        '1.0 2.0 "kafka" LIMIT 1  # @limit postings',
        "don't c++ c# v2.0 \"quoted\"",
    ],
)
def test_sparql_syntax_in_keywords_is_harmless(kafka: MemoryManager, hostile: str) -> None:
    before = stored_quads(kafka)
    for entry in ("keywords", "both"):
        assert kafka.recall([hostile], relations=[hostile], depth=3, entry=entry) == ""
        text = kafka.recall([hostile, "retention"], depth=0, entry=entry)
        assert "[记忆] Kafka retention is seven days" in text
    assert stored_quads(kafka) == before


# -- cost controls ----------------------------------------------------------------------------


def test_collection_stats_are_cached_until_the_store_grew_a_tenth(make_manager) -> None:
    mem = make_manager()
    for filler in FILLERS[:20]:
        remember(mem, filler)
    entry = KeywordEntry(mem)
    searcher, generation = entry.searcher, entry.generation
    stats = searcher.collection_stats(generation)
    assert (stats.nodes, stats.avgdl) == (20, 4.0)
    assert searcher.collection_stats(generation) is stats
    assert searcher.collection_stats(generation + 2) is stats  # 2 ≤ 10% of 20
    remember(mem, "three new words | and more | words here")
    fresh = searcher.collection_stats(generation + 3)  # 3 > 2: recomputed
    assert fresh is not stats and fresh.nodes == 23


def test_frequent_terms_are_left_out_beyond_the_posting_budget(
    kafka: MemoryManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    both = ["lunch", "retention"]  # lunch: 8 nodes, retention: 1
    assert _seeds(kafka, both)[0][0] == OLD_EN
    assert len(_seeds(kafka, both)) == 9
    monkeypatch.setattr(search, "POSTING_BUDGET", 5)
    # lunch (df 8) no longer fits: only the rarest term is scored
    assert [c for c, _ in _seeds(kafka, both)] == [OLD_EN]
    # a lone frequent term is still scored, over at most POSTING_BUDGET of its nodes
    assert len(_seeds(kafka, ["lunch"])) == 5
    assert kafka.recall(["lunch"], depth=0, entry="keywords").count("[记忆]") == 5


def test_equal_candidates_beyond_the_cap_are_the_newest(
    make_manager, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One term, the same weight and length on every node: the candidate cut (keyword_entry.rq)
    # keeps the newest nodes, as the final order does, whatever order the engine reads them in
    # (it was the engine's order: the read mirror and the disk store could seed differently).
    monkeypatch.setattr(search, "CANDIDATES", 5)
    mem = make_manager()
    for filler in FILLERS[:12]:
        remember(mem, filler)
    assert [c for c, _ in _seeds(mem, ["lunch"], limit=1)] == [FILLERS[11]]
    assert [c for c, _ in _seeds(mem, ["lunch"], limit=3)] == FILLERS[11:8:-1]


def test_frequent_dfs_are_cached_and_new_nodes_still_found(
    kafka: MemoryManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search, "DF_CACHE_MIN", 5)
    entry = KeywordEntry(kafka)
    searcher = entry.searcher
    assert len(_seeds(kafka, ["lunch", "retention"], entry=entry)) == 9
    assert searcher._frequent_df == {"lunch": 8}  # retention (df 1) is always counted afresh
    remember(kafka, "lunch menu special")  # 15 nodes: 1 ≤ 10% of 14, no refresh yet
    assert searcher._frequent_df == {"lunch": 8}
    # the postings themselves are always read fresh: the new node is a seed at once
    text = kafka.recall(["lunch"], depth=0, entry="keywords")
    assert text.count("[记忆]") == 9 and "[记忆] lunch menu special" in text
    assert len(_seeds(kafka, ["lunch"], entry=entry)) == 9
    remember(kafka, "more lunch | even more lunch")  # 3 new nodes > 1.4: refreshed
    kafka.recall(["lunch"], depth=0, entry="keywords")
    _seeds(kafka, ["lunch"], entry=entry)
    assert searcher._frequent_df == {"lunch": 11}


def test_default_config_has_the_keyword_index() -> None:
    cfg = Config()
    assert cfg.keyword_index is True and cfg.max_entry_nodes == 10


@pytest.mark.parametrize("entry", ["keywords", "both"])
def test_full_width_and_ascii_letters_match_each_other(make_manager, entry: str) -> None:
    """A keyword and a text are compared NFKC-normalized and lower-cased, whichever of them
    is written in full-width letters (SPEC §5.4 v3 rule 4, §5.5): "SQL" finds a memory that
    says "ＳＱＬ", "ＳＱＬ" one that says "SQL", and a Chinese keyword too. The store's
    prefilter compared the raw text, so a full-width text matched nothing."""
    mem = make_manager()
    ascii_en, wide_en = "orders live in SQL tables", "invoices live in ＳＱＬ tables"
    ascii_zh, wide_zh = "修复了登录页API的超时", "重写了支付页ＡＰＩ的重试"
    remember(mem, ascii_en, wide_en, ascii_zh, wide_zh, *FILLERS[:6])
    for word in ("SQL", "ＳＱＬ", "sql", "ｓｑｌ"):
        got = mem.recall([word], depth=0, entry=entry)
        assert ascii_en in got and wide_en in got, (word, got)
    assert wide_zh in mem.recall(["支付页API"], depth=0, entry=entry)
    assert ascii_zh in mem.recall(["登录页ＡＰＩ"], depth=0, entry=entry)
    assert {m["content"] for m in mem.memories(keywords=["ｓｑｌ"])} == {ascii_en, wide_en}
    assert {m["content"] for m in mem.memories(keywords=["支付页api"])} == {wide_zh}
