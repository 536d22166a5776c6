"""Does the keyword entry (SPEC §5.5) find old memories? An evaluation on a long conversation.

The script builds a bilingual (English / Chinese) multi-session conversation: 18 sessions of
chat, 12 facts planted in sessions 1–6 among distractors that share their words ("the office
wifi was slow", "我邮箱的密码又过期了"), and filler sessions after them. One exchange (user +
assistant) is remembered at a time with the built-in ``HeuristicModel``; two compression
slices run after each session (time passing). Then every fact is asked about with the
keywords an agent would use, and the recall is scored: a fact counts as recalled when its
evidence string (the answer, e.g. "maple-4471") is in the returned text.

Reported per entry mode (focus / keywords / both) and depth (2, 4): share of facts recalled,
entries and characters returned per question, median latency; and the same for a BM25
baseline over the raw turns (the same tokenizer, k1 = 1.2, b = 0.75) returning, for each
question, as many turns as the network returned entries — and at a fixed 5 and 10 turns.
A per-fact table shows where each method finds what.

    python benchmarks/keyword_eval.py [--slices 2] [--repeat 3]
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memory_rdf import Config, MemoryManager  # noqa: E402
from memory_rdf._text import tokenize  # noqa: E402

SEP = "\n---\n"


@dataclass(frozen=True)
class Fact:
    key: str
    user: str  # the planted turn
    reply: str
    keywords: tuple[str, ...]  # what the agent asks with, much later
    evidence: str  # the answer that must come back


FACTS = [
    Fact("cabin wifi", "By the way, the wifi password at the lake cabin is maple-4471.",
         "Got it, I'll remember that.", ("wifi password", "cabin"), "maple-4471"),
    Fact("Hannah allergy", "My sister Hannah is allergic to shellfish, so no shrimp at the party.",
         "Understood, no shellfish for Hannah.", ("Hannah", "allergic"), "shellfish"),
    Fact("landlord", "Our landlord is Mr. Okafor; the rent is due on the third of each month.",
         "Noted.", ("landlord",), "Okafor"),
    Fact("parking", "I parked the car on level B2, spot 117, at the airport garage.",
         "Okay, level B2 it is.", ("parked", "airport"), "spot 117"),
    Fact("dentist", "The dentist appointment moved to Thursday at 4:30 pm.",
         "I'll keep that in mind.", ("dentist", "appointment"), "4:30"),
    Fact("gift", "For Dad's birthday I ordered a Seiko watch, it arrives next Friday.",
         "Nice choice!", ("Dad", "birthday", "gift"), "Seiko"),
    Fact("车牌", "我的车牌号是京A5Q728，别忘了帮我登记。", "好的，记住了。",
         ("车牌",), "5Q728"),
    Fact("年会", "公司年会定在十二月二十号，在西湖国宾馆。", "好的，到时候提醒你。",
         ("公司年会", "地点"), "西湖国宾馆"),
    Fact("妈妈生日", "我妈妈的生日是农历八月初三。", "记下了。",
         ("妈妈", "生日"), "八月初三"),
    Fact("项目代号", "新项目的代号叫青鸟，下个月十五号上线。", "明白。",
         ("项目代号",), "青鸟"),
    Fact("保险箱", "家里保险箱的密码是0917，只告诉你一个人。", "放心，我不会说出去。",
         ("保险箱", "密码"), "0917"),
    Fact("川菜馆", "小王推荐的那家川菜馆叫蜀香阁，在人民路上。", "听起来不错。",
         ("川菜馆", "小王"), "蜀香阁"),
]

NAMES = ["Hannah", "Marco", "Priya", "Tom", "Aiko"]
CITIES = ["Lisbon", "Denver", "Osaka", "Berlin", "Austin"]
PROJECTS = ["Atlas", "Beacon", "Comet", "Delta"]
PLACES = ["杭州", "苏州", "黄山", "厦门", "成都"]
DISHES = ["湘菜馆", "火锅店", "日料店", "粤菜馆"]

FILLER_EN = [
    ("The office wifi was really slow again today.",
     "Maybe ask IT to check the office network."),
    ("I need to reset my email password, the old one expired.",
     "You can reset it from the account settings page."),
    ("My car needs an oil change and new tires soon.",
     "Better book the garage before the long drive."),
    ("I have a doctor appointment next month for a checkup.",
     "Good, regular checkups matter."),
    ("{name} sent photos from the trip to {city}.",
     "Sounds like {name} had a great time in {city}."),
    ("Can you remind me where the {project} demo stands?",
     "The {project} demo is on track, the review is next week."),
    ("Rent went up again in our neighborhood.",
     "Rents have been rising everywhere lately."),
    ("We went to the lake last weekend and swam a lot.",
     "The lake must have been lovely."),
    ("{name}'s birthday party is on Saturday, what gift should I bring?",
     "A book or a plant is always a safe gift."),
    ("The weather in {city} is rainy this week.",
     "Take an umbrella if you go to {city}."),
    ("I'm allergic to cats, so the visit to {name}'s place was rough.",
     "Maybe take an antihistamine next time."),
    ("I parked badly at the mall and got a ticket.",
     "That's annoying, parking there is strict."),
]
FILLER_ZH = [
    ("今天开会讨论了{project}的进度，大家都很忙。", "听起来任务不少，记得合理安排时间。"),
    ("我邮箱的密码又过期了，真麻烦。", "可以在设置里重新修改密码。"),
    ("周末想去{place}玩，你有什么推荐？", "{place}的风景不错，可以早点出发。"),
    ("公司下周要搬到新的办公楼。", "搬家的时候记得整理好文件。"),
    ("我爸爸的生日快到了，还没想好送什么。", "可以送一些实用的礼物。"),
    ("昨天去了一家{dish}，味道一般。", "下次可以换一家试试。"),
    ("今天下雨了，出门忘了带伞。", "记得多备一把伞放在公司。"),
    ("新项目的需求文档还没写完。", "可以先列出主要功能，再补充细节。"),
    ("车子该保养了，最近油耗有点高。", "保养的时候顺便检查一下轮胎。"),
    ("年底了，部门要做总结报告。", "可以提前整理一下今年的数据。"),
    ("小李说他妈妈最近身体不太好。", "希望她早日康复。"),
    ("晚上想吃火锅，你觉得怎么样？", "火锅不错，记得点些蔬菜。"),
]


def fill(template: str, rng: random.Random) -> str:
    return template.format(
        name=rng.choice(NAMES), city=rng.choice(CITIES), project=rng.choice(PROJECTS),
        place=rng.choice(PLACES), dish=rng.choice(DISHES),
    )


def conversation(sessions: int, per_session: int, seed: int) -> list[list[tuple[str, str]]]:
    """Sessions of (user, assistant) exchanges; the facts go two per session into 1–6."""
    rng = random.Random(seed)
    out: list[list[tuple[str, str]]] = []
    for s in range(sessions):
        pool = FILLER_EN if s % 2 == 0 else FILLER_ZH
        other = FILLER_ZH if s % 2 == 0 else FILLER_EN
        exchanges = []
        for i in range(per_session):
            user, reply = rng.choice(pool if i % 3 else other)
            r2 = random.Random(rng.random())
            exchanges.append((fill(user, r2), fill(reply, random.Random(r2.random()))))
        if s < 6:
            for fact in FACTS[2 * s : 2 * s + 2]:
                exchanges.insert(rng.randrange(len(exchanges) + 1), (fact.user, fact.reply))
        out.append(exchanges)
    return out


class BM25:
    """Plain BM25 over the raw turns, with the library's tokenizer."""

    def __init__(self, docs: list[str], k1: float = 1.2, b: float = 0.75) -> None:
        self.docs = docs
        self.tfs = [Counter(tokenize(d)) for d in docs]
        self.lens = [sum(tf.values()) for tf in self.tfs]
        self.avgdl = sum(self.lens) / max(len(docs), 1)
        df: Counter[str] = Counter()
        for tf in self.tfs:
            df.update(tf.keys())
        n = len(docs)
        self.idf = {t: math.log(1 + (n - c + 0.5) / (c + 0.5)) for t, c in df.items()}
        self.k1, self.b = k1, b

    def top(self, keywords: tuple[str, ...], k: int) -> list[str]:
        q = list(dict.fromkeys(t for kw in keywords for t in tokenize(kw)))
        scores = []
        for i, tf in enumerate(self.tfs):
            s = 0.0
            norm = self.k1 * (1 - self.b + self.b * self.lens[i] / self.avgdl)
            for t in q:
                f = tf.get(t, 0)
                if f:
                    s += self.idf[t] * f * (self.k1 + 1) / (f + norm)
            if s > 0:
                scores.append((-s, i))
        scores.sort()
        return [self.docs[i] for _, i in scores[:k]]


