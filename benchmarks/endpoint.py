"""The embedded store against SPARQL servers on loopback (SPEC §8), on one 10k-node workload.

Part 1 — one agent, the same workload (``_workload.generate``: the store the remember path
builds) in each store: the embedded Oxigraph store, ``oxigraph serve`` (the same engine behind
HTTP) and Virtuoso when ``virtuoso-t`` is installed. Per store: recall p50/p95 (focus entry and
keyword entry), remember throughput (remembers of 5 segments, ``FastModel``) and compression
scans/s; and, on the embedded store, the keyword-entry query with ``LATERAL`` against its
standard-SPARQL form (``keyword_entry_std.rq``, what endpoints get).

Part 2 — scale-out: 1, 2 and 4 worker processes, each serving its own agents, against one
``oxigraph serve``: total remembers/s and recalls/s.

    python -m benchmarks.endpoint [--nodes 10000] [--repeat 40] [--remembers 100]
        [--workers 1 2 4] [--skip-virtuoso]

Servers are started on free loopback ports and stopped at the end; their data lives in a
temporary directory. Figures vary with the machine's load: compare ratios within one run.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import WORDS_EN, WORDS_ZH, FastModel, percentiles, timed  # noqa: E402
from benchmarks._servers import (  # noqa: E402
    oxigraph_bulk_load,
    oxigraph_server,
    virtuoso_available,
    virtuoso_server,
)
from benchmarks._workload import generate  # noqa: E402
from memory_rdf import Config, MemoryManager, MemorySystem, SparqlEndpoint  # noqa: E402
from memory_rdf import _vocab as V  # noqa: E402
from memory_rdf._oxigraph import AgentStore, lit, render  # noqa: E402
from memory_rdf._remote import RemoteStore  # noqa: E402

RECALLS: list[tuple[str, list[str], dict[str, Any]]] = [
    ("focus, all, depth 2", [], {"depth": 2}),
    ("focus, 'login', depth 4", ["login"], {"depth": 4}),
    ("keywords, '登录 支付'", ["登录", "支付"], {"entry": "keywords"}),
    ("both, 'budget'", ["budget"], {"entry": "both"}),
]


# ---------------------------------------------------------------------------------------------
# Loading the workload into a server: standard SPARQL only (INSERT DATA in chunks)
# ---------------------------------------------------------------------------------------------


def agent_nquads(store: AgentStore, agent: str) -> list[str]:
    """The embedded agent's quads in the endpoint layout (SPEC §8): default graph → the agent's
    graph, journal and metadata → its named graphs."""
    base = f"https://w3id.org/memory-rdf/agent/{agent}"
    out = []
    for line in store.dump("nquads", default_graph_only=False).decode("utf-8").splitlines():
        if not line.strip():
            continue
        body = line.rstrip(" .")
        graph = base
        for embedded, suffix in ((V.JOURNAL_GRAPH, "/journal"), (V.META_GRAPH, "/meta")):
            if body.endswith(f"<{embedded}>"):
                body, graph = body[: -len(embedded) - 2].rstrip(), base + suffix
        out.append(f"{body} <{graph}> .")
    return out


def load_by_update(endpoint: SparqlEndpoint, agent: str, quads: list[str],
                   chunk: int = 1000) -> float:
    """Standard SPARQL only: INSERT DATA in chunks (Virtuoso 7 ran out of parser memory at
    10,000 triples per request, its SQL translation at 2,000)."""
    remote = RemoteStore(endpoint, agent, read_only=True, max_retries=3)
    start = time.perf_counter()
    for i in range(0, len(quads), chunk):
        by_graph: dict[str, list[str]] = {}
        for quad in quads[i:i + chunk]:
            body, _, graph = quad.rstrip(" .").rpartition(" <")
            by_graph.setdefault(graph, []).append(body + " .")
        data = " ".join(f"GRAPH <{g} {{\n" + "\n".join(t) + "\n}" for g, t in by_graph.items())
        remote._update(f"INSERT DATA {{ {data} }}")
    remote.close()
    return time.perf_counter() - start


# ---------------------------------------------------------------------------------------------
# Part 1: one agent per store
# ---------------------------------------------------------------------------------------------


def time_recalls(mems: dict[str, MemoryManager], repeat: int) -> dict[str, dict[str, Any]]:
    """Recall timings, the stores interleaved call by call so that they share the machine's
    load (2 shared cores here): p50/p95 per store and query."""
    samples: dict[str, dict[str, list[float]]] = {name: {} for name in mems}
    for label, words, kwargs in RECALLS:
        texts = {name: mem.recall(words, **kwargs) for name, mem in mems.items()}  # warm
        first = next(iter(texts.values()))
        for name, text in texts.items():
            if text != first:  # reported, not fatal: which store, which query
                print(f"  NOTE: {name} recalls a different text for {label!r} "
                      f"({len(text)} vs {len(first)} characters embedded)")
        for _ in range(repeat):
            for name, mem in mems.items():
                start = time.perf_counter()
                mem.recall(words, **kwargs)
                samples[name].setdefault(label, []).append((time.perf_counter() - start) * 1000)
    return {name: {label: percentiles(xs) for label, xs in per.items()}
            for name, per in samples.items()}


def measure_writes(mem: MemoryManager, remembers: int, slices: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    texts = [[{"role": "user", "content": f"第{i}条：{WORDS_ZH[i % 20]} | note {i}: the "
               f"{WORDS_EN[i % 16]} check | 第{i}条补充 | item {i} | end {i}"}]
             for i in range(remembers)]
    start = time.perf_counter()
    for messages in texts:
        mem.remember(messages)
    assert mem.wait_idle(600)
    out["remembers_per_s"] = remembers / (time.perf_counter() - start)
    scanned = 0
    start = time.perf_counter()
    for _ in range(slices):
        scanned += mem.run_compression_slice()["scanned"]
    out["scans_per_s"] = scanned / (time.perf_counter() - start)
    return out


def lateral_vs_standard(store: AgentStore, repeat: int) -> dict[str, tuple[float, float]]:
    terms = ["登录", "支付"]
    literals = [lit(t) for t in terms]
    entries = [lit(f"{1.5!r} 20.0 {t}") for t in terms]
    out = {}
    for name in ("keyword_entry", "keyword_entry_std"):
        query = render(name, keywords=entries, terms=literals, postings=10_000, candidates=50,
                       results=10)
        rows = store.rows(query)
        assert rows, name
        out[name] = percentiles(timed(lambda q=query: store.rows(q), repeat))
    for name in ("keyword_entry_df", "keyword_entry_df_std"):
        query = render(name, keywords=literals, terms=literals, postings=10_001)
        out[name] = percentiles(timed(lambda q=query: store.rows(q), repeat))
    return out


def part1(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    base = tmp / "embedded"
    start = time.perf_counter()
    generate(base / "bench", args.nodes, progress=False)
    print(f"workload: {args.nodes:,} nodes generated in {time.perf_counter() - start:.1f} s")
    source = AgentStore(base / "bench")
    source.optimize()  # a live agent's store is compacted when idle (compression_throughput.py)
    quads = agent_nquads(source, "bench")
    source.close()
    nquads = tmp / "bench.nq"
    nquads.write_text("\n".join(quads) + "\n", encoding="utf-8")
    config = Config(auto_compress=False, max_queue_size=100_000, compression_batch_size=100)
    results: dict[str, Any] = {"quads": len(quads)}
    with ExitStack() as stack:
        mems: dict[str, MemoryManager] = {}
        mems["embedded"] = stack.enter_context(
            MemoryManager("bench", data_dir=base, config=config, model=FastModel()))
        assert isinstance(mems["embedded"]._store, AgentStore)
        results["lateral"] = lateral_vs_standard(mems["embedded"]._store, args.repeat)
        oxi = tmp / "oxigraph-serve"
        start = time.perf_counter()
        oxigraph_bulk_load(oxi, nquads)
        print(f"oxigraph serve: {len(quads):,} quads bulk-loaded (oxigraph load) in "
              f"{time.perf_counter() - start:.1f} s")
        query_url, update_url = stack.enter_context(oxigraph_server(oxi))
        ep = stack.enter_context(SparqlEndpoint(query_url, update_url=update_url, timeout=300))
        mems["oxigraph serve"] = stack.enter_context(
            MemoryManager("bench", endpoint=ep, config=config, model=FastModel()))
        if virtuoso_available() and not args.skip_virtuoso:
            try:
                query_url, update_url = stack.enter_context(virtuoso_server(tmp / "virtuoso"))
                vep = stack.enter_context(SparqlEndpoint(query_url, update_url=update_url,
                                                         timeout=300))
                seconds = load_by_update(vep, "bench", quads)
                print(f"virtuoso: {len(quads):,} quads loaded by INSERT DATA in {seconds:.1f} s")
                mems["virtuoso"] = stack.enter_context(
                    MemoryManager("bench", endpoint=vep, config=config, model=FastModel()))
            except Exception as exc:  # reported, not fatal
                print(f"virtuoso: FAILED: {type(exc).__name__}: {exc}")
                results["virtuoso"] = {"error": f"{type(exc).__name__}: {exc}"}
        elif not args.skip_virtuoso:
            print("virtuoso-t is not installed: Virtuoso skipped (apt-get install "
                  "virtuoso-opensource)")
        for name, timings in time_recalls(mems, args.repeat).items():
            results[name] = {"recall": timings}
        for name, mem in mems.items():
            results[name].update(measure_writes(mem, args.remembers, args.slices))
    return results


def report1(results: dict[str, Any], nodes: int) -> None:
    stores = [s for s in ("embedded", "oxigraph serve", "virtuoso") if s in results]
    print(f"\nRecall on {nodes:,} nodes, ms (p50 / p95; × = p50 ÷ embedded p50)")
    print(f"{'recall':<28}" + "".join(f"{s:>26}" for s in stores))
    for label, _, _ in RECALLS:
        row = f"{label:<28}"
        base = results["embedded"]["recall"][label][0]
        for s in stores:
            if "error" in results[s]:
                row += f"{'failed':>26}"
                continue
            p50, p95 = results[s]["recall"][label]
            row += f"{p50:>9.2f} / {p95:>7.2f} {p50 / base:>5.1f}×"
        print(row)
    for key, unit in (("remembers_per_s", "remembers/s (5 segments each)"),
                      ("scans_per_s", "compression scans/s")):
        row = f"{unit:<28}"
        for s in stores:
            row += f"{'failed':>26}" if "error" in results[s] else f"{results[s][key]:>26,.1f}"
        print(row)
    print("\nKeyword entry on the embedded store: LATERAL vs the standard form (ms p50 / p95)")
    for name, (p50, p95) in results["lateral"].items():
        print(f"  {name:<24}{p50:>9.2f} / {p95:>7.2f}")


# ---------------------------------------------------------------------------------------------
# Part 2: worker processes against one server
# ---------------------------------------------------------------------------------------------


def worker(query_url: str, update_url: str, index: int, agents: int, remembers: int,
           recalls: int, start_at: float, out: Any) -> None:
    ep = SparqlEndpoint(query_url, update_url=update_url, timeout=120)
    config = Config(auto_compress=False, max_queue_size=100_000)
    with MemorySystem(endpoint=ep, model=FastModel(), config=config) as system:
        mems = [system.agent(f"w{index}-a{k}") for k in range(agents)]
        for mem in mems:  # warm up (jieba's dictionary loads at the first remember: ~1 s)
            mem.remember([{"role": "user", "content": "预热 warm-up"}])
            assert mem.wait_idle(600)
            mem.recall(["warm"], entry="both")
        while time.time() < start_at:
            time.sleep(0.01)
        t0 = time.perf_counter()
        for i in range(remembers):
            mem = mems[i % agents]
            mem.remember([{"role": "user", "content": f"第{i}条：{WORDS_ZH[i % 20]} | note "
                           f"{i}: the {WORDS_EN[i % 16]} check"}])
        for mem in mems:
            assert mem.wait_idle(600)
        t1 = time.perf_counter()
        for i in range(recalls):
            mems[i % agents].recall([WORDS_EN[i % 16]], entry="both")
        t2 = time.perf_counter()
    ep.close()
    out.put((index, t1 - t0, t2 - t1))


def part2(args: argparse.Namespace, tmp: Path) -> list[tuple[int, float, float]]:
    rows = []
    ctx = multiprocessing.get_context("spawn")
    for n in args.workers:
        with oxigraph_server(tmp / f"scale-{n}") as (query_url, update_url):
            queue = ctx.Queue()
            start_at = time.time() + 8.0 + 2 * n  # every worker imported and warm by then
            procs = [ctx.Process(target=worker, args=(query_url, update_url, i, 2,
                                                      args.scale_remembers, args.scale_recalls,
                                                      start_at, queue)) for i in range(n)]
            for p in procs:
                p.start()
            results = [queue.get(timeout=1800) for _ in procs]
            for p in procs:
                p.join()
            remember_s = max(r[1] for r in results)
            recall_s = max(r[2] for r in results)
            rows.append((n, n * args.scale_remembers / remember_s,
                         n * args.scale_recalls / recall_s))
            print(f"  {n} worker(s): {rows[-1][1]:,.1f} remembers/s, {rows[-1][2]:,.1f} "
                  "recalls/s in all")
    return rows


def report2(rows: list[tuple[int, float, float]]) -> None:
    print("\nWorkers against one oxigraph serve (each: 2 agents of its own)")
    print(f"{'workers':<10}{'remembers/s':>14}{'× 1 worker':>12}{'recalls/s':>12}"
          f"{'× 1 worker':>12}")
    base_r, base_q = rows[0][1], rows[0][2]
    for n, rem, rec in rows:
        print(f"{n:<10}{rem:>14,.1f}{rem / base_r:>12.2f}{rec:>12,.1f}{rec / base_q:>12.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=40)
    parser.add_argument("--remembers", type=int, default=100)
    parser.add_argument("--slices", type=int, default=20)
    parser.add_argument("--workers", type=int, nargs="*", default=[1, 2, 4])
    parser.add_argument("--scale-remembers", type=int, default=100)
    parser.add_argument("--scale-recalls", type=int, default=200)
    parser.add_argument("--skip-virtuoso", action="store_true")
    parser.add_argument("--skip-part1", action="store_true")
    args = parser.parse_args()
    print(f"cores: {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as tmp:
        if not args.skip_part1:
            report1(part1(args, Path(tmp)), args.nodes)
        if args.workers:
            report2(part2(args, Path(tmp)))


if __name__ == "__main__":
    main()
