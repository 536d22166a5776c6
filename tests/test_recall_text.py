"""SPEC §5.4 v3, §5.5 v3 (issues 34, 35): what recall hands the LLM — dated entries, the language
of the content, matching by words, current facts first, and the default entry "both".

Through the public API (``recall``, ``memories``, ``Config``, ``Templates``), ``tools.call_tool``,
the CLI and the official MCP client, on real stores with the scripted model of ``helpers.py``.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memory_rdf import Config, ConfigError, MemoryManager, MemorySystem, Templates
from memory_rdf.tools import call_tool

from helpers import FAST, ScriptedModel, memory_rdf_command, say

SEP = "\n---\n"
HAN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff\u3000-\u303f\uff00-\uffef「」（）、]")
FILLERS = [f"filler number {i} about gardening and bicycles" for i in range(12)]


def said(content: str, at: str, role: str = "user") -> list[dict[str, str]]:
    return [{"role": role, "content": content, "timestamp": at}]


# -- dated entries ---------------------------------------------------------------------------------


def test_every_entry_carries_the_day_it_was_said(make_manager) -> None:
    mem = make_manager()
    mem.remember(said("the budget is 6,000 euros", "2024-05-01T22:30:00-05:00"))  # 05-02 UTC
    mem.remember(say("the budget moved again"))  # no timestamp: the day it was created
    assert mem.wait_idle(30)
    today = datetime.now(UTC).date().isoformat()
    entries = mem.recall(["budget"], depth=1).split(SEP)
    assert sorted(entries) == sorted([
        "[memory 2024-05-02] the budget is 6,000 euros",
        f"[memory {today}] the budget moved again",
    ])


def test_templates_can_use_the_date_and_the_times(make_manager) -> None:
    templates = Templates(memory="[{said_at}] {content} ({date}; stored {created_at})")
    mem = make_manager(config=FAST.replace(templates=templates))
    mem.remember(said("Miso is my cat", "2024-05-01T10:00:00Z"))
    assert mem.wait_idle(30)
    text = mem.recall(["Miso"])
    match = re.fullmatch(r"\[(.+?)\] Miso is my cat \((.+?); stored (.+?)\)", text)
    assert match, text
    assert datetime.fromisoformat(match.group(1)) == datetime(2024, 5, 1, 10, tzinfo=UTC)
    assert match.group(2) == "2024-05-01"
    created = datetime.fromisoformat(match.group(3))
    assert created.tzinfo is not None and created.year >= 2026  # when it was remembered
    # a user's template is used for Chinese content too
    mem.remember(said("米索是我的猫", "2024-05-03T10:00:00Z"))
    assert mem.wait_idle(30)
    assert mem.recall(["米索"]).startswith("[2024-05-03T10:00:00+00:00] 米索是我的猫 (2024-05-03;")


def test_a_template_with_an_unknown_field_is_still_refused() -> None:
    with pytest.raises(ConfigError, match="templates.memory"):
        Config(templates=Templates(memory="[{when}] {content}"))
    with pytest.raises(ConfigError, match="templates.memory_en"):
        Config(templates=Templates(memory_en="{nope}"))


# -- the language of the content -------------------------------------------------------------------


@pytest.fixture
def english(make_manager, model: ScriptedModel) -> MemoryManager:
    """An English conversation whose links the model named in Chinese (as the built-in model
    did before it named them in the content's language), and a memory forgotten in the middle:
    a perception entry names the links to it."""
    model.default_relation = "提到"
    mem = make_manager(config=FAST.replace(focus_limit=1))
    mem.remember(said("We fly to Osaka in May with the whole team", "2024-04-01T09:00:00Z"))
    mem.remember(said("ok | The hotel in Osaka is near the station", "2024-04-08T09:00:00Z"))
    assert mem.wait_idle(30)
    assert mem.run_compression_slice()["forgotten"] == 1  # "ok" is too short to keep
    return mem


def test_english_content_reads_english_everywhere(english: MemoryManager) -> None:
    text = english.recall([], depth=2)
    assert not HAN.search(text), text
    parts = text.split(SEP)
    assert parts[0] == "[memory 2024-04-08] The hotel in Osaka is near the station"
    assert parts[1] == ("[memory] \u201cThe hotel\u201d is still linked to a memory I have "
                        "forgotten (previous); I cannot recall it")
    assert "[memory 2024-04-01] We fly to Osaka in May with the whole team" in parts
    assert any("(mentions)" in p for p in parts)  # the stored name 提到, shown in English
    # and the same through the tool call an LLM makes
    assert not HAN.search(call_tool(english, "recall", {"keywords": ["Osaka"]}))


def test_chinese_content_reads_chinese(make_manager) -> None:
    mem = make_manager(config=FAST.replace(focus_limit=1))
    mem.remember(said("根节点的内容足够长，不会被忘记", "2024-04-01T09:00:00Z"))
    mem.remember(said("甲乙 | 目标节点的文字内容很长", "2024-04-08T09:00:00Z"))
    assert mem.wait_idle(30)
    assert mem.run_compression_slice()["forgotten"] == 1
    assert mem.recall([], depth=0) == SEP.join([
        "[记忆 2024-04-08] 目标节点的文字内容很长",
        "[记忆] 「目标节点的文字内容很」还关联着一段已经遗忘的记忆（上文），我想不起来了",
    ])


def test_config_language_forces_one_language(make_manager, model: ScriptedModel) -> None:
    model.default_relation = "提到"
    zh = make_manager("zh", config=FAST.replace(language="zh"))
    zh.remember(said("We fly to Osaka", "2024-04-01T09:00:00Z"))
    zh.remember(said("Osaka hotel booked", "2024-04-02T09:00:00Z"))
    assert zh.wait_idle(30)
    assert zh.recall(["Osaka"]).startswith("[记忆 2024-04-02] Osaka hotel booked")
    en = make_manager("en", config=FAST.replace(language="en"))
    en.remember(said("我们五月去大阪", "2024-04-01T09:00:00Z"))
    assert en.wait_idle(30)
    assert en.recall(["大阪"]) == "[memory 2024-04-01] 我们五月去大阪"
    with pytest.raises(ConfigError, match="language"):
        Config(language="fr")
    # Templates set to one language win over Config.language
    fixed = make_manager("fixed", config=FAST.replace(language="zh",
                                                      templates=Templates.english()))
    fixed.remember(said("我们五月去大阪", "2024-04-01T09:00:00Z"))
    assert fixed.wait_idle(30)
    assert fixed.recall(["大阪"]) == "[memory 2024-04-01] 我们五月去大阪"


def test_relations_accept_either_form(english: MemoryManager) -> None:
    for english_name, chinese_name in (("previous", "上文"), ("next", "下文"),
                                       ("mentions", "提到")):
        got = english.recall([], relations=[english_name], depth=2, entry="focus")
        assert got == english.recall([], relations=[chinese_name], depth=2, entry="focus")
        assert got  # something is reached: the names are really followed
    # "mentions" follows the focus links (stored 提到): the first remember is reached
    assert "We fly to Osaka" in english.recall([], relations=["mentions"], depth=1)
    assert "We fly to Osaka" not in english.recall([], relations=["next"], depth=1)


# -- matching by words -----------------------------------------------------------------------------


@pytest.fixture
def trip(make_manager) -> MemoryManager:
    mem = make_manager()
    for i, line in enumerate([
        "We are staying in a ryokan in Kyoto for three nights",
        "The flight lands in Osaka at noon",
        "We need to buy a rail pass before we leave",
        "In the evening we want to try the ramen place",
        "Budgets: keep it under 6,000 euros",
        "We're thinking about a day trip to Nara",
    ]):
        mem.remember(said(line, f"2024-05-0{i + 1}T10:00:00Z"))
    assert mem.wait_idle(30)
    return mem


def test_stop_words_no_longer_match_everything(trip: MemoryManager) -> None:
    text = trip.recall(["Where", "are", "we", "staying", "in", "Kyoto"], entry="both")
    assert text == "[memory 2024-05-01] We are staying in a ryokan in Kyoto for three nights"
    # a substring of a word is no match: "art" is not in "party" or "start"
    assert trip.recall(["ram"]) == ""
    # only stop words: they are the query, matched as words
    assert "rail pass" in trip.recall(["before"], depth=2)
    listed = [m["content"] for m in trip.memories(["in"])]
    assert listed == [
        "In the evening we want to try the ramen place",
        "The flight lands in Osaka at noon",
        "We are staying in a ryokan in Kyoto for three nights",
    ]


def test_words_match_by_stem_in_recall_and_in_memories(trip: MemoryManager) -> None:
    assert "6,000 euros" in trip.recall(["budget"])  # "Budgets:" has the stem of "budget"
    assert "ryokan" in trip.recall(["stays"])  # "staying"
    assert "flight" in trip.recall(["landing"])
    assert [m["content"] for m in trip.memories(["budgeting"])] == [
        "Budgets: keep it under 6,000 euros"
    ]
    assert trip.memories(["bud"]) == []


def test_chinese_keywords_still_match_as_substrings(make_manager) -> None:
    mem = make_manager()
    mem.remember(say("我的车牌号是京A5Q728"))
    assert mem.wait_idle(30)
    assert "京A5Q728" in mem.recall(["车牌"])
    assert "京A5Q728" in mem.recall(["的", "车牌"])  # a stop word beside a word: left out
    assert [m["content"] for m in mem.memories(["牌号"])] == ["我的车牌号是京A5Q728"]


# -- the default entry -----------------------------------------------------------------------------


def test_an_old_memory_is_found_by_default(make_manager) -> None:
    mem = make_manager()
    mem.remember(said("My cat is called Miso", "2024-01-01T10:00:00Z"))
    for filler in FILLERS:
        mem.remember(say(filler))
    assert mem.wait_idle(30)
    assert mem.recall(["Miso"], entry="focus") == ""  # left the focus long ago
    assert mem.recall(["Miso"]) == "[memory 2024-01-01] My cat is called Miso"
    assert mem.recall_async(["Miso"]).result(30) == mem.recall(["Miso"])
    # with the keyword index off, the default is the focus walk
    plain = make_manager("plain", config=FAST.replace(keyword_index=False))
    plain.remember(say("My cat is called Miso"))
    for filler in FILLERS:
        plain.remember(say(filler))
    assert plain.wait_idle(30)
    assert plain.recall(["Miso"]) == ""


def test_the_tool_call_finds_old_memories_dated(tmp_path: Path) -> None:
    with MemorySystem(data_dir=tmp_path, model=ScriptedModel(), config=FAST) as system:
        mem = system.agent("bot")
        call_tool(mem, "remember", {"messages": said("My cat is called Miso",
                                                     "2024-01-01T10:00:00Z")})
        for filler in FILLERS:
            call_tool(mem, "remember", {"messages": say(filler)})
        assert mem.wait_idle(30)
        assert call_tool(mem, "recall", {"keywords": ["Miso"]}) == (
            "[memory 2024-01-01] My cat is called Miso"
        )
        assert call_tool(mem, "recall", {"keywords": ["Miso"], "entry": "focus"}) == (
            "(nothing recalled)"
        )


def test_the_cli_recalls_old_memories_by_default(tmp_path: Path) -> None:
    import subprocess

    with MemoryManager("cli", data_dir=tmp_path, config=FAST, model=ScriptedModel()) as mem:
        mem.remember(said("My cat is called Miso", "2024-01-01T10:00:00Z"))
        for filler in FILLERS:
            mem.remember(say(filler))
        assert mem.wait_idle(30)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        import os

        from test_mcp import CHECKOUT

        return subprocess.run([memory_rdf_command(), "recall", "cli", *args,
                               "--data-dir", str(tmp_path)], env={**os.environ, **CHECKOUT},
                              capture_output=True, text=True, timeout=120, check=False)

    found = run("Miso")
    assert found.returncode == 0, found.stderr
    assert found.stdout.strip() == "[memory 2024-01-01] My cat is called Miso"
    focus = run("Miso", "--entry", "focus")
    assert focus.returncode == 0 and focus.stdout.strip() == ""


# -- current facts first ---------------------------------------------------------------------------


@pytest.mark.parametrize(("old", "new", "keywords"), [
    ("Our budget is 6,000 euros", "Budget update: it goes up to 7,500 euros now", ["budget"]),
    ("My address is 12 Baker Street", "New address: 48 Elm Road since I moved",
     ["where", "address"]),
    ("这次旅行的预算是五千元", "预算调整了，提高到八千元", ["预算"]),
])
def test_an_updated_fact_ranks_above_what_it_updates(make_manager, old: str, new: str,
                                                     keywords: list[str]) -> None:
    mem = make_manager()
    mem.remember(said(old, "2024-01-01T10:00:00Z"))
    for filler in FILLERS[:8]:
        mem.remember(say(filler))
    mem.remember(said(new, "2024-03-01T10:00:00Z"))
    for filler in FILLERS[8:]:
        mem.remember(say(filler))
    assert mem.wait_idle(30)
    for entry in ("both", "keywords"):
        text = mem.recall(keywords, entry=entry)
        assert new in text and old in text, text
        assert text.index(new) < text.index(old), text
    if keywords == ["budget"]:
        # not alike: the old statement matches one more keyword, so it ranks first
        text = mem.recall(["budget", "euros", "6,000"])
        assert text.index(old) < text.index(new), text


def test_mcp_recall_is_dated_and_finds_old_memories(tmp_path: Path) -> None:
    import anyio
    from mcp import Client, StdioServerParameters
    from test_mcp import CHECKOUT

    params = StdioServerParameters(
        command=memory_rdf_command(), args=["serve", "--data-dir", str(tmp_path)],
        env={"MEMORY_RDF_MODEL": "heuristic", **CHECKOUT},
    )

    async def main() -> None:
        async with Client(params) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            entry = tools["recall"].input_schema["properties"]["entry"]
            assert "'both' (default)" in entry["description"]
            await client.call_tool("remember", {"messages": said(
                "Hi, my cat is called Miso", "2024-01-01T10:00:00Z")})
            for i in range(12):
                await client.call_tool("remember", {"messages": say(
                    f"Session {i}: we talked about gardening, tomatoes and bicycles.",
                    f"We also planned trip number {i} to the mountains.")})
            result = await client.call_tool("recall", {"keywords": ["Miso"]})
            agent, _, text = result.content[0].text.partition("\n")
            assert agent == "(agent: default)"  # the default agent named (SPEC §9 v3)
            assert text.startswith("[memory 2024-01-01] "), text
            assert "Miso" in text
            assert not HAN.search(text)
            assert json.loads((await client.call_tool("stats", {})).content[0].text)["nodes"]

    anyio.run(main)


def test_an_entrys_language_and_dates_are_what_their_definitions_say() -> None:
    """The recall's per-entry helpers, written for speed (issue 38), against their plain
    definitions: mostly Han text = at least as many Han characters as the other words the
    scanner finds (SPEC §5.4 v3); the date is the said (else created) time's UTC day."""
    import random
    from datetime import timedelta, timezone

    from memory_rdf._search import entry_fields
    from memory_rdf._text import _HAN_RE, _SCAN_RE, is_cjk_text

    def by_definition(text: str) -> bool:
        han = len(_HAN_RE.findall(text))
        words = sum(1 for m in _SCAN_RE.finditer(text) if m.group(2) is not None)
        return han > 0 and han >= words

    alphabet = [*"登录数据库的是", *"abXZ09", *".-_'+# ，。：?", "é", "İ", "ｓ", "\u0301", "𠀀",
                "豈", "ア", "한"]
    rnd = random.Random(3)
    texts = ["".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 24)))
             for _ in range(20_000)]
    assert [is_cjk_text(t) for t in texts] == [by_definition(t) for t in texts]
    assert any(is_cjk_text(t) for t in texts) and not all(is_cjk_text(t) for t in texts)

    east = timezone(timedelta(hours=9))
    said, created = datetime(2024, 5, 1, 8, 30, tzinfo=east), datetime(999, 12, 31, 23, 0)
    assert entry_fields("c", said, created) == {
        "content": "c", "date": "2024-04-30", "said_at": "2024-04-30T23:30:00+00:00",
        "created_at": "0999-12-31T23:00:00+00:00"}
    assert entry_fields("c", None, created)["date"] == "0999-12-31"
    assert entry_fields("c", None, created)["said_at"] == "0999-12-31T23:00:00+00:00"
