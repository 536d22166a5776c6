"""Shared pieces of the benchmarks: a fast deterministic model, workload text, timing."""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable

from memory_rdf import Processed

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
