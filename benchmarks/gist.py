"""What compression leaves: does a shortened memory still say who said what?

A memory whose importance falls is shortened by the small model, then forgotten (SPEC §5.2).
"Forgets like a mind" means it fades to its gist: who said it and the words that carry its
facts. This script ages stores with compression slices and reads what their texts still hold:

* **answers kept**: the LoCoMo question answers that the conversation says verbatim (short
  answers: at most five words holding a content word, found as written in a turn) and that a
  node's original text held, still present in the store's text (case-insensitive, as whole
  words) — against the same nodes cut to
  the same lengths by plain truncation (each present node's original text cut to the length
  its content has now). For the bilingual conversation of ``keyword_eval.py`` the answers are
  its facts' answer strings.
* **speaker named**: of the shortened nodes, those with a line that still opens with the
  speaker's label of one of its original lines (LoCoMo's ``Caroline:``, else ``user:`` /
  ``assistant:``) and holds text after it.
* **lone words**: shortened nodes whose text, labels aside, is fewer than two words.

Stores are built as ``recall_quality.py`` builds them (one exchange per ``remember``, the
built-in ``HeuristicModel``, ``Config()`` with one compression slice per remember; two slices
per session for ``keyword_eval``'s conversation, as that script builds it), recording
each node's text when it is created (new nodes are focus nodes, so not yet shortened); then
aged with more slices, with no new memories, and measured when a third, a half and two thirds
of the nodes present are shortened. Data: the LoCoMo development split (read from
``../shared/data/locomo-dev/`` or ``--data``, never copied here: see ``recall_quality.DATA_HELP``),
the Chinese demo conversation (``memory_rdf/data/demo_conversation.json``) and the English one,
and ``keyword_eval.py``'s bilingual conversation.

    python benchmarks/gist.py                       # everything (LoCoMo dev: a few minutes)
    python benchmarks/gist.py --conversations 41    # one LoCoMo conversation
    python benchmarks/gist.py --skip-locomo         # the demo and keyword_eval conversations
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks import recall_quality as rq  # noqa: E402
from benchmarks.keyword_eval import FACTS, conversation  # noqa: E402
from memory_rdf import Config, MemoryManager  # noqa: E402
from memory_rdf._text import HAN, WORD_CHAR, cut_han, tokenize  # noqa: E402

LEVELS = (1 / 3, 1 / 2, 2 / 3)
MAX_AGEING_SLICES = 2000
ANSWER_MAX_WORDS = 5
_ROLE = r"(?:user|assistant|system): ?"
_NAME = r"[A-Z][A-Za-z'’\-]*(?: [A-Z][A-Za-z'’\-]*){0,2}: "
_LABEL_RE = re.compile(rf"(?:{_ROLE})?({_NAME})|({_ROLE})")
_WORD_RE = re.compile(rf"([{HAN}]+)|([^\W_{HAN}]+(?:['’\-.][^\W_{HAN}]+)*)")

Exchange = list[dict[str, str]]


@dataclass
class Level:
    slices: int
    present: int
    shortened: int
    forgotten: int
    answers: int
    kept: int
    kept_truncated: int
    named: int
    lone: list[str] = field(default_factory=list)
    examples: list[tuple[str, str]] = field(default_factory=list)


def labels(line: str) -> str:
    """Who said ``line``: its speaker's name label ("Caroline: ") when it opens the line
    (after the role label), else its role label ("user: "), else ""."""
    m = _LABEL_RE.match(line)
    if m is None:
        return ""
    return (m.group(1) or m.group(2) or "").rstrip() + " "


def words(text: str) -> int:
    n = 0
    for m in _WORD_RE.finditer(text):
        n += len(cut_han(m.group(1))) if m.group(1) else 1
    return n


def names_speaker(original: str, content: str) -> bool:
    wanted = {labels(line).strip() for line in original.split("\n")} - {""}
    for line in content.split("\n"):
        label = labels(line)
        if label.strip() in wanted and words(line[len(label):]) > 0:
            return True
    return False


def body_words(content: str) -> int:
    return sum(words(line[len(labels(line)):]) for line in content.split("\n"))


def contents(mem: MemoryManager) -> dict[str, str]:
    rows = mem.sparql("SELECT ?n ?c WHERE { ?n memory:content ?c }")
    return {str(r["n"]): str(r["c"]) for r in rows}  # type: ignore[index]


def measure(mem: MemoryManager, original: dict[str, str], answers: Sequence[str],
            slices: int) -> Level:
    now = contents(mem)
    truncated = {n: original[n][: len(c)] for n, c in now.items()}
    shortened = [n for n, c in now.items() if c != original[n]]
    held = "\n".join(original.values()).lower()
    tracked = [a for a in answers if holds(held, a)]
    text, cut = "\n".join(now.values()).lower(), "\n".join(truncated.values()).lower()
    lone = [now[n] for n in shortened if body_words(now[n]) < 2]
    level = Level(slices, len(now), len(shortened), len(original) - len(now), len(tracked),
                  sum(holds(text, a) for a in tracked),
                  sum(holds(cut, a) for a in tracked),
                  sum(names_speaker(original[n], now[n]) for n in shortened), lone)
    level.examples = [(original[n], now[n]) for n in shortened[:: max(1, len(shortened) // 3)]][:3]
    return level


def age(name: str, sessions: Sequence[Sequence[Exchange]], answers: Sequence[str],
        per_remember: int = 1, per_session: int = 0) -> list[Level]:
    """Build the store (recording each node's text at creation; ``per_remember`` compression
    slices after each remember, ``per_session`` after each session), then age it to each
    level."""
    with tempfile.TemporaryDirectory(prefix="gist-") as home, \
            MemoryManager("gist", data_dir=home, config=Config(auto_compress=False)) as mem:
        original: dict[str, str] = {}
        for n, session in enumerate(sessions, 1):
            for exchange in session:
                mem.remember(exchange)
                mem.wait_idle()
                for nid, content in contents(mem).items():
                    original.setdefault(nid, content)
                for _ in range(per_remember):
                    mem.run_compression_slice()
            for _ in range(per_session):
                mem.run_compression_slice()
            print(f"\r  {name}: session {n}/{len(sessions)}", end="", file=sys.stderr,
                  flush=True)
        print(file=sys.stderr)
        out: list[Level] = []
        slices = 0
        for share in LEVELS:
            while slices < MAX_AGEING_SLICES:
                now = contents(mem)
                changed = sum(c != original[n] for n, c in now.items())
                if now and changed >= share * len(now):
                    break
                mem.run_compression_slice()
                slices += 1
            out.append(measure(mem, original, answers, slices))
        return out


def report(name: str, levels: Sequence[Level], show_examples: bool) -> None:
    print(f"{name}")
    print(f"  {'level':<7}{'slices':>7}{'nodes':>7}{'short':>7}{'forgot':>7}"
          f"{'answers':>9}{'kept':>6}{'trunc':>7}{'speaker named':>20}{'lone':>6}")
    for share, lv in zip(LEVELS, levels, strict=True):
        named = f"{lv.named}/{lv.shortened} ({100 * lv.named / max(lv.shortened, 1):.0f}%)"
        print(f"  {f'{share:.2f}':<7}{lv.slices:>7}{lv.present:>7}{lv.shortened:>7}"
              f"{lv.forgotten:>7}{lv.answers:>9}{lv.kept:>6}{lv.kept_truncated:>7}"
              f"{named:>20}{len(lv.lone):>6}")
    if show_examples:
        for before, after in levels[-1].examples:
            print(f"    {before[:100]!r}\n      → {after!r}")
        for lone in levels[-1].lone[:3]:
            print(f"    lone word: {lone!r}")
    print()


def total(levels_by_name: dict[str, list[Level]]) -> list[Level]:
    out = []
    for i in range(len(LEVELS)):
        rows = [lv[i] for lv in levels_by_name.values()]
        out.append(Level(sum(r.slices for r in rows), sum(r.present for r in rows),
                         sum(r.shortened for r in rows), sum(r.forgotten for r in rows),
                         sum(r.answers for r in rows), sum(r.kept for r in rows),
                         sum(r.kept_truncated for r in rows), sum(r.named for r in rows),
                         [w for r in rows for w in r.lone]))
    return out


def holds(text: str, answer: str) -> bool:
    """``answer`` is in ``text`` (lower-cased), not inside a longer Latin word or number
    ("yes" is not in "eyes"; Chinese has no spaces to mark words)."""
    found = re.search(rf"(?<!{WORD_CHAR}){re.escape(answer.lower())}(?!{WORD_CHAR})", text)
    return found is not None


def locomo_answers(path: Path, conv: rq.Conversation) -> list[str]:
    """The conversation's short answers said verbatim in one of its turns, that hold a content
    word (not "Yes" or "No")."""
    said = "\n".join(t.text for t in conv.turns).lower()
    out = []
    for q in json.loads(path.read_bytes())["qa"]:
        answer = str(q.get("answer", "")).strip()
        if (answer and len(answer.split()) <= ANSWER_MAX_WORDS and tokenize(answer)
                and holds(said, answer)):
            out.append(answer)
    return out


def demo_sessions(file: str) -> list[list[Exchange]]:
    data = json.loads((REPO / "memory_rdf" / "data" / file).read_text(encoding="utf-8"))
    out = []
    for session in data["sessions"]:
        msgs = [{"role": m["role"], "content": m["content"]} for m in session["messages"]]
        out.append([msgs[i:i + 2] for i in range(0, len(msgs), 2)])
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=rq.DATA_DEFAULT,
                        help="folder of the LoCoMo conversation files (default: %(default)s)")
    parser.add_argument("--conversations", default="",
                        help="comma-separated LoCoMo conversation names, e.g. 41,42")
    parser.add_argument("--skip-locomo", action="store_true")
    parser.add_argument("--skip-demos", action="store_true")
    parser.add_argument("--examples", action="store_true",
                        help="print a few shortened texts and lone words per store")
    args = parser.parse_args(argv)
    if not args.skip_locomo:
        files = sorted(args.data.glob("*.json"))
        if args.conversations:
            files = [f for f in files if f.stem in set(args.conversations.split(","))]
        if not files:
            sys.exit(rq.DATA_HELP.format(path=args.data))
        results = {}
        for path in files:
            conv = rq.load(path)
            plan: list[list[Exchange]] = [[] for _ in conv.sessions]
            for si, turns in rq.exchanges(conv):
                plan[si].append(rq.messages(conv, turns))
            results[path.stem] = age(f"LoCoMo {path.stem}", plan, locomo_answers(path, conv))
            report(f"LoCoMo {path.stem} (English)", results[path.stem], args.examples)
        if len(results) > 1:
            report(f"LoCoMo {', '.join(results)}", total(results), False)
    if not args.skip_demos:
        report("Chinese demo conversation (memory_rdf/data/demo_conversation.json)",
               age("zh demo", demo_sessions("demo_conversation.json"), []), args.examples)
        report("English demo conversation (memory_rdf/data/demo_conversation_en.json)",
               age("en demo", demo_sessions("demo_conversation_en.json"), []), args.examples)
        # Built as keyword_eval.py builds it: two slices after each session.
        sessions = [[[{"role": "user", "content": u}, {"role": "assistant", "content": r}]
                     for u, r in s] for s in conversation(18, 9, 5)]
        report("keyword_eval's bilingual conversation (Chinese and English facts)",
               age("keyword_eval", sessions, [f.evidence for f in FACTS], 0, 2), args.examples)


if __name__ == "__main__":
    main()
