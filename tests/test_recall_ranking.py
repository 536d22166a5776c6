"""SPEC §5.4 v2: recall ranked by relevance, cut to a budget; perception in the content's language.

Everything through the public API (``recall``, ``recall_async``, ``arecall``, ``Config``), on a
real store with the scripted model of ``helpers.py``.
"""

from __future__ import annotations

import asyncio

import pytest

from memory_rdf import Config, ConfigError, MemoryManager, Templates

from _graph import set_strength
from helpers import FAST, ScriptedModel, remember, undated, with_undated_entries

BACKENDS = ("embedded", "endpoint")

SEP = "\n---\n"


@pytest.fixture
def make_manager(make_manager):  # type: ignore[no-untyped-def]
    """The shared fixture, with undated entries (helpers.UNDATED) unless a test sets its
    templates."""
    return with_undated_entries(make_manager)


def entries(*contents: str) -> str:
    return SEP.join(f"[记忆] {c}" for c in contents)


# -- ranking ---------------------------------------------------------------------------------------


def test_more_keywords_matched_outrank_fewer_at_equal_path_strength(mem: MemoryManager) -> None:
    # Both focus nodes: hop 0, path strength 1.0; the walk lists the newest first.
    remember(mem, "alpha beta gamma notes | alpha notes")
    assert mem.recall(["alpha"], depth=0) == entries("alpha notes", "alpha beta gamma notes")
    assert mem.recall(["alpha", "beta"], depth=0) == entries(
        "alpha beta gamma notes", "alpha notes"
    )
    assert mem.recall(["gamma", "alpha", "beta"], depth=0) == entries(
        "alpha beta gamma notes", "alpha notes"
    )


def test_equal_matches_in_one_band_put_the_later_first(make_manager) -> None:
    mem = make_manager(config=FAST.replace(focus_limit=1))
    remember(mem, "root alpha")
    remember(mem, "x1 alpha | x2 alpha | x3 alpha | x4 alpha")
    # focus x4; x4 → root and x4 → x3 at 1.0 (a tie: discovery order decides), root → x1 and
    # root → x2 at 1.0 (focus links of the second remember)
    set_strength(mem, "x4 alpha", "x3 alpha", 1.0)
    set_strength(mem, "x3 alpha", "root alpha", 0.7)
    walk = mem.recall([], depth=4)  # no keywords: nothing to match alike, the walk's order
    # equal links are discovered by target id (SPEC §5.4 step 2; ids made in one millisecond
    # differ in their random bits, so x1 may come after x2)
    ids = {m["content"]: m["id"] for m in mem.memories()}
    first, then = (sorted(pair, key=lambda c: ids[c])
                   for pair in (("root alpha", "x3 alpha"), ("x1 alpha", "x2 alpha")))
    assert walk == entries("x4 alpha", *first, *then)
    # every node matches "alpha" and none matches "missing", every path is at 1.0: they all
    # match alike, so the later said comes first (SPEC §5.4 v3), the root (said first) last
    alike = entries("x4 alpha", "x3 alpha", "x2 alpha", "x1 alpha", "root alpha")
    assert mem.recall(["alpha"], depth=4) == alike
    assert mem.recall(["alpha", "missing"], depth=4) == alike
    assert mem.recall(["missing", "ALPHA", "nowhere"], depth=4) == alike


def test_rarer_keywords_weigh_more(mem: MemoryManager) -> None:
    remember(mem, "common one | common two | rare three | common four")
    text = mem.recall(["common", "rare"], depth=0)
    assert text.split(SEP)[0] == "[记忆] rare three"
    # the other three match the same single keyword: newest first, as the walk has them
    assert text == entries("rare three", "common four", "common two", "common one")


