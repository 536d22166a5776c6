"""What one owner thread per store would cost (issue 36, docs/concurrency.md): measured in
one run, on one agent store of the workload generator (10,000 nodes by default), read from
disk (read mirror off: the reads an owner would take over; the mirror's stay on the caller's
thread).

* **Queue hop per disk read**: recall's per-level query (``outgoing_links.rq`` for a
  frontier of 5 nodes) called directly, against the same call sent as a message to a thread
  that owns the store and answers it (a ``SimpleQueue`` each way), interleaved in blocks;
  p50 and p95 in µs, and the hop alone (an empty message answered).
* **Disk reads one at a time vs two readers**: the same queries, all through one thread,
  against the same number split over two threads reading at once; throughput ratio.
* **One idle thread per open agent**: 100 threads, each blocked on its own empty queue as
  an idle owner would be: the time to start one and the RSS they add.

Every ratio is of two measurements of this run. The machine's load moves absolute numbers;
run it with nothing else busy for figures to quote.

    python benchmarks/store_owner.py [--nodes 10000] [--queries 2000] [--agents 100]
"""

from __future__ import annotations

import argparse
import queue
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._workload import generate  # noqa: E402
from memory_rdf import _vocab as V  # noqa: E402
from memory_rdf._oxigraph import AgentStore, lit, node_ref  # noqa: E402


def rss_bytes() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


