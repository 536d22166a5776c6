"""Where the time of a recall goes on Oxigraph (the findings are in benchmarks/PROFILE.md).

    python benchmarks/profile_recall.py [--nodes 10000] [--repeat 200] [--cprofile]
                                        [--read-mirror on|off]

On a store from the fast loader (the suite's workload), for depth 2 and 4, read through the
read mirror (``Config.read_mirror``, default ``on``; waited for before timing) or the disk
store (``off``):

* the public ``recall()`` against ``Searcher.recall`` with the same seeds (what the public
  call adds: the focus query, the keyword weights, the scheduler);

* every query a ``Searcher.recall`` runs, with its rows and time, split into Oxigraph's own
  work (parsing, planning, evaluation: ``Store.query`` plus iterating the solutions) and the
  Python conversion of the terms (``to_python``), per row;
* the fixed cost of one SPARQL round trip (a query returning one constant row);
* alternatives measured on the same store: one query for two hops instead of two level
  queries, ``quads_for_pattern`` lookups instead of SPARQL, texts and dangling links in one
  query, keyword matching inside the last level's query;
* with ``--cprofile``: the top Python functions of many recalls.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import io
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pyoxigraph as ox  # noqa: E402

from benchmarks._common import FastModel  # noqa: E402
from benchmarks._workload import generate  # noqa: E402
from memory_rdf import Config, MemoryManager  # noqa: E402
from memory_rdf import _vocab as V  # noqa: E402
from memory_rdf._oxigraph import AgentStore, Term, lit, node_id, node_ref, render, to_python  # noqa: E402

QUERY_NAMES = ("# mirror_outgoing", "# mirror_lost", "# outgoing_links", "# dangling_targets",
               "# dangling_link_details",
               "# matching_texts", "live_outgoing_links", "matching_nodes", "node_texts",
               "dangling_links",
               "focus_nodes")


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return statistics.median(out)


def split_rows(store: AgentStore, query: str) -> tuple[float, float, float, int]:
    """(query call ms, iterate ms, convert ms, rows) of one query, like AgentStore.rows."""
    t0 = time.perf_counter()
    result = store._reads().query(query, prefixes=V.PREFIXES)
    t1 = time.perf_counter()
    assert isinstance(result, ox.QuerySolutions)
    width = len(result.variables)
    raw = [[sol[i] for i in range(width)] for sol in result]
    t2 = time.perf_counter()
    if "mirror_" in query:  # AgentStore.mirror_rows: lexical values only
        [tuple(None if t is None else t.value for t in row) for row in raw]
    else:
        [tuple(to_python(t) for t in row) for row in raw]
    t3 = time.perf_counter()
    return (t1 - t0) * 1000, (t2 - t1) * 1000, (t3 - t2) * 1000, len(raw)


class Recorder:
    """Wraps AgentStore.rows to log every query of a recall: name, rows, time."""

    def __init__(self, store: AgentStore) -> None:
        self.store = store
        self.log: list[tuple[str, int, float, str]] = []
        self._rows = store.rows
        self._mirror_rows = store.mirror_rows

    def _wrap(self, run: Callable[[str], Any]) -> Callable[[str], Any]:
        def rows(query: str) -> Any:
            start = time.perf_counter()
            out = run(query)
            took = (time.perf_counter() - start) * 1000
            name = next((n.lstrip("# ") for n in QUERY_NAMES if n in query), "other")
            self.log.append((name, len(out or ()), took, query))
            return out

        return rows

    def __enter__(self) -> Recorder:
        self.store.rows = self._wrap(self._rows)  # type: ignore[method-assign]
        self.store.mirror_rows = self._wrap(self._mirror_rows)  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        del self.store.rows
        del self.store.mirror_rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--cprofile", action="store_true")
    parser.add_argument("--read-mirror", choices=("on", "off"), default="on")
    args = parser.parse_args()
    cfg = Config(auto_compress=False, read_mirror=args.read_mirror == "on")
    with tempfile.TemporaryDirectory() as tmp:
        generate(Path(tmp) / "agent", args.nodes, decay=120, forgotten=0.05)
        with MemoryManager("agent", data_dir=tmp, config=cfg, model=FastModel()) as mem:
            assert isinstance(mem._store, AgentStore)
            start = time.perf_counter()
            mem._store.wait_mirror()
            print(f"read mirror: {mem._store.mirror_state} "
                  f"(ready {time.perf_counter() - start:.1f} s after open)")
            run(mem, args)


def run(mem: MemoryManager, args: argparse.Namespace) -> None:
    from memory_rdf._search import Seed

    store = mem._store
    assert store is not None
    seeds = [Seed(n, 1.0, i) for i, n in enumerate(mem._focus.ids())]
    limit = mem.config.max_search_results
    threshold = lit(float(mem.config.link_break_threshold))
    print(f"{mem.stats()['nodes']:,} nodes; seeds: the {len(seeds)} focus nodes\n")

    trivial = "SELECT ?x WHERE { VALUES ?x { 1 } }"
    round_trip = median_ms(lambda: store.rows(trivial), 500)
    print(f"one SPARQL round trip (1 constant row): {round_trip:.3f} ms")
    print(f"focus_nodes query: {median_ms(lambda: mem._focus.ids(), 200):.3f} ms\n")

    for keywords in ([], ["login"]):
        for depth in (2, 4):
            label = f"depth {depth}, keywords {keywords or '(none)'}"
            total = median_ms(functools.partial(mem._searcher.recall, seeds, keywords, None,
                                                depth, limit), args.repeat)
            public = median_ms(functools.partial(mem.recall, keywords, depth=depth,
                                                 max_chars=0), args.repeat)
            with Recorder(store) as rec:
                mem._searcher.recall(seeds, keywords, None, depth, limit)
            print(f"== {label}: Searcher.recall p50 {total:.2f} ms, {len(rec.log)} queries; "
                  f"public recall() {public:.2f} ms")
            print(f"   {'query':<22}{'rows':>6}{'ms':>8}{'query':>9}{'iterate':>9}"
                  f"{'convert':>9}{'µs/row':>9}")
            parts = []
            for name, rows, took, query in rec.log:
                splits = [split_rows(store, query) for _ in range(30)]
                q, it, cv = (statistics.median(s[i] for s in splits) for i in range(3))
                parts.append((q, it, cv))
                per_row = (it + cv) * 1000 / rows if rows else float("nan")
                print(f"   {name:<22}{rows:>6}{took:>8.3f}{q:>9.3f}{it:>9.3f}{cv:>9.3f}"
                      f"{per_row:>9.1f}")
            in_store = sum(q + it for q, it, _ in parts)
            convert = sum(cv for _, _, cv in parts)
            print(f"   Oxigraph {in_store:.2f} ms, to_python {convert:.2f} ms, rest of Python "
                  f"{max(0.0, total - in_store - convert):.2f} ms\n")

    alternatives(mem, store, seeds, threshold, args.repeat)
    if args.cprofile:
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(args.repeat):
            mem._searcher.recall(seeds, ["login"], None, 4, limit)
        profile.disable()
        buf = io.StringIO()
        pstats.Stats(profile, stream=buf).sort_stats("tottime").print_stats(18)
        print(buf.getvalue())


def alternatives(mem: MemoryManager, store: AgentStore, seeds: list[Any], threshold: Term,
                 repeat: int) -> None:
    focus = [s.node for s in seeds]
    refs = [node_ref(n) for n in focus]
    level1 = render("live_outgoing_links", sources=refs, threshold=threshold, relations=None)
    hop1 = {node_id(t) for _, t, _, _ in store.rows(level1)}
    level2 = render("live_outgoing_links", sources=[node_ref(n) for n in hop1 - set(focus)],
                    threshold=threshold, relations=None)
    two_levels = median_ms(lambda: (store.rows(level1), store.rows(level2)), repeat)
    values = " ".join(refs)
    # The expansion pattern repeated inside each branch: with it after the UNION, Oxigraph
    # evaluated it first, over every link of the store (minutes at 10k nodes).
    expand = f"""?link memory:source ?source ; memory:target ?target ; memory:strength ?strength .
        FILTER(?strength >= {threshold})
        ?target memory:scanCount ?alive .
        OPTIONAL {{ ?link memory:relation ?relation }}"""
    two_hop = f"""
      SELECT ?source ?target ?strength ?relation WHERE {{
        {{ VALUES ?source {{ {values} }} {expand} }}
        UNION
        {{ VALUES ?seed {{ {values} }}
           ?l0 memory:source ?seed ; memory:target ?source ; memory:strength ?w0 .
           FILTER(?w0 >= {threshold}) ?source memory:scanCount ?a0 .
           {expand} }}
      }}"""
    one_query = median_ms(lambda: store.rows(two_hop), repeat)
    print("== alternatives (same store, same answers)")
    print(f"   levels 0 and 1 as two live_outgoing queries: {two_levels:.3f} ms; "
          f"as one two-hop query: {one_query:.3f} ms "
          f"({len(store.rows(two_hop))} rows, duplicates included)")

    # What each part of the level query costs on the store that answers reads (issue 16):
    # the liveness probe of the target and the relation are OPTIONAL lookups per row.
    sources = render("outgoing_links", sources=[node_ref(n) for n in hop1],
                     threshold=threshold, relations=None)
    values1 = " ".join(node_ref(n) for n in hop1)
    core = (f"?link memory:source ?source ; memory:target ?target ; memory:strength ?strength "
            f". FILTER(?strength >= {threshold})")
    parts = {
        "outgoing_links.rq": sources,
        "without the liveness OPTIONAL": f"SELECT * WHERE {{ VALUES ?source {{ {values1} }} "
                                         f"{core} OPTIONAL {{ ?link memory:relation ?r }} }}",
        "without either OPTIONAL": f"SELECT * WHERE {{ VALUES ?source {{ {values1} }} {core} }}",
        "?link memory:source only": f"SELECT * WHERE {{ VALUES ?source {{ {values1} }} "
                                    f"?link memory:source ?source }}",
    }
    for what, text in parts.items():
        took = median_ms(lambda text=text: store.rows(text), repeat)
        print(f"   level 1 ({len(hop1)} nodes), {what}: {took:.3f} ms "
              f"({len(store.rows(text))} rows)")

    src = ox.NamedNode(V.MEMORY + "source")
    tgt = ox.NamedNode(V.MEMORY + "target")
    strength = ox.NamedNode(V.MEMORY + "strength")
    scans = ox.NamedNode(V.MEMORY + "scanCount")
    graph = ox.DefaultGraph()
    st = store._reads()

    def by_pattern(nodes: list[str]) -> list[tuple[str, str, float]]:
        out = []
        for n in nodes:
            for q in st.quads_for_pattern(None, src, ox.NamedNode(V.NODE + n), graph):
                link = q.subject
                t: Any = next(iter(st.quads_for_pattern(link, tgt, None, graph))).object
                w_term: Any = next(iter(st.quads_for_pattern(link, strength, None, graph))).object
                w = float(w_term.value)
                if w >= 0.01 and next(iter(st.quads_for_pattern(t, scans, None, graph)), None):
                    out.append((n, t.value, w))
        return out

    sparql_level = median_ms(lambda: store.rows(level1), repeat)
    pattern_level = median_ms(lambda: by_pattern(focus), repeat)
    print(f"   level 0 ({len(focus)} nodes): SPARQL {sparql_level:.3f} ms, quads_for_pattern "
          f"lookups {pattern_level:.3f} ms ({len(by_pattern(focus))} rows)")

    results = list(hop1)[:30]
    rrefs = [node_ref(n) for n in results]
    texts_q = render("node_texts", nodes=rrefs)
    dangling_q = render("dangling_links", sources=rrefs, threshold=threshold, relations=None)
    separate = median_ms(lambda: (store.rows(texts_q), store.rows(dangling_q)), repeat)
    merged_q = f"""
      SELECT ?node ?content ?phrase ?strength ?relation WHERE {{
        VALUES ?node {{ {' '.join(rrefs)} }}
        ?node memory:content ?content ; memory:phrase ?phrase .
        OPTIONAL {{
          ?link memory:source ?node ; memory:target ?target ; memory:strength ?strength .
          FILTER(?strength >= {threshold})
          FILTER NOT EXISTS {{ ?target memory:scanCount ?alive }}
          OPTIONAL {{ ?link memory:relation ?relation }}
        }}
      }}"""
    merged = median_ms(lambda: store.rows(merged_q), repeat)
    print(f"   texts + dangling of {len(results)} results: two queries {separate:.3f} ms, one "
          f"query {merged:.3f} ms")

    match_q = render("matching_nodes", nodes=[node_ref(n) for n in hop1],
                     keywords=[lit("login")])
    level_and_match = median_ms(lambda: (store.rows(level1), store.rows(match_q)), repeat)
    fused = f"""
      SELECT ?source ?target ?strength ?relation ?hit WHERE {{
        VALUES ?source {{ {values} }}
        ?link memory:source ?source ; memory:target ?target ; memory:strength ?strength .
        FILTER(?strength >= {threshold})
        ?target memory:scanCount ?alive .
        OPTIONAL {{ ?link memory:relation ?relation }}
        OPTIONAL {{ {{ ?target memory:content ?raw }} UNION {{ ?target memory:keyword ?raw }}
                   FILTER(CONTAINS(LCASE(?raw), "login")) BIND(true AS ?hit) }}
      }}"""
    fused_ms = median_ms(lambda: store.rows(fused), repeat)
    print(f"   last level + keyword test: two queries {level_and_match:.3f} ms, one query "
          f"{fused_ms:.3f} ms ({len(store.rows(fused))} rows)\n")


if __name__ == "__main__":
    main()
