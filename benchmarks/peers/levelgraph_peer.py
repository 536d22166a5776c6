"""LevelGraph peer: a Node.js process (``levelgraph/walk.js``) answering the same walk.

The graph is exported as JSON (nodes with content, phrase, keywords; links with strength and
relation, dangling ones included), the queries with the seeds and templates; the script loads
LevelGraph (memory-level backend), answers and times every query itself and prints one JSON
object. It runs after the in-process engines rather than taking turns with them, so it times
every query in two passes and keeps the one with the lower median, each after a full garbage
collection (untimed). Its dependencies are installed with npm into
``levelgraph/node_modules`` (gitignored) the first time the peer runs; without node or npm
the peer is skipped with the reason.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from benchmarks.peers import Peer, Query, Snapshot, Timer
from memory_rdf._oxigraph import AgentStore

HERE = Path(__file__).resolve().parent / "levelgraph"
INSTALL_TIMEOUT = 300


def ensure_installed() -> str | None:
    """Install the script's npm dependencies when missing; None on success, else why not."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        missing = " and ".join(n for n, p in (("node", node), ("npm", npm)) if p is None)
        return f"{missing} not found on PATH (install Node.js >= 18 to run the LevelGraph peer)"
    if (HERE / "node_modules" / "levelgraph").is_dir() and (
        HERE / "node_modules" / "memory-level"
    ).is_dir():
        return None
    try:
        done = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=HERE, capture_output=True, text=True, timeout=INSTALL_TIMEOUT,
            env={**os.environ, "npm_config_update_notifier": "false"},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"npm install failed: {exc}"
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        return "npm install failed: " + " | ".join(tail)
    return None


class LevelGraphPeer(Peer):
    name = "levelgraph (node)"
    #: ~20 triples and 6 LevelDB keys per triple per node, in the node process's heap.
    default_max_nodes = 100_000

    def available(self) -> str | None:
        return ensure_installed()

    def load(self, snapshot: Snapshot, store: AgentStore, workdir: Any) -> None:
        self.snap = snapshot
        self.workdir = Path(workdir)
        self.graph_path = self.workdir / "levelgraph-graph.json"
        with self.graph_path.open("w", encoding="utf-8") as f:
            json.dump({
                "nodes": [[n, r.content, r.phrase, list(r.keywords)]
                          for n, r in snapshot.nodes.items()],
                "links": snapshot.links,
            }, f, ensure_ascii=False)

    def run(self, queries: Sequence[Query], timer: Timer) -> list[dict[str, Any]]:
        spec = {
            "seeds": self.snap.focus,
            "threshold": self.snap.threshold,
            "templates": asdict(self.snap.templates),
            "queries": [
                {"keywords": list(q.keywords),
                 "relations": None if q.relations is None else list(q.relations),
                 "depth": q.depth, "limit": q.limit}
                for q in queries
            ],
            "repeat": timer.repeat,
            "min_repeat": timer.min_repeat,
            "budget_ms": timer.budget_s * 1000,
        }
        spec_path = self.workdir / "levelgraph-queries.json"
        spec_path.write_text(json.dumps(spec, ensure_ascii=False), encoding="utf-8")
        done = subprocess.run(
            ["node", "--max-old-space-size=8192", "--expose-gc", str(HERE / "walk.js"),
             str(self.graph_path), str(spec_path)],
            capture_output=True, text=True, encoding="utf-8",
        )
        if done.returncode != 0:
            raise RuntimeError(f"levelgraph walk.js failed: {done.stderr.strip()[-2000:]}")
        out = json.loads(done.stdout)
        self.reported_load_ms = float(out["load_ms"])
        self.reported_rss_bytes = int(out["rss_bytes"])
        self.triples = int(out["triples"])
        return [{"text": r["text"], "samples_ms": r["samples_ms"]} for r in out["results"]]

    def close(self) -> None:
        path = getattr(self, "graph_path", None)
        if path is not None:
            path.unlink(missing_ok=True)
