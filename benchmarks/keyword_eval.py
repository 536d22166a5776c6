"""Does the keyword entry (SPEC §5.5) find old memories? An evaluation on a long conversation.

The script builds a bilingual (English / Chinese) multi-session conversation: 18 sessions of
chat, 20 facts planted in sessions 1–7 among distractors that share their words ("the office
wifi was slow", "我邮箱的密码又过期了"), and filler sessions after them. One exchange (user +
assistant) is remembered at a time with the built-in ``HeuristicModel``; two compression
slices run after each session (time passing). Then every fact is asked about with the
keywords an agent would use, and the recall is scored: a fact counts as recalled when its
evidence string (the answer, e.g. "maple-4471") is in the returned text.

Two kinds of facts (checked when the script starts):

* same-turn (12): the answer is in the turn that holds the query words ("the wifi password
  at the lake cabin is maple-4471");
* link-only (8): the answer is in the turn next to it, which has none of the query words:
  "What did we end up calling the new project? I forgot the codename." → "Falcon. …", or the
  answer first and the words after it ("Number 38, …" → "… that is where your gym locker
  is."). The remember path links consecutive segments (下文 / 上文), so a walk from the
  question's node reaches the answer's node in one hop, where BM25 over the raw turns
  returns the question's turn.

Reported per entry mode (focus / keywords / both) and depth (2, 4): share of facts recalled
(all, same-turn, link-only), entries and characters returned per question, median latency;
and the same for a BM25 baseline over the raw turns (the network's tokenizer: turns cut like
index terms, queries like query terms; k1 = 1.2, b = 0.75) returning, for each question, as
many turns as the network returned entries — and at a fixed 5 and 10 turns, and 5 turns
each with its neighbouring turns. "reached" (a diagnostic, not a recall) is the share of
link-only facts whose answer node the walk reached within ``depth`` hops (SPEC §5.4 returns
a reached node only when a keyword is a substring of its content or keywords). A per-fact
table shows where each method finds what.

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
from memory_rdf._search import Seed  # noqa: E402
from memory_rdf._text import (  # noqa: E402
    is_cjk_text,
    strip_role_prefixes,
    tokenize,
    tokenize_for_index,
)

SEP = "\n---\n"


@dataclass(frozen=True)
class Fact:
    key: str
    user: str  # the planted exchange
    reply: str
    keywords: tuple[str, ...]  # what the agent asks with, much later
    evidence: str  # the answer that must come back
    link: bool = False  # True: the answer is in the turn next to the query words' turn


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
    # link-only: the query words in one turn, the answer in the other
    Fact("codename", "What did we end up calling the new project? I forgot the codename.",
         "Falcon. Marketing picked it last week.", ("codename",), "Falcon", link=True),
    Fact("gym locker", "Number 38, the one next to the window.",
         "Got it, that is where your gym locker is.", ("gym locker",), "38", link=True),
    Fact("Aiko flight", "When does Aiko's flight land on Sunday?",
         "At 7:45 in the evening, terminal 2.", ("Aiko", "flight"), "7:45", link=True),
    Fact("physio", "Dr. Lindqvist, on the fourth floor of the clinic.",
         "Noted, that is your new physiotherapist.", ("physiotherapist",), "Lindqvist",
         link=True),
    Fact("班主任", "孩子的班主任叫什么来着？", "姓周，周老师，教数学的。",
         ("班主任",), "周老师", link=True),
    Fact("会议室", "在三楼最里面那间，靠近电梯。", "好的，这是新的会议室位置，我记住了。",
         ("会议室",), "三楼最里面", link=True),
    Fact("猫疫苗", "我家猫下次什么时候打疫苗？", "明年三月九号，别忘了带上小本子。",
         ("疫苗",), "三月九号", link=True),
    Fact("物业", "张阿姨，电话是13912345678。", "好的，这是你们小区新的物业联系人。",
         ("物业",), "13912345678", link=True),
]
PLANTED_SESSIONS = 7  # the facts go three per session into sessions 1-7


def mentions(turn: str, keywords: tuple[str, ...]) -> bool:
    """Whether ``turn`` holds a query word: a keyword as a substring, or a query term as one
    of its index terms."""
    low = turn.lower()
    terms = set(tokenize_for_index(turn))
    return any(k.lower() in low for k in keywords) or any(
        t in terms for k in keywords for t in tokenize(k)
    )


def check_facts() -> None:
    """Same-turn facts hold answer and query words in one turn; link-only facts never do."""
    for fact in FACTS:
        pair = (fact.user, fact.reply)
        if fact.link:
            answer, other = pair if fact.evidence in fact.user else pair[::-1]
            assert fact.evidence in answer and fact.evidence not in other, fact.key
            assert not mentions(answer, fact.keywords), fact.key
            assert mentions(other, fact.keywords), fact.key
        else:
            assert any(fact.evidence in t and mentions(t, fact.keywords) for t in pair), fact.key


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
    ("The flight to {city} was delayed by an hour.",
     "Delays are common this time of year."),
    ("I finally joined a gym near the office.",
     "Great, a gym close by makes it easy to go."),
    ("Which project did {name} move to?",
     "{name} moved to {project} last month."),
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
    ("小区物业又在修电梯了。", "希望早点修好。"),
    ("会议室的投影仪又坏了。", "可以先用电视屏幕代替。"),
    ("明天要去打流感疫苗。", "打完记得多休息。"),
]


def fill(template: str, rng: random.Random) -> str:
    return template.format(
        name=rng.choice(NAMES), city=rng.choice(CITIES), project=rng.choice(PROJECTS),
        place=rng.choice(PLACES), dish=rng.choice(DISHES),
    )


def conversation(sessions: int, per_session: int, seed: int) -> list[list[tuple[str, str]]]:
    """Sessions of (user, assistant) exchanges; the facts go three per session into 1–7."""
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
        if s < PLANTED_SESSIONS:
            for fact in FACTS[3 * s : 3 * s + 3]:
                exchanges.insert(rng.randrange(len(exchanges) + 1), (fact.user, fact.reply))
        out.append(exchanges)
    return out


class BM25:
    """Plain BM25 over the raw turns, with the network's tokenizer (turns cut like index
    terms, queries like query terms)."""

    def __init__(self, docs: list[str], k1: float = 1.2, b: float = 0.75) -> None:
        self.docs = docs
        self.tfs = [Counter(tokenize_for_index(d)) for d in docs]
        self.lens = [sum(tf.values()) for tf in self.tfs]
        self.avgdl = sum(self.lens) / max(len(docs), 1)
        df: Counter[str] = Counter()
        for tf in self.tfs:
            df.update(tf.keys())
        n = len(docs)
        self.idf = {t: math.log(1 + (n - c + 0.5) / (c + 0.5)) for t, c in df.items()}
        self.k1, self.b = k1, b

    def top(self, keywords: tuple[str, ...], k: int) -> list[str]:
        return [self.docs[i] for i in self.top_ids(keywords, k)]

    def top_ids(self, keywords: tuple[str, ...], k: int) -> list[int]:
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
        return [i for _, i in scores[:k]]


@dataclass
class Row:
    recalled: list[bool]
    entries: list[int]
    chars: list[int]
    ms: list[float]
    reached: list[bool] | None = None  # link-only diagnostic (network rows only)


def reaches_answer(mem: MemoryManager, fact: Fact, depth: int, mode: str) -> bool:
    """Whether the walk of ``recall(fact.keywords, depth=depth, entry=mode)`` reaches, within
    ``depth`` hops, a node holding the answer — returned or not (the seeds as the manager
    builds them, SPEC §5.4 / §5.5)."""
    searcher = mem._searcher
    seeds: list[Seed] = []
    if mode in ("focus", "both"):
        seeds = [Seed(nid, 1.0, rank) for rank, nid in enumerate(mem._focus.ids())]
    if mode in ("keywords", "both"):
        seeds += searcher.keyword_seeds(
            list(fact.keywords), mem.config.max_entry_nodes, first_rank=len(seeds),
            generation=mem._metadata.node_sequence,
        )
    if not seeds:
        return False
    reached = searcher.fetch(seeds, depth, None).reached
    return any(fact.evidence in content for content, _ in mem._nodes.texts(reached).values())


def layout(mem: MemoryManager, fact: Fact) -> str:
    """Where the answer of a link-only fact ended up: in one node with the query words (the
    segmenter kept the exchange together), in a node of its own, or nowhere (compressed or
    forgotten)."""
    rows = mem.sparql(
        f'SELECT ?c WHERE {{ ?n memory:content ?c FILTER(CONTAINS(?c, "{fact.evidence}")) }}'
    )
    contents = [r["c"] for r in rows]  # type: ignore[index,union-attr]
    if not contents:
        return "gone"
    return "1 node" if any(mentions(c, fact.keywords) for c in contents) else "2 nodes"


def terms_line(mem: MemoryManager) -> str:
    """Index terms per node as stored (search-mode cut) and as the precise cut would give."""
    rows = mem.sparql(
        """SELECT ?n ?c ?k (GROUP_CONCAT(?kw; separator="\\u0001") AS ?kws) WHERE {
             ?n memory:content ?c ; memory:termCount ?k OPTIONAL { ?n memory:keyword ?kw } }
           GROUP BY ?n ?c ?k"""
    )
    stored, precise, han = [], [], []
    for r in rows:  # type: ignore[union-attr]
        keywords = [k for k in str(r.get("kws") or "").split("\u0001") if k]  # type: ignore[union-attr]
        words = set(tokenize(strip_role_prefixes(str(r["c"]))))  # type: ignore[index]
        for k in keywords:
            words.update(tokenize(k))
        stored.append(int(r["k"]))  # type: ignore[index,arg-type]
        precise.append(len(words))
        if is_cjk_text(str(r["c"])):  # type: ignore[index]
            han.append((int(r["k"]), len(words)))  # type: ignore[index,arg-type]
    return (f"index terms per node: {statistics.mean(stored):.2f} (the precise cut would give "
            f"{statistics.mean(precise):.2f}); Chinese nodes ({len(han)}): "
            f"{statistics.mean(a for a, _ in han):.2f} ({statistics.mean(b for _, b in han):.2f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=18)
    parser.add_argument("--per-session", type=int, default=9)
    parser.add_argument("--slices", type=int, default=2, help="compression slices per session")
    parser.add_argument("--repeat", type=int, default=3, help="timing repetitions per recall")
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()
    assert args.sessions >= 15, "the evaluation asks about facts from 10+ sessions back"
    check_facts()

    sessions = conversation(args.sessions, args.per_session, args.seed)
    turns = [t for session in sessions for exchange in session for t in exchange]
    config = Config(auto_compress=False)
    start = time.perf_counter()
    modes = [(mode, depth) for mode in ("focus", "keywords", "both") for depth in (2, 4)]
    rows: dict[tuple[str, int], Row] = {}
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
        n_link = sum(f.link for f in FACTS)
        print(f"{args.sessions} sessions, {len(turns)} turns, {len(FACTS)} facts "
              f"({len(FACTS) - n_link} same-turn, {n_link} link-only) planted in sessions "
              f"1-{PLANTED_SESSIONS} → {stats['nodes']} nodes, {stats['links']} links "
              f"(built in {time.perf_counter() - start:.1f} s, HeuristicModel, "
              f"{args.slices} compression slices per session)\n")
        print(terms_line(mem) + "\n")
        bm25 = BM25(turns)
        layouts = {f.key: layout(mem, f) for f in FACTS if f.link}

        for mode, depth in modes:
            row = rows[(mode, depth)] = Row([], [], [], [], [])
            for fact in FACTS:
                times = []
                for _ in range(args.repeat):
                    t0 = time.perf_counter()
                    text = mem.recall(list(fact.keywords), depth=depth, entry=mode)
                    times.append((time.perf_counter() - t0) * 1000)
                row.recalled.append(fact.evidence in text)
                row.entries.append(len(text.split(SEP)) if text else 0)
                row.chars.append(len(text))
                row.ms.append(statistics.median(times))
                assert row.reached is not None
                row.reached.append(reaches_answer(mem, fact, depth, mode))

    def bm25_row(counts: list[int], neighbours: bool = False) -> Row:
        row = Row([], [], [], [])
        for fact, k in zip(FACTS, counts, strict=True):
            times = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                ids = bm25.top_ids(fact.keywords, k)
                if neighbours:  # each hit with the turn before and the turn after it
                    ids = list(dict.fromkeys(
                        j for i in ids for j in (i - 1, i, i + 1) if 0 <= j < len(turns)))
                times.append((time.perf_counter() - t0) * 1000)
            text = SEP.join(turns[i] for i in ids)
            row.recalled.append(fact.evidence in text)
            row.entries.append(len(ids))
            row.chars.append(len(text))
            row.ms.append(statistics.median(times))
        return row

    link = [f.link for f in FACTS]

    def share(row: Row, kind: bool | None) -> str:
        got = [r for r, is_link in zip(row.recalled, link, strict=True)
               if kind is None or is_link == kind]
        return f"{sum(got):>3}/{len(got):<3}{100 * sum(got) / len(got):>4.0f}%"

    def line(label: str, row: Row) -> str:
        if row.reached is not None:
            hit = sum(r for r, is_link in zip(row.reached, link, strict=True) if is_link)
            reached = f"{hit:>3}/{sum(link):<3}"
        else:
            reached = f"{'-':>7}"
        return (f"{label:<28}{share(row, None):>12}{share(row, False):>12}"
                f"{share(row, True):>12}{reached:>10}{statistics.mean(row.entries):>9.1f}"
                f"{statistics.mean(row.chars):>8.0f}{statistics.median(row.ms):>9.2f}")

    print(f"{'method':<28}{'all':>12}{'same-turn':>12}{'link-only':>12}{'reached':>10}"
          f"{'entries':>9}{'chars':>8}{'ms p50':>9}")
    baselines: dict[tuple[str, int], Row] = {}
    for (mode, depth), row in rows.items():
        print(line(f"network {mode} d{depth}", row))
        baselines[(mode, depth)] = bm25_row(row.entries)
        print(line("  BM25, same entries", baselines[(mode, depth)]))
    for k in (5, 10):
        print(line(f"BM25 top {k}", bm25_row([k] * len(FACTS))))
    print(line("BM25 top 5 + next/prev turn", bm25_row([5] * len(FACTS), neighbours=True)))

    print("\nper fact (✓ = evidence returned, r = answer node reached but not returned; "
          "BM25 with the keyword-entry d2 entry count):")
    print(f"{'fact':<16}{'kind':<15}{'keywords':<24}"
          + "".join(f"{m[:4]}{d:<4}" for m, d in modes) + "bm25")
    bm_kw2 = baselines[("keywords", 2)]
    for i, fact in enumerate(FACTS):
        marks = ""
        for c in modes:
            reached = rows[c].reached
            mark = "✓" if rows[c].recalled[i] else "r" if reached and reached[i] else "·"
            marks += f"{mark:<8}"
        kind = f"link, {layouts[fact.key]}" if fact.link else "same-turn"
        print(f"{fact.key:<16}{kind:<15}{', '.join(fact.keywords):<24}{marks}"
              f"{'✓' if bm_kw2.recalled[i] else '·'}")


if __name__ == "__main__":
    main()
