"""What the semantic entry (SPEC §5.7) costs: the in-memory vector search and the recall.

* ``nearest()`` p50/p95 of the in-memory index (``memory_rdf._vectors.VectorIndex``) at 10k
  and 100k nodes, dimension 384 (the size of all-MiniLM-L6-v2's vectors), 30 neighbours
  (3 × ``max_entry_nodes``: what one recall asks). Below ``APPROXIMATE_FROM`` (20k) vectors
  the search is exact; from there on two-stage (a sketch on the principal axes, then exact
  scores of its best candidates), so each row says which, its recall@30 against the exact
  search over the same queries, and the sketch's fit (done once, by the first search).
  Baseline, measured in the same run: the bare matrix-vector product over the same matrix,
  numpy's ``einsum`` as the exact search uses it (the floor of any exact scan of it): the
  ratio is what the index adds (below 1: the two-stage search scans less than that).
  The vectors are synthetic but shaped like MiniLM's (:func:`minilm_like`); the row "no
  structure" is random unit vectors, where the fit keeps the exact search.
* with ``--vectors FILE.npz`` (an embedding server's vector cache, e.g. the one
  ``recall_quality.py --embedder minilm`` fills under ``benchmarks/.work/embeddings/``) and
  ``--data`` (LoCoMo): recall@30 of the two-stage search on real MiniLM vectors, LoCoMo's
  questions asked (:func:`real_recall`).
* recall p50 through the public ``recall()`` on a 10k-node agent store (the workload of
  ``benchmarks/_workload.py``, its vectors bulk-loaded into the vectors graph) with
  ``entry="semantic"`` and ``entry="both"`` against ``entry="keywords"`` on the same store
  (the baseline). The query's embedding is excluded: the embedder here is in process and
  caches, as a real server's time is the server's (measured apart by benchmarks that run
  one).
* bytes per node: in memory (the matrix row) and in the store (the base64 literal).

    python benchmarks/vector_entry.py [--sizes 10000 100000] [--recall-nodes 10000] [--repeat 30]
        [--vectors .work/embeddings/all-MiniLM-L6-v2.npz --data ../shared/data/locomo-dev]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import pyoxigraph as ox  # noqa: E402

from benchmarks._common import percentiles  # noqa: E402
from benchmarks._workload import generate  # noqa: E402
from memory_rdf import Config, MemoryManager  # noqa: E402
from memory_rdf._vectors import (  # noqa: E402
    CALIBRATION_K,
    VectorIndex,
    encode,
    model_record,
)

DIMENSION = 384
NEIGHBOURS = 30
VECTORS = "https://w3id.org/memory-rdf/graph/vectors"
MEMORY = "https://w3id.org/memory-rdf/ontology#"


class HashedEmbedder:
    """An in-process embedder: the words of a text hashed into 384 dimensions (texts that
    share words are near). Deterministic, fast, thread-safe; caches nothing itself."""

    name = "hashed-384"
    dimension = DIMENSION

    def embed(self, texts: list[str]) -> list[list[float]]:
        out = []
        for text in texts:
            v = np.zeros(DIMENSION, dtype=np.float32)
            for word in text.lower().split():
                v[zlib.crc32(word.encode()) % DIMENSION] += 1.0
            v[0] += 0.01
            out.append(v.tolist())
        return out


def _unit(matrix: np.ndarray) -> np.ndarray:
    return (matrix / np.linalg.norm(matrix, axis=1, keepdims=True)).astype(np.float32)


def interleaved(fns: dict[str, Callable[[], object]], repeat: int) -> dict[str, list[float]]:
    """Each callable ``repeat`` times, round-robin (fair under machine noise); ms."""
    out: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            out[name].append((time.perf_counter() - start) * 1000)
    return out


def minilm_like(nodes: int, queries: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``nodes`` unit vectors and ``queries`` query vectors shaped like all-MiniLM-L6-v2's on
    conversation turns (measured on LoCoMo's: a shared direction — the mean vector's norm 0.37
    —, the variance of the i-th principal axis falling as i^-1.13, and topics: 1,000 centres
    holding 60% of the variance). At 6,060 vectors they match the real ones in what the
    two-stage search depends on: its calibrated candidates 164 (real 153), a question's best
    cosine 0.72 (0.64), its 30th 0.44 (0.48), the mean 0.13 (0.14). Random unit vectors have
    no such structure: every pair is near orthogonal, and no sketch helps."""
    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(rng.standard_normal((DIMENSION, DIMENSION)))
    scale = (np.arange(DIMENSION) + 3.0) ** -0.565
    scale *= np.sqrt(0.76 / np.sum(scale**2))
    centres = rng.standard_normal((1000, DIMENSION)) * scale * np.sqrt(0.6)

    def draw(count: int) -> np.ndarray:
        topic = rng.integers(0, len(centres), count)
        z = centres[topic] + rng.standard_normal((count, DIMENSION)) * scale * np.sqrt(0.4)
        return _unit(z @ basis.T + 0.37 * basis[:, 0])

    return draw(nodes), draw(queries)


