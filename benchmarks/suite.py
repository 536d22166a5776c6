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

A measurement that raises becomes an error row (``errors`` in the JSON, ``**error**`` in the
Markdown) and the run goes on with every figure kept; ``main`` then returns 1, after writing
the results. A figure whose denominator is not above zero is null with its reason
(``not_measurable``), printed as "not measurable" with no ratio.
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
import stat
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
    ScanTiming,
    aged_slices,
    cpus,
    percentiles,
    sentence,
    time_compression,
)
from benchmarks._workload import check_against_remember, generate
from benchmarks.peers import Peer, Query, Snapshot, Timer, all_peers
from memory_rdf import Config, HeuristicModel, MemoryManager, Processed, SmallModel, Templates
from memory_rdf._oxigraph import AgentStore

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "results"
DEFAULT_WORK = HERE / ".work"

OXI_SEARCH = "oxigraph search"
OXI_RECALL = "oxigraph recall()"
REFERENCE = "python dict"
BOTH = "recall() both"
BOTH_SPARQL = "recall() both, SPARQL entry"

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


def disk_usage(path: Path, nodes: int, *,
               walk: Callable[[Path], Iterator[tuple[str, list[str], list[str]]]] = os.walk,
               ) -> dict[str, Any]:
    """Bytes of an Oxigraph (RocksDB) store: total, per node, and the table files (``.sst``)
    apart from the write-ahead log (``.log``).

    RocksDB removes files as it compacts, also while they are being measured: a file listed
    by ``walk`` and gone when its size is read is skipped (counted in ``vanished_files``), as
    is a directory gone before it is listed (``os.walk`` ignores it). ``walk`` is the
    directory walk, ``os.walk``'s signature (a test passes one that removes a file between
    listing it and measuring it)."""
    total = sst = wal = vanished = 0
    for root, _dirs, files in walk(path):
        for name in files:
            try:
                st = os.stat(os.path.join(root, name))
            except FileNotFoundError:
                vanished += 1
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            total += st.st_size
            if name.endswith(".sst"):
                sst += st.st_size
            elif name.endswith(".log"):
                wal += st.st_size
    return {"bytes": total, "per_node": total / max(1, nodes), "sst_bytes": sst,
            "wal_bytes": wal, "nodes": nodes, "vanished_files": vanished}


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


class InjectedFailure(RuntimeError):
    """The error ``--fail-measure NAME`` makes the measurement NAME raise (for testing)."""


#: The measurements of one store size, in the order they run: each one failing becomes an
#: error row (``errors`` of the results) and the others still run. ``--fail-measure`` takes
#: these names (and ``model_requests``, measured once per run).
MEASURES = (
    "disk_after_bulk_load", "open", "rss_fresh_process", "peers", "recall", "importance",
    "next_batch", "disk_sqlite_peer", "remember", "disk_after_writes", "disk_after_optimize",
    "disk_after_reopen", "compression_fast_model", "compression_builtin_model",
)


def error_row(exc: BaseException, **where: Any) -> dict[str, Any]:
    """What the results keep of a failed measurement: where (size, measure, engine), the
    error's type and message, and its traceback."""
    return {**where, "type": type(exc).__name__, "message": str(exc),
            "traceback": traceback.format_exception(exc)}


