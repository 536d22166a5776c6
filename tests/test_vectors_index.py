"""The semantic entry's in-memory index (SPEC §5.7): exact below ``APPROXIMATE_FROM`` vectors,
two-stage from there on (a sketch on the principal axes, then exact scores of its best
candidates), and correct through inserts, re-embeds, removals and refits."""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from memory_rdf import MemoryManager
from memory_rdf import _vectors as vectors_module
from memory_rdf._vectors import VectorIndex

from helpers import FAST, ScriptedModel, say

DIM = 48
TOPICS = 12


def _unit(m: np.ndarray) -> np.ndarray:
    m = np.atleast_2d(m)
    return (m / np.linalg.norm(m, axis=1, keepdims=True)).astype(np.float32)


def clustered(n: int, seed: int = 0) -> np.ndarray:
    """Unit vectors with structure a sketch can use: topic centres in the first 8
    dimensions, a little noise in all 48."""
    rng = np.random.default_rng(seed)
    centres = np.zeros((TOPICS, DIM))
    centres[:, :8] = rng.standard_normal((TOPICS, 8))
    topic = rng.integers(0, TOPICS, n)
    spread = np.zeros((n, DIM))
    spread[:, :8] = 0.3 * rng.standard_normal((n, 8))
    return _unit(centres[topic] + spread + 0.05 * rng.standard_normal((n, DIM)))


def exact_top(matrix: np.ndarray, ids: list[str], q: np.ndarray, k: int) -> list[str]:
    sims = matrix @ q
    return [ids[i] for i in np.argsort(-sims, kind="stable")[:k]]


def index_of(matrix: np.ndarray, **kw: int) -> tuple[VectorIndex, list[str]]:
    ids = [f"n{i}" for i in range(len(matrix))]
    index = VectorIndex(matrix.shape[1], **kw)
    for nid, v in zip(ids, matrix, strict=True):
        index.put(nid, v)
    return index, ids


def recall_at(index: VectorIndex, live: dict[str, np.ndarray], queries: np.ndarray,
              k: int) -> float:
    ids = list(live)
    matrix = np.stack([live[n] for n in ids])
    found = 0
    for q in queries:
        found += len(set(exact_top(matrix, ids, q, k)) & {n for n, _ in index.nearest(q, k)})
    return found / (k * len(queries))


def check_exact_scores(index: VectorIndex, live: dict[str, np.ndarray], q: np.ndarray,
                       k: int) -> list[tuple[str, float]]:
    """What nearest() returns: live ids only, exact cosines, best first."""
    got = index.nearest(q, k)
    assert len(got) == min(k, len(live))
    assert len({n for n, _ in got}) == len(got)
    for nid, sim in got:
        assert nid in live
        assert sim == pytest.approx(float(live[nid] @ q), abs=1e-5)
    assert [s for _, s in got] == sorted((s for _, s in got), reverse=True)
    return got


def test_below_the_threshold_the_search_is_exact_and_fits_nothing() -> None:
    matrix = clustered(3000)
    index, ids = index_of(matrix)  # default threshold: 20,000 vectors
    queries = clustered(20, seed=9)
    for q in queries:
        got = index.nearest(q, 30)
        assert [n for n, _ in got] == exact_top(matrix, ids, q, 30)
    assert index.fits == 0 and not index.approximate
    assert index.nbytes == index._matrix.nbytes  # no sketch: 4·d bytes a row


def test_from_the_threshold_the_two_stage_search_finds_the_exact_neighbours() -> None:
    matrix = clustered(4000)
    index, ids = index_of(matrix, approximate_from=1000)
    queries = clustered(40, seed=7)
    live = dict(zip(ids, matrix, strict=True))
    check_exact_scores(index, live, queries[0], 30)
    assert index.fits == 1 and index.approximate
    assert 0 < index.candidates * vectors_module.EXACT_SHARE < len(ids)
    assert index.calibrated_recall is not None and index.calibrated_recall >= 0.95
    assert recall_at(index, live, queries, 30) >= 0.95
    assert recall_at(index, live, queries, 10) >= 0.95
    assert recall_at(index, live, queries, 100) >= 0.95  # more than calibrated for
    # the sketch is a sixth of the row (8 of 48 coordinates) beside the exact row
    assert index.nbytes == index._matrix.nbytes * 7 // 6


