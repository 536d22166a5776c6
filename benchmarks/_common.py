"""Shared pieces of the benchmarks: a fast deterministic model, workload text, timing."""

from __future__ import annotations

import os
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memory_rdf import Processed

if TYPE_CHECKING:
    from memory_rdf import MemoryManager, SmallModel

WORDS_ZH = ["登录", "支付", "订单", "数据库", "缓存", "发布", "测试", "预算", "会议", "接口",
            "前端", "后端", "部署", "日志", "监控", "权限", "用户", "商品", "库存", "退款"]
WORDS_EN = ["login", "payment", "order", "database", "cache", "release", "test", "budget",
            "meeting", "api", "frontend", "backend", "deploy", "logs", "metrics", "token"]


class FastModel:
    """A deterministic small model with no language work: benchmarks measure the store."""

    def segment(self, text: str) -> list[str]:
        return [line.partition(": ")[2] or line for line in text.split("\n") if line.strip()]

    def process(self, text: str, target_length: int | None = None) -> Processed:
        content = text if target_length is None else text[:target_length]
        words = [w for w in content.replace("，", " ").split() if len(w) > 1][:4]
        return Processed(content, content[:16], words or [content[:4]])

    def relation(self, node_content: str, focus_content: str) -> str:
        return "涉及" if node_content[:2] == focus_content[:2] else ""


def sentence(rng: random.Random, i: int) -> str:
    if rng.random() < 0.5:
        picked = rng.sample(WORDS_ZH, 3)
        return f"第{i}条：{picked[0]}模块 {picked[1]} 需要和 {picked[2]} 一起检查"
    picked = rng.sample(WORDS_EN, 3)
    return f"note {i}: the {picked[0]} service needs {picked[1]} and {picked[2]} checks"


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    return statistics.median(ordered), p95