class SizeRun:
    def __init__(self, size: int, mode: Mode, args: argparse.Namespace, work: Path,
                 say: Callable[[str], None], step: Callable[[str], None]) -> None:
        self.size, self.mode, self.args, self.work = size, mode, args, work
        self.say = say
        self.at = "starting"  # the step running, named in the row of a size that failed

        def stepped(name: str) -> None:
            self.at = name
            step(name)

        self.step = stepped
        # The peers write every entry undated, with the Chinese templates (SPEC §5.4 v3 lets
        # templates fix one language): the texts stay comparable.
        self.config = Config(auto_compress=False, max_queue_size=1_000_000,
                             templates=Templates(memory="[记忆] {content}", language="zh"))
        self.out: dict[str, Any] = {"nodes_generated": size, "engines": {}, "recall": [],
                                    "metrics": {}, "mismatches": [], "errors": []}
        self.peers: list[Peer] = []

    # -- measurements that fail alone ----------------------------------------------------------

    def measure(self, key: str, fn: Callable[[], Any], engine: str = "memory_rdf", *,
                keep: bool = True) -> Any:
        """Run the measurement ``key``; its result goes to ``metrics[key]`` (with ``keep``;
        without, the measurement records its figures itself). An exception becomes an error row
        — ``metrics[key]`` holds it, ``errors`` lists it — and is logged; the run goes on,
        every figure already taken kept. Returns the result, or None after an error."""
        try:
            if key in self.args.fail_measure:
                raise InjectedFailure(f"made to fail with --fail-measure {key}")
            value = fn()
        except Exception as exc:
            self.error(key, exc, engine)
            return None
        if keep:
            self.out["metrics"][key] = value
        return value

    def error(self, key: str, exc: Exception, engine: str) -> None:
        row = error_row(exc, nodes=self.size, measure=key, engine=engine)
        self.out["errors"].append(row)
        self.out["metrics"][key] = {"status": "error", "engine": engine, "type": row["type"],
                                    "message": row["message"]}
        self.say(f"[bold red]{self.size:,} nodes: {key} ({engine}) FAILED, the run goes on: "
                 f"{row['type']}: {row['message']}\n{''.join(row['traceback'])}")

    # -- the whole size ------------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        out, cfg = self.out, self.config
        metrics: dict[str, Any] = out["metrics"]
        path = self.work / f"agent{self.size}"
        self.step("generating the store")
        start = time.perf_counter()
        generate(path, self.size, decay=self.args.decay, forgotten=self.args.forgotten,
                 progress=False)
        out["generate_s"] = time.perf_counter() - start
        self.measure("disk_after_bulk_load", lambda: disk_usage(path, 0))

        self.step("timing store opens")
        self.measure("open", lambda: self.open_times(path))
        self.measure("rss_fresh_process", lambda: fresh_process_rss(path))

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
            bulk = metrics["disk_after_bulk_load"]
            if bulk.get("status") != "error":
                bulk.update(nodes=stats["nodes"], per_node=bulk["bytes"] / max(1, stats["nodes"]))

            self.step("loading the peers")
            snapshot = self.measure("peers", lambda: self.load_peers(mem), keep=False)

            self.step("recall: every engine, every query")
            self.measure("recall", lambda: self.recall(mem, snapshot), keep=False)

            self.step("importance and next batch")
            self.measure("importance", lambda: self.importance(mem, snapshot))
            self.measure("next_batch", lambda: self.next_batch(mem))
            sqlite_peer = self.peer("sqlite")
            if sqlite_peer is not None:
                def sqlite_disk() -> dict[str, Any]:
                    disk = sqlite_peer.disk_bytes()  # type: ignore[attr-defined]
                    return {"bytes": disk, "per_node": disk / max(1, stats["nodes"])}

                self.measure("disk_sqlite_peer", sqlite_disk, engine=sqlite_peer.name)
            for peer in self.peers:
                peer.close()
            self.peers.clear()
            snapshot = None  # its memory goes before the remembers are timed
            gc.collect()

            self.step("remember throughput")
            self.measure("remember", lambda: self.remember(mem))

            self.step("disk after writing and after optimize()")
            def after_writes() -> dict[str, Any]:
                assert mem._store is not None
                mem._store.flush()
                metrics["nodes_after"] = mem._nodes.count()
                return disk_usage(path, metrics["nodes_after"])

            def after_optimize() -> dict[str, Any]:
                assert mem._store is not None
                nodes = metrics.get("nodes_after") or mem._nodes.count()
                start = time.perf_counter()
                mem._store.optimize()
                took = time.perf_counter() - start
                return {**disk_usage(path, nodes), "optimize_s": took}

            self.measure("disk_after_writes", after_writes)
            self.measure("disk_after_optimize", after_optimize)
        # the write-ahead log stays on disk after optimize() until the store is opened again
        with MemoryManager(path.name, data_dir=self.work, config=cfg, model=FastModel()):
            pass
        nodes_after = metrics.get("nodes_after", out["nodes"])
        self.measure("disk_after_reopen", lambda: disk_usage(path, nodes_after))

        self.step("compression scans")
        # Both models scan the same nodes in the same state: the built-in one on a copy.
        twin = self.work / f"{path.name}-twin"
        copied: Exception | None = None
        try:
            shutil.copytree(path, twin)
        except Exception as exc:  # the built-in model's row says so; FastModel's still runs
            copied = exc
        try:
            for key, name, model in (
                ("compression_fast_model", path.name, FastModel()),
                ("compression_builtin_model", twin.name, HeuristicModel()),
            ):
                def scans(name: str = name, model: SmallModel = model) -> dict[str, Any]:
                    if copied is not None and name == twin.name:
                        raise copied
                    with MemoryManager(name, data_dir=self.work, config=cfg,
                                       model=model) as mem:
                        if isinstance(mem._store, AgentStore):
                            mem._store.wait_mirror()  # steady state: not beside its build
                        return self.compression(mem)

                self.measure(key, scans, engine=type(model).__name__)
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
            except Exception as exc:  # a peer failing to load is an error row, not fatal
                engines[peer.name] = {"status": "failed", "reason": f"{type(exc).__name__}: {exc}"}
                self.out["errors"].append(error_row(exc, nodes=self.size, measure="peers",
                                                    engine=peer.name))
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
            return mem.recall(list(q.keywords), relations=rels, depth=q.depth, max_chars=0,
                              entry="focus")

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
        self.recall_both(mem, queries, timer)

    def recall_both(self, mem: MemoryManager, queries: Sequence[Query], timer: Timer) -> None:
        """The default recall (``entry="both"``, SPEC §5.5) against the SQLite peer answering
        it the same way (BM25 keyword seeds in SQL + recursive CTE walk), and the library with
        its keyword entry in SPARQL (the derived term index turned off: what it cost before),
        every query with keywords at every depth. The library ranks its results (SPEC §5.4
        v2/v3) and the peer returns the walk's order: the texts are compared as multisets of
        entries (:func:`_same_ranked`), as for the focus rows."""
        from memory_rdf._oxigraph import term_index

        sqlite = self.peer("sqlite")

        def oxi(q: Query, index: bool = True) -> str:
            rels = None if q.relations is None else list(q.relations)
            term_index.ENABLED = index
            try:
                return mem.recall(list(q.keywords), relations=rels, depth=q.depth, max_chars=0,
                                  entry="both")
            finally:
                term_index.ENABLED = True

        rows: list[dict[str, Any]] = []
        for q in queries:
            if not q.keywords:  # without keywords there is no keyword entry: "both" is "focus"
                continue
            calls: list[tuple[str, Callable[[], str]]] = [
                (BOTH, lambda q=q: oxi(q)), (BOTH_SPARQL, lambda q=q: oxi(q, False))]
            if sqlite is not None:
                calls.append((sqlite.name, lambda q=q: sqlite.recall_both(  # type: ignore[attr-defined]
                    q, mem.config.max_entry_nodes)))
            row: dict[str, Any] = {"query": q.label, "depth": q.depth, "limit": q.limit,
                                   "engines": {}}
            texts = {}
            for name, timing in round_robin(calls, timer, self._engine_failed).items():
                texts[name] = timing["text"]
                row["engines"][name] = summary(timing["samples_ms"])
            reference = texts.get(sqlite.name if sqlite is not None else BOTH, "")
            row["entries"] = 0 if not reference else reference.count(
                self.config.templates.entry_separator) + 1
            row["identical"] = True
            for name, text in texts.items():
                same = text == reference or _same_ranked(reference, text, q.limit, self.config)
                row["engines"][name]["identical"] = same
                if not same:
                    row["identical"] = False
                    where = _first_difference(reference, text)
                    self.out["mismatches"].append(
                        {"query": q.label, "depth": q.depth, "engine": name, "entry": "both",
                         "reference": sqlite.name if sqlite is not None else BOTH,
                         "difference": where})
                    self.say(f"[bold red]MISMATCH (both): {name} answered {q.label!r} at depth "
                             f"{q.depth} differently: {where}")
            rows.append(row)
        self.out["recall_both"] = rows

    def _engine_failed(self, name: str, exc: Exception) -> None:
        self.out["engines"][name] = {"status": "failed", "reason": f"{type(exc).__name__}: {exc}"}
        self.out["errors"].append(error_row(exc, nodes=self.size, measure="recall", engine=name))
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
            if not same and name in (OXI_SEARCH, OXI_RECALL) and row["keywords"]:
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

    def importance(self, mem: MemoryManager, snapshot: Snapshot | None) -> dict[str, Any]:
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
        return result

    def next_batch(self, mem: MemoryManager) -> dict[str, Any]:
        from memory_rdf._oxigraph import render

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
        return result

    # -- remember, disk, compression -----------------------------------------------------------

    def remember(self, mem: MemoryManager) -> dict[str, Any]:
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
        net = wall - timed.seconds
        floor = self._write_floor(mem, n, per, rng)
        out: dict[str, Any] = {
            "remembers": n, "nodes": nodes, "wall_s": wall, "model_s": timed.seconds,
            "model_calls": timed.calls,
            "nodes_per_s": nodes / net if net > 0 else None,
            "ms_per_remember": net * 1000 / n if net > 0 else None,
            "baseline_write_floor": {"nodes_per_s": nodes / floor if floor > 0 else None,
                                     "ms_per_remember": floor * 1000 / n},
        }
        if net <= 0:
            why = (f"model time ({timed.seconds:.3g} s) is not below the wall-clock time "
                   f"({wall:.3g} s)")
            out["not_measurable"] = {"nodes_per_s": why, "ms_per_remember": why}
        return out

    def _write_floor(self, mem: MemoryManager, n: int, per: int, rng: random.Random) -> float:
        """The same triples as ``n`` remembers, committed straight to the store (one update
        each): no journal, scheduler, model or reads. The cost floor of a remember."""
        from memory_rdf._links import LinkData
        from memory_rdf._nodes import NodeData
        from memory_rdf._oxigraph import WriteBatch
        from memory_rdf._remember import NEXT, PREVIOUS, new_node_id

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

    def compression(self, mem: MemoryManager) -> dict[str, Any]:
        slices = self.mode.slices or aged_slices(self.size)
        return {**compression_figures(time_compression(mem, slices)[""]), "slices": slices,
                "warmup_slices": WARMUP_SLICES}


