"""Model requests and tokens per remember and per compressed node: naive vs batched.

Runs a real MemoryManager against the loopback fake LLM server (``benchmarks/_fake_llm.py``,
Ollama or OpenAI protocol) with the real prompts, and counts what reaches the server:

* **naive**: the model wrapped so that ``process_batch``/``relation_batch`` are hidden; the
  manager falls back to one request per segment and one per (new node, focus node) pair;
* **batched**: the HTTP model as shipped: segment + process_batch + relation_batch.

Workload: ``--remembers`` remembers of ``--segments`` chat lines each (Chinese and English
runs), ``focus_limit`` 5, so from the second remember on, each one puts 5 segments into 5
focus nodes. Per-remember numbers are over those steady-state remembers. Then compression
slices run (``decay_rate`` 0.5 so nodes age fast) and requests per compressed node are counted.
Token counts are the fake server's estimate (1 per Han character, 1 per 4 other characters,
4 per message) of the real prompts and answers; the model's own ``usage()`` is checked
against them.

    python benchmarks/model_requests.py [--backend ollama|openai] [--remembers 6] [--segments 5]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import WORDS_EN, WORDS_ZH  # noqa: E402
from benchmarks._fake_llm import FAKE_MODEL, FakeLLM  # noqa: E402
from memory_rdf import Config, MemoryManager, Processed  # noqa: E402
from memory_rdf.small_model import HTTPModel, OllamaModel, OpenAIModel  # noqa: E402


class Unbatched:
    """The model without its batched forms: the manager makes one call per item."""

    def __init__(self, model: HTTPModel) -> None:
        self.model = model

    def segment(self, text: str) -> list[str]:
        return self.model.segment(text)

    def process(self, text: str, target_length: int | None = None) -> Processed:
        return self.model.process(text, target_length)

    def relation(self, node_content: str, focus_content: str) -> str:
        return self.model.relation(node_content, focus_content)


def chat_line(rng: random.Random, lang: str, i: int) -> dict[str, str]:
    role = "user" if i % 2 == 0 else "assistant"
    if lang == "zh":
        a, b, c = rng.sample(WORDS_ZH, 3)
        text = f"第{i}条：{a}模块的{b}需要在周三前和{c}一起检查，张伟负责跟进"
    else:
        a, b, c = rng.sample(WORDS_EN, 3)
        text = f"item {i}: the {a} service needs its {b} checked with {c} before Wednesday"
    return {"role": role, "content": text}


def run(backend: str, lang: str, mode: str, remembers: int, segments: int,
        tmp: Path) -> dict[str, Any]:
    rng = random.Random(7)
    config = Config(auto_compress=False, retry_initial_delay=0, retry_max_delay=0,
                    decay_rate=0.5)
    with FakeLLM() as server:
        model: HTTPModel
        if backend == "ollama":
            model = OllamaModel(FAKE_MODEL, server.url)
        else:
            model = OpenAIModel(FAKE_MODEL, server.openai_url)
        with model, MemoryManager(f"{lang}-{mode}", data_dir=tmp, config=config,
                                  model=model if mode == "batched" else Unbatched(model)) as mem:
            steady = {"requests": 0, "prompt": 0, "completion": 0}
            for r in range(remembers):
                before_n, (before_p, before_c) = server.count(), server.tokens()
                mem.remember([chat_line(rng, lang, r * segments + i) for i in range(segments)])
                assert mem.wait_idle(60)
                if r > 0:
                    p, c = server.tokens()
                    steady["requests"] += server.count() - before_n
                    steady["prompt"] += p - before_p
                    steady["completion"] += c - before_c
            assert mem.failed_tasks() == [] and mem.stats()["nodes"] == remembers * segments
            before_n, (before_p, before_c) = server.count(), server.tokens()
            compressed = 0
            start = time.perf_counter()
            for _ in range(12):
                compressed += mem.run_compression_slice()["compressed"]
            elapsed = time.perf_counter() - start
            p, c = server.tokens()
            comp = {"requests": server.count() - before_n, "prompt": p - before_p,
                    "completion": c - before_c}
            usage = model.usage()
            assert (usage["prompt_tokens"], usage["completion_tokens"]) == server.tokens()
            assert usage["requests"] == server.count()
    n = remembers - 1
    return {
        "per_remember": {k: v / n for k, v in steady.items()},
        "compressed": compressed,
        "per_compressed": {k: v / max(compressed, 1) for k, v in comp.items()},
        "compression_seconds": elapsed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=("ollama", "openai"), default="ollama")
    parser.add_argument("--remembers", type=int, default=6)
    parser.add_argument("--segments", type=int, default=5)
    args = parser.parse_args()
    if args.remembers < 2 or args.segments < 1:
        parser.error("need --remembers >= 2 and --segments >= 1")
    print(
        f"{args.remembers} remembers x {args.segments} segments, focus_limit 5, backend "
        f"{args.backend} (fake server on 127.0.0.1); per remember: remembers 2..{args.remembers} "
        f"({args.segments} segments into 5 focus nodes)\n"
    )
    print(f"{'':<14}{'per remember':^34}   | {'per compression (process with target)':^38}")
    header = (f"{'lang':<5}{'mode':<9}{'requests':>10}{'prompt tok':>12}{'compl. tok':>12}"
              f"   | {'compressions':>12}{'requests':>10}{'prompt tok':>12}{'compl. tok':>12}")
    print(header)
    print("-" * len(header))
    with tempfile.TemporaryDirectory() as tmp:
        for lang in ("zh", "en"):
            results = {}
            for mode in ("naive", "batched"):
                res = run(args.backend, lang, mode, args.remembers, args.segments, Path(tmp))
                results[mode] = res
                pr, pc = res["per_remember"], res["per_compressed"]
                print(
                    f"{lang:<5}{mode:<9}{pr['requests']:>10.1f}{pr['prompt']:>12.0f}"
                    f"{pr['completion']:>12.0f}   | {res['compressed']:>12}"
                    f"{pc['requests']:>10.2f}{pc['prompt']:>12.0f}{pc['completion']:>12.0f}"
                )
            naive, batched = results["naive"]["per_remember"], results["batched"]["per_remember"]
            print(
                f"{'':<5}{'naive/batched':<14}{naive['requests'] / batched['requests']:>4.1f}x"
                f"{naive['prompt'] / batched['prompt']:>11.1f}x"
                f"{naive['completion'] / batched['completion']:>11.1f}x"
            )
    print("\nrequests and tokens per remember are the server's counts; tokens are its estimate.")


if __name__ == "__main__":
    main()
