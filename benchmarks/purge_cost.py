"""What forgetting on request costs (SPEC §5.6): ``forget(ids)`` and ``forget(ids, purge=True)``.

For each size it builds an agent store with the workload generator (the same triples as the
remember path, bulk-loaded), then through the public API (queue and scheduler included):

* ``forget([id])`` of one memory: the node's triples and the links out of it, one update;
* ``forget([id], purge=True)`` of a memory remembered just before with a unique text: the
  same, then the store rewritten into a fresh directory and swapped in (the only way measured
  to get a deleted literal out of every file); how many files of the data directory hold the
  text before and after (RocksDB compresses blocks, so text that shares words with other
  memories may not show as raw bytes even when present — the unique text does), and the
  store's bytes on disk before and after.

The purge is a copy of the whole store, so its cost grows with the store; the plain forget
does not. Ratio = purge ÷ plain forget, same run.

    python benchmarks/purge_cost.py [--sizes 1000 10000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import FastModel  # noqa: E402
from benchmarks._workload import generate  # noqa: E402
from memory_rdf import Config, MemoryManager  # noqa: E402

SECRET = "my home address is 42 Wallaby Way, Sydney (secret 7f3a91)"


def _bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _holding(root: Path, text: str) -> int:
    data = text.encode()
    return sum(1 for p in root.rglob("*") if p.is_file() and data in p.read_bytes())


def measure(size: int, work: Path) -> dict[str, float | int]:
    data = work / f"n{size}"
    generate(data / "agent", size, progress=False)
    config = Config(auto_compress=False)
    with MemoryManager("agent", data_dir=data, config=config, model=FastModel()) as mem:
        plain = mem.memories(limit=1, offset=size // 2)[0]
        start = time.perf_counter()
        assert mem.forget([plain["id"]]) == 1
        forget_s = time.perf_counter() - start
        mem.remember([{"role": "user", "content": SECRET}])
        (secret,) = mem.memories(["Wallaby"])
        before = _bytes(data)
        held = _holding(data, "Wallaby")
        start = time.perf_counter()
        assert mem.forget([secret["id"]], purge=True) == 1
        purge_s = time.perf_counter() - start
        left = _holding(data, "Wallaby")
        after = _bytes(data)
        nodes = mem.stats()["nodes"]
    return {
        "nodes": nodes, "forget_ms": forget_s * 1000, "purge_ms": purge_s * 1000,
        "files_before": held, "files_after": left, "bytes_before": before, "bytes_after": after,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    args = parser.parse_args(argv)
    print("| nodes | forget | forget(purge=True) | ratio | files holding the text "
          "(before / after purge) | store bytes before → after |")
    print("|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            r = measure(size, Path(tmp))
            print(f"| {r['nodes']:,} | {r['forget_ms']:.1f} ms | {r['purge_ms']:.0f} ms | "
                  f"{r['purge_ms'] / max(r['forget_ms'], 1e-6):.0f}× | "
                  f"{r['files_before']} / {r['files_after']} | "
                  f"{r['bytes_before']:,} → {r['bytes_after']:,} |", flush=True)
            if r["files_after"] or not r["files_before"]:
                print("the text was not on disk before the purge, or still is after it",
                      file=sys.stderr)
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