def compression_figures(t: ScanTiming) -> dict[str, Any]:
    """The results' figures of timed compression slices: a figure that cannot be computed
    (its denominator not above zero) is null, and ``not_measurable`` says why."""
    out: dict[str, Any] = {
        "scans_per_s": t.per_s, "scans_per_s_excl_model": t.per_s_excl_model,
        "scans_per_cpu_s_excl_model": t.per_cpu_s_excl_model, "model_s": t.model_s,
        "process_cpu_us_per_scan": t.process_cpu_us_per_scan,
        "others_cpu_us_per_scan": t.others_cpu_us_per_scan,
        "ceiling_per_s": t.ceiling_per_s, "cpus": cpus(),
        "scanned": t.scans, "model_calls": t.model_calls,
        "wall_s": t.wall_s, "thread_cpu_s": t.cpu_s, "process_cpu_s": t.process_cpu_s,
    }
    names = {"per_s": "scans_per_s", "per_s_excl_model": "scans_per_s_excl_model",
             "per_cpu_s_excl_model": "scans_per_cpu_s_excl_model"}
    why = {names.get(k, k): v for k, v in t.not_measurable().items()
           if names.get(k, k) in out}
    if why:
        out["not_measurable"] = why
    return out


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


#: The fresh processes' own VmRSS (prefixed to each script below).
_RSS_FUNCTION = """
from pathlib import Path
def rss():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0
"""

