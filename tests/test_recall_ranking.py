"""SPEC §5.4 v2: recall ranked by relevance, cut to a budget; perception in the content's language.

Everything through the public API (``recall``, ``recall_async``, ``arecall``, ``Config``), on a
real store with the scripted model of ``helpers.py``.
"""

from __future__ import annotations

import asyncio

import pytest

from memory_rdf import Config, ConfigError, MemoryManager, Templates

from _graph import set_strength
from helpers import FAST, ScriptedModel, remember

SEP = "\n---\n"


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


def test_equal_matches_keep_the_best_first_order_ties_included(make_manager) -> None:
    mem = make_manager(config=FAST.replace(focus_limit=1))
    remember(mem, "root alpha")
    remember(mem, "x1 alpha | x2 alpha | x3 alpha | x4 alpha")
    # focus x4; x4 → root and x4 → x3 at 1.0 (a tie: discovery order decides), x3 → x2 0.5 …
    set_strength(mem, "x4 alpha", "x3 alpha", 1.0)
    set_strength(mem, "x3 alpha", "root alpha", 0.7)
    walk = mem.recall([], depth=4)
    assert walk.count("[记忆]") == 5
    # every node matches "alpha" and none matches "missing": equal matches, the walk's order
    assert mem.recall(["alpha"], depth=4) == walk
    assert mem.recall(["alpha", "missing"], depth=4) == walk
    assert mem.recall(["missing", "ALPHA", "nowhere"], depth=4) == walk
    # ties (x4 → root and x4 → x3, both 1.0) as the walk has them, whatever the keywords
    assert mem.recall(["alpha", "missing"], depth=1) == mem.recall([], depth=1)


def test_rarer_keywords_weigh_more(mem: MemoryManager) -> None:
    remember(mem, "common one | common two | rare three | common four")
    text = mem.recall(["common", "rare"], depth=0)
    assert text.split(SEP)[0] == "[记忆] rare three"
    # the other three match the same single keyword: newest first, as the walk has them
    assert text == entries("rare three", "common four", "common two", "common one")


def test_keywords_among_the_nodes_own_keywords_weigh_more(
    make_manager, model: ScriptedModel
) -> None:
    model.keywords["alpha beta one"] = ["alpha"]
    mem = make_manager()
    remember(mem, "alpha beta one | alpha beta two")
    assert mem.recall(["alpha"], depth=0) == entries("alpha beta two", "alpha beta one")
    assert mem.recall(["alpha", "beta"], depth=0) == entries("alpha beta one", "alpha beta two")


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
    assert len(parts) == 4 and parts[1].startswith("[记忆] \u201ctarget nod\u201d")
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
        "[记忆] \u201ctarget nod\u201d is still linked to a memory I have forgotten (上文); "
        "I cannot recall it",
        "[记忆] root content long enough",
        "[记忆] \u201croot conte\u201d is still linked to a memory I have forgotten; "
        "I cannot recall it",
    ])


def test_perception_language_per_result(make_manager) -> None:
    mem = make_manager(config=FAST.replace(focus_limit=1))
    remember(mem, "根节点的内容足够长，不会被忘记")
    remember(mem, "ab | target node text")
    assert mem.run_compression_slice()["forgotten"] == 1
    parts = mem.recall([], depth=1).split(SEP)
    assert parts[1].startswith("[记忆] \u201ctarget nod\u201d is still linked")
    assert parts[2:] == [
        "[记忆] 根节点的内容足够长，不会被忘记",
        "[记忆] 「根节点的内容足够长，」还关联着一段已经遗忘的记忆，我想不起来了",
    ]


def test_templates_can_fix_one_language(make_manager) -> None:
    chinese_only = Templates(forgotten_named_en=None, forgotten_unnamed_en=None)
    mem = make_manager(config=FAST.replace(focus_limit=1, templates=chinese_only))
    remember(mem, "root content long enough")
    remember(mem, "ab | target node text")
    mem.run_compression_slice()
    assert mem.recall([], depth=0) == SEP.join([
        "[记忆] target node text",
        "[记忆] 「target nod」还关联着一段已经遗忘的记忆（上文），我想不起来了",
    ])