def test_an_own_keyword_does_not_put_an_older_alike_match_first(
    make_manager, model: ScriptedModel
) -> None:
    # Alike (SPEC §5.4 v3) counts which keywords match, not whether the model chose them as a
    # node's own keywords: the later said comes first either way.
    model.keywords["alpha beta one"] = ["alpha"]
    mem = make_manager()
    remember(mem, "alpha beta one | alpha beta two")
    assert mem.recall(["alpha"], depth=0) == entries("alpha beta two", "alpha beta one")
    assert mem.recall(["alpha", "beta"], depth=0) == entries("alpha beta two", "alpha beta one")


def test_match_quality_outweighs_a_weaker_path(make_manager) -> None:
    mem = make_manager(config=FAST.replace(focus_limit=1))
    remember(mem, "alpha beta gamma far")
    remember(mem, "alpha near")
    # the focus "alpha near" (1.0) reaches the older node through a focus link (1.0)
    set_strength(mem, "alpha near", "alpha beta gamma far", 0.3)
    assert mem.recall(["alpha"], depth=1) == entries("alpha near", "alpha beta gamma far")
    assert mem.recall(["alpha", "beta", "gamma"], depth=1) == entries(
        "alpha beta gamma far", "alpha near"
    )


def test_ranking_without_a_keyword_index(make_manager) -> None:
    mem = make_manager(config=FAST.replace(keyword_index=False))
    remember(mem, "alpha beta notes | alpha notes")
    assert mem.recall(["alpha", "beta"], depth=0) == entries("alpha beta notes", "alpha notes")


def test_limit_takes_the_best_ranked(make_manager) -> None:
    mem = make_manager(config=FAST.replace(focus_limit=10))
    remember(mem, "alpha beta a | alpha b | alpha c | alpha d")
    # the walk lists the newest first: its first two are d and c; ranked first, then cut
    assert mem.recall(["alpha"], depth=0, limit=2) == entries("alpha d", "alpha c")
    assert mem.recall(["alpha", "beta"], depth=0, limit=2) == entries("alpha beta a", "alpha d")


def test_a_whole_word_outranks_a_substring_of_a_longer_word(mem: MemoryManager) -> None:
    # Both match "art" by the walk's substring rule; only one has the word.
    remember(mem, "alpha art show | alpha party notes")
    assert mem.recall(["alpha"], depth=0) == entries("alpha party notes", "alpha art show")
    assert mem.recall(["alpha", "art"], depth=0) == entries("alpha art show", "alpha party notes")


def test_other_forms_of_an_english_word_count_as_the_word(mem: MemoryManager) -> None:
    remember(mem, "alpha painting class | alpha beta notes")
    assert mem.recall(["alpha", "painted"], depth=0) == entries(
        "alpha painting class", "alpha beta notes"
    )
    assert mem.recall(["alpha", "kids"], depth=0) == entries(
        "alpha beta notes", "alpha painting class"
    )


def test_the_keyword_entry_looks_up_other_forms_of_a_word(make_manager) -> None:
    mem = make_manager(config=FAST.replace(max_entry_nodes=1))
    remember(mem, "sea shells")
    remember(mem, "sea vacation photos from the old album")
    remember(mem, "sea breeze")
    # one seed: the node with both words ("vacation" for "vacationed"), although longer
    assert mem.recall(["sea", "vacationed"], depth=0, entry="keywords") == entries(
        "sea vacation photos from the old album"
    )
    assert mem.recall(["sea", "vacationed"], depth=0, entry="keywords", max_chars=0) == entries(
        "sea vacation photos from the old album"
    )


# -- reply context ---------------------------------------------------------------------------------


@pytest.fixture
def asked(make_manager) -> MemoryManager:
    """'old' (two remembers ago), then one remember: a question and its answer (下文)."""
    mem = make_manager(config=FAST.replace(focus_limit=1))
    remember(mem, "old notes on alpha beta")
    remember(mem, "Did you see the alpha beta comet? | Yes, it was green last night.")
    return mem


OLD = "old notes on alpha beta"
QUESTION = "Did you see the alpha beta comet?"
ANSWER = "Yes, it was green last night."