_RSS_SCRIPT = _RSS_FUNCTION + """
import json, sys, time
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
        raise RuntimeError(f"the fresh process exited with {done.returncode}: "
                           f"{done.stderr.strip()[-500:]}")
    out = json.loads(done.stdout)
    # jieba's dictionary, loaded by the first Chinese keyword (the 登录 rows): once a process,
    # however many agents and nodes; measured on its own (issue 38, benchmarks/HISTORY.md)
    seg = subprocess.run([sys.executable, "-c", _SEGMENTER_SCRIPT], capture_output=True,
                         text=True, timeout=300, cwd=HERE.parent)
    if seg.returncode == 0:
        out["segmenter"] = json.loads(seg.stdout)["segmenter"]
    return {"status": "ok", **out}


_SEGMENTER_SCRIPT = _RSS_FUNCTION + """
import json
import memory_rdf
from memory_rdf._text import jieba_module
before = rss()
jieba_module()
print(json.dumps({"segmenter": rss() - before}))
"""


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
    """The library ranks the results of a query with keywords (SPEC §5.4 v2: two keywords or
    more; v3: of results that match alike, the later said first), so it is checked against the
    walk's answer as a multiset of entries; when the walk
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
        if size.get("status") == "skipped":
            lines += [f"## {size['nodes_generated']:,} nodes — skipped: {size['reason']}", ""]
            continue
        if size.get("status") == "failed":
            lines += [f"## {size['nodes_generated']:,} nodes — failed: {_cell(size['reason'])}",
                      "", "The figures taken before the failure:", ""]
        else:
            lines += [f"## {size['nodes']:,} nodes, {size['links']:,} links "
                      f"({size['dangling_links']:,} dangling)", ""]
        if size.get("recall"):
            lines += _recall_rows(size, names)
        if size.get("recall_both"):
            lines += _both_rows(size)
        if size.get("metrics"):
            lines += ["### Store operations (ratio = memory_rdf ÷ baseline, same run)", "",
                      "| metric | memory_rdf | baseline | baseline value | ratio |",
                      "|---|---|---|---|---|"]
            lines += [*_metric_rows(size), ""]
        lines += _engine_rows(size, names)
    lines += _model_rows(result)
    vectors = result.get("vector_entry") or {}
    if vectors.get("status") == "ok":
        lines += [*importlib.import_module("benchmarks.vector_entry").markdown_rows(vectors), ""]
    skipped = result.get("skipped", [])
    if skipped:
        lines += ["## Skipped", ""] + [f"- {s}" for s in skipped] + [""]
    errors = result.get("errors", [])
    if errors:
        lines += ["## Errors", "",
                  f"**{len(errors)} measurement(s) failed**; every other row above was taken "
                  "(the tracebacks are in the JSON).", ""]
        for e in errors:
            where = f"{e['nodes']:,} nodes, " if "nodes" in e else ""
            lines.append(f"- {where}{e['measure']} ({e['engine']}): {e['type']}: "
                         f"{_cell(e['message'])}")
        lines.append("")
    mismatches = result.get("mismatches", [])
    lines += ["## Identical answers", "",
              "**every engine returned the identical recall text**" if not mismatches else
              f"**{len(mismatches)} MISMATCHES** — see the JSON", ""]
    return "\n".join(lines)


