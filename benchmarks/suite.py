"""The benchmark suite: scale, cost growth, and every peer measured side by side.

    python -m benchmarks [--quick | --full] [--sizes 2000,10000] [--out DIR] [...]

For each store size it builds an agent store shaped like real remembers (the fast bulk
loader of ``benchmarks/_workload.py``, checked once per run against the real remember path),
then measures in ONE run, so every number can be read as a ratio to a baseline measured on
the same machine at the same moment:

* recall p50/p95 at depth 2 and 4 through ``MemoryManager.searcher.recall`` and through the
  public ``recall()``, against peers answering the same recall (same seeds — the focus — same
  depth, keywords, relation filter, tie-break rules and result limit): a pure-Python dict,
  NetworkX, rdflib running the library's own SPARQL, SQLite (recursive CTE + FTS5) and
  LevelGraph on Node.js. Every engine must return the identical text: a mismatch is printed
  in red, recorded, and makes ``main`` return 1;
* ``LinkStore.importance`` (baselines: dicts, SQLite), ``Compressor.next_batch(100)``
  (baselines: the same query with ORDER BY over every node, SQLite with an index);
* remember throughput excluding model time (``FastModel``; baseline: the same triples
  committed straight to the store, one update per remember);
* compression scans/s with ``FastModel`` and with the built-in model;
* disk bytes per node after writing and after ``optimize()`` (baseline: SQLite), resident
  memory (VmRSS), store open time (baseline: a bare ``pyoxigraph.Store`` open).

Results go to ``--out`` (default ``benchmarks/results/``) as ``bench-<date>.json``, a
Markdown table ``bench-<date>.md`` and, when matplotlib is installed, ``bench-<date>.png``
(recall latency against node count per engine).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import importlib
import json
import math
import os
import platform
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks._common import (
    WARMUP_SLICES,
    FastModel,
    aged_slices,
    cpus,
    percentiles,
    sentence,
    time_compression,
)
from benchmarks._workload import check_against_remember, generate
from benchmarks.peers import Peer, Query, Snapshot, Timer, all_peers
from memory_rdf import Config, HeuristicModel, MemoryManager, Processed, SmallModel, Templates
from memory_rdf._store import AgentStore

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "results"
DEFAULT_WORK = HERE / ".work"

OXI_SEARCH = "oxigraph search"
OXI_RECALL = "oxigraph recall()"
REFERENCE = "python dict"

#: (label, keywords, relations) — each asked at every depth of ``DEPTHS``.
QUERIES: list[tuple[str, tuple[str, ...], tuple[str, ...] | None]] = [
    ("(all)", (), None),
    ("login", ("login",), None),
    ("登录 数据库", ("登录", "数据库"), None),
    ("login 支付 / 下文 涉及", ("login", "支付"), ("下文", "涉及")),
]
DEPTHS = (2, 4)


@dataclass(frozen=True)
class Mode:
    sizes: tuple[int, ...]
    repeat: int
    budget_s: float
    remembers: int
    slices: int | None  # None: benchmarks._common.aged_slices(size)
    opens: int
    importance_sample: int


MODES = {
    "quick": Mode((10_000,), repeat=20, budget_s=0.5, remembers=100, slices=None, opens=3,
                  importance_sample=50),
    "full": Mode((100_000, 1_000_000), repeat=50, budget_s=3.0, remembers=500, slices=None,
                 opens=5, importance_sample=100),
}


# ---------------------------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------------------------


def rss_bytes(field: str = "VmRSS") -> int:
    """Resident memory of this process from /proc/self/status (0 where there is none)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def disk_usage(path: Path, nodes: int) -> dict[str, Any]:
    """Bytes of an Oxigraph (RocksDB) store: total, per node, and the table files (``.sst``)
    apart from the write-ahead log (``.log``)."""
    files = [p for p in path.rglob("*") if p.is_file()]
    total = sum(p.stat().st_size for p in files)
    sst = sum(p.stat().st_size for p in files if p.suffix == ".sst")
    wal = sum(p.stat().st_size for p in files if p.suffix == ".log")
    return {"bytes": total, "per_node": total / max(1, nodes), "sst_bytes": sst,
            "wal_bytes": wal, "nodes": nodes}


def summary(samples: Sequence[float]) -> dict[str, Any]:
    p50, p95 = percentiles(list(samples))
    return {"p50_ms": p50, "p95_ms": p95, "samples": len(samples)}


def timed_ms(fn: Callable[[], object], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return out


class TimedModel:
    """FastModel, with the time spent inside the model summed (to exclude it)."""

    def __init__(self, inner: SmallModel) -> None:
        self.inner = inner
        self.seconds = 0.0
        self.calls = 0

    def _timed(self, fn: Callable[..., Any], *args: Any) -> Any:
        start = time.perf_counter()
        try:
            return fn(*args)
        finally:
            self.seconds += time.perf_counter() - start
            self.calls += 1

    def segment(self, text: str) -> list[str]:
        return self._timed(self.inner.segment, text)

    def process(self, text: str, target_length: int | None = None) -> Processed:
        return self._timed(self.inner.process, text, target_length)

    def relation(self, node_content: str, focus_content: str) -> str:
        return self._timed(self.inner.relation, node_content, focus_content)


def _version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def environment() -> dict[str, Any]:
    node = shutil.which("node")
    node_version = None
    if node:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            node_version = subprocess.run([node, "--version"], capture_output=True, text=True,
                                          timeout=10).stdout.strip()
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": cpus(),  # the same count the compression bound divides by
        "pyoxigraph": _version("pyoxigraph"),
        "rdflib": _version("rdflib"),
        "networkx": _version("networkx"),
        "sqlite": sqlite3.sqlite_version,
        "node": node_version,
        "memory_rdf": _version("memory-rdf"),
        "malloc": allocator(),
    }


def allocator() -> str:
    """The C allocator this process runs on, as far as its environment says: compression's
    scans/s move with it (benchmarks/PROFILE.md, "eighth pass")."""
    preload = os.environ.get("LD_PRELOAD", "")
    for name in ("jemalloc", "mimalloc", "tcmalloc"):
        if name in preload:
            return name
    libc, version = platform.libc_ver()
    tunables = os.environ.get("GLIBC_TUNABLES", "")
    base = f"{libc} {version}".strip() or "system"
    return f"{base} ({tunables})" if tunables else base


# ---------------------------------------------------------------------------------------------
# One store size
# ---------------------------------------------------------------------------------------------


