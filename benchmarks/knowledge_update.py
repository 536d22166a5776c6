"""Current facts first (SPEC §5.4 v3): is an updated fact recalled, and above what it updates?

``benchmarks/data/knowledge_update.json`` holds 24 cases made for this (12 English, 12
Chinese: budgets, addresses, dates, rooms, names, passwords, numbers, preferences). Each case is
one agent and one conversation in eight weekly sessions of dated messages, remembered one
exchange (user + assistant) at a time through the built-in model with ``Config()``'s defaults
and one compression slice per remember (as ``recall_quality.py`` does):

    session 1  the fact (e.g. "Our budget for the Japan trip is 6,000 euros.") and a filler
    2 – 4      two fillers each (other topics)
    5          the update ("Change of plan: the Japan trip budget is now 7,500 euros.") and a
               filler
    6 – 8      two fillers each, so the update has left the focus by the question

Then the agent recalls with the case's keywords (``recall(keywords)``, the default entry and
budget, and ``entry="both"``). A case counts as **current first** when the text holds the
update's distinctive string and it comes before the old statement's (or the old one is not
there). Run it against any checkout (the library is imported from ``PYTHONPATH``):

    PYTHONPATH=. python benchmarks/knowledge_update.py
    PYTHONPATH=/path/to/other/checkout python benchmarks/knowledge_update.py
"""

from __future__ import annotations

import argparse
import json
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memory_rdf import Config, MemoryManager

DATA = Path(__file__).resolve().parent / "data" / "knowledge_update.json"
START = datetime(2024, 1, 1, 9, 0, tzinfo=UTC)
ACK = {"en": "Got it, I will remember that.", "zh": "好的，我记住了。"}


def sessions(case: dict[str, Any], fillers: list[list[str]]) -> list[list[tuple[str, str]]]:
    """The case's conversation: eight sessions of (user, assistant) exchanges."""
    ack = ACK[case["lang"]]
    pool = iter(fillers * 2)

    def filler() -> tuple[str, str]:
        user, assistant = next(pool)
        return user, assistant

    out: list[list[tuple[str, str]]] = [[(case["old"], ack), filler()]]
    out += [[filler(), filler()] for _ in range(3)]
    out.append([(case["update"], ack), filler()])
    out += [[filler(), filler()] for _ in range(3)]
    return out


def run_case(case: dict[str, Any], fillers: list[list[str]], work: Path) -> dict[str, Any]:
    config = Config(auto_compress=False)
    with MemoryManager("ku", data_dir=work, config=config) as mem:
        for week, session in enumerate(sessions(case, fillers)):
            day = START + timedelta(days=7 * week)
            for i, (user, assistant) in enumerate(session):
                at = (day + timedelta(minutes=2 * i)).isoformat()
                mem.remember([
                    {"role": "user", "content": user, "timestamp": at},
                    {"role": "assistant", "content": assistant, "timestamp": at},
                ])
                mem.wait_idle(60)
                mem.run_compression_slice()
        result: dict[str, Any] = {}
        for name, kwargs in (("default", {}), ("both", {"entry": "both"})):
            text = mem.recall(case["keywords"], **kwargs)
            new = text.find(case["new"])
            old = text.find(case["old_marker"])
            result[name] = {
                "returned": new >= 0,
                "current_first": new >= 0 and (old < 0 or new < old),
                "old_returned": old >= 0,
            }
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--verbose", action="store_true", help="one line per case")
    args = parser.parse_args(argv)
    data = json.loads(args.data.read_text(encoding="utf-8"))
    rows: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for case in data["cases"]:
        with tempfile.TemporaryDirectory() as tmp:
            result = run_case(case, data["fillers"][case["lang"]], Path(tmp))
        rows.append((case, result))
        if args.verbose:
            print(case["lang"], case["keywords"], json.dumps(result), flush=True)
    print("| recall | language | cases | update returned | current first | old returned |")
    print("|---|---|---|---|---|---|")
    for name in ("default", "both"):
        for lang in ("en", "zh", "all"):
            chosen = [r[name] for c, r in rows if lang in ("all", c["lang"])]
            n = len(chosen)
            returned = sum(r["returned"] for r in chosen)
            first = sum(r["current_first"] for r in chosen)
            old = sum(r["old_returned"] for r in chosen)
            print(f"| {name} | {lang} | {n} | {returned} ({100 * returned / n:.0f}%) | "
                  f"{first} ({100 * first / n:.0f}%) | {old} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