def test_a_question_is_followed_by_its_reply_within_a_budget(asked: MemoryManager) -> None:
    # The walk: the answer (focus), then 'old' (focus link, 1.0), the question (上文, 0.5);
    # 'old' and the question match alike, the question was said later (SPEC §5.4 v3).
    assert asked.recall(["alpha", "beta"], depth=1) == entries(QUESTION, ANSWER, OLD)
    assert asked.recall(["comet", "alpha"], depth=1) == entries(QUESTION, ANSWER, OLD)
    # only within a budget and only when ranked (two keywords or more)
    assert asked.recall(["alpha", "beta"], depth=1, max_chars=0) == entries(QUESTION, OLD)
    assert asked.recall(["alpha"], depth=1) == entries(QUESTION, OLD)


def test_no_reply_within_a_time_window(asked: MemoryManager) -> None:
    # A time window (SPEC §5.6) says which memories may be shown: the reply, which matches no
    # keyword, is not added to it even though it is inside the window.
    assert asked.recall(["comet", "alpha"], depth=1, since="2000-01-01") == entries(QUESTION, OLD)


def test_the_relation_filter_applies_to_the_replys_link(make_manager, model) -> None:
    model.default_relation = "related"  # the name of every focus link
    asked = make_manager(config=FAST.replace(focus_limit=1))
    remember(asked, OLD)
    remember(asked, f"{QUESTION} | {ANSWER}")
    # the question is reached over focus links; its reply's link ("下文") is filtered out
    focus_links = ["related"]
    assert asked.recall(["alpha", "beta"], depth=2, relations=focus_links) == entries(
        QUESTION, OLD
    )
    assert asked.recall(["alpha", "beta"], depth=2, relations=[*focus_links, "下文"]) == entries(
        QUESTION, ANSWER, OLD
    )


def test_a_reply_counts_toward_max_chars_not_limit(asked: MemoryManager) -> None:
    assert asked.recall(["comet", "alpha"], depth=1, limit=1) == entries(QUESTION, ANSWER)
    question = len(entries(QUESTION))
    assert asked.recall(["comet", "alpha"], depth=1, max_chars=question) == entries(QUESTION)
    both = len(entries(QUESTION, ANSWER))
    assert asked.recall(["comet", "alpha"], depth=1, max_chars=both - 1) == entries(QUESTION)
    assert asked.recall(["comet", "alpha"], depth=1, max_chars=both) == entries(QUESTION, ANSWER)


def test_a_node_is_shown_once_as_reply_or_result(asked: MemoryManager) -> None:
    # the answer is a result too ("green"): shown as the question's reply, not again
    assert asked.recall(["comet", "alpha", "green"], depth=1) == entries(QUESTION, ANSWER, OLD)
    # the answer ranks first as a result: the question that follows gets no second copy
    assert asked.recall(["comet", "green"], depth=1) == entries(ANSWER, QUESTION)


def test_the_reply_of_the_last_segment_is_the_next_remember(make_manager) -> None:
    mem = make_manager(config=FAST.replace(focus_limit=1))
    remember(mem, "Where did alpha beta go?")
    remember(mem, "To the coast.")
    remember(mem, "Later, gamma.")
    assert mem.recall(["alpha", "beta"], depth=2) == entries(
        "Where did alpha beta go?", "To the coast."
    )


# -- budget ----------------------------------------------------------------------------------------


@pytest.fixture
def long_nodes(make_manager) -> MemoryManager:
    """Ten focus nodes of 100 characters each (entries of 105, separators of 5)."""
    mem = make_manager(config=FAST.replace(focus_limit=10))
    remember(mem, " | ".join(f"n{i} " + "x" * 97 for i in range(10)))
    return mem


