"""Build ``memory_rdf/data/english_frequencies.txt``, the English word frequencies of the
built-in model (``memory_rdf/small_model/_heuristic.py``), from SymSpell's frequency dictionary.

The source is ``frequency_dictionary_en_82_765.txt`` as shipped in the ``symspellpy`` wheel
(MIT; 6.10.1 was used): word counts from the Google Books Ngram data (CC BY 3.0) for the
words that the SCOWL word lists (Kevin Atkinson) hold. The compact list keeps the
``--words`` most frequent words (the count-of-300,000 entries appended at the end of the
source — contractions, "covid", "hi" — are placeholders, not counts: dropped), each with its
Zipf value (log10 of its occurrences per billion words) rounded to 0.1, one line per value::

    pip download --no-deps -d /tmp/ss symspellpy && unzip -o -d /tmp/ss /tmp/ss/symspellpy-*.whl
    python benchmarks/english_frequencies.py /tmp/ss/symspellpy/frequency_dictionary_en_82_765.txt
"""

from __future__ import annotations

import argparse
import math
from collections import defaultdict
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "memory_rdf" / "data" / "english_frequencies.txt"
PLACEHOLDER_COUNT = 300_000

HEADER = """\
# English word frequencies for memory_rdf's built-in small model (HeuristicModel): how rare a
# word is decides how much of a text's meaning it carries when a memory is shortened.
# Each line: a Zipf value (log10 of the word's occurrences per billion words, rounded to 0.1),
# then the words with that value. The {n} most frequent words of the source.
#
# Source: SymSpell's frequency_dictionary_en_82_765.txt (Wolf Garbe, MIT licence), as shipped
# in symspellpy (MIT licence): word counts from the Google Books Ngram data
# (https://books.google.com/ngrams; Google, Creative Commons Attribution 3.0 Unported), for
# the words held by SCOWL, the Spell Checker Oriented Word Lists (Kevin Atkinson,
# http://wordlist.aspell.net/; licence below). Made by benchmarks/english_frequencies.py.
#
# SCOWL's notice: the collective work is Copyright 2000-2019 by Kevin Atkinson as well as any
# of the copyrights of its sources (http://wordlist.aspell.net/scowl-readme/).
#
#   Copyright 2000-2019 by Kevin Atkinson
#
#   Permission to use, copy, modify, distribute and sell these word
#   lists, the associated scripts, the output created from the scripts,
#   and its documentation for any purpose is hereby granted without fee,
#   provided that the above copyright notice appears in all copies and
#   that both that copyright notice and this permission notice appear in
#   supporting documentation. Kevin Atkinson makes no representations
#   about the suitability of this array for any purpose. It is provided
#   "as is" without express or implied warranty.
"""


def build(source: Path, words: int) -> str:
    rows: list[tuple[str, int]] = []
    for line in source.read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if len(parts) == 2:
            rows.append((parts[0], int(parts[1])))
    total = sum(count for _, count in rows)
    counted = [(w, c) for w, c in rows if c != PLACEHOLDER_COUNT and w.isalpha()]
    counted.sort(key=lambda row: (-row[1], row[0]))
    bands: dict[float, list[str]] = defaultdict(list)
    for word, count in counted[:words]:
        bands[round(math.log10(count / total * 1e9), 1)].append(word)
    lines = [f"{z:.1f} {' '.join(sorted(ws))}" for z, ws in sorted(bands.items(), reverse=True)]
    return HEADER.format(n=min(words, len(counted))) + "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path, help="frequency_dictionary_en_82_765.txt")
    parser.add_argument("--words", type=int, default=30_000, help="most frequent words kept")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    args.out.write_text(build(args.source, args.words), encoding="utf-8")
    print(f"wrote {args.out} ({args.out.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
