"""Compression throughput and the cost of choosing the next batch (SPEC §5.2, §5.3).

For each size: a store shaped like real remembers with aged links (some nodes below
importance 1), then

* next batch: ``Compressor.next_batch(100)`` through the scanOrder index, against the plain
  ``ORDER BY`` query over every node (the baseline, measured in the same run);
* scans/s with the built-in HeuristicModel, including and excluding the time spent inside the
  model's calls (``Compressor.stats.seconds``), and the same with ``FastModel`` (whose
  ``process`` is a slice of the text: the store's cost alone), after untimed warm-up slices;
* beside each: the CPU the scans cost the whole process (the compression thread and RocksDB's
  own threads), and the most scans/s this machine's CPUs allow at that cost — a shared host's
  speed moves the figure by up to 1.8× from one hour to the next (benchmarks/PROFILE.md).

The workload's links are aged (``--decay`` scans of decay) so that the first nodes in scan
order fall below importance 1 and each scan of them compresses its node by a model call: the
worst case, and the one the figure is for. They last ~1,700 scans at 10k nodes, so the default
there is 6 timed slices of 100 after 10 untimed ones (30 from ~50k nodes), and each model
scans its own fresh copy of the generated store (as the suite does): both meet the same nodes
in the same state, and each line prints how many of its scans called the model.

Scans are timed with the read mirror off and on (``--read-mirror both``, the default; the
mirror is waited for before timing): reads are cheaper from memory, but every write is applied
to both stores.

    python benchmarks/compression_throughput.py [--sizes 10000,100000] [--slices N] [--decay 120]
                                                [--read-mirror both|on|off] [--store DIR]

``--store DIR`` keeps the generated, optimized store of each size in ``DIR`` and later runs
time a fresh copy of it (building 100k nodes takes minutes): every run starts from the same
state.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import (  # noqa: E402
    FastModel,
    aged_slices,
    cpus,
    figure,
    percentiles,
    time_compression,
    timed,
)
from benchmarks._workload import generate  # noqa: E402
from memory_rdf import Config, HeuristicModel, MemoryManager, SmallModel  # noqa: E402
from memory_rdf._oxigraph import AgentStore, render  # noqa: E402


def prepare(path: Path, size: int, focus_limit: int, decay: float) -> None:
    """Generate the store at ``path`` and compact it."""
    start = time.perf_counter()
    generate(path, size, decay=decay, focus_limit=focus_limit)
    print(f"\n{size:,} nodes: generated and bulk-loaded in {time.perf_counter() - start:.1f} s")
    # A bulk-loaded store is not compacted; scans on it ran 5.8x slower (203 vs 1,176 scans/s
    # at 100k). A live agent's store is compacted in the background when idle, so measure that.
    with MemoryManager(path.name, data_dir=path.parent,
                       config=Config(auto_compress=False, read_mirror=False)) as mem:
        start = time.perf_counter()
        assert mem._store is not None
        mem._store.optimize()
        links = mem.stats()["links"] / max(1, mem.stats()["nodes"])
        print(f"  optimize(): {time.perf_counter() - start:.1f} s; {links:.1f} links per node")


def run(size: int, slices: int | None, tmp: Path, focus_limit: int, decay: float,
        mirrors: tuple[bool, ...], keep: Path | None) -> None:
    generated = (keep if keep is not None else tmp) / f"agent{size}-f{focus_limit}-d{decay:g}"
    if not generated.exists():
        prepare(generated, size, focus_limit, decay)
    path = tmp / f"agent{size}"
    models: list[tuple[str, SmallModel]] = [("FastModel", FastModel()),
                                             ("built-in model", HeuristicModel())]
    first = True
    for mirror in mirrors:
        for label, model in models:
            # Every (setting, model) starts from the same state: a fresh copy of the generated
            # store. (Taking turns slice by slice on one store, the two models' warm-up alone
            # scanned past the aged nodes at 10k: none of the timed scans compressed.)
            shutil.rmtree(path, ignore_errors=True)
            start = time.perf_counter()
            shutil.copytree(generated, path)
            print(f"\n{size:,} nodes: copied from {generated} in "
                  f"{time.perf_counter() - start:.1f} s")
            config = Config(auto_compress=False, compression_batch_size=100, read_mirror=mirror)
            with MemoryManager(path.name, data_dir=tmp, config=config, model=model) as mem:
                assert isinstance(mem._store, AgentStore)
                if mirror:
                    start = time.perf_counter()
                    mem._store.wait_mirror()
                    print(f"  read mirror {mem._store.mirror_state} after "
                          f"{time.perf_counter() - start:.1f} s")
                if first:
                    first = False
                    next_batch(mem)
                where = "mirror on " if mirror else "mirror off"
                t = time_compression(mem, slices or aged_slices(size), [(label, model)])[label]
                why = t.not_measurable()
                print(f"  scans/s {label:<15} {where} {figure(t.per_s, '9,.0f')} including the "
                      f"model, {figure(t.per_s_excl_model, '9,.0f')} excluding it, "
                      f"{figure(t.per_cpu_s_excl_model, '9,.0f')} per CPU second of the "
                      f"compression thread   ({t.scans} scans, {t.model_calls} model calls)")
                print(f"  {'':<31} process CPU {figure(t.process_cpu_us_per_scan)} µs a scan, "
                      f"model excluded ({figure(t.thread_cpu_us_per_scan)} the compression "
                      f"thread, {figure(t.others_cpu_us_per_scan)} the others: store owner, "
                      f"RocksDB): with a model that takes no time, at most "
                      f"{figure(t.ceiling_per_s)} scans/s on this machine's {cpus()} CPUs")
                for name, reason in why.items():
                    print(f"  {'':<31} {name}: not measurable: {reason}")


def next_batch(mem: MemoryManager) -> None:
    """``next_batch(100)`` through the scanOrder index against the ``ORDER BY`` baseline."""
    comp = mem._compressor
    store = mem._store
    assert store is not None
    sorted_q = render("scan_order_sorted") + "\nLIMIT 100"
    expected = [r[0].rsplit("/", 1)[1] for r in store.rows(sorted_q)]
    assert comp.next_batch(100) == expected
    idx = timed(lambda: comp.next_batch(100), 50)
    full = timed(lambda: store.rows(sorted_q), 5)
    i50, i95 = percentiles(idx)
    f50 = statistics.median(full)
    print(f"  next batch (index)      p50 {i50:8.2f} ms   p95 {i95:8.2f} ms")
    print(f"  next batch (ORDER BY)   p50 {f50:8.2f} ms   ({f50 / i50:,.0f}× slower)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--slices", type=int, default=None,
                        help="timed slices of 100 scans per model, after 10 untimed "
                             "(default: as many as stay among the aged nodes, 6 at 10k, "
                             "at most 30)")
    parser.add_argument("--decay", type=float, default=120,
                        help="link ageing of the workload: the oldest links × 0.97^this")
    parser.add_argument("--read-mirror", choices=("both", "on", "off"), default="both",
                        help="time the scans with the read mirror off, on, or both")
    parser.add_argument("--focus-limit", type=int, default=5,
                        help="focus size of the generated remembers (more focus, more links)")
    parser.add_argument("--store", type=Path, default=None,
                        help="keep the generated stores here and time copies of them")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for size in (int(s) for s in args.sizes.split(",")):
            mirrors = {"both": (False, True), "on": (True,), "off": (False,)}[args.read_mirror]
            run(size, args.slices, Path(tmp), args.focus_limit, args.decay, mirrors, args.store)


if __name__ == "__main__":
    main()