class Owner:
    """A thread that alone holds ``store`` and answers query messages in order."""

    def __init__(self, store: AgentStore) -> None:
        self._inbox: queue.SimpleQueue[tuple[str | None, queue.SimpleQueue[Any]] | None] = (
            queue.SimpleQueue())
        self._store = store
        self._thread = threading.Thread(target=self._run, name="owner", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (message := self._inbox.get()) is not None:
            query, reply = message
            try:
                reply.put(None if query is None else self._store.rows(query))
            except BaseException as exc:  # handed to the caller
                reply.put(exc)

    def ask(self, query: str | None, reply: queue.SimpleQueue[Any]) -> Any:
        self._inbox.put((query, reply))
        answer = reply.get()
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def stop(self) -> None:
        self._inbox.put(None)
        self._thread.join()


def frontiers(store: AgentStore, count: int, width: int = 5, seed: int = 7) -> list[str]:
    """``count`` outgoing_links queries, each for ``width`` random live nodes."""
    nodes = [str(n) for n in store.column(
        "SELECT ?n WHERE { ?n memory:scanCount ?c }")]
    rng = random.Random(seed)
    ids = [n[len(V.NODE):] for n in nodes]
    return [store.render("outgoing_links", sources=[node_ref(i) for i in rng.sample(ids, width)],
                         threshold=lit(0.01), relations=None)
            for _ in range(count)]


def per_call_us(call: Any, queries: list[str]) -> list[float]:
    out = []
    for q in queries:
        start = time.perf_counter()
        call(q)
        out.append((time.perf_counter() - start) * 1e6)
    return out


def p50_p95(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[int(0.95 * (len(ordered) - 1))]


def queue_hop(store: AgentStore, queries: list[str], block: int = 100) -> dict[str, Any]:
    owner = Owner(store)
    reply: queue.SimpleQueue[Any] = queue.SimpleQueue()
    direct: list[float] = []
    hopped: list[float] = []
    empty: list[float] = []
    try:
        for q in queries[:200]:  # warm both paths (block cache, page cache)
            store.rows(q)
            owner.ask(q, reply)
        for n, at in enumerate(range(0, len(queries), block)):  # interleaved, A B B A …
            part = queries[at:at + block]
            if n % 2:
                hopped += per_call_us(lambda q: owner.ask(q, reply), part)
                direct += per_call_us(store.rows, part)
            else:
                direct += per_call_us(store.rows, part)
                hopped += per_call_us(lambda q: owner.ask(q, reply), part)
            empty += per_call_us(lambda _q: owner.ask(None, reply), part)
    finally:
        owner.stop()
    d50, d95 = p50_p95(direct)
    h50, h95 = p50_p95(hopped)
    e50, e95 = p50_p95(empty)
    return {"direct_p50": d50, "direct_p95": d95, "owner_p50": h50, "owner_p95": h95,
            "hop_alone_p50": e50, "hop_alone_p95": e95, "ratio_p50": h50 / d50,
            "hop_share_p50": e50 / d50}


def two_readers(store: AgentStore, queries: list[str], rounds: int = 3) -> dict[str, Any]:
    """Seconds for all ``queries`` read by one thread, and split over two reading at once
    (best of ``rounds``, alternating)."""
    half = len(queries) // 2
    one: list[float] = []
    two: list[float] = []

    def read(part: list[str]) -> None:
        for q in part:
            store.rows(q)

    for _ in range(rounds):
        start = time.perf_counter()
        read(queries[: 2 * half])
        one.append(time.perf_counter() - start)
        threads = [threading.Thread(target=read, args=(queries[i * half:(i + 1) * half],))
                   for i in range(2)]
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        two.append(time.perf_counter() - start)
    return {"queries": 2 * half, "one_thread_s": min(one), "two_threads_s": min(two),
            "throughput_ratio": min(one) / min(two)}


def idle_threads(agents: int) -> dict[str, Any]:
    """Start ``agents`` threads that wait on an empty queue, as idle owners would."""
    inboxes: list[queue.SimpleQueue[None]] = [queue.SimpleQueue() for _ in range(agents)]
    started = threading.Barrier(agents + 1)

    def idle(inbox: queue.SimpleQueue[None]) -> None:
        started.wait()
        inbox.get()

    before = rss_bytes()
    threads = [threading.Thread(target=idle, args=(inbox,), daemon=True) for inbox in inboxes]
    start = time.perf_counter()
    for t in threads:
        t.start()
    started.wait()
    seconds = time.perf_counter() - start
    after = rss_bytes()
    for inbox in inboxes:
        inbox.put(None)
    for t in threads:
        t.join()
    return {"agents": agents, "start_us_each": seconds / agents * 1e6,
            "rss_kb_each": (after - before) / agents / 1024, "rss_mb_all": (after - before) / 2**20,
            "stack_size_kb": (threading.stack_size() or 8192 * 1024) // 1024}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=2_000)
    parser.add_argument("--agents", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "agent"
        start = time.perf_counter()
        generate(path, args.nodes, progress=False)
        print(f"store: {args.nodes:,} nodes, built in {time.perf_counter() - start:.1f} s")
        store = AgentStore(path, mirror=False)  # disk reads: what an owner would serialize
        try:
            queries = frontiers(store, args.queries)
            rows = statistics.mean(len(store.rows(q)) for q in queries[:100])
            print(f"query: outgoing_links.rq, 5-node frontier, {rows:.0f} rows on average")
            hop = queue_hop(store, queries)
            print(f"queue hop per disk read (p50 / p95 µs, {len(queries)} queries each):")
            print(f"  direct call        {hop['direct_p50']:8.1f} / {hop['direct_p95']:8.1f}")
            print(f"  owner thread       {hop['owner_p50']:8.1f} / {hop['owner_p95']:8.1f}")
            print(f"  the hop alone      {hop['hop_alone_p50']:8.1f} / {hop['hop_alone_p95']:8.1f}")
            print(f"  ratio owner/direct (p50): {hop['ratio_p50']:.2f}; the hop alone / a direct "
                  f"read (p50): {hop['hop_share_p50']:.3f}")
            par = two_readers(store, queries)
            print(f"disk reads, {par['queries']} queries: one thread {par['one_thread_s']:.2f} s, "
                  f"two threads {par['two_threads_s']:.2f} s; throughput two/one: "
                  f"{par['throughput_ratio']:.2f}")
        finally:
            store.close()
    idle = idle_threads(args.agents)
    print(f"idle owner threads: {idle['agents']}: {idle['start_us_each']:.0f} µs to start each, "
          f"RSS +{idle['rss_mb_all']:.2f} MB ({idle['rss_kb_each']:.0f} kB each; stack "
          f"reserved {idle['stack_size_kb']} kB virtual each)")


if __name__ == "__main__":
    main()