def test_max_chars_takes_entries_in_order_while_they_fit(long_nodes: MemoryManager) -> None:
    whole = long_nodes.recall([], depth=0, max_chars=0)
    parts = whole.split(SEP)
    assert len(parts) == 10 and all(len(p) == 105 for p in parts)
    for budget in (105, 214, 215, 216, 500, 1000, 1095, 1100):
        text = long_nodes.recall([], depth=0, max_chars=budget)
        assert len(text) <= budget
        n = (budget + 5) // 110
        assert text == SEP.join(parts[:n])
    assert long_nodes.recall([], depth=0, max_chars=10_000) == whole


def test_first_entry_is_always_whole(long_nodes: MemoryManager) -> None:
    first = long_nodes.recall([], depth=0, max_chars=0).split(SEP)[0]
    for budget in (1, 50, 104):
        assert long_nodes.recall([], depth=0, max_chars=budget) == first


def test_default_budget_from_config(make_manager) -> None:
    mem = make_manager(config=FAST.replace(focus_limit=50))
    remember(mem, " | ".join(f"n{i} " + "y" * 97 for i in range(50)))
    assert Config().recall_max_chars == 2000
    text = mem.recall([], depth=0)
    assert len(text) <= 2000 and text.count("[记忆]") == 18  # 18 × 105 + 17 × 5 = 1975
    small = make_manager("small", config=FAST.replace(focus_limit=50, recall_max_chars=300))
    remember(small, " | ".join(f"n{i} " + "y" * 97 for i in range(50)))
    assert small.recall([], depth=0).count("[记忆]") == 2
    assert small.recall([], depth=0, max_chars=0).count("[记忆]") == 50
    unlimited = make_manager("all", config=FAST.replace(focus_limit=50, recall_max_chars=None))
    remember(unlimited, " | ".join(f"n{i} " + "y" * 97 for i in range(50)))
    assert unlimited.recall([], depth=0).count("[记忆]") == 50


def test_limit_counts_entries(long_nodes: MemoryManager) -> None:
    assert long_nodes.recall([], depth=0, limit=3, max_chars=0).count("[记忆]") == 3
    assert long_nodes.recall([], depth=0, limit=0, max_chars=0).count("[记忆]") == 10
    # the smaller of the two bounds wins
    assert long_nodes.recall([], depth=0, limit=3, max_chars=215).count("[记忆]") == 2
    assert long_nodes.recall([], depth=0, limit=1, max_chars=0) == long_nodes.recall(
        [], depth=0, max_chars=1
    )


def test_budget_through_recall_async_and_arecall(long_nodes: MemoryManager) -> None:
    expected = long_nodes.recall([], depth=0, limit=4, max_chars=400)
    assert expected.count("[记忆]") == 3
    assert long_nodes.recall_async([], depth=0, limit=4, max_chars=400).result(30) == expected
    got = asyncio.run(long_nodes.arecall([], depth=0, limit=4, max_chars=400))
    assert got == expected


@pytest.fixture
def forgot(make_manager) -> MemoryManager:
    """root ↔ ab ↔ target, then 'ab' is forgotten (too short to keep): both report it."""
    mem = make_manager(config=FAST.replace(focus_limit=1))
    remember(mem, "root content long enough")
    remember(mem, "ab | target node text")
    assert mem.run_compression_slice()["forgotten"] == 1
    return mem


