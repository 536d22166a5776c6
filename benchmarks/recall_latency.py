"""Recall latency on a 10,000-node agent, against a pure-Python dict walk of the same graph.

Builds the agent through the real remember path (a fast scripted model, so model time is
negligible), then times ``recall`` at depth 2 and 4 — through the public API (queue and
scheduler included) and through the search alone — and the same best-first walk over a Python
dict holding the whole graph (the lower bound for Python). Both must return identical text.

    python benchmarks/recall_latency.py [--nodes 10000] [--repeat 50]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import FastModel, percentiles, sentence, timed  # noqa: E402
from memory_rdf import Config, MemoryManager  # noqa: E402
from memory_rdf._search import Seed, walk  # noqa: E402

NODE = "https://w3id.org/memory-rdf/node/"


def build(mem: MemoryManager, nodes: int, per_remember: int, rng: random.Random) -> float:
    start = time.perf_counter()
    i = 0
    while i < nodes:
        n = min(per_remember, nodes - i)
        mem.remember([{"role": "user", "content": sentence(rng, i + k)} for k in range(n)])
        i += n
        if i % 1000 < per_remember:
            mem.wait_idle()
            print(f"  built {i:>6} nodes", file=sys.stderr, end="\r")
    mem.wait_idle()
    print(file=sys.stderr)
    return time.perf_counter() - start


def dict_reference(mem: MemoryManager) -> tuple[dict, dict, dict]:
    rows = mem.sparql(
        """SELECT ?s ?t ?w ?r WHERE { ?l memory:source ?s ; memory:target ?t ; memory:strength ?w .
           ?t memory:scanCount ?alive . OPTIONAL { ?l memory:relation ?r } }"""
    )
    adjacency: dict[str, list[tuple[str, float]]] = {}
    for r in rows:  # type: ignore[union-attr]
        adjacency.setdefault(r["s"][len(NODE):], []).append(  # type: ignore[index]
            (r["t"][len(NODE):], r["w"])  # type: ignore[index]
        )
    for targets in adjacency.values():
        targets.sort(key=lambda t: (-t[1], t[0]))
    texts = {
        r["n"][len(NODE):]: r["c"]  # type: ignore[index]
        for r in mem.sparql("SELECT ?n ?c WHERE { ?n memory:content ?c }")  # type: ignore[union-attr]
    }
    keywords: dict[str, list[str]] = {}
    for r in mem.sparql("SELECT ?n ?k WHERE { ?n memory:keyword ?k }"):  # type: ignore[union-attr]
        keywords.setdefault(r["n"][len(NODE):], []).append(r["k"].lower())  # type: ignore[index]
    return adjacency, texts, keywords


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    rng = random.Random(7)
    config = Config(auto_compress=False, max_queue_size=100_000)
    with tempfile.TemporaryDirectory() as tmp, MemoryManager(
        "bench", data_dir=tmp, config=config, model=FastModel()
    ) as mem:
        seconds = build(mem, args.nodes, 5, rng)
        st = mem.stats()
        print(f"built {st['nodes']} nodes, {st['links']} links in {seconds:.1f} s "
              f"({st['nodes'] / seconds:.0f} nodes/s through remember)")
        adjacency, texts, keywords = dict_reference(mem)
        focus = mem._focus.ids()
        seeds = [Seed(n, 1.0, i) for i, n in enumerate(focus)]
        limit = config.max_search_results

        def dict_recall(words: list[str], depth: int) -> str:
            lowered = [w.lower() for w in words]

            class Matches:  # tested only for the nodes the walk reaches, as a dict user would
                def __contains__(self, n: object) -> bool:
                    c = texts[n].lower()  # type: ignore[index]
                    kws = keywords.get(n, ())  # type: ignore[call-overload]
                    return any(w in c or any(w in k for k in kws) for w in lowered)

            hits = walk(seeds, adjacency, Matches() if lowered else None,  # type: ignore[arg-type]
                        depth, limit)
            return "\n---\n".join(f"[记忆] {texts[h.node]}" for h in hits)

        print(f"\n{'query':<28}{'engine':<22}{'p50 ms':>9}{'p95 ms':>9}{'× dict':>9}")
        for words in ([], ["login"], ["登录"]):
            for depth in (2, 4):
                expected = dict_recall(words, depth)
                got = mem.recall(words, depth=depth)
                assert got == expected, f"recall text differs for {words} depth {depth}"
                base = timed(lambda w=words, d=depth: dict_recall(w, d), args.repeat)
                api = timed(lambda w=words, d=depth: mem.recall(w, depth=d), args.repeat)
                direct = timed(
                    lambda w=words, d=depth: mem._searcher.recall(seeds, w, None, d, limit),
                    args.repeat,
                )
                b50, b95 = percentiles(base)
                label = f"{words or 'all'} depth {depth}"
                for name, samples in (("oxigraph (recall())", api), ("oxigraph (search)", direct),
                                      ("python dict", base)):
                    p50, p95 = percentiles(samples)
                    print(f"{label:<28}{name:<22}{p50:>9.2f}{p95:>9.2f}{p50 / b50:>9.1f}")
                    label = ""


if __name__ == "__main__":
    main()
