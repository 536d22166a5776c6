"""Where the time of the default recall (``entry="both"``) goes, on the suite's workload.

    python benchmarks/profile_both.py [--nodes 10000] [--repeat 30] [--dir DIR]

For each suite query (benchmarks/suite.py QUERIES) at depth 2 and 4: p50 ms of the public
``recall(entry="focus")`` and ``recall(entry="both")``, and of the parts of the latter: the
keyword entry (``Searcher.keyword_seeds``), the keyword weights (``keyword_weights``), the
walk's graph (``Searcher.fetch``) and the whole ``Searcher.recall`` (walk, match, rank,
render) from the same seeds; the keyword entry and the public ``both`` recall also with the
derived term index turned off (the SPARQL path, ``keyword_entry.rq``). ``--dir`` keeps
the generated store for the next run.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import FastModel  # noqa: E402
from benchmarks._workload import generate  # noqa: E402
from benchmarks.profile_recall import median_ms  # noqa: E402
from benchmarks.suite import DEPTHS, QUERIES  # noqa: E402
from memory_rdf import Config, MemoryManager  # noqa: E402
from memory_rdf._oxigraph import AgentStore, term_index  # noqa: E402
from memory_rdf._search import Seed  # noqa: E402
from memory_rdf._text import significant_keywords  # noqa: E402


def p50(fn: Callable[[], object], repeat: int) -> float:
    """Median ms of ``repeat`` calls after one warm-up call."""
    fn()
    return median_ms(fn, repeat)


def row(mem: MemoryManager, depth: int, label: str, kws: tuple[str, ...],
        rels: tuple[str, ...] | None, repeat: int) -> str:
    """One table row: p50 ms of the public recalls and of the parts of ``both``."""
    s = mem._searcher
    gen = mem._metadata.node_sequence
    focus = [Seed(n, 1.0, i) for i, n in enumerate(mem._focus.ids())]
    keywords = significant_keywords(list(kws))
    rel = None if rels is None else list(rels)
    limit = mem.config.max_search_results
    f = p50(lambda: mem.recall(list(kws), relations=rel, depth=depth,
                               entry="focus"), repeat)
    b = p50(lambda: mem.recall(list(kws), relations=rel, depth=depth,
                               entry="both"), repeat)
    seeds = focus + s.keyword_seeds(keywords, mem.config.max_entry_nodes,
                                    first_rank=len(focus), generation=gen)
    k = p50(lambda: s.keyword_seeds(keywords, mem.config.max_entry_nodes,
                                    first_rank=len(focus), generation=gen),
            repeat)
    term_index.ENABLED = False  # the keyword entry in SPARQL (keyword_entry.rq), as before
    try:
        ks = p50(lambda: s.keyword_seeds(keywords, mem.config.max_entry_nodes,
                                         first_rank=len(focus), generation=gen), repeat)
        bs = p50(lambda: mem.recall(list(kws), relations=rel, depth=depth, entry="both"),
                 repeat)
    finally:
        term_index.ENABLED = True
    w = p50(lambda: s.keyword_weights(keywords, gen), repeat) \
        if len(keywords) >= 2 else 0.0
    fe = p50(lambda: s.fetch(seeds, depth, rel), repeat)
    weights = s.keyword_weights(keywords, gen) if len(keywords) >= 2 else None
    r = p50(lambda: s.recall(seeds, keywords, rel, depth, limit,
                             mem.config.recall_max_chars, weights=weights),
            repeat)
    return (f"| {depth} | {label} | {f:.2f} | {b:.2f} | {bs:.2f} | {k:.2f} | {ks:.2f} | "
            f"{w:.2f} | {fe:.2f} | {r:.2f} | {b / f:.2f} | {k / f:.2f} | {ks / f:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    base = args.dir or Path("/tmp") / f"profile_both_{args.nodes}"
    if not (base / "agent").exists():
        base.mkdir(parents=True, exist_ok=True)
        generate(base / "agent", args.nodes, decay=120, forgotten=0.05)
    cfg = Config(auto_compress=False)
    with MemoryManager("agent", data_dir=base, config=cfg, model=FastModel()) as mem:
        assert isinstance(mem._store, AgentStore)
        mem._store.wait_mirror()
        print(f"{mem.stats()['nodes']:,} nodes, mirror {mem._store.mirror_state}; p50 ms\n")
        print("| depth | query | focus recall() | both recall() | both, SPARQL entry | "
              "keyword_seeds | keyword_seeds SPARQL | keyword_weights | fetch | "
              "Searcher.recall | both ÷ focus | seeds ÷ focus | SPARQL seeds ÷ focus |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for depth in DEPTHS:
            for label, kws, rels in QUERIES:
                print(row(mem, depth, label, kws, rels, args.repeat))


if __name__ == "__main__":
    main()