def test_perception_entries_count_toward_max_chars_not_limit(forgot: MemoryManager) -> None:
    whole = forgot.recall([], depth=1, max_chars=0)
    parts = whole.split(SEP)
    assert len(parts) == 4 and parts[1].startswith("[memory] \u201ctarget nod\u201d")
    # limit counts results: one result and its perception
    assert forgot.recall([], depth=1, limit=1, max_chars=0) == SEP.join(parts[:2])
    # max_chars counts every entry: the perception stays right after its result or goes
    assert forgot.recall([], depth=1, max_chars=len(parts[0])) == parts[0]
    two = len(SEP.join(parts[:2]))
    assert forgot.recall([], depth=1, max_chars=two) == SEP.join(parts[:2])
    assert forgot.recall([], depth=1, max_chars=two + 5) == SEP.join(parts[:2])
    assert forgot.recall([], depth=1, max_chars=len(whole)) == whole
    assert forgot.recall([], depth=1, max_chars=len(whole) - 1) == SEP.join(parts[:3])


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"limit": -1}, ValueError, "limit"),
        ({"limit": 1.5}, TypeError, "limit"),
        ({"limit": True}, TypeError, "limit"),
        ({"limit": "3"}, TypeError, "limit"),
        ({"max_chars": -1}, ValueError, "max_chars"),
        ({"max_chars": 2.0}, TypeError, "max_chars"),
        ({"max_chars": False}, TypeError, "max_chars"),
        ({"max_chars": "2000"}, TypeError, "max_chars"),
    ],
)
def test_bad_budget_values_raise_at_the_call(
    mem: MemoryManager, model: ScriptedModel, kwargs: dict, error: type, match: str
) -> None:
    before = dict(model.calls)
    with pytest.raises(error, match=match):
        mem.recall(["a"], **kwargs)
    with pytest.raises(error, match=match):
        mem.recall_async(["a"], **kwargs)
    with pytest.raises(error, match=match):
        asyncio.run(mem.arecall(["a"], **kwargs))
    assert model.calls == before and mem.stats()["pending_tasks"] == 0


@pytest.mark.parametrize("value", [0, -5, 1.5, "2000", True])
def test_bad_recall_max_chars_in_config(value: object) -> None:
    with pytest.raises((ConfigError, TypeError, ValueError), match="recall_max_chars"):
        Config(recall_max_chars=value)  # type: ignore[arg-type]


# -- perception language ---------------------------------------------------------------------------


def test_perception_in_chinese_for_chinese_content(make_manager) -> None:
    mem = make_manager(config=FAST.replace(focus_limit=1))
    remember(mem, "根节点的内容足够长，不会被忘记")
    remember(mem, "甲乙 | 目标节点的文字内容很长")
    assert mem.run_compression_slice()["forgotten"] == 1
    assert mem.recall([], depth=0) == SEP.join([
        "[记忆] 目标节点的文字内容很长",
        "[记忆] 「目标节点的文字内容很」还关联着一段已经遗忘的记忆（上文），我想不起来了",
    ])


def test_perception_in_english_for_other_content(forgot: MemoryManager) -> None:
    assert forgot.recall([], depth=1) == SEP.join([
        "[记忆] target node text",
        "[memory] \u201ctarget nod\u201d is still linked to a memory I have forgotten "
        "(previous); I cannot recall it",
        "[记忆] root content long enough",
        "[memory] \u201croot conte\u201d is still linked to a memory I have forgotten; "
        "I cannot recall it",
    ])


def test_perception_language_per_result(make_manager) -> None:
    mem = make_manager(config=FAST.replace(focus_limit=1))
    remember(mem, "根节点的内容足够长，不会被忘记")
    remember(mem, "ab | target node text")
    assert mem.run_compression_slice()["forgotten"] == 1
    parts = mem.recall([], depth=1).split(SEP)
    assert parts[1].startswith("[memory] \u201ctarget nod\u201d is still linked")
    assert parts[2:] == [
        "[记忆] 根节点的内容足够长，不会被忘记",
        "[记忆] 「根节点的内容足够长，」还关联着一段已经遗忘的记忆，我想不起来了",
    ]


def test_templates_can_fix_one_language(make_manager) -> None:
    mem = make_manager(config=FAST.replace(focus_limit=1, templates=Templates.chinese()))
    remember(mem, "root content long enough")
    remember(mem, "ab | target node text")
    mem.run_compression_slice()
    assert undated(mem.recall([], depth=0)) == SEP.join([
        "[记忆] target node text",
        "[记忆] 「target nod」还关联着一段已经遗忘的记忆（上文），我想不起来了",
    ])
