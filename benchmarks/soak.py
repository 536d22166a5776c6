"""Soak: many agents remembering in one MemorySystem while compression runs and a reader recalls.

N agents share one scheduler thread (SPEC §5.3). Each agent has a writer thread that issues M
remembers (1–3 chat messages each, built-in ``HeuristicModel``, ``auto_compress=True``), with a
pause between them; a reader thread keeps issuing recalls across the agents until the writers
are done; a sampler reads the process's RSS (``VmRSS`` in ``/proc/self/status``) every second.

Reported: recall queue wait p50/p95 (from the ``recall()`` call until the scheduler starts
it: the wait behind the agent's earlier tasks and the compression step in flight, as recorded
by the scheduler), and recall latency from call to result (the wait plus the search);
``remember()`` call latency p50/p95 (validate + durable journal write + enqueue); RSS over
time; total wall time (until every agent is idle, compression included); the longest steps of
the scheduler thread (a remember, a compression slice, a recall: what a waiting recall waited
behind).

    python benchmarks/soak.py [--agents 4] [--remembers 200] [--pause-ms 50] [--decay 0.97]

``--duration S`` runs for S seconds instead of a number of remembers: the writers keep
remembering (every ``--pause-ms``) until then, compression runs all along (every remember
queues a slice), and the report adds the RSS curve summary (RSS at each tenth of the run and
the slope over its second half, with the live nodes and the store's size on disk beside it):

    nice -n 10 python benchmarks/soak.py --duration 1800 --pause-ms 1000
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import WORDS_EN, WORDS_ZH, percentiles, sentence  # noqa: E402
from memory_rdf import Config, HeuristicModel, MemoryManager, MemorySystem  # noqa: E402
from memory_rdf._scheduler import LONG_STEP, RECENT_WAITS  # noqa: E402


def rss_mb() -> float:
    """Resident set size of this process in MB (Linux ``/proc/self/status``)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def disk_mb(path: Path) -> float:
    """Size of the files under ``path`` in MB (files vanishing meanwhile are skipped)."""
    total = 0
    for f in path.rglob("*"):
        try:
            if f.is_file():
                total += f.stat().st_size
        except OSError:
            pass
    return total / 2**20


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of ``(t, y)`` points (y per second); nan for fewer than two."""
    if len(points) < 2:
        return float("nan")
    n = len(points)
    mt = sum(t for t, _ in points) / n
    my = sum(y for _, y in points) / n
    var = sum((t - mt) ** 2 for t, _ in points)
    return sum((t - mt) * (y - my) for t, y in points) / var if var else float("nan")


def curve_summary(samples: list[tuple[float, float, int, int, int, int]],
                  disk: list[float]) -> list[str]:
    """RSS, nodes and disk at each tenth of the run, and the slopes over its second half."""
    if not samples:
        return []
    end = samples[-1][0]
    out = [f"{'t (s)':>7} {'RSS (MB)':>9} {'nodes':>7} {'disk (MB)':>10} {'remembers':>10}"]
    for k in range(11):
        i = min(range(len(samples)), key=lambda j: abs(samples[j][0] - end * k / 10))
        t, rss, issued, _, nodes, _ = samples[i]
        out.append(f"{t:7.0f} {rss:9.1f} {nodes:7d} {disk[i]:10.1f} {issued:10d}")
    half = [(s, d) for s, d in zip(samples, disk, strict=True) if s[0] >= end / 2]
    out.append(f"second half: RSS {slope([(s[0], s[1]) for s, _ in half]):+.3f} MB/s, "
               f"nodes {slope([(s[0], s[4]) for s, _ in half]):+.2f}/s, "
               f"disk {slope([(s[0], d) for s, d in half]):+.3f} MB/s")
    return out


class Soak:
    def __init__(self, agents: list[MemoryManager], remembers: int, pause: float,
                 reader_pause: float, seed: int, duration: float = 0.0,
                 data_dir: Path | None = None) -> None:
        self.agents = agents
        self.duration = duration
        self.data_dir = data_dir
        self.live = 0.0  # print a sample every this many seconds while running (0 = not)
        self.shown = -1e9
        self.remembers = remembers
        self.pause = pause
        self.reader_pause = reader_pause
        self.seed = seed
        self.lock = threading.Lock()
        self.remember_ms: list[float] = []
        self.recall_ms: list[float] = []
        self.issued = 0
        self.errors: list[str] = []
        self.writers_done = threading.Event()
        self.finished = threading.Event()
        self.samples: list[tuple[float, float, int, int, int, int]] = []
        self.disk: list[float] = []  # MB on disk of every agent's store, at each sample
        self.start = 0.0
        self.began = 0.0

    def writer(self, index: int) -> None:
        mem = self.agents[index]
        rng = random.Random(self.seed * 1000 + index)
        try:
            i = -1
            while True:
                i += 1
                if self.duration:
                    if time.perf_counter() - self.start >= self.duration:
                        break
                elif i >= self.remembers:
                    break
                messages = [
                    {"role": rng.choice(["user", "assistant"]), "content": sentence(rng, i * 3 + k)}
                    for k in range(rng.randint(1, 3))
                ]
                t0 = time.perf_counter()
                mem.remember(messages)
                ms = (time.perf_counter() - t0) * 1000
                with self.lock:
                    self.remember_ms.append(ms)
                    self.issued += 1
                if self.pause:
                    time.sleep(self.pause)
        except Exception as exc:  # reported at the end
            with self.lock:
                self.errors.append(f"writer {index}: {type(exc).__name__}: {exc}")

    def reader(self) -> None:
        rng = random.Random(self.seed)
        while not self.writers_done.is_set():
            mem = rng.choice(self.agents)
            keywords = [rng.choice(WORDS_ZH + WORDS_EN)]
            t0 = time.perf_counter()
            try:
                mem.recall(keywords, timeout=300)
            except Exception as exc:  # reported at the end
                with self.lock:
                    self.errors.append(f"reader: {type(exc).__name__}: {exc}")
                continue
            with self.lock:
                self.recall_ms.append((time.perf_counter() - t0) * 1000)
            if self.reader_pause:
                time.sleep(self.reader_pause)

    def sampler(self) -> None:
        while True:
            nodes = pending = 0
            for mem in self.agents:
                try:
                    st = mem.stats()
                except Exception:  # an agent closing at the very end
                    continue
                nodes += st["nodes"]
                pending += st["pending_tasks"]
            disk = disk_mb(self.data_dir) if self.data_dir is not None else float("nan")
            t, rss = time.perf_counter() - self.start, rss_mb()
            with self.lock:
                self.samples.append((t, rss, self.issued, len(self.recall_ms), nodes, pending))
                self.disk.append(disk)
            if self.live and t - self.shown >= self.live:
                self.shown = t
                print(f"  {t:7.0f} s  RSS {rss:7.1f} MB  nodes {nodes:6d}  disk {disk:7.1f} MB  "
                      f"remembers {self.issued:6d}  pending {pending:5d}", flush=True)
            if self.finished.wait(1.0):
                return

    def run(self) -> float:
        self.start = time.perf_counter()
        self.began = time.monotonic()  # the scheduler's clock (long steps)
        sampler = threading.Thread(target=self.sampler, name="soak-rss", daemon=True)
        reader = threading.Thread(target=self.reader, name="soak-reader", daemon=True)
        writers = [threading.Thread(target=self.writer, args=(i,), name=f"soak-writer-{i}",
                                    daemon=True) for i in range(len(self.agents))]
        sampler.start()
        reader.start()
        for t in writers:
            t.start()
        for t in writers:
            t.join()
        self.writers_done.set()
        reader.join()
        if not self.duration:  # a timed run stops at its time, whatever slices are queued
            for mem in self.agents:
                mem.wait_idle()
        wall = time.perf_counter() - self.start
        self.finished.set()
        sampler.join()
        return wall


def fmt(samples: list[float]) -> str:
    if not samples:
        return "n/a"
    p50, p95 = percentiles(samples)
    return (f"p50 {p50:8.2f} ms   p95 {p95:8.2f} ms   max {max(samples):8.2f} ms   "
            f"(n={len(samples)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=4)
    parser.add_argument("--remembers", type=int, default=200, help="remembers per agent")
    parser.add_argument("--pause-ms", type=float, default=50.0,
                        help="pause of each writer between two remembers (0 = flood)")
    parser.add_argument("--reader-pause-ms", type=float, default=10.0)
    parser.add_argument("--decay", type=float, default=Config().decay_rate,
                        help="Config.decay_rate (lower forgets sooner)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--duration", type=float, default=0.0,
                        help="run this many seconds (writers keep remembering) instead of "
                             "--remembers per agent")
    parser.add_argument("--print-every", type=float, default=1.0,
                        help="seconds between the printed RSS rows (sampled every second); "
                             "with --duration they are printed as the run goes")
    parser.add_argument("--read-mirror", choices=("auto", "on", "off"), default="auto",
                        help="Config.read_mirror: None (auto), True, False")
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="keep the stores here (default: a temporary directory)")
    args = parser.parse_args()

    mirror = {"auto": None, "on": True, "off": False}[args.read_mirror]
    config = Config(auto_compress=True, decay_rate=args.decay, read_mirror=mirror,
                    max_queue_size=max(1000, args.remembers + 10))
    what = (f"{args.duration:g} s" if args.duration else f"{args.remembers} remembers")
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = args.data_dir or Path(tmp)
        print(f"soak: {args.agents} agents x {what}, read mirror {args.read_mirror}, writer pause "
              f"{args.pause_ms:g} ms, decay {args.decay:g}, HeuristicModel, auto_compress, "
              f"data in {data_dir}")
        rss_start = rss_mb()
        with MemorySystem(data_dir=data_dir, model=HeuristicModel(), config=config) as system:
            agents = [system.agent(f"soak_{i:02d}") for i in range(args.agents)]
            soak = Soak(agents, args.remembers, args.pause_ms / 1000,
                        args.reader_pause_ms / 1000, args.seed, args.duration, data_dir)
            if args.duration:
                soak.live = args.print_every
            wall = soak.run()
            finals = [mem.stats() for mem in agents]
            waits_ms = [w * 1000 for mem in agents
                        for w in system._scheduler.recall_waits(mem.agent_id)]
            long_steps = sorted(system._scheduler.long_steps, reverse=True)
            for mem, st in zip(agents, finals, strict=True):  # compression scans that ran
                rows = mem.sparql("SELECT (SUM(?s) AS ?t) WHERE { ?n memory:scanCount ?s }")
                st["scans"] = int(rows[0].get("t", 0)) if rows else 0  # type: ignore[index,union-attr]

        print("\nRSS over time")
        print(f"{'t (s)':>7} {'RSS (MB)':>9} {'remembers':>10} {'recalls':>8} {'nodes':>7} "
              f"{'pending':>8}")
        shown = -1e9
        for t, rss, issued, recalls, nodes, pending in soak.samples:
            if t - shown < args.print_every:
                continue
            shown = t
            print(f"{t:7.1f} {rss:9.1f} {issued:10d} {recalls:8d} {nodes:7d} {pending:8d}")

        print("\nRSS curve")
        for line in curve_summary(soak.samples, soak.disk):
            print("  " + line)

        print("\nLatency")
        print(f"  recall queue wait:      {fmt(waits_ms)}   (last {RECENT_WAITS} per agent)")
        print(f"  recall (call → result): {fmt(soak.recall_ms)}")
        print(f"  remember() call:        {fmt(soak.remember_ms)}")
        print(f"  longest scheduler steps (over {LONG_STEP * 1000:g} ms): " + (", ".join(
            f"{kind.lower()} {agent} {sec * 1000:.0f} ms at {start - soak.began:.0f} s"
            for sec, kind, agent, start in long_steps[:8]) or "none"))
        print("\nTotals")
        print(f"  wall time (until every agent idle): {wall:.1f} s")
        print(f"  remembers: {soak.issued}   recalls: {len(soak.recall_ms)}")
        print(f"  RSS: start {rss_start:.1f} MB, peak "
              f"{max((s[1] for s in soak.samples), default=float('nan')):.1f} MB, end "
              f"{rss_mb():.1f} MB")
        for st in finals:
            print(f"  {st['agent_id']}: nodes {st['nodes']}, links {st['links']}, dangling "
                  f"{st['dangling_links']}, failed {st['failed_tasks']}, model calls "
                  f"{st['model_calls']}, scans of live nodes {st['scans']}")
        if soak.errors:
            print(f"\n{len(soak.errors)} errors, first: {soak.errors[0]}")
            sys.exit(1)


if __name__ == "__main__":
    main()
