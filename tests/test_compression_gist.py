"""What the built-in model leaves when memories fade, and how it names links, in the content's
language (issue 35; SPEC §5.2, §5.4 v3).

Stores are built through the public manager with the built-in model (``model=None``) and aged
with ``run_compression_slice``; what they hold is read back with SPARQL.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_rdf import MemoryManager
from memory_rdf._text import cut_han

from helpers import FAST, memory_rdf_command

REPO = Path(__file__).resolve().parent.parent

HAN = re.compile(r"[\u3400-\u9fff]")
LABEL = re.compile(r"^(?:(?:user|assistant): )?(?:(Caroline|Melanie): )?")
WORD = re.compile(r"([\u3400-\u9fff]+)|(\w+(?:['’\-.:,]\w+)*)")
MONTHS = {"may", "june", "august", "saturday", "weekend"}
# Short and aged fast: each remember leaves the focus at once, links decay a lot per scan.
AGEING = dataclasses.replace(FAST, focus_limit=1, decay_rate=0.8)

ENGLISH = [
    ("Caroline: I went to the LGBTQ support group on 7 May 2023, and it was so powerful.",
     "Melanie: Wow, that sounds great! What did the counsellor in Boston tell you?"),
    ("Caroline: She said the adoption agency in Boston interviews us on 12 June.",
     "Melanie: I painted a sunrise by the lake last weekend, my third painting this year."),
    ("Caroline: The budget is 6,000 EUR for two, including flights to Lisbon in August.",
     "Melanie: Marco is thinking about joining, he booked the hotel for 4 nights."),
    ("Caroline: My grandmother gave me a necklace from Sweden when I turned 18.",
     "Melanie: I ran a charity race for mental health last Saturday, 10 kilometres."),
    ("Caroline: Where did you buy the pottery for the kids?",
     "Melanie: We bought the pottery at the market in Denver and the kids loved it."),
]
CHINESE = [
    ("我们决定下周把用户数据库迁移到 PostgreSQL，张伟负责 JWT 登录模块的改造。",
     "好的，JWT 登录模块的改造需要多久？"),
    ("张伟说 JWT 改造大概三天，李娜负责迁移脚本，发布日期定在 2026-12-15。",
     "明白了。那测试环境什么时候准备好？"),
    ("王芳周五之前把测试环境搭好，回归测试安排在发布前一周。",
     "好的，测试环境的数据库也用 PostgreSQL 吗？"),
    ("测试环境的数据库也用 PostgreSQL，预算是六万元，包括三个月的云服务费用。",
     "预算够用，三个月的云服务大约两万元。"),
    ("公司年会定在十二月二十号，在西湖国宾馆。", "好的，我记下了十二月二十号的年会。"),
]


def graph_dot(agent: str, data: Path) -> str:
    """``memory-rdf graph AGENT --format dot`` as a real process: the picture's DOT text."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["PYTHONIOENCODING"] = "utf-8"
    done = subprocess.run(
        [memory_rdf_command(), "graph", agent, "-o", "-", "--format", "dot", "--depth", "9",
         "--data-dir", str(data)],
        env=env, capture_output=True, text=True, encoding="utf-8", timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def words(text: str) -> int:
    return sum(len(cut_han(m.group(1))) if m.group(1) else 1 for m in WORD.finditer(text))


def remember_all(mem: MemoryManager, exchanges: list[tuple[str, str]]) -> None:
    for user, reply in exchanges:
        mem.remember([{"role": "user", "content": user}, {"role": "assistant", "content": reply}])
        mem.wait_idle()


def contents(mem: MemoryManager) -> dict[str, str]:
    rows = mem.sparql("SELECT ?n ?c WHERE { ?n memory:content ?c }")
    return {str(r["n"]): str(r["c"]) for r in rows}  # type: ignore[index]


def age(mem: MemoryManager, slices: int) -> Iterator[tuple[dict[str, str], dict[str, str]]]:
    """After each slice: (the texts at creation of the nodes still there, their texts now)."""
    original = contents(mem)
    for _ in range(slices):
        mem.run_compression_slice()
        now = contents(mem)
        yield {n: original[n] for n in now}, now


@pytest.mark.parametrize("exchanges", [ENGLISH, CHINESE], ids=["english", "chinese"])
def test_a_shortened_memory_keeps_who_said_it_and_a_fact(
    tmp_path: Path, exchanges: list[tuple[str, str]]
) -> None:
    """Every shortened memory, at every age, is a line (or lines) that opens with who said it
    — the speaker's name that opened it, else its role — followed by two words or more (never
    a lone word); in English, once shortened, one of them a number, a date or a verb of the
    original."""
    verbs = {"went", "said", "interviews", "painted", "booked", "gave", "turned", "ran",
             "bought", "loved", "thinking", "sounds", "tell", "joining", "is", "did",
             "including", "was", "buy"}
    shortened: set[str] = set()
    with MemoryManager("gist", data_dir=tmp_path, config=AGEING) as mem:
        remember_all(mem, exchanges)
        for original, now in age(mem, 60):
            for nid, text in now.items():
                if text == original[nid]:
                    continue
                first = nid not in shortened
                shortened.add(nid)
                for line in text.split("\n"):
                    label = LABEL.match(line)
                    assert label is not None and label.group(0), text
                    if "Caroline: " in original[nid] and label.group(1) is None:
                        pytest.fail(f"the speaker's name is gone: {text!r}")
                    body = line[label.end():]
                    assert words(body) >= 2, text
                if exchanges is ENGLISH and first:  # shortened once: the facts stay
                    said = {m.group(0).lower() for m in WORD.finditer(text)}
                    assert re.search(r"\d", text) or said & (verbs | MONTHS), text
    assert len(shortened) >= 3


def test_english_content_gets_english_relation_names(tmp_path: Path) -> None:
    """The built-in model names a new memory's links to the focus in the memory's language:
    no Han character in memory:relation on an English store except the chain's 上文 / 下文
    (SPEC §5.1 keeps those as stored), and the graph shows their English display forms."""
    config = dataclasses.replace(FAST, focus_limit=3)
    with MemoryManager("en", data_dir=tmp_path, config=config) as mem:
        remember_all(mem, ENGLISH)
        rows = mem.sparql("SELECT DISTINCT ?r WHERE { ?l memory:relation ?r }")
        names = {str(r["r"]) for r in rows}  # type: ignore[index]
    assert {n for n in names if HAN.search(n)} <= {"上文", "下文"}, names
    assert names & {"answers", "mentions", "relates to"}, names
    dot = graph_dot("en", tmp_path)
    assert "next 0." in dot and "previous 0." in dot, dot
    assert not HAN.search(dot), dot


def test_chinese_content_keeps_chinese_relation_names(tmp_path: Path) -> None:
    config = dataclasses.replace(FAST, focus_limit=3)
    with MemoryManager("zh", data_dir=tmp_path, config=config) as mem:
        remember_all(mem, CHINESE)
        rows = mem.sparql("SELECT DISTINCT ?r WHERE { ?l memory:relation ?r }")
        names = {str(r["r"]) for r in rows}  # type: ignore[index]
    assert names <= {"上文", "下文", "回应", "提到", "涉及"}, names
    assert names & {"回应", "提到", "涉及"}, names
    dot = graph_dot("zh", tmp_path)
    assert "下文 0." in dot and "next" not in dot, dot