def _recall(index: VectorIndex, matrix: np.ndarray, queries: np.ndarray, k: int) -> float:
    """Mean share of the exact ``k`` nearest (einsum over ``matrix``) that ``index`` finds."""
    found = 0
    for q in queries:
        exact = np.argpartition(-np.einsum("ij,j->i", matrix, q), k - 1)[:k]
        found += len({f"{i:032x}" for i in exact} & {n for n, _ in index.nearest(q, k)})
    return found / (k * len(queries))


def nearest_figures(nodes: int, repeat: int, *, structure: bool = True) -> dict[str, Any]:
    if structure:
        matrix, queries = minilm_like(nodes, repeat, nodes)
    else:
        rng = np.random.default_rng(nodes)
        matrix = _unit(rng.standard_normal((nodes, DIMENSION)))
        queries = _unit(rng.standard_normal((repeat, DIMENSION)))
    index = VectorIndex(DIMENSION)
    index.bulk([f"{i:032x}" for i in range(nodes)], matrix)
    it = iter(range(10**9))

    def search() -> object:
        return index.nearest(queries[next(it) % repeat], NEIGHBOURS)

    def floor() -> object:
        return np.einsum("ij,j->i", matrix, queries[0])

    start = time.perf_counter()
    search()  # the first search fits the sketch (from APPROXIMATE_FROM vectors on)
    fit_s = time.perf_counter() - start
    floor()  # warm up
    times = interleaved({"nearest": search, "matvec": floor}, repeat)
    p50, p95 = percentiles(times["nearest"])
    base, _ = percentiles(times["matvec"])
    return {"nodes": nodes, "structure": structure, "nearest_p50_ms": p50,
            "nearest_p95_ms": p95, "matvec_p50_ms": base,
            "ratio": p50 / base if base > 0 else None,
            "two_stage": index.approximate, "candidates": index.candidates,
            "fit_s": fit_s, "recall": _recall(index, matrix, queries, NEIGHBOURS),
            "index_bytes_per_node": index.nbytes // nodes}


def real_recall(vectors: Path, data: Path | None, *, nodes: int = 100_000,
                k: int = CALIBRATION_K) -> list[dict[str, Any]]:
    """recall@k of the two-stage search on real vectors: the cache's own vectors (two-stage
    forced, as at 20k+), and ``nodes`` vectors resampled from them (each a real vector plus
    noise of half their covariance, a kernel density sample: their neighbourhoods and
    spectrum kept). Queries: LoCoMo's questions when ``data`` is given (their vectors are in
    the cache), else 300 held-out vectors."""
    import hashlib
    import json

    with np.load(vectors) as f:
        keys, matrix = [str(x) for x in f["keys"]], np.asarray(f["vectors"], np.float32)
    asked = np.zeros(len(keys), dtype=bool)
    if data is not None:
        questions = {hashlib.sha256(q["question"].encode()).hexdigest()
                     for p in sorted(data.glob("*.json"))
                     for q in json.loads(p.read_text(encoding="utf-8"))["qa"]}
        asked = np.array([key in questions for key in keys])
    if not asked.any():
        asked[np.random.default_rng(0).choice(len(keys), 300, replace=False)] = True
    stored, queries = matrix[~asked], matrix[asked][:300]
    rng = np.random.default_rng(1)
    cov = np.linalg.cholesky(np.cov(stored.T) + 1e-6 * np.eye(stored.shape[1]))
    picked = rng.integers(0, len(stored), nodes)
    resampled = _unit(stored[picked] + 0.5 * (rng.standard_normal((nodes, stored.shape[1]))
                                              @ cov.T))
    out = []
    for name, m in (("real vectors", stored), ("resampled from them", resampled)):
        index = VectorIndex(m.shape[1], approximate_from=1_000)
        index.bulk([f"{i:032x}" for i in range(len(m))], m)
        index.fit()
        out.append({"vectors": name, "nodes": len(m), "queries": len(queries), "k": k,
                    "candidates": index.candidates, "two_stage": index.approximate,
                    "recall": _recall(index, m, queries, k)})
    return out


def _vector_nquads(path: Path, embedder: HashedEmbedder) -> tuple[Path, int]:
    """N-Quads of every node's vector and the model's record (as ``_vectors`` writes
    them), for the bulk loader; and the mean literal length."""
    store = ox.Store(str(path))
    rows = [(r["n"], r["c"].value) for r in store.query(  # type: ignore[union-attr]
        f"SELECT ?n ?c WHERE {{ ?n <{MEMORY}content> ?c }}")]
    del store
    graph = ox.NamedNode(VECTORS)
    out = path.parent / f"{path.name}-vectors.nq"
    total = 0
    with out.open("w", encoding="utf-8") as f:
        for start in range(0, len(rows), 512):
            part = rows[start:start + 512]
            vectors = _unit(np.asarray(embedder.embed([c for _, c in part]), dtype=np.float32))
            for (node, _), v in zip(part, vectors, strict=True):
                literal = encode(v)
                total += len(literal)
                f.write(f'{node} <{MEMORY}vector> "{literal}" {graph} .\n')
        # the store's record, its text recipe included, so the store takes these vectors as
        # its own (a timing benchmark: each node's content alone is embedded, by a hashed
        # embedder)
        for s, p, o in model_record(embedder.name, DIMENSION):
            f.write(f"{s} {p} {o} {graph} .\n")
    return out, total // max(1, len(rows))


def recall_figures(base: Path, nodes: int, repeat: int) -> dict[str, Any]:
    path = base / f"semantic_{nodes}" / "bench"
    generate(path, nodes, progress=False)
    embedder = HashedEmbedder()
    quads, literal = _vector_nquads(path, embedder)
    store = ox.Store(str(path))
    store.bulk_load(path=str(quads), format=ox.RdfFormat.N_QUADS)
    store.flush()
    del store
    config = Config(auto_compress=False)
    with MemoryManager(path.name, data_dir=path.parent, config=config,
                       embedder=embedder) as mem:
        assert mem._store is not None
        mem._store.wait_mirror()  # reads from the read mirror, as a running agent's are
        start = time.perf_counter()
        assert mem.stats()["vectors"] == nodes, mem.stats()
        load_s = time.perf_counter() - start
        queries = [["login", "error"], ["payment", "retry"], ["4242"], ["登录"]]
        for q in queries:  # warm up; the query vectors are cached from here on
            for entry in ("keywords", "semantic", "both"):
                mem.recall(q, entry=entry)
        it = iter(range(10**9))

        def run(entry: str) -> Callable[[], object]:
            return lambda: mem.recall(queries[next(it) % len(queries)], entry=entry)

        times = interleaved({e: run(e) for e in ("keywords", "semantic", "both")}, repeat)
    p = {name: percentiles(t) for name, t in times.items()}
    base_p50 = p["keywords"][0]
    return {
        "nodes": nodes, "load_s": load_s, "store_literal_chars_per_node": literal,
        **{f"{e}_p50_ms": p[e][0] for e in p}, **{f"{e}_p95_ms": p[e][1] for e in p},
        "semantic_ratio": p["semantic"][0] / base_p50 if base_p50 > 0 else None,
        "both_ratio": p["both"][0] / base_p50 if base_p50 > 0 else None,
    }


def suite_metrics(*, quick: bool) -> dict[str, Any]:
    """The figures for ``python -m benchmarks`` (quick: fewer repeats, no random vectors)."""
    sizes = [10_000, 100_000]  # the two-stage search begins at 20k: quick too shows it
    repeat = 15 if quick else 30
    out: dict[str, Any] = {"dimension": DIMENSION, "neighbours": NEIGHBOURS,
                           "nearest": [nearest_figures(n, repeat) for n in sizes]}
    if not quick:
        out["nearest"].append(nearest_figures(sizes[-1], repeat, structure=False))
    with tempfile.TemporaryDirectory() as tmp:
        out["recall"] = recall_figures(Path(tmp), 2_000 if quick else 10_000, repeat)
    return out


def markdown_rows(figures: dict[str, Any]) -> list[str]:
    rows = ["", f"### Semantic entry (dimension {figures['dimension']}, "
                f"{figures['neighbours']} neighbours)", "",
            "| measure | p50 ms | p95 ms | baseline p50 ms | ratio | recall@30 |",
            "|---|---|---|---|---|---|"]
    for n in figures["nearest"]:
        how = (f"two-stage, {n['candidates']:,} candidates" if n["two_stage"] else "exact")
        what = "MiniLM-like vectors" if n.get("structure", True) else "no structure"
        rows.append(f"| nearest() at {n['nodes']:,} nodes, {what}: {how} (baseline: bare "
                    f"matrix·vector) | {n['nearest_p50_ms']:.2f} | {n['nearest_p95_ms']:.2f} | "
                    f"{n['matvec_p50_ms']:.2f} | {n['ratio']:.2f}× | {n['recall']:.3f} |")
    r = figures["recall"]
    for entry in ("semantic", "both"):
        rows.append(f"| recall(entry=\"{entry}\") at {r['nodes']:,} nodes (baseline: "
                    f"entry=\"keywords\") | {r[f'{entry}_p50_ms']:.2f} | "
                    f"{r[f'{entry}_p95_ms']:.2f} | {r['keywords_p50_ms']:.2f} | "
                    f"{r[f'{entry}_ratio']:.2f}× | |")
    for real in figures.get("real", []):
        rows.append(f"| recall@{real['k']} of the two-stage search, {real['vectors']} "
                    f"({real['nodes']:,}; {real['queries']} questions; "
                    f"{real['candidates']:,} candidates) | | | | | {real['recall']:.3f} |")
    fits = [n for n in figures["nearest"] if n["two_stage"]]
    fit = (f" Fitting the sketch (the first search from 20,000 vectors on, and again after "
           f"a fifth of them changed): {fits[-1]['fit_s']:.2f} s at {fits[-1]['nodes']:,}."
           if fits else "")
    two = fits[-1]["index_bytes_per_node"] if fits else None
    rows.append(f"\nBytes per node: {figures['nearest'][0]['index_bytes_per_node']:,} in the "
                f"in-memory index (exact)" + (f", {two:,} with the sketch" if two else "")
                + f"; {r['store_literal_chars_per_node']:,} characters of base64 "
                f"in the store (one literal). Loading {r['nodes']:,} vectors into the index "
                f"(the first recall or stats() after open): {r['load_s']:.2f} s." + fit)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--recall-nodes", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--vectors", type=Path, default=None,
                        help="an embedding server's vector cache (.npz): recall on real vectors")
    parser.add_argument("--data", type=Path, default=None,
                        help="LoCoMo (its questions are the queries of --vectors)")
    args = parser.parse_args()
    figures: dict[str, Any] = {"dimension": DIMENSION, "neighbours": NEIGHBOURS,
                               "nearest": [nearest_figures(n, args.repeat) for n in args.sizes]
                               + [nearest_figures(args.sizes[-1], args.repeat,
                                                  structure=False)]}
    if args.vectors is not None:
        figures["real"] = real_recall(args.vectors, args.data)
    with tempfile.TemporaryDirectory() as tmp:
        figures["recall"] = recall_figures(Path(tmp), args.recall_nodes, args.repeat)
    print("\n".join(markdown_rows(figures)))


if __name__ == "__main__":
    main()