def test_vectors_without_structure_stay_exact() -> None:
    rng = np.random.default_rng(3)
    matrix = _unit(rng.standard_normal((3000, 64)))
    index, ids = index_of(matrix, approximate_from=1000)
    q = _unit(rng.standard_normal(64))[0]
    assert [n for n, _ in index.nearest(q, 30)] == exact_top(matrix, ids, q, 30)
    assert index.fits == 1 and not index.approximate  # calibrated: the sketch would not pay


def test_inserts_after_the_fit_are_found_without_a_refit() -> None:
    index, ids = index_of(clustered(4000), approximate_from=1000)
    live = {n: index.get(n).copy() for n in ids}  # type: ignore[union-attr]
    queries = clustered(30, seed=11)
    index.nearest(queries[0], 30)
    assert index.approximate and index.fits == 1
    # new vectors equal to the queries: each is then its query's nearest, cosine 1
    for i, q in enumerate(queries):
        index.put(f"new{i}", q)
        live[f"new{i}"] = q
    for i, q in enumerate(queries):
        got = check_exact_scores(index, live, q, 30)
        assert got[0] == (f"new{i}", pytest.approx(1.0, abs=1e-5))
    assert index.fits == 1  # 30 changes of 4,000: no refit yet


def test_a_re_embedded_node_is_found_by_its_new_vector_only() -> None:
    matrix = clustered(4000)
    index, ids = index_of(matrix, approximate_from=1000)
    index.nearest(matrix[0], 30)
    assert index.approximate
    old, new = matrix[5].copy(), clustered(1, seed=99)[0]
    index.put("n5", new)  # compression rewrote its content: a vector of the new text
    live = dict(zip(ids, matrix, strict=True))
    live["n5"] = new
    assert check_exact_scores(index, live, new, 30)[0] == ("n5", pytest.approx(1.0, abs=1e-5))
    found = dict(check_exact_scores(index, live, old, 30))
    assert found.get("n5", -1.0) == pytest.approx(float(new @ old), abs=1e-5) or "n5" not in found
    assert len(index) == 4000


def test_removed_nodes_never_come_back_and_moved_rows_keep_their_vectors() -> None:
    matrix = clustered(4000)
    index, ids = index_of(matrix, approximate_from=1000)
    index.nearest(matrix[0], 30)
    assert index.approximate
    live = dict(zip(ids, matrix, strict=True))
    gone = ids[::7]  # forgotten or purged: rows filled from the end, sketch rows with them
    for nid in gone:
        index.remove(nid)
        del live[nid]
    assert len(index) == len(live)
    for nid in gone[:20]:  # a gone node's own vector as the query
        got = check_exact_scores(index, live, matrix[ids.index(nid)], 30)
        assert nid not in {n for n, _ in got}
    for nid in list(live)[-20:]:  # rows moved by the removals: each finds itself first
        assert index.nearest(live[nid], 1)[0] == (nid, pytest.approx(1.0, abs=1e-5))
    assert recall_at(index, live, clustered(30, seed=5), 30) >= 0.95


def test_the_sketch_is_fitted_again_when_a_fifth_of_the_vectors_changed() -> None:
    index, ids = index_of(clustered(4000), approximate_from=1000)
    index.nearest(clustered(1, seed=1)[0], 30)
    assert index.fits == 1
    # the memory drifts: a third of it replaced by vectors of another structure
    drift = np.zeros((1400, DIM), dtype=np.float32)
    rng = np.random.default_rng(4)
    drift[:, 40:] = rng.standard_normal((1400, 8))
    drift = _unit(drift + 0.05 * rng.standard_normal((1400, DIM)))
    live = {n: index.get(n).copy() for n in ids}  # type: ignore[union-attr]
    for i, v in enumerate(drift):
        index.put(ids[i], v)
        live[ids[i]] = v
    assert index.fits == 1  # puts never fit: the next search does
    queries = _unit(np.concatenate([drift[:15] + 0.02, clustered(15, seed=8)]))
    check_exact_scores(index, live, queries[0], 30)
    assert index.fits == 2
    assert recall_at(index, live, queries, 30) >= 0.95
    # fewer changes than a fifth: no refit
    for i in range(100):
        index.remove(ids[-1 - i])
        del live[ids[-1 - i]]
    check_exact_scores(index, live, queries[1], 30)
    assert index.fits == 2


