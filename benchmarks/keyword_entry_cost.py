"""What the keyword entry (SPEC §5.5) costs: recall latency and store size.

For each size it builds two stores with the workload generator (the same triples as the
remember path, bulk-loaded): one with index terms, one without (``terms=False``). Then:

* store size: bytes on disk with and without the ``memory:term`` / ``memory:termCount``
  triples, per node, and their ratio;
* latency, on the store with terms, through the public API (queue and scheduler included):
  a focus-only recall, a keyword-entry recall and a "both" recall at depth 2 and 4, for
  queries from rare (one node carries the term) to frequent (~9% of the nodes), and the
  entry alone (``Searcher.keyword_seeds``: the two SPARQL queries that find the seeds);
* the N / avgdl aggregate that the searcher caches (paid once per 10% of growth).

Ratios are keyword ÷ focus at the same depth (the aim: ≤ 2× at 100k). A keyword recall walks
from up to ``max_entry_nodes`` (10) old nodes instead of from the 5 focus nodes; old nodes
carry more links than the focus (every node created while they were in focus links to them),
so the walk itself costs more — the "entry" column is the price of the entry proper.

    python benchmarks/keyword_entry_cost.py [--sizes 10000 100000] [--repeat 15]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import percentiles  # noqa: E402
from benchmarks._workload import generate  # noqa: E402
from memory_rdf import Config, MemoryManager  # noqa: E402

#: Queries, from rare to frequent in the generated workload (sentence() in _common.py: one
#: numbered note per node, three of 16 English or 20 Chinese topic words each).
QUERIES: list[tuple[str, list[str]]] = [
    ("rare: one node", ["4242"]),
    ("rare + frequent", ["4242", "login"]),
    ("frequent en (~9%)", ["login"]),
    ("frequent zh (~7%)", ["登录"]),
    ("two frequent (~17%)", ["login", "payment"]),
    ("very frequent (~50%)", ["service", "checks"]),
]


def entries(text: str, separator: str) -> int:
    """How many entries a recall text holds (``""`` when nothing was recalled).

    Counted by the entry separator, not by a label: entries are dated and written in their
    own language (``[memory 2026-01-01] …`` / ``[记忆 2026-01-01] …``, SPEC §5.4 v3).
    """
    return len(text.split(separator)) if text else 0


def store_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def interleaved(fns: dict[str, object], repeat: int) -> dict[str, list[float]]:
    """Run each callable ``repeat`` times, round-robin (fair under machine noise); ms."""
    out: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()  # type: ignore[operator]
            out[name].append((time.perf_counter() - start) * 1000)
    return out


def measure(base: Path, nodes: int, repeat: int) -> None:
    with_terms = base / f"terms_{nodes}" / "bench"
    without = base / f"plain_{nodes}" / "bench"
    print(f"\n=== {nodes:,} nodes ===")
    for path, terms in ((with_terms, True), (without, False)):
        start = time.perf_counter()
        generate(path, nodes, terms=terms, progress=False)
        print(f"  generated {'with' if terms else 'without'} terms in "
              f"{time.perf_counter() - start:.0f} s")
    # Compact both the same way, so the sizes compare the data, not the load history.
    for path in (with_terms, without):
        mem = MemoryManager(path.name, data_dir=path.parent, config=Config(auto_compress=False))
        mem.initialize()
        assert mem._store is not None
        mem._store.optimize()
        mem.close()
    size_terms, size_plain = store_bytes(with_terms), store_bytes(without)
    print(f"  store size: {size_plain / nodes:,.0f} B/node without terms, "
          f"{size_terms / nodes:,.0f} B/node with terms "
          f"(× {size_terms / size_plain:.2f}; terms add {(size_terms - size_plain) / nodes:,.0f}"
          " B/node)")

    config = Config(auto_compress=False, max_queue_size=100_000)
    with MemoryManager(with_terms.name, data_dir=with_terms.parent, config=config) as mem:
        searcher = mem._searcher
        generation = mem._metadata.node_sequence
        stats_ms = []
        for _ in range(3):
            searcher._stats = None
            start = time.perf_counter()
            stats = searcher.collection_stats(generation)
            stats_ms.append((time.perf_counter() - start) * 1000)
        print(f"  N / avgdl aggregate (cached; once per 10% growth): "
              f"{statistics.median(stats_ms):.1f} ms  (N={stats.nodes}, "
              f"avgdl={stats.avgdl:.2f})")
        print(f"\n  {'query':<22}{'d':>2}{'focus':>9}{'keywords':>10}{'both':>9}"
              f"{'entry':>8}{'kw/focus':>10}{'both/focus':>11}{'entry/focus':>12}"
              f"{'seeds':>7}{'results f/k':>13}")
        ratios: list[float] = []
        sep = config.templates.entry_separator
        for label, words in QUERIES:
            for depth in (2, 4):
                # warm up (caches, the stats) and count what comes back
                focus_text = mem.recall(words, depth=depth)
                kw_text = mem.recall(words, depth=depth, entry="keywords")
                mem.recall(words, depth=depth, entry="both")
                seeds = searcher.keyword_seeds(words, config.max_entry_nodes,
                                               generation=generation)
                times = interleaved({
                    "focus": lambda w=words, d=depth: mem.recall(w, depth=d),
                    "keywords": lambda w=words, d=depth: mem.recall(w, depth=d,
                                                                    entry="keywords"),
                    "both": lambda w=words, d=depth: mem.recall(w, depth=d, entry="both"),
                    "entry": lambda w=words: searcher.keyword_seeds(
                        w, config.max_entry_nodes, generation=generation),
                }, repeat)
                med = {k: percentiles(v)[0] for k, v in times.items()}
                ratio = med["keywords"] / med["focus"]
                ratios.append(ratio)
                print(f"  {label:<22}{depth:>2}{med['focus']:>9.1f}{med['keywords']:>10.1f}"
                      f"{med['both']:>9.1f}{med['entry']:>8.1f}{ratio:>10.2f}"
                      f"{med['both'] / med['focus']:>11.2f}"
                      f"{med['entry'] / med['focus']:>12.2f}{len(seeds):>7}"
                      f"{entries(focus_text, sep):>7}/{entries(kw_text, sep):<5}")
                label = ""
        print(f"  keywords/focus median ratio over the queries: {statistics.median(ratios):.2f}"
              f" (max {max(ratios):.2f}); times are medians in ms of {repeat} runs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--dir", type=Path, default=None,
                        help="where to build the stores (default: a temporary directory)")
    args = parser.parse_args()
    if args.dir is not None:
        args.dir.mkdir(parents=True, exist_ok=True)
        for nodes in args.sizes:
            measure(args.dir, nodes, args.repeat)
        return
    with tempfile.TemporaryDirectory() as tmp:
        for nodes in args.sizes:
            measure(Path(tmp), nodes, args.repeat)


if __name__ == "__main__":
    main()