def _recall_rows(size: dict[str, Any], names: list[str]) -> list[str]:
    lines = ["### Recall latency: p50 ms (× the python dict reference's p50)", ""]
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
    return [*lines, ""]


def _both_rows(size: dict[str, Any]) -> list[str]:
    """The ``entry="both"`` rows: p50 ms, × the SQLite peer's, and the geometric mean."""
    rows = size["recall_both"]
    shown = list(dict.fromkeys(n for r in rows for n in r["engines"]))
    base = next((n for n in shown if n.startswith("sqlite")), None)
    lines = ['### Recall, entry="both" (SPEC §5.5): p50 ms (× the SQLite peer\'s p50)', "",
             "| depth | keywords / relations | entries | " + " | ".join(shown)
             + " | identical |", "|---|---|---|" + "---|" * len(shown) + "---|"]
    for row in rows:
        b50 = row["engines"].get(base, {}).get("p50_ms") if base else None
        cells = []
        for name in shown:
            e = row["engines"].get(name)
            if e is None:
                cells.append("—")
            elif b50:
                cells.append(f"{e['p50_ms']:.3g} (×{e['p50_ms'] / b50:.3g})")
            else:
                cells.append(f"{e['p50_ms']:.3g}")
        lines.append(f"| {row['depth']} | {row['query']} | {row['entries']} | "
                     + " | ".join(cells) + f" | {'yes' if row['identical'] else '**NO**'} |")
    for depth in DEPTHS:
        means = {}
        for name in shown:
            vals = [r["engines"][name]["p50_ms"] for r in rows
                    if r["depth"] == depth and name in r["engines"]]
            if vals:
                means[name] = math.exp(statistics.fmean(math.log(max(v, 1e-6)) for v in vals))
        ref = means.get(base) if base else None
        cells = [f"{v:.3g}" + (f" (×{v / ref:.3g})" if ref else "") for v in means.values()]
        lines.append(f"| {depth} | geometric mean | | " + " | ".join(cells) + " | |")
    return [*lines, ""]