def timed(fn: Callable[[], object], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return out


#: Compression slices run untimed after an open, before the timed ones: the first ~1,000
#: scans after an open (10 slices of 100) ran ~20% slower at 100k nodes (block cache, page cache;
#: PROFILE.md, "fourth pass").
WARMUP_SLICES = 10


def aged_slices(nodes: int, most: int = 30) -> int:
    """Timed compression slices of 100 scans that stay, after the warm-up, among the generated
    workload's aged nodes (its oldest fifth at the default ``--decay`` 120, below importance 1:
    each of their scans compresses the node, the worst case the figure is for): 6 at 10k nodes
    (the aged ones last ~1,700 scans there), ``most`` from ~50k. Below ~7k nodes the warm-up
    alone runs past them: the one slice timed there compresses nothing (the scripts print the
    model calls beside every figure)."""
    return max(1, min(most, (nodes // 5 - 400) // 100 - WARMUP_SLICES))


@dataclass
class ScanTiming:
    """Compression slices timed by :func:`time_compression`.

    A figure whose denominator is not above zero is ``None``, and :meth:`not_measurable`
    says why: the model's time is wall-clock time, and on a loaded machine the thread can
    be off the CPU for much of a model call, so "CPU time minus model time" can come out at
    or below zero — a rate computed from it (once clamped to 1e-9 s) read 6e+11 scans/s."""

    scans: int = 0
    model_calls: int = 0
    wall_s: float = 0.0
    cpu_s: float = 0.0  # the compression thread's own CPU time
    #: the whole process's CPU time: the compression thread and RocksDB's own threads (its
    #: memtable flushes and the compactions the scans' writes set off), every CPU summed
    process_cpu_s: float = 0.0
    model_s: float = 0.0  # inside the model's calls (``Compressor.stats.seconds``)

    @property
    def per_s(self) -> float | None:
        return self._figures()["per_s"][0]

    @property
    def per_s_excl_model(self) -> float | None:
        return self._figures()["per_s_excl_model"][0]

    @property
    def per_cpu_s_excl_model(self) -> float | None:
        return self._figures()["per_cpu_s_excl_model"][0]

    @property
    def thread_cpu_us_per_scan(self) -> float | None:
        """The compression thread's CPU time per scan, model time excluded."""
        return self._figures()["thread_cpu_us_per_scan"][0]

    @property
    def process_cpu_us_per_scan(self) -> float | None:
        """CPU time of the whole process per scan, model time excluded (the built-in model
        and FastModel compute on the compression thread: their time is CPU time)."""
        return self._figures()["process_cpu_us_per_scan"][0]

    @property
    def others_cpu_us_per_scan(self) -> float | None:
        """CPU time of the process's other threads per scan: the store's owner applying the
        scans' updates to RocksDB while the compression thread applies them to the read
        mirror, RocksDB's memtable flushes and the compactions the writes set off."""
        return self._figures()["others_cpu_us_per_scan"][0]

    @property
    def ceiling_per_s(self) -> float | None:
        """The most scans/s this machine's CPUs allow at that cost, with a model that takes
        no time: every CPU the process may run on, busy with nothing else. (The measured
        rate excluding the model can pass it: the other threads also run while the model
        computes.)"""
        return self._figures()["ceiling_per_s"][0]

    def not_measurable(self) -> dict[str, str]:
        """Why each figure that is ``None`` could not be computed, by property name."""
        return {name: why for name, (value, why) in self._figures().items() if value is None
                and why is not None}

    def _figures(self) -> dict[str, tuple[float | None, str | None]]:
        scans = self.scans
        wall, cpu, process, model = self.wall_s, self.cpu_s, self.process_cpu_s, self.model_s
        no_scans = "no scan was timed"

        def over(num: float, den: float, why: str) -> tuple[float | None, str | None]:
            return (num / den, None) if den > 0 else (None, why)

        def per_scan(cpu_s: float, why: str) -> tuple[float | None, str | None]:
            if scans <= 0:
                return None, no_scans
            return (cpu_s * 1e6 / scans, None) if cpu_s > 0 else (None, why)

        model_over_thread = (f"model time ({model:.3g} s, wall-clock) exceeded the compression "
                             f"thread's CPU time ({cpu:.3g} s): the machine was too loaded")
        model_over_process = (f"model time ({model:.3g} s, wall-clock) exceeded the process's "
                              f"CPU time ({process:.3g} s): the machine was too loaded")
        process_cpu = per_scan(process - model, model_over_process)
        others: tuple[float | None, str | None]
        if scans <= 0:
            others = (None, no_scans)
        elif process < cpu:
            others = (None, f"the process's CPU time ({process:.3g} s) is below its "
                            f"compression thread's ({cpu:.3g} s)")
        else:
            others = ((process - cpu) * 1e6 / scans, None)
        ceiling: tuple[float | None, str | None] = (
            (None, process_cpu[1]) if process_cpu[0] is None
            else (cpus() * 1e6 / process_cpu[0], None))
        return {
            "per_s": over(scans, wall, "no wall-clock time was timed"),
            "per_s_excl_model": over(
                scans, wall - model, f"model time ({model:.3g} s) is not below the "
                                     f"wall-clock time ({wall:.3g} s)"),
            "per_cpu_s_excl_model": over(scans, cpu - model, model_over_thread),
            "thread_cpu_us_per_scan": per_scan(cpu - model, model_over_thread),
            "process_cpu_us_per_scan": process_cpu,
            "others_cpu_us_per_scan": others,
            "ceiling_per_s": ceiling,
        }


def figure(value: float | None, spec: str = ",.0f", why: str | None = None) -> str:
    """``value`` formatted with ``spec``, or "not measurable (why)" when it is ``None``."""
    if value is None:
        return "not measurable" + (f" ({why})" if why else "")
    return format(value, spec)


def cpus() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def time_compression(
    mem: MemoryManager, slices: int, models: Sequence[tuple[str, SmallModel]] | None = None,
    *, warmup: int = WARMUP_SLICES,
) -> dict[str, ScanTiming]:
    """``slices`` compression slices (``mem.run_compression_slice()``) for each (label, model)
    of ``models`` (default: the manager's own model, label ""), taking turns slice by slice
    on the same store, so that each meets the same state and the same load; ``warmup``
    untimed slices for each go first, taking turns the same way.

    The thread's CPU time counts only the scheduler thread (``time.thread_time``, read in that
    thread around each slice): steadier than wall-clock time on a shared, loaded machine, and
    blind to background threads (RocksDB's own, a background flush). The process's CPU time
    (``time.process_time``) counts those too: what the scans cost the machine in all."""
    comp = mem._compressor
    turns = list(models) if models is not None else [("", comp.model)]
    timings = {label: ScanTiming() for label, _ in turns}
    run_slice = comp.run_slice
    cpu = 0.0

    def timed_slice():  # type: ignore[no-untyped-def]
        nonlocal cpu
        start = time.thread_time()
        try:
            return (yield from run_slice())
        finally:
            cpu += time.thread_time() - start

    comp.run_slice = timed_slice  # type: ignore[method-assign]
    try:
        for _ in range(warmup):
            for _label, model in turns:
                comp.model = model
                mem.run_compression_slice()
        for _ in range(slices):
            for label, model in turns:
                comp.model = model
                timing = timings[label]
                model_before, cpu_before = comp.stats.seconds, cpu
                process_before = time.process_time()
                start = time.perf_counter()
                report = mem.run_compression_slice()
                timing.wall_s += time.perf_counter() - start
                timing.process_cpu_s += time.process_time() - process_before
                timing.cpu_s += cpu - cpu_before
                timing.model_s += comp.stats.seconds - model_before
                timing.scans += report["scanned"]
                timing.model_calls += report["model_calls"]
    finally:
        del comp.run_slice
        comp.model = turns[0][1]
    return timings