@dataclass
class Row:
    recalled: list[bool]
    entries: list[int]
    chars: list[int]
    ms: list[float]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=18)
    parser.add_argument("--per-session", type=int, default=9)
    parser.add_argument("--slices", type=int, default=2, help="compression slices per session")
    parser.add_argument("--repeat", type=int, default=3, help="timing repetitions per recall")
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()
    assert args.sessions >= 15, "the evaluation asks about facts from 10+ sessions back"

    sessions = conversation(args.sessions, args.per_session, args.seed)
    turns = [t for session in sessions for exchange in session for t in exchange]
    config = Config(auto_compress=False)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp, MemoryManager(
        "eval", data_dir=tmp, config=config
    ) as mem:
        for session in sessions:
            for user, reply in session:
                mem.remember([{"role": "user", "content": user},
                              {"role": "assistant", "content": reply}])
            mem.wait_idle()
            for _ in range(args.slices):
                mem.run_compression_slice()
        stats = mem.stats()
        print(f"{args.sessions} sessions, {len(turns)} turns, {len(FACTS)} facts planted in "
              f"sessions 1-6 → {stats['nodes']} nodes, {stats['links']} links "
              f"(built in {time.perf_counter() - start:.1f} s, HeuristicModel, "
              f"{args.slices} compression slices per session)\n")
        bm25 = BM25(turns)

        rows: dict[tuple[str, int], Row] = {}
        texts: dict[tuple[str, int, str], str] = {}
        for mode in ("focus", "keywords", "both"):
            for depth in (2, 4):
                row = rows[(mode, depth)] = Row([], [], [], [])
                for fact in FACTS:
                    times = []
                    for _ in range(args.repeat):
                        t0 = time.perf_counter()
                        text = mem.recall(list(fact.keywords), depth=depth, entry=mode)
                        times.append((time.perf_counter() - t0) * 1000)
                    texts[(mode, depth, fact.key)] = text
                    row.recalled.append(fact.evidence in text)
                    row.entries.append(len(text.split(SEP)) if text else 0)
                    row.chars.append(len(text))
                    row.ms.append(statistics.median(times))

    def bm25_row(counts: list[int]) -> Row:
        row = Row([], [], [], [])
        for fact, k in zip(FACTS, counts, strict=True):
            times = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                got = bm25.top(fact.keywords, k)
                times.append((time.perf_counter() - t0) * 1000)
            text = SEP.join(got)
            row.recalled.append(fact.evidence in text)
            row.entries.append(len(got))
            row.chars.append(len(text))
            row.ms.append(statistics.median(times))
        return row

    def line(label: str, row: Row) -> str:
        n = len(row.recalled)
        return (f"{label:<28}{sum(row.recalled):>4}/{n:<3}{100 * sum(row.recalled) / n:>6.0f}%"
                f"{statistics.mean(row.entries):>10.1f}{statistics.mean(row.chars):>10.0f}"
                f"{statistics.median(row.ms):>10.2f}")

    print(f"{'method':<28}{'recalled':>10}{'':>3}{'entries':>10}{'chars':>10}{'ms p50':>10}")
    baselines: dict[tuple[str, int], Row] = {}
    for (mode, depth), row in rows.items():
        print(line(f"network {mode} d{depth}", row))
        baselines[(mode, depth)] = bm25_row(row.entries)
        print(line("  BM25, same entries", baselines[(mode, depth)]))
    for k in (5, 10):
        print(line(f"BM25 top {k}", bm25_row([k] * len(FACTS))))

    print("\nper fact (✓ = evidence returned; BM25 with the keyword-entry d2 entry count):")
    cols = [("focus", 2), ("focus", 4), ("keywords", 2), ("keywords", 4), ("both", 2),
            ("both", 4)]
    print(f"{'fact':<16}{'keywords':<26}" + "".join(f"{m[:4]}{d:<4}" for m, d in cols)
          + "bm25")
    bm_kw2 = baselines[("keywords", 2)]
    for i, fact in enumerate(FACTS):
        marks = "".join(f"{'✓' if rows[c].recalled[i] else '·':<8}" for c in cols)
        print(f"{fact.key:<16}{', '.join(fact.keywords):<26}{marks}"
              f"{'✓' if bm_kw2.recalled[i] else '·'}")


if __name__ == "__main__":
    main()