def _engine_rows(size: dict[str, Any], names: list[str]) -> list[str]:
    if not size.get("engines"):
        return []
    lines = ["### Engines", "", "| engine | status | load s | memory |", "|---|---|---|---|"]
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
    return lines


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
    """The rows of the store operations table: a failed measurement's row says its error, a
    figure that could not be computed says "not measurable" and why, with no ratio."""
    metrics = size["metrics"]
    rows: list[str] = []
    for key, value in metrics.items():
        if isinstance(value, dict) and value.get("status") == "error":
            rows.append(f"| {key} ({value['engine']}) | **error**: {value['type']}: "
                        f"{_cell(value['message'])} | | | |")
    m = {k: v for k, v in metrics.items()
         if not (isinstance(v, dict) and v.get("status") == "error")}

    def why(d: dict[str, Any], key: str) -> str | None:
        return (d.get("not_measurable") or {}).get(key)

    def row(metric: str, value: float | None, unit: str, baseline: str, base: float | None,
            value_why: str | None = None, base_why: str | None = None) -> None:
        shown = f"{value:.4g} {unit}" if value is not None else _not_measurable(value_why)
        if base is None:
            based = _not_measurable(base_why) if base_why else ""
        else:
            based = f"{base:.4g} {unit}"
        ratio = ""
        if value is not None and base is not None:
            ratio = (f"×{value / base:.3g}" if base > 0 else
                     "not measurable (the baseline is not above zero)")
        rows.append(f"| {metric} | {shown} | {baseline} | {based} | {ratio} |")

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
        floor = rem["baseline_write_floor"]
        row("remember, model time excluded", rem["ms_per_remember"], "ms/remember",
            "same triples, one update() each", floor["ms_per_remember"],
            why(rem, "ms_per_remember"))
        rates = [(f"{v:.4g} nodes/s" if v is not None else _not_measurable(why(d, "nodes_per_s")))
                 for d in (rem, floor) for v in [d["nodes_per_s"]]]
        rows.append(f"| remember throughput | {rates[0]} | write floor | {rates[1]} | |")
    fast, builtin = m.get("compression_fast_model"), m.get("compression_builtin_model")
    if fast or builtin:
        b, f = builtin or {}, fast or {}
        def fig(d: dict[str, Any], key: str) -> tuple[float | None, str | None]:
            if not d:
                return None, NOT_MEASURED
            return d.get(key), why(d, key)

        def pair(metric: str, key: str, unit: str, baseline: str) -> None:
            value, value_why = fig(b, key)
            base, base_why = fig(f, key)
            row(metric, value, unit, baseline, base, value_why, base_why)

        pair(f"compression scans/s, built-in model ({b.get('model_calls', '?')} calls in "
             f"{b.get('scanned', '?')} scans)", "scans_per_s", "scans/s",
             f"FastModel, same nodes ({f.get('model_calls', '?')} calls)")
        pair("compression scans/s, built-in model, model time excluded",
             "scans_per_s_excl_model", "scans/s", "FastModel, model time excluded")
        pair("compression scans per CPU second of its thread, built-in model, model time "
             "excluded", "scans_per_cpu_s_excl_model", "scans/s", "FastModel, the same")
        pair("compression: CPU of the whole process per scan, built-in model, model time "
             "excluded (other threads — store owner, RocksDB: "
             f"{_microseconds(b.get('others_cpu_us_per_scan'))})",
             "process_cpu_us_per_scan", "µs",
             f"FastModel, the same (other threads: "
             f"{_microseconds(f.get('others_cpu_us_per_scan'))})")
        pair(f"compression: most scans/s {b.get('cpus', f.get('cpus', '?'))} CPUs allow at "
             "that cost (a model that takes no time), built-in model", "ceiling_per_s",
             "scans/s", "FastModel, the same")
    sq = m.get("disk_sqlite_peer", {}).get("per_node")
    for key, label in (("disk_after_bulk_load", "disk/node after bulk load"),
                       ("disk_after_writes", "disk/node after remembers"),
                       ("disk_after_optimize", "disk/node after optimize()"),
                       ("disk_after_reopen", "disk/node after reopen")):
        if key in m:
            d = m[key]
            gone = d.get("vanished_files", 0)
            what = (f"{label} (sst {d['sst_bytes'] / max(1, d['nodes']):.4g} B, "
                    f"WAL {d['wal_bytes'] / max(1, d['nodes']):.4g} B"
                    + (f"; {gone} files vanished while measured, skipped" if gone else "")
                    + ")")
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
        if fresh.get("segmenter"):
            rest = fresh["after_recalls"] - fresh.get("after_mirror", fresh["after_open"])
            rows.append(
                f"| of the recalls' growth: Chinese word segmenter (jieba, once a process) | "
                f"{fresh['segmenter'] / mb:.0f} MB | the rest (term index...) | "
                f"{(rest - fresh['segmenter']) / mb:.0f} MB | |")
    rss = [size.get(k) for k in ("rss_after_open_bytes", "rss_end_bytes", "rss_peak_bytes")]
    if any(v is not None for v in rss):
        shown = " / ".join("—" if v is None else f"{v / 2**20:.0f}" for v in rss)
        rows.append(f"| RSS of the benchmark process after open / end / peak | {shown} MB "
                    "| | | |")
    return rows