class SizeRun:
    def __init__(self, size: int, mode: Mode, args: argparse.Namespace, work: Path,
                 say: Callable[[str], None], step: Callable[[str], None]) -> None:
        self.size, self.mode, self.args, self.work = size, mode, args, work
        self.say, self.step = say, step
        # The peers write every perception entry with the Chinese templates (SPEC §5.4 v2 lets
        # a config fix one language): the texts stay comparable.
        self.config = Config(auto_compress=False, max_queue_size=1_000_000,
                             templates=Templates(forgotten_named_en=None,
                                                 forgotten_unnamed_en=None))
        self.out: dict[str, Any] = {"nodes_generated": size, "engines": {}, "recall": [],
                                    "metrics": {}, "mismatches": []}
        self.peers: list[Peer] = []

    # -- the whole size ------------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        out, cfg = self.out, self.config
        path = self.work / f"agent{self.size}"
        self.step("generating the store")
        start = time.perf_counter()
        generate(path, self.size, decay=self.args.decay, forgotten=self.args.forgotten,
                 progress=False)
        out["generate_s"] = time.perf_counter() - start
        out["metrics"]["disk_after_bulk_load"] = disk_usage(path, 0)

        self.step("timing store opens")
        out["metrics"]["open"] = self.open_times(path)
        out["metrics"]["rss_fresh_process"] = fresh_process_rss(path)

        rss_before_open = rss_bytes()
        self.model = TimedModel(FastModel())
        with MemoryManager(path.name, data_dir=self.work, config=cfg, model=self.model) as mem:
            out["rss_after_open_bytes"] = rss_bytes()
            out["rss_open_delta_bytes"] = out["rss_after_open_bytes"] - rss_before_open
            # Recall is timed once the read mirror (if any) serves the reads.
            start = time.perf_counter()
            if isinstance(mem._store, AgentStore):
                mem._store.wait_mirror()
                out["read_mirror"] = mem._store.mirror_state
            out["read_mirror_wait_s"] = time.perf_counter() - start
            stats = mem.stats()
            out.update(nodes=stats["nodes"], links=stats["links"],
                       dangling_links=stats["dangling_links"])
            bulk = out["metrics"]["disk_after_bulk_load"]
            bulk.update(nodes=stats["nodes"], per_node=bulk["bytes"] / max(1, stats["nodes"]))

            self.step("loading the peers")
            snapshot = self.load_peers(mem)

            self.step("recall: every engine, every query")
            self.recall(mem, snapshot)

            self.step("importance and next batch")
            self.importance(mem, snapshot)
            self.next_batch(mem)
            sqlite_peer = self.peer("sqlite")
            if sqlite_peer is not None:
                disk = sqlite_peer.disk_bytes()  # type: ignore[attr-defined]
                out["metrics"]["disk_sqlite_peer"] = {
                    "bytes": disk, "per_node": disk / max(1, stats["nodes"])}
            for peer in self.peers:
                peer.close()
            self.peers.clear()
            del snapshot
            gc.collect()

            self.step("remember throughput")
            self.remember(mem)

            self.step("disk after writing and after optimize()")
            self.disk(mem, path)
        # the write-ahead log stays on disk after optimize() until the store is opened again
        with MemoryManager(path.name, data_dir=self.work, config=cfg, model=FastModel()):
            pass
        out["metrics"]["disk_after_reopen"] = disk_usage(path, out["metrics"]["nodes_after"])

        self.step("compression scans")
        # Both models scan the same nodes in the same state: the built-in one on a copy.
        twin = self.work / f"{path.name}-twin"
        shutil.copytree(path, twin)
        try:
            for key, name, model in (
                ("compression_fast_model", path.name, FastModel()),
                ("compression_builtin_model", twin.name, HeuristicModel()),
            ):
                with MemoryManager(name, data_dir=self.work, config=cfg, model=model) as mem:
                    if isinstance(mem._store, AgentStore):
                        mem._store.wait_mirror()  # steady state: not beside its build
                    out["metrics"][key] = self.compression(mem)
        finally:
            shutil.rmtree(twin, ignore_errors=True)
        out["rss_end_bytes"] = rss_bytes()
        out["rss_peak_bytes"] = rss_bytes("VmHWM")
        if not self.args.keep:
            shutil.rmtree(path, ignore_errors=True)
        return out

    def peer(self, prefix: str) -> Peer | None:
        return next((p for p in self.peers if p.name.startswith(prefix)), None)

    # -- opening -------------------------------------------------------------------------------

    def open_times(self, path: Path) -> dict[str, Any]:
        import pyoxigraph as ox

        def bare() -> None:
            store = ox.Store(str(path))
            del store
            gc.collect()

        def manager() -> None:
            mem = MemoryManager(path.name, data_dir=self.work, config=self.config,
                                model=FastModel())
            mem.initialize()
            mem.close()

        def read_only() -> None:
            store = ox.Store.read_only(str(path))
            del store
            gc.collect()

        n = self.mode.opens
        return {
            "initialize": summary(timed_ms(manager, n)),
            "baseline_bare_store": summary(timed_ms(bare, n)),
            "read_only": summary(timed_ms(read_only, n)),
        }

    # -- peers ---------------------------------------------------------------------------------

    def load_peers(self, mem: MemoryManager) -> Snapshot | None:
        engines = self.out["engines"]
        engines[OXI_SEARCH] = {"status": "ok"}
        engines[OXI_RECALL] = {"status": "ok"}
        wanted: list[Peer] = []
        for peer in all_peers():
            reason: str | None
            cap = self.args.peer_max.get(peer.name.split()[0], peer.default_max_nodes)
            if _skipped(peer.name, self.args.skip):
                reason = "skipped with --skip"
            elif cap is not None and self.size > cap:
                reason = (f"store of {self.size:,} nodes is above this peer's limit of "
                          f"{cap:,} (memory/load time; raise it with --peer-max "
                          f"{peer.name.split()[0]}={self.size})")
            else:
                reason = peer.available()
            if reason is None and not wanted:
                reason = _memory_shortfall(self.size)
            if reason is not None:
                engines[peer.name] = {"status": "skipped", "reason": reason}
                self.say(f"[yellow]{peer.name} skipped at {self.size:,} nodes: {reason}")
            else:
                wanted.append(peer)
        if not wanted:
            return None
        start = time.perf_counter()
        assert mem._store is not None
        snapshot = Snapshot.read(mem._store, self.config.link_break_threshold,
                                 self.config.templates)
        self.out["snapshot_read_s"] = time.perf_counter() - start
        peer_dir = self.work / f"peers{self.size}"
        peer_dir.mkdir(exist_ok=True)
        for peer in wanted:
            gc.collect()
            before = rss_bytes()
            start = time.perf_counter()
            try:
                peer.load(snapshot, mem._store, peer_dir)
            except Exception as exc:  # a peer failing to load is reported, not fatal
                engines[peer.name] = {"status": "failed", "reason": f"{type(exc).__name__}: {exc}"}
                self.say(f"[red]{peer.name} failed to load: {exc}")
                continue
            gc.collect()
            engines[peer.name] = {
                "status": "ok",
                "load_s": time.perf_counter() - start,
                "rss_delta_bytes": rss_bytes() - before,
            }
            self.peers.append(peer)
        return snapshot

    # -- recall --------------------------------------------------------------------------------

    def recall(self, mem: MemoryManager, snapshot: Snapshot | None) -> None:
        from memory_rdf._search import Seed

        limit = self.config.max_search_results
        queries = [Query(label, kws, rels, depth, limit)
                   for depth in DEPTHS for label, kws, rels in QUERIES]
        seeds = [Seed(nid, 1.0, rank) for rank, nid in enumerate(mem._focus.ids())]
        timer = Timer(repeat=self.mode.repeat, min_repeat=3, budget_s=self.mode.budget_s)

        def oxi_search(q: Query) -> str:
            rels = None if q.relations is None else list(q.relations)
            return mem._searcher.recall(seeds, list(q.keywords), rels, q.depth, q.limit)

        def oxi_recall(q: Query) -> str:
            rels = None if q.relations is None else list(q.relations)
            return mem.recall(list(q.keywords), relations=rels, depth=q.depth, max_chars=0)

        inline: list[tuple[str, Callable[[Query], str]]] = [
            (OXI_SEARCH, oxi_search), (OXI_RECALL, oxi_recall)]
        batched: list[Peer] = []
        for peer in self.peers:
            if type(peer).run is Peer.run:
                inline.append((peer.name, peer.recall))
            else:
                batched.append(peer)
        rows: list[dict[str, Any]] = []
        for q in queries:
            row: dict[str, Any] = {"query": q.label, "keywords": list(q.keywords),
                                   "relations": q.relations, "depth": q.depth, "limit": q.limit,
                                   "engines": {}, "texts": {}}
            calls = [(name, lambda fn=fn, q=q: fn(q)) for name, fn in inline]
            for name, timing in round_robin(calls, timer, self._engine_failed).items():
                row["texts"][name] = timing["text"]
                row["engines"][name] = summary(timing["samples_ms"])
            rows.append(row)
        for peer in batched:
            try:
                answers = peer.run(queries, timer)
            except Exception as exc:
                self._engine_failed(peer.name, exc)
                continue
            info = self.out["engines"][peer.name]
            if peer.reported_load_ms is not None:
                info["load_s"] = peer.reported_load_ms / 1000
            if peer.reported_rss_bytes is not None:
                info["process_rss_bytes"] = peer.reported_rss_bytes
            for row, answer in zip(rows, answers, strict=True):
                row["texts"][peer.name] = answer["text"]
                row["engines"][peer.name] = summary(answer["samples_ms"])
        for row in rows:
            self._compare(row)
        self.out["recall"] = rows

    def _engine_failed(self, name: str, exc: Exception) -> None:
        self.out["engines"][name] = {"status": "failed", "reason": f"{type(exc).__name__}: {exc}"}
        self.out["mismatches"].append({"engine": name, "error": f"{type(exc).__name__}: {exc}"})
        self.say(f"[bold red]{name} FAILED: {exc}")

    def _compare(self, row: dict[str, Any]) -> None:
        texts: dict[str, str] = row.pop("texts")
        expected = texts.get(OXI_SEARCH)
        reference = texts.get(REFERENCE, expected)
        row["entries"] = 0 if not expected else expected.count(
            self.config.templates.entry_separator) + 1
        lost = self.config.templates.forgotten_unnamed.split("{phrase}")[0]
        row["forgotten_entries"] = 0 if not expected else sum(
            1 for e in expected.split(self.config.templates.entry_separator)
            if e.startswith(lost))
        row["identical"] = True
        for name, text in texts.items():
            same = text == reference
            if not same and name == OXI_RECALL and len(row["keywords"]) >= 2:
                same = _same_ranked(reference or "", text, row["limit"], self.config)
            row["engines"][name]["identical"] = same
            if not same:
                row["identical"] = False
                where = _first_difference(reference or "", text)
                self.out["mismatches"].append(
                    {"query": row["query"], "depth": row["depth"], "engine": name,
                     "reference": REFERENCE if REFERENCE in texts else OXI_SEARCH,
                     "difference": where})
                self.say(f"[bold red]MISMATCH: {name} answered {row['query']!r} at depth "
                         f"{row['depth']} differently from {REFERENCE}: {where}")

    # -- importance, next batch ----------------------------------------------------------------

    def importance(self, mem: MemoryManager, snapshot: Snapshot | None) -> None:
        rng = random.Random(self.size)
        focus = set(mem._focus.ids())
        assert mem._store is not None
        ids = [i for i in (r[0].rsplit("/", 1)[1] for r in mem._store.rows(
            "SELECT ?n WHERE { ?n memory:scanOrder ?k } LIMIT 20000")) if i not in focus]
        sample = rng.sample(ids, min(len(ids), self.mode.importance_sample))
        result: dict[str, Any] = {"nodes_sampled": len(sample)}
        result["oxigraph"] = summary(_each(sample, mem._links.importance))
        got = {n: mem._links.importance(n) for n in sample}
        for prefix, label in (("python dict", "baseline_dict"), ("sqlite", "baseline_sqlite")):
            peer = self.peer(prefix)
            if peer is None:
                continue
            fn = peer.importance  # type: ignore[attr-defined]
            result[label] = summary(_each(sample, fn))
            bad = [n for n in sample if not math.isclose(fn(n), got[n], rel_tol=1e-9,
                                                          abs_tol=1e-12)]
            if bad:
                self.out["mismatches"].append({"metric": "importance", "engine": prefix,
                                               "nodes": bad[:5]})
                self.say(f"[bold red]MISMATCH: importance differs on {prefix} for "
                         f"{len(bad)} nodes")
        self.out["metrics"]["importance"] = result

    def next_batch(self, mem: MemoryManager) -> None:
        from memory_rdf._store import render

        assert mem._store is not None
        store = mem._store
        sorted_q = render("scan_order_sorted") + "\nLIMIT 100"
        expected = [r[0].rsplit("/", 1)[1] for r in store.rows(sorted_q)]
        got = mem._compressor.next_batch(100)
        result: dict[str, Any] = {
            "oxigraph": summary(timed_ms(lambda: mem._compressor.next_batch(100),
                                         self.mode.repeat)),
            "baseline_order_by": summary(timed_ms(lambda: store.rows(sorted_q),
                                                  max(3, self.mode.repeat // 10))),
            "index_fallbacks": mem._compressor.index_fallbacks,
        }
        checks = {"baseline_order_by": expected}
        for prefix, label in (("python dict", "baseline_dict"), ("sqlite", "baseline_sqlite")):
            peer = self.peer(prefix)
            if peer is not None:
                fn = peer.next_batch  # type: ignore[attr-defined]
                result[label] = summary(timed_ms(functools.partial(fn, 100), self.mode.repeat))
                checks[label] = fn(100)
        for label, ids in checks.items():
            if ids != got:
                self.out["mismatches"].append({"metric": "next_batch", "engine": label})
                self.say(f"[bold red]MISMATCH: next_batch(100) differs from {label}")
        self.out["metrics"]["next_batch"] = result

    # -- remember, disk, compression -----------------------------------------------------------

    def remember(self, mem: MemoryManager) -> None:
        n = self.mode.remembers
        per = 5
        rng = random.Random(99)
        timed = self.model
        timed.seconds, timed.calls = 0.0, 0
        batches = [[{"role": "user", "content": sentence(rng, 10_000_000 + i * per + k)}
                    for k in range(per)] for i in range(n)]
        start = time.perf_counter()
        for messages in batches:
            mem.remember(messages)
        mem.wait_idle()
        wall = time.perf_counter() - start
        nodes = n * per
        net = max(wall - timed.seconds, 1e-9)
        floor = self._write_floor(mem, n, per, rng)
        self.out["metrics"]["remember"] = {
            "remembers": n, "nodes": nodes, "wall_s": wall, "model_s": timed.seconds,
            "model_calls": timed.calls,
            "nodes_per_s": nodes / net,
            "ms_per_remember": net * 1000 / n,
            "baseline_write_floor": {"nodes_per_s": nodes / floor,
                                     "ms_per_remember": floor * 1000 / n},
        }

    def _write_floor(self, mem: MemoryManager, n: int, per: int, rng: random.Random) -> float:
        """The same triples as ``n`` remembers, committed straight to the store (one update
        each): no journal, scheduler, model or reads. The cost floor of a remember."""
        from memory_rdf._links import LinkData
        from memory_rdf._nodes import NodeData
        from memory_rdf._remember import NEXT, PREVIOUS, new_node_id
        from memory_rdf._store import WriteBatch

        model = FastModel()
        store = mem._store
        assert store is not None
        current = mem._focus.current()
        texts = mem._nodes.texts([nid for nid, _ in current])
        focus_text = {nid: texts.get(nid, ("", ""))[0] for nid, _ in current}
        seq = mem._metadata.node_sequence
        created = datetime.now(UTC)
        spent = 0.0
        for i in range(n):
            start = time.perf_counter()
            batch = WriteBatch()
            ids = [new_node_id() for _ in range(per)]
            contents = []
            for k, nid in enumerate(ids):
                seq += 1
                p = model.process(sentence(rng, 20_000_000 + i * per + k))
                contents.append(p.content)
                mem._nodes.add(batch, NodeData(nid, p.content, p.phrase, p.keywords, created,
                                              len(p.content), seq, 0, []))
            links = []
            for a, b in zip(ids, ids[1:], strict=False):
                links += [LinkData(a, b, 0.5, NEXT), LinkData(b, a, 0.5, PREVIOUS)]
            for nid, content in zip(ids, contents, strict=True):
                for fid, _ in current:
                    rel = model.relation(content, focus_text.get(fid, ""))
                    links += [LinkData(nid, fid, 1.0, rel), LinkData(fid, nid, 1.0, rel)]
            mem._links.add(batch, links)
            mem._focus.update(batch, current, ids)
            store.commit(batch)
            spent += time.perf_counter() - start
            next_order = max((o for _, o in current), default=0) + 1
            current = sorted([*current, *((nid, next_order + j) for j, nid in enumerate(ids))],
                             key=lambda item: -item[1])[: self.config.focus_limit]
            focus_text.update(zip(ids, contents, strict=True))
        return spent

    def disk(self, mem: MemoryManager, path: Path) -> None:
        assert mem._store is not None
        mem._store.flush()
        nodes = mem._nodes.count()
        self.out["metrics"]["nodes_after"] = nodes
        self.out["metrics"]["disk_after_writes"] = disk_usage(path, nodes)
        start = time.perf_counter()
        mem._store.optimize()
        took = time.perf_counter() - start
        self.out["metrics"]["disk_after_optimize"] = {**disk_usage(path, nodes),
                                                      "optimize_s": took}

    def compression(self, mem: MemoryManager) -> dict[str, Any]:
        slices = self.mode.slices or aged_slices(self.size)
        t = time_compression(mem, slices)[""]
        return {"scans_per_s": t.per_s, "scans_per_s_excl_model": t.per_s_excl_model,
                "scans_per_cpu_s_excl_model": t.per_cpu_s_excl_model, "model_s": t.model_s,
                "process_cpu_us_per_scan": t.process_cpu_us_per_scan,
                "others_cpu_us_per_scan": t.others_cpu_us_per_scan,
                "ceiling_per_s": t.ceiling_per_s, "cpus": cpus(),
                "scanned": t.scans, "model_calls": t.model_calls,
                "slices": slices, "warmup_slices": WARMUP_SLICES}


def round_robin(
    calls: Sequence[tuple[str, Callable[[], str]]], timer: Timer,
    failed: Callable[[str, Exception], None],
) -> dict[str, dict[str, Any]]:
    """Time every engine on one query, the engines taking turns call by call, so that the
    noise of a shared machine falls on all of them alike; the order is shuffled every round
    (seeded), so that no engine always runs right after the same one (whose work warms or
    evicts caches). Each
    engine first answers once untimed (its text); then rounds run until every engine has
    ``timer.repeat`` samples, an engine dropping out once it has ``timer.min_repeat`` samples
    and spent ``timer.budget_s``.
    """
    out: dict[str, dict[str, Any]] = {}
    active: list[tuple[str, Callable[[], str]]] = []
    for name, fn in calls:
        try:
            out[name] = {"text": fn(), "samples_ms": [], "spent": 0.0}
            active.append((name, fn))
        except Exception as exc:
            failed(name, exc)
    rng = random.Random(0)
    while active:
        still = []
        for name, fn in rng.sample(active, len(active)):
            entry = out[name]
            start = time.perf_counter()
            try:
                fn()
            except Exception as exc:
                failed(name, exc)
                del out[name]
                continue
            took = time.perf_counter() - start
            entry["samples_ms"].append(took * 1000)
            entry["spent"] += took
            n = len(entry["samples_ms"])
            if n < timer.repeat and (n < timer.min_repeat or entry["spent"] < timer.budget_s):
                still.append((name, fn))
        active = [c for c in active if c in still]
    for entry in out.values():
        entry.pop("spent")
    return out


#: Python memory per node of the graph snapshot and the peers built from it (measured at 100k
#: nodes: ~1.4 GB for snapshot, dicts, NetworkX and the SQLite load together).
PEER_BYTES_PER_NODE = 16_000


def _memory_shortfall(nodes: int) -> str | None:
    """Why the in-process peers cannot be loaded (not enough free memory), or None."""
    available = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                available = int(line.split()[1]) * 1024
    except OSError:
        return None
    need = nodes * PEER_BYTES_PER_NODE
    if available and available < need:
        return (f"the graph snapshot and peers need about {need / 2**30:.1f} GB of memory, "
                f"{available / 2**30:.1f} GB available")
    return None


_RSS_SCRIPT = """
import json, sys, time
from pathlib import Path
def rss():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0
base = rss()
from memory_rdf import Config, MemoryManager
imported = rss()
path = Path(sys.argv[1])
start = time.perf_counter()
with MemoryManager(path.name, data_dir=path.parent, config=Config(auto_compress=False)) as mem:
    opened_s = time.perf_counter() - start
    opened = rss()
    mirrored = mem._store.wait_mirror()  # the read mirror (Config.read_mirror=None: automatic)
    mirror_s = time.perf_counter() - start
    after_mirror = rss()
    for depth in (2, 4):
        for words in ([], ["login"], ["登录"]):
            for _ in range(5):
                mem.recall(words, depth=depth)
    recalled = rss()
print(json.dumps({"interpreter": base, "after_import": imported, "after_open": opened,
                  "after_recalls": recalled, "open_s": opened_s, "mirror": mirrored,
                  "mirror_ready_s": mirror_s, "after_mirror": after_mirror}))
"""


def fresh_process_rss(path: Path) -> dict[str, Any]:
    """VmRSS of a new Python process: bare, after importing memory_rdf, after opening this
    store (``initialize()``) and after 30 recalls — memory the store itself costs, free of
    what the benchmark process holds."""
    done = subprocess.run([sys.executable, "-c", _RSS_SCRIPT, str(path)], capture_output=True,
                          text=True, timeout=600, cwd=HERE.parent)
    if done.returncode != 0:
        return {"status": "failed", "reason": done.stderr.strip()[-500:]}
    return {"status": "ok", **json.loads(done.stdout)}


def _each(items: Sequence[str], fn: Callable[[str], object]) -> list[float]:
    out = []
    for item in items:
        start = time.perf_counter()
        fn(item)
        out.append((time.perf_counter() - start) * 1000)
    return out


def _skipped(name: str, skip: Sequence[str]) -> bool:
    return any(name.lower().startswith(s.lower()) for s in skip if s)


def _same_ranked(reference: str, ranked: str, limit: int, config: Config) -> bool:
    """The public recall ranks the results of a query with two keywords or more (SPEC §5.4
    v2), so it is checked against the walk's answer as a multiset of entries; when the walk
    stopped at ``limit`` results, the ranked list may hold other matches of the walk: then the
    same number of entries is what is checked."""
    sep = config.templates.entry_separator
    got, want = ranked.split(sep) if ranked else [], reference.split(sep) if reference else []
    lost = config.templates.forgotten_unnamed.split("{phrase}")[0]

    def results(entries: list[str]) -> int:
        return sum(not e.startswith(lost) for e in entries)

    if limit and results(want) >= limit:
        return results(got) == results(want)
    return sorted(got) == sorted(want)


def _first_difference(expected: str, got: str) -> str:
    a, b = expected.split("\n---\n"), got.split("\n---\n")
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return f"entry {i}: expected {x[:80]!r}, got {y[:80]!r}"
    return f"{len(a)} entries expected, {len(b)} returned"


# ---------------------------------------------------------------------------------------------
# Reports
# ---------------------------------------------------------------------------------------------


def engine_order(result: dict[str, Any]) -> list[str]:
    names: list[str] = [OXI_SEARCH, OXI_RECALL]
    for size in result["sizes"]:
        for name in size.get("engines", {}):
            if name not in names:
                names.append(name)
    return names


def markdown(result: dict[str, Any]) -> str:
    env = result["environment"]
    lines = [
        f"# memory_rdf benchmark — {result['date']}",
        "",
        f"`{result['command']}` · Python {env['python']} · pyoxigraph {env['pyoxigraph']} · "
        f"rdflib {env['rdflib']} · networkx {env['networkx']} · SQLite {env['sqlite']} · "
        f"node {env['node']} · {env['cpus']} CPUs · {env['platform']} · "
        f"malloc {env['malloc']}",
        "",
        "Shared, noisy machine: read the ratios (measured in the same run, engines taking "
        "turns on every query), not the absolute milliseconds.",
        "",
    ]
    lines += summary_table(result)
    check = result.get("workload_check")
    if check:
        lines += [f"Workload check (fast loader vs real remember path, {check['nodes']} nodes): "
                  f"**{check['status']}**", ""]
    names = engine_order(result)
    for size in result["sizes"]:
        if size.get("status") in ("skipped", "failed"):
            lines += [f"## {size['nodes_generated']:,} nodes — {size['status']}: "
                      f"{size['reason']}", ""]
            continue
        lines += [
            f"## {size['nodes']:,} nodes, {size['links']:,} links "
            f"({size['dangling_links']:,} dangling)",
            "",
            "### Recall latency: p50 ms (× the python dict reference's p50)",
            "",
        ]
        shown = [n for n in names if size["engines"].get(n, {}).get("status") == "ok"]
        lines.append("| depth | keywords / relations | entries | " + " | ".join(shown)
                     + " | identical |")
        lines.append("|---|---|---|" + "---|" * len(shown) + "---|")
        for row in size["recall"]:
            base = row["engines"].get(REFERENCE, row["engines"].get(OXI_SEARCH, {}))
            b50 = base.get("p50_ms") or float("nan")
            cells = []
            for name in shown:
                e = row["engines"].get(name)
                cells.append("—" if e is None else f"{e['p50_ms']:.3g} (×{e['p50_ms'] / b50:.3g})")
            lines.append(f"| {row['depth']} | {row['query']} | {row['entries']} | "
                         + " | ".join(cells) + f" | {'yes' if row['identical'] else '**NO**'} |")
        lines += ["", "### Recall latency: p95 ms", ""]
        lines.append("| depth | keywords / relations | " + " | ".join(shown) + " |")
        lines.append("|---|---|" + "---|" * len(shown))
        for row in size["recall"]:
            cells = [("—" if (e := row["engines"].get(n)) is None else f"{e['p95_ms']:.3g}")
                     for n in shown]
            lines.append(f"| {row['depth']} | {row['query']} | " + " | ".join(cells) + " |")
        lines += ["", "### Store operations (ratio = memory_rdf ÷ baseline, same run)", "",
                  "| metric | memory_rdf | baseline | baseline value | ratio |",
                  "|---|---|---|---|---|"]
        lines += _metric_rows(size)
        lines += ["", "### Engines", "", "| engine | status | load s | memory |",
                  "|---|---|---|---|"]
        for name in names:
            e = size["engines"].get(name)
            if e is None:
                continue
            if e["status"] != "ok":
                lines.append(f"| {name} | {e['status']}: {e['reason']} | | |")
                continue
            mem = ""
            if "process_rss_bytes" in e:
                mem = f"{e['process_rss_bytes'] / 2**20:.0f} MB (own process)"
            elif "rss_delta_bytes" in e:
                mem = f"+{e['rss_delta_bytes'] / 2**20:.0f} MB RSS"
            load = f"{e['load_s']:.2f}" if "load_s" in e else ""
            lines.append(f"| {name} | ok | {load} | {mem} |")
        lines.append("")
    lines += _model_rows(result)
    skipped = result.get("skipped", [])
    if skipped:
        lines += ["## Skipped", ""] + [f"- {s}" for s in skipped] + [""]
    mismatches = result.get("mismatches", [])
    lines += ["## Identical answers", "",
              "**every engine returned the identical recall text**" if not mismatches else
              f"**{len(mismatches)} MISMATCHES** — see the JSON", ""]
    return "\n".join(lines)


def _gmean_p50(size: dict[str, Any], name: str, depth: int) -> float | None:
    vals = [r["engines"][name]["p50_ms"] for r in size["recall"]
            if r["depth"] == depth and name in r["engines"]]
    if not vals:
        return None
    return math.exp(statistics.fmean(math.log(max(v, 1e-6)) for v in vals))


def summary_table(result: dict[str, Any]) -> list[str]:
    """One table for the README: recall p50 per engine and size (geometric mean over the
    keyword sets), depth 2 / depth 4, with the ratio to the dict reference."""
    sizes = [s for s in result["sizes"] if s.get("status") not in ("skipped", "failed")]
    if not sizes:
        return []
    names = engine_order(result)
    lines = ["## Summary: recall p50, ms, depth 2 / depth 4 (× the python dict reference)", "",
             "Geometric mean over the keyword sets below; — = not run at that size.", "",
             "| nodes | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for size in sizes:
        cells = []
        for name in names:
            parts = []
            for depth in DEPTHS:
                v = _gmean_p50(size, name, depth)
                ref = _gmean_p50(size, REFERENCE, depth)
                if v is None:
                    parts.append("—")
                elif ref:
                    ratio = v / ref
                    parts.append(f"{v:.3g} (×{ratio:.2g})" if ratio < 10 else
                                 f"{v:.3g} (×{ratio:.0f})")
                else:
                    parts.append(f"{v:.3g}")
            cells.append(" / ".join(parts))
        lines.append(f"| {size['nodes']:,} | " + " | ".join(cells) + " |")
    return lines + [""]


def _metric_rows(size: dict[str, Any]) -> list[str]:
    m = size["metrics"]
    rows: list[str] = []

    def row(metric: str, value: float, unit: str, baseline: str, base: float | None,
            lower_is_better: bool = True) -> None:
        if base is None or base == 0:
            rows.append(f"| {metric} | {value:.4g} {unit} | {baseline} | | |")
            return
        ratio = value / base
        rows.append(f"| {metric} | {value:.4g} {unit} | {baseline} | {base:.4g} {unit} | "
                    f"×{ratio:.3g} |")

    imp = m.get("importance", {})
    if "oxigraph" in imp:
        for label in ("baseline_dict", "baseline_sqlite"):
            if label in imp:
                row("importance p50", imp["oxigraph"]["p50_ms"], "ms", label[9:],
                    imp[label]["p50_ms"])
    nb = m.get("next_batch", {})
    if "oxigraph" in nb:
        for label in ("baseline_order_by", "baseline_dict", "baseline_sqlite"):
            if label in nb:
                row("next_batch(100) p50", nb["oxigraph"]["p50_ms"], "ms",
                    label[9:].replace("_", " "), nb[label]["p50_ms"])
    rem = m.get("remember")
    if rem:
        row("remember, model time excluded", rem["ms_per_remember"], "ms/remember",
            "same triples, one update() each", rem["baseline_write_floor"]["ms_per_remember"])
        rows.append(f"| remember throughput | {rem['nodes_per_s']:.4g} nodes/s | write floor | "
                    f"{rem['baseline_write_floor']['nodes_per_s']:.4g} nodes/s | |")
    fast, builtin = m.get("compression_fast_model"), m.get("compression_builtin_model")
    if fast and builtin:
        row(f"compression scans/s, built-in model ({builtin['model_calls']} calls in "
            f"{builtin['scanned']} scans)", builtin["scans_per_s"], "scans/s",
            f"FastModel, same nodes ({fast['model_calls']} calls)", fast["scans_per_s"])
        if "scans_per_s_excl_model" in builtin:
            row("compression scans/s, built-in model, model time excluded",
                builtin["scans_per_s_excl_model"], "scans/s",
                "FastModel, model time excluded", fast["scans_per_s_excl_model"])
        if "scans_per_cpu_s_excl_model" in builtin:
            row("compression scans per CPU second of its thread, built-in model, model time "
                "excluded", builtin["scans_per_cpu_s_excl_model"], "scans/s",
                "FastModel, the same", fast["scans_per_cpu_s_excl_model"])
        if "process_cpu_us_per_scan" in builtin:
            row("compression: CPU of the whole process per scan, built-in model, model time "
                "excluded (other threads — disk writer, RocksDB: "
                f"{builtin['others_cpu_us_per_scan']:.4g} µs)",
                builtin["process_cpu_us_per_scan"], "µs",
                f"FastModel, the same (other threads: "
                f"{fast['others_cpu_us_per_scan']:.4g} µs)", fast["process_cpu_us_per_scan"])
            row(f"compression: most scans/s {builtin['cpus']} CPUs allow at that cost (a model "
                "that takes no time), built-in model", builtin["ceiling_per_s"], "scans/s",
                "FastModel, the same", fast["ceiling_per_s"])
    sq = m.get("disk_sqlite_peer", {}).get("per_node")
    for key, label in (("disk_after_bulk_load", "disk/node after bulk load"),
                       ("disk_after_writes", "disk/node after remembers"),
                       ("disk_after_optimize", "disk/node after optimize()"),
                       ("disk_after_reopen", "disk/node after reopen")):
        if key in m:
            d = m[key]
            what = (f"{label} (sst {d['sst_bytes'] / max(1, d['nodes']):.4g} B, "
                    f"WAL {d['wal_bytes'] / max(1, d['nodes']):.4g} B)")
            row(what, d["per_node"], "B", "SQLite peer (same graph, FTS5)", sq)
    op = m.get("open")
    if op:
        row("open: initialize() p50", op["initialize"]["p50_ms"], "ms", "bare pyoxigraph.Store",
            op["baseline_bare_store"]["p50_ms"])
        row("open: read-only p50", op["read_only"]["p50_ms"], "ms", "bare pyoxigraph.Store",
            op["baseline_bare_store"]["p50_ms"])
    fresh = m.get("rss_fresh_process", {})
    if fresh.get("status") == "ok":
        mb = 2**20
        rows.append(
            f"| RSS of a fresh process: opened / after 30 recalls | "
            f"{fresh['after_open'] / mb:.0f} / {fresh['after_recalls'] / mb:.0f} MB | "
            f"after importing memory_rdf | {fresh['after_import'] / mb:.0f} MB | "
            f"+{(fresh['after_recalls'] - fresh['after_import']) / mb:.0f} MB |")
        if fresh.get("mirror"):
            grown = fresh["after_mirror"] - fresh["after_open"]
            rows.append(
                f"| read mirror (fresh process): ready after / RSS added | "
                f"{fresh['mirror_ready_s']:.1f} s / {grown / mb:.0f} MB | per node | "
                f"{grown / max(1, size.get('nodes', 1)) / 1000:.1f} kB | |")
    rows.append(f"| RSS of the benchmark process after open / end / peak | "
                f"{size['rss_after_open_bytes'] / 2**20:.0f} / "
                f"{size['rss_end_bytes'] / 2**20:.0f} / {size['rss_peak_bytes'] / 2**20:.0f} MB "
                "| | | |")
    return rows


def plot(result: dict[str, Any], path: Path) -> str | None:
    """Recall p50 against node count per engine (geometric mean over the keyword sets)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed: no plot (pip install matplotlib)"
    sizes = [s for s in result["sizes"] if s.get("status") not in ("skipped", "failed")]
    if not sizes:
        return "no store size was measured: no plot"
    fig, axes = plt.subplots(1, len(DEPTHS), figsize=(6 * len(DEPTHS), 4.5), squeeze=False)
    for ax, depth in zip(axes[0], DEPTHS, strict=True):
        for name in engine_order(result):
            xs, ys = [], []
            for s in sizes:
                v = _gmean_p50(s, name, depth)
                if v is not None:
                    xs.append(s["nodes"])
                    ys.append(v)
            if xs:
                ax.plot(xs, ys, marker="o", label=name)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("nodes")
        ax.set_ylabel("recall p50 (ms, geometric mean over queries)")
        ax.set_title(f"depth {depth}")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.suptitle(f"memory_rdf recall latency — {result['date']}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None


# ---------------------------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None, prog: str = "python -m benchmarks") -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="memory_rdf benchmarks: scale, cost growth, and every peer side by side.",
        epilog=(
            "Examples:\n"
            f"  {prog} --quick                 # 10k nodes, about two minutes\n"
            f"  {prog} --full                  # 100k and 1M nodes where disk allows\n"
            f"  {prog} --sizes 10000,100000 --skip levelgraph --data-dir /tmp/bench\n"
            "\nResults go to benchmarks/results/ as JSON, Markdown and PNG."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--quick", action="store_true",
                       help="one 10k-node store, short timing budgets (the default)")
    group.add_argument("--full", action="store_true",
                       help="100k and 1M nodes (sizes that do not fit on disk are skipped)")
    parser.add_argument("--sizes", help="comma-separated node counts, overriding the mode's")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help=f"where results go (default {DEFAULT_OUT})")
    parser.add_argument("--work", "--data-dir", dest="work", type=Path, default=DEFAULT_WORK,
                        help="where the benchmark agents' stores are built (a temporary "
                             f"directory inside it; default {DEFAULT_WORK})")
    parser.add_argument("--repeat", type=int, help="most timed runs per recall and engine")
    parser.add_argument("--budget", type=float, help="seconds per recall and engine")
    parser.add_argument("--remembers", type=int, help="remembers timed per size")
    parser.add_argument("--slices", type=int,
                        help="compression slices timed per model (default: as many as stay "
                             "among the workload's aged nodes, 6 at 10k, at most 30)")
    parser.add_argument("--skip", default="",
                        help="comma-separated engines to leave out (e.g. levelgraph,rdflib)")
    parser.add_argument("--peer-max", action="append", default=[], metavar="PEER=NODES",
                        help="largest store a peer runs on (e.g. rdflib=100000)")
    parser.add_argument("--decay", type=float, default=120,
                        help="link ageing of the workload: the oldest links × 0.97^this")
    parser.add_argument("--forgotten", type=float, default=0.05,
                        help="fraction of nodes forgotten in the workload (dangling links)")
    parser.add_argument("--check-nodes", type=int, default=200,
                        help="nodes of the fast-loader vs remember-path check (0: skip)")
    parser.add_argument("--no-plot", action="store_true", help="do not draw the PNG")
    parser.add_argument("--keep", action="store_true", help="keep the generated stores")
    args = parser.parse_args(argv)
    mode = MODES["full" if args.full else "quick"]
    if args.sizes:
        try:
            sizes = tuple(int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip())
        except ValueError:
            parser.error(f"--sizes must be comma-separated integers, got {args.sizes!r}")
        if not sizes or min(sizes) < 10:
            parser.error("--sizes: every size must be at least 10 nodes")
        mode = Mode(sizes, *(getattr(mode, f) for f in
                             ("repeat", "budget_s", "remembers", "slices", "opens",
                              "importance_sample")))
    overrides = {"repeat": args.repeat, "budget_s": args.budget, "remembers": args.remembers,
                 "slices": args.slices}
    mode = Mode(**{**mode.__dict__, **{k: v for k, v in overrides.items() if v is not None}})
    args.mode = mode
    args.skip = [s.strip() for s in args.skip.split(",") if s.strip()]
    caps: dict[str, int] = {}
    for item in args.peer_max:
        name, _, value = item.partition("=")
        try:
            caps[name.strip().split()[0]] = int(value.replace("_", ""))
        except (ValueError, IndexError):
            parser.error(f"--peer-max takes PEER=NODES, got {item!r}")
    args.peer_max = caps
    return args


def _disk_needed(size: int, per_node: float) -> int:
    # the store, its optimized copy, the SQLite peer and the LevelGraph export
    return int(size * per_node * 3)


@contextlib.contextmanager
def _progress(total: int) -> Iterator[tuple[Callable[[str], None], Callable[[str], None],
                                             Callable[[int], None]]]:
    from rich.console import Console
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                  TextColumn("{task.completed}/{task.total}"), TimeElapsedColumn(),
                  console=console, transient=False) as progress:
        task = progress.add_task("starting", total=total)
        label = [""]

        def say(message: str) -> None:
            progress.console.print(message)

        def step(name: str) -> None:
            progress.update(task, description=f"{label[0]}{name}", advance=1)

        def size(n: int) -> None:
            label[0] = f"[bold]{n:,} nodes[/]: "

        yield say, step, size
        progress.update(task, description="done", completed=total)


STEPS_PER_SIZE = 8


def main(argv: list[str] | None = None, prog: str = "python -m benchmarks") -> int:
    """Run the suite; returns 0, or 1 when an engine answered differently (or failed)."""
    args = parse_args(argv, prog)
    mode: Mode = args.mode
    now = datetime.now()
    stamp = now.strftime("%Y-%m-%d-%H%M%S")
    result: dict[str, Any] = {
        "date": now.isoformat(timespec="seconds"),
        "command": " ".join([prog, *(argv if argv is not None else sys.argv[1:])]),
        "mode": "full" if args.full else "quick",
        "parameters": {**mode.__dict__, "decay": args.decay, "forgotten": args.forgotten,
                       "depths": list(DEPTHS), "queries": [q[0] for q in QUERIES]},
        "environment": environment(),
        "sizes": [], "skipped": [], "mismatches": [],
    }
    args.work.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bench-", dir=args.work))
    per_node = 8_000.0  # disk bytes per node before anything was measured (bulk + indexes)
    try:
        with _progress(len(mode.sizes) * STEPS_PER_SIZE + 1) as (say, step, size_label):
            step("workload check: fast loader vs remember path")
            if args.check_nodes > 0:
                check_dir = work / "check"
                check_dir.mkdir()
                try:
                    check_against_remember(check_dir, args.check_nodes)
                    result["workload_check"] = {"nodes": args.check_nodes, "status": "identical"}
                except AssertionError as exc:
                    result["workload_check"] = {"nodes": args.check_nodes,
                                                "status": "DIFFERENT", "detail": str(exc)}
                    result["mismatches"].append({"workload_check": str(exc)})
                    say(f"[bold red]WORKLOAD CHECK FAILED: {exc}")
                shutil.rmtree(check_dir, ignore_errors=True)
            for size in mode.sizes:
                size_label(size)
                free = shutil.disk_usage(work).free
                need = _disk_needed(size, per_node)
                if free < need:
                    reason = (f"needs about {need / 2**30:.1f} GB of disk, "
                              f"{free / 2**30:.1f} GB free in {work}")
                    say(f"[yellow]{size:,} nodes skipped: {reason}")
                    result["sizes"].append({"nodes_generated": size, "status": "skipped",
                                            "reason": reason})
                    result["skipped"].append(f"{size:,} nodes: {reason}")
                    for _ in range(STEPS_PER_SIZE):
                        step("skipped")
                    continue
                run = SizeRun(size, mode, args, work, say, step)
                try:
                    out = run.run()
                except Exception as exc:  # report what was measured; the run fails (exit 1)
                    reason = f"{type(exc).__name__}: {exc}"
                    say(f"[bold red]{size:,} nodes FAILED: {reason}\n{traceback.format_exc()}")
                    result["sizes"].append({"nodes_generated": size, "status": "failed",
                                            "reason": reason})
                    result["mismatches"].append({"nodes": size, "error": reason})
                    for peer in run.peers:
                        with contextlib.suppress(Exception):
                            peer.close()
                    continue
                per_node = max(per_node, out["metrics"]["disk_after_optimize"]["per_node"])
                result["sizes"].append(out)
                result["mismatches"] += [{"nodes": size, **m} for m in out["mismatches"]]
                for name, e in out["engines"].items():
                    if e["status"] != "ok":
                        result["skipped"].append(f"{name} at {size:,} nodes: {e['reason']}")
            result["model_requests"] = _model_requests(say, quick=not args.full)
            if result["model_requests"]["status"] != "ok":
                result["skipped"].append(f"model requests: {result['model_requests']['reason']}")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    args.out.mkdir(parents=True, exist_ok=True)
    base = args.out / f"bench-{stamp}"
    base.with_suffix(".json").write_text(
        json.dumps(result, indent=2, ensure_ascii=False, default=str), encoding="utf-8")
    text = markdown(result)
    base.with_suffix(".md").write_text(text, encoding="utf-8")
    if args.no_plot:
        why: str | None = "--no-plot given"
    else:
        why = plot(result, base.with_suffix(".png"))
    if why:
        result["skipped"].append(f"plot: {why}")
        print(f"plot skipped: {why}", file=sys.stderr)
    print(text)
    print(f"results: {base}.json, {base}.md" + ("" if why else f", {base}.png"), file=sys.stderr)
    if result["mismatches"]:
        print(f"{len(result['mismatches'])} MISMATCH(ES): see {base}.json", file=sys.stderr)
        return 1
    return 0


def _model_requests(say: Callable[[str], None], *, quick: bool) -> dict[str, Any]:
    """Model requests and tokens per remember, from ``benchmarks/model_requests.py`` (another
    benchmark: a real manager against a loopback fake LLM server) when it is importable."""
    try:
        module = importlib.import_module("benchmarks.model_requests")
    except Exception as exc:
        msg = f"benchmarks/model_requests.py not importable ({exc}): model requests not measured"
        say(f"[yellow]{msg}")
        return {"status": "skipped", "reason": msg}
    try:
        suite_metrics = getattr(module, "suite_metrics", None)
        if callable(suite_metrics):
            return {"status": "ok", **suite_metrics(quick=quick)}
        run = module.run
        out: dict[str, Any] = {"status": "ok", "backend": "ollama (fake server)",
                               "remembers": 6, "segments": 5, "runs": {}}
        with tempfile.TemporaryDirectory() as tmp:
            for lang in ("zh", "en"):
                for kind in ("naive", "batched"):
                    out["runs"][f"{lang} {kind}"] = run("ollama", lang, kind, 6, 5, Path(tmp))
        return out
    except Exception as exc:
        msg = f"benchmarks/model_requests.py failed: {type(exc).__name__}: {exc}"
        say(f"[red]{msg}")
        return {"status": "failed", "reason": msg}


def _model_rows(result: dict[str, Any]) -> list[str]:
    mr = result.get("model_requests") or {}
    if mr.get("status") != "ok" or "runs" not in mr:
        return [f"Model requests per remember: {mr.get('status', 'not run')}"
                + (f" — {mr['reason']}" if "reason" in mr else ""), ""]
    lines = [f"## Model requests per remember ({mr['backend']}, {mr['segments']} segments "
             "into 5 focus nodes; benchmarks/model_requests.py)", "",
             "| run | requests/remember | prompt tokens | completion tokens "
             "| requests/compressed node |", "|---|---|---|---|---|"]
    for name, r in mr["runs"].items():
        pr, pc = r["per_remember"], r["per_compressed"]
        lines.append(f"| {name} | {pr['requests']:.1f} | {pr['prompt']:.0f} | "
                     f"{pr['completion']:.0f} | {pc['requests']:.2f} |")
    return [*lines, ""]


if __name__ == "__main__":
    raise SystemExit(main())