def test_bulk_replaces_the_index_and_its_sketch() -> None:
    index, _ = index_of(clustered(4000), approximate_from=1000)
    index.nearest(clustered(1)[0], 30)
    assert index.approximate
    matrix = clustered(2500, seed=2)
    ids = [f"m{i}" for i in range(2500)]
    index.bulk(ids, matrix)
    assert not index.approximate and len(index) == 2500
    q = clustered(1, seed=3)[0]
    live = dict(zip(ids, matrix, strict=True))
    check_exact_scores(index, live, q, 30)
    assert index.fits == 2
    assert index.nearest(q, 5000)[-1][0] in live  # k ≥ n: every node, exact
    assert len(index.nearest(q, 5000)) == 2500


def test_the_sketch_follows_the_matrix_as_it_grows() -> None:
    index, ids = index_of(clustered(1100), approximate_from=1000)
    index.nearest(clustered(1)[0], 30)
    live = {n: index.get(n).copy() for n in ids}  # type: ignore[union-attr]
    more = clustered(150, seed=6)  # past the matrix's allocated rows (grown × 2)
    for i, v in enumerate(more):
        index.put(f"g{i}", v)
        live[f"g{i}"] = v
    for i in range(0, 150, 15):
        assert index.nearest(more[i], 1)[0] == (f"g{i}", pytest.approx(1.0, abs=1e-5))


# -- through the public API ---------------------------------------------------------------------

WORDS = ("harbour", "violin", "glacier", "orchard", "satellite", "bakery")


class TopicEmbedder:
    """In process: a text's vector is its topic word's centre plus a little noise of its own
    (deterministic); the first 8 dimensions carry the topics."""

    name = "topics-v1"
    dimension = DIM

    def __init__(self) -> None:
        rng = np.random.default_rng(0)
        self.centres = np.zeros((len(WORDS) + 1, DIM))
        self.centres[:, :8] = rng.standard_normal((len(WORDS) + 1, 8))

    def embed(self, texts: list[str]) -> list[list[float]]:
        out = []
        for text in texts:
            topic = next((i for i, w in enumerate(WORDS) if w in text), len(WORDS))
            noise = np.random.default_rng(zlib.crc32(text.encode())).standard_normal(DIM)
            out.append((self.centres[topic] + 0.15 * noise).tolist())
        return out


@pytest.fixture
def two_stage_at_test_size(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The knobs lowered so that a store of a few hundred memories searches in two stages."""
    monkeypatch.setattr(vectors_module, "APPROXIMATE_FROM", 100)
    monkeypatch.setattr(vectors_module, "EXACT_SHARE", 2)
    monkeypatch.setattr(vectors_module, "CALIBRATION_K", 6)
    yield


def test_recall_by_meaning_answers_the_same_through_the_two_stage_index(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, two_stage_at_test_size: None) -> None:
    config = FAST.replace(focus_limit=1, max_entry_nodes=2)
    questions = [f"tell me about the {w}" for w in WORDS]

    def recalls(mem: MemoryManager) -> list[str]:
        return [mem.recall([], entry="semantic", query=q) for q in questions]

    with MemoryManager("a", data_dir=tmp_path, config=config, model=ScriptedModel(),
                       embedder=TopicEmbedder()) as mem:
        # six memories a remember (ScriptedModel splits on " | "), of one topic: a memory is
        # embedded with its neighbours in its remember, and the embedder takes one topic
        for i in range(40):
            w = WORDS[i % len(WORDS)]
            mem.remember(say(" | ".join(f"note {i}-{j} on the {w}" for j in range(6))))
        assert mem.wait_idle(timeout=120)
        assert mem.stats()["vectors"] == mem.stats()["nodes"] >= 200
        first = recalls(mem)
        assert mem.stats()["vector_search"] == "two-stage"  # the two-stage path answered
        violins = [m for m in mem.memories(limit=None) if "violin" in m["content"]]
        gone = violins[:30]
        assert mem.forget([m["id"] for m in gone]) == len(gone)
        after = mem.recall([], entry="semantic", query="tell me about the violin")
        assert "violin" in after
        assert not any(m["content"].split(": ", 1)[-1] in after for m in gone)
    for i, q in enumerate(questions):
        assert WORDS[i] in first[i], q
    # the same store searched exactly: the same answers
    monkeypatch.setattr(vectors_module, "APPROXIMATE_FROM", 10**9)
    with MemoryManager("a", data_dir=tmp_path, config=config, model=ScriptedModel(),
                       embedder=TopicEmbedder()) as mem:
        exact = mem.recall([], entry="semantic", query="tell me about the violin")
        assert mem.stats()["vector_search"] == "exact"
        assert exact == after