#: What a figure's cell says when its measurement failed (its error row says why).
NOT_MEASURED = "not measured (see its error row)"


def _not_measurable(why: str | None) -> str:
    if why == NOT_MEASURED:
        return why
    return "not measurable" + (f" ({_cell(why)})" if why else "")


def _microseconds(value: float | None) -> str:
    return "not measurable" if value is None else f"{value:.4g} µs"


def _cell(text: str) -> str:
    """``text`` fit for one Markdown table cell: one line, no column bar."""
    return " ".join(text.split()).replace("|", "\\|")


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
    parser.add_argument("--fail-measure", action="append", default=[], metavar="NAME",
                        help="make the measurement NAME raise, to check that the run goes on "
                             "and keeps the other rows (for testing; comma-separated or "
                             "repeated; names: " + ", ".join([*MEASURES, "model_requests"])
                             + ")")
    args = parser.parse_args(argv)
    args.fail_measure = {n.strip() for item in args.fail_measure for n in item.split(",")
                         if n.strip()}
    unknown = sorted(args.fail_measure - {*MEASURES, "model_requests"})
    if unknown:
        parser.error(f"--fail-measure: unknown measurement {', '.join(unknown)} (names: "
                     + ", ".join([*MEASURES, "model_requests"]) + ")")
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
    """Run the suite; returns 0, or 1 when an engine answered differently or a measurement
    failed (its error row is in the results, written first, beside every other row)."""
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
        "sizes": [], "skipped": [], "mismatches": [], "errors": [],
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
                except Exception as exc:  # what was measured stays; the run fails (exit 1)
                    reason = f"{type(exc).__name__}: {exc} (while {run.at})"
                    say(f"[bold red]{size:,} nodes FAILED while {run.at}, the figures taken "
                        f"are kept: {reason}\n{traceback.format_exc()}")
                    out = run.out
                    out.update(status="failed", reason=reason)
                    out["errors"].append(error_row(exc, nodes=size, measure=run.at,
                                                   engine="memory_rdf"))
                    for peer in run.peers:
                        with contextlib.suppress(Exception):
                            peer.close()
                optimized = out["metrics"].get("disk_after_optimize", {}).get("per_node")
                if optimized is not None:
                    per_node = max(per_node, optimized)
                result["sizes"].append(out)
                result["mismatches"] += [{"nodes": size, **m} for m in out["mismatches"]]
                result["errors"] += out.pop("errors")
                for name, e in out["engines"].items():
                    if e["status"] != "ok":
                        result["skipped"].append(f"{name} at {size:,} nodes: {e['reason']}")
            result["model_requests"] = _model_requests(
                say, quick=not args.full, fail="model_requests" in args.fail_measure)
            requests = result["model_requests"]
            if requests["status"] == "failed":
                result["errors"].append({"measure": "model_requests",
                                         "engine": "memory_rdf", **requests["error"]})
            elif requests["status"] != "ok":
                result["skipped"].append(f"model requests: {requests['reason']}")
            vectors = result["vector_entry"] = _vector_entry(say, quick=not args.full)
            if vectors["status"] == "failed":
                result["errors"].append({"measure": "vector_entry", "engine": "memory_rdf",
                                         **vectors["error"]})
            elif vectors["status"] != "ok":
                result["skipped"].append(f"vector entry: {vectors['reason']}")
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
    failed = 0
    if result["mismatches"]:
        print(f"{len(result['mismatches'])} MISMATCH(ES): see {base}.json", file=sys.stderr)
        failed = 1
    if result["errors"]:
        print(f"{len(result['errors'])} MEASUREMENT(S) FAILED, the other rows kept: see the "
              f"errors in {base}.json and {base}.md", file=sys.stderr)
        failed = 1
    return failed


def _model_requests(say: Callable[[str], None], *, quick: bool,
                    fail: bool = False) -> dict[str, Any]:
    """Model requests and tokens per remember, from ``benchmarks/model_requests.py`` (another
    benchmark: a real manager against a loopback fake LLM server) when it is importable."""
    try:
        module = importlib.import_module("benchmarks.model_requests")
    except Exception as exc:
        msg = f"benchmarks/model_requests.py not importable ({exc}): model requests not measured"
        say(f"[yellow]{msg}")
        return {"status": "skipped", "reason": msg}
    try:
        if fail:
            raise InjectedFailure("made to fail with --fail-measure model_requests")
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
        return {"status": "failed", "reason": msg, "error": error_row(exc)}


def _vector_entry(say: Callable[[str], None], *, quick: bool) -> dict[str, Any]:
    """The semantic entry's figures (``benchmarks/vector_entry.py``: nearest() at 10k, exact,
    and 100k, two-stage, with random vectors too with --full; the semantic recall against the
    keyword entry), when numpy is there."""
    try:
        module = importlib.import_module("benchmarks.vector_entry")
    except ImportError as exc:
        msg = f"benchmarks/vector_entry.py not importable ({exc}): pip install '.[embeddings]'"
        say(f"[yellow]{msg}")
        return {"status": "skipped", "reason": msg}
    try:
        return {"status": "ok", **module.suite_metrics(quick=quick)}
    except Exception as exc:
        msg = f"benchmarks/vector_entry.py failed: {type(exc).__name__}: {exc}"
        say(f"[red]{msg}")
        return {"status": "failed", "reason": msg, "error": error_row(exc)}


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
