"""The semantic entry's vectors: kept in the agent's store, searched in memory (SPEC §5.7).

**What is embedded.** A node's content between the contents of the segments next to it in
its remember (its ``上文`` and ``下文`` links, SPEC §5.1 step 3), one per line: a turn of a
conversation is embedded with the turn it answers and the one answering it, so "what did
Maria suggest after John lost his job" finds Maria's turn though the job is in John's
(:data:`TEXT_RECIPE`; LoCoMo dev: +0.7 points within 2,000 characters on the conversations
tuned on, see docs/embeddings.md). A vector embeds its neighbours' text, so it is made again
when one of them is rewritten or forgotten (:meth:`Vectors.changed_with`,
:meth:`Vectors.forget_with`).

**In the store.** One triple per live node in the vectors graph (``graph/vectors``; on an
endpoint ``<…/agent/{id}/vectors>``, SPEC §8), never the default graph::

    node:{id} memory:vector "base64 of the unit vector's float32 values, little-endian" .
    <https://w3id.org/memory-rdf/store> memory:embeddingModel "all-minilm" ;
                                        memory:embeddingDimension 384 ;
                                        memory:embeddingText "with-neighbours-v1" .

so export/import (N-Quads, TriG) and a purge carry them like every other triple: a node
forgotten or purged takes its vector with it (``forget_node.ru``, ``forget_nodes.ru``). A
vector is 4·d bytes, 4/3 of that in base64: 2,048 characters at d = 384.

**In memory.** :class:`VectorIndex`: the unit vectors as one float32 matrix (4·d bytes a
node: 1,536 B at d = 384, plus ~100 B for the id and its row number). Below
:data:`APPROXIMATE_FROM` vectors it is searched exactly (one matrix-vector product in numpy's
own loop, and a partial sort: cosine similarity of unit vectors is their dot product); from
there on in two stages, a sketch of d/6 coordinates a node (256 B more at d = 384) scanned
first, its best candidates scored again exactly (see :class:`VectorIndex`).
``benchmarks/vector_entry.py`` measures it at 10k and 100k nodes, and its recall.

**Never mixed.** The store records the model's name and dimension, and how the texts were
made (``memory:embeddingText``; none: a node's content alone, the first way); an embedder
of another name, or whose vectors have another dimension, or vectors of other texts, are
vectors made by another model: they are dropped and every memory is embedded again (logged),
a few batches at a time (``stats()["vectors_missing"]`` counts down).

numpy is an optional dependency: ``pip install 'memory-rdf[embeddings]'``.
"""

from __future__ import annotations

import base64
import functools
import logging
import math
import threading
import time
from collections.abc import Callable, Generator, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TYPE_CHECKING, Any

from memory_rdf import _vocab as V
from memory_rdf._calls import AwaitCall, current_agent
from memory_rdf._exceptions import ConfigError
from memory_rdf._links import PREVIOUS
from memory_rdf._nodes import NodeStore, chunks
from memory_rdf._oxigraph import MemoryStore, WriteBatch, iri_ref, lit, node_id, node_ref, triple

if TYPE_CHECKING:
    import numpy as np

    from memory_rdf._embedders import Embedder

log = logging.getLogger("memory_rdf")

#: Nodes embedded in one fill step (the nodes still without a vector, SPEC §5.7).
FILL_BATCH = 64
#: Seconds the embedder is left alone after a failure unless it says (its ``cool_down``):
#: remembers and recalls do not wait on it meanwhile (a down server costs one timeout, not
#: one per call).
COOL_DOWN = 30.0
#: Query vectors kept (query text → unit vector).
QUERY_CACHE = 256
#: Longest a recall waits for its query's vector (seconds): a slower embedder is treated as
#: down (the lexical entries answer, SPEC §5.7) and left alone for its cool-down.
QUERY_WAIT = 5.0
#: Vectors from which the index searches in two stages (a sketch, then exact scores of its
#: best candidates) instead of exactly: below, an exact scan is already fast (1.3 ms at
#: 10,000 vectors of 384 dimensions), and every agent of a few thousand memories keeps it.
APPROXIMATE_FROM = 20_000
#: The sketch has dimension // SKETCH_SHARE coordinates (64 at 384): a sixth of the scan.
SKETCH_SHARE = 6
#: Neighbours the sketch is calibrated for (3 × the default ``max_entry_nodes``: what one
#: recall asks), and the share of their exact nearest it must find (on stored vectors asked
#: as queries); its candidate count is then widened by CANDIDATE_MARGIN for queries that are
#: not stored vectors.
CALIBRATION_K = 30
TARGET_RECALL = 0.99
CANDIDATE_MARGIN = 1.5
#: Vectors asked as queries, and sampled for the principal axes, at a fit.
CALIBRATION_QUERIES = 64
FIT_SAMPLE = 16_384
#: The two-stage search is used only while its candidates are at most 1/EXACT_SHARE of the
#: vectors: a candidate scored again (a random read of its row) costs about 7 rows of an
#: exact scan, the sketch's scan about a fifth of it (measured at 100k, 384 dimensions), so
#: at 1/32 the two stages cost at most half the exact scan.
EXACT_SHARE = 32
#: Share of the vectors added, replaced or removed after which the sketch is fitted again.
REFIT_CHANGES = 0.2

#: How a node's text is embedded (``memory:embeddingText`` in the store): its content between
#: its remember's previous and next segments' (``上文``/``下文``). Vectors of other texts (none
#: recorded: the content alone) are made again, as those of another model.
TEXT_RECIPE = "with-neighbours-v1"

_STORE = iri_ref(V.META_SUBJECT)


def model_record(name: str, dimension: int) -> list[tuple[str, str, str]]:
    """The store's record of how its vectors were made, in the vectors graph: the model's
    name, the vectors' dimension and :data:`TEXT_RECIPE`, as (subject, predicate, object)
    serialized terms (N-Triples).

    >>> [o for _, _, o in model_record("all-minilm", 384)][::2]
    ['"all-minilm"', '"with-neighbours-v1"']
    """
    return [
        (_STORE, V.EMBEDDING_MODEL, lit(name)),
        (_STORE, V.EMBEDDING_DIMENSION, lit(dimension)),
        (_STORE, V.EMBEDDING_TEXT, lit(TEXT_RECIPE)),
    ]


def numpy() -> Any:
    """numpy, or a clear error saying how to install it."""
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy is installed where tests run
        raise ConfigError(
            "an embedder needs numpy: pip install 'memory-rdf[embeddings]'"
        ) from None
    return np


def encode(vector: np.ndarray) -> str:
    """A unit float32 vector as base64 of its little-endian bytes."""
    xp = numpy()
    return base64.b64encode(xp.asarray(vector, dtype="<f4").tobytes()).decode("ascii")


def decode(text: str, dimension: int) -> np.ndarray | None:
    """The vector of :func:`encode`; None when ``text`` is not one of ``dimension`` values."""
    xp = numpy()
    try:
        raw = base64.b64decode(text, validate=True)
    except ValueError:
        return None
    if len(raw) != 4 * dimension:
        return None
    vector = xp.frombuffer(raw, dtype="<f4").astype(xp.float32)
    if not xp.all(xp.isfinite(vector)):
        return None
    return vector


def unit(vector: Sequence[float]) -> np.ndarray:
    """``vector`` as a float32 unit vector (checked non-zero and finite by the embedder)."""
    xp = numpy()
    v = xp.asarray(vector, dtype=xp.float32)
    norm = float(xp.linalg.norm(v))
    return v / norm if norm > 0 and math.isfinite(norm) else v


class VectorIndex:
    """Unit vectors by node id, searched by cosine similarity (numpy).

    Below :data:`APPROXIMATE_FROM` vectors (every agent of a few thousand memories) the search
    is exact: one matrix-vector product over every vector and a partial sort. From there on it
    is two-stage, once a *sketch* has been fitted on the stored vectors (:meth:`fit`, done by
    the first search that needs it): every vector's coordinates on the ``sketch_dims``
    principal axes of the stored vectors (a second, narrower float32 matrix) are scanned
    first, and the best :attr:`candidates` of that scan are scored again exactly; what
    ``nearest`` returns are exact cosines, in exact order, of the nodes it found. The fit
    measures its own recall on the stored vectors (each one asked as a query) and keeps the
    smallest candidate count that finds :data:`TARGET_RECALL` of their exact nearest
    :data:`CALIBRATION_K`; vectors with no such structure (a scan of most of them would be
    needed) stay exact. The sketch follows every :meth:`put` and :meth:`remove`, and is fitted
    again once a :data:`REFIT_CHANGES` share of the vectors changed since the last fit.

    >>> index = VectorIndex(2)
    >>> index.put("a", unit([1.0, 0.0])); index.put("b", unit([0.6, 0.8]))
    >>> [(n, round(s, 2)) for n, s in index.nearest(unit([1.0, 0.1]), 2)]
    [('a', 1.0), ('b', 0.68)]
    """

    def __init__(self, dimension: int, *, approximate_from: int | None = None,
                 sketch_dims: int | None = None) -> None:
        xp = numpy()
        self.dimension = dimension
        self.approximate_from = APPROXIMATE_FROM if approximate_from is None else approximate_from
        self.sketch_dims = sketch_dims or max(8, dimension // SKETCH_SHARE)
        self._matrix = xp.zeros((0, dimension), dtype=xp.float32)
        self._ids: list[str] = []
        self._rows: dict[str, int] = {}
        #: the sketch: principal axes (dimension × sketch_dims) and every row's coordinates on
        #: them (same row numbers as the matrix); None until fitted, or when exact is kept
        self._axes: np.ndarray | None = None
        self._sketch: np.ndarray | None = None
        #: vectors searched exactly when this index was last fitted (its size then), or -1
        self._fitted_size = -1
        #: vectors added, replaced or removed since the last fit
        self._changes = 0
        #: candidates scored exactly for :data:`CALIBRATION_K` neighbours (0: exact search)
        self.candidates = 0
        #: recall of the last fit's calibration at :attr:`candidates` (None: not fitted)
        self.calibrated_recall: float | None = None
        #: fits made (the first search from ``approximate_from`` vectors, then on drift)
        self.fits = 0

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, nid: object) -> bool:
        return nid in self._rows

    @property
    def approximate(self) -> bool:
        """Whether searches now go through the sketch (else they are exact)."""
        return self._sketch is not None and self.candidates > 0

    @property
    def nbytes(self) -> int:
        """Bytes of the in-memory matrices (allocated rows; ids and their dict apart)."""
        extra = 0 if self._sketch is None else self._sketch.nbytes
        return int(self._matrix.nbytes) + int(extra)

    def put(self, nid: str, vector: np.ndarray) -> None:
        """Add or replace the vector of ``nid``."""
        xp = numpy()
        row = self._rows.get(nid)
        if row is None:
            row = len(self._ids)
            if row >= self._matrix.shape[0]:
                size = max(16, 2 * row)
                grown = xp.zeros((size, self.dimension), dtype=xp.float32)
                grown[:row] = self._matrix[:row]
                self._matrix = grown
                if self._sketch is not None:
                    sketch = xp.zeros((size, self._sketch.shape[1]), dtype=xp.float32)
                    sketch[:row] = self._sketch[:row]
                    self._sketch = sketch
            self._ids.append(nid)
            self._rows[nid] = row
        self._matrix[row] = vector
        if self._sketch is not None and self._axes is not None:
            self._sketch[row] = xp.einsum("j,jk->k", self._matrix[row], self._axes)
        self._changes += 1

    def bulk(self, ids: Sequence[str], matrix: np.ndarray) -> None:
        """Replace the whole index by ``ids`` and their rows (the sketch is fitted again)."""
        self._ids = list(ids)
        self._rows = {n: i for i, n in enumerate(self._ids)}
        self._matrix = matrix
        self._axes = self._sketch = None
        self._fitted_size, self._changes, self.candidates = -1, 0, 0
        self.calibrated_recall = None

    def remove(self, nid: str) -> None:
        row = self._rows.pop(nid, None)
        if row is None:
            return
        last = len(self._ids) - 1
        if row != last:
            moved = self._ids[last]
            self._matrix[row] = self._matrix[last]
            if self._sketch is not None:
                self._sketch[row] = self._sketch[last]
            self._ids[row] = moved
            self._rows[moved] = row
        self._ids.pop()
        self._changes += 1

    def get(self, nid: str) -> np.ndarray | None:
        row = self._rows.get(nid)
        return None if row is None else self._matrix[row]

    def similarity(self, query: np.ndarray, ids: Sequence[str]) -> dict[str, float]:
        """Cosine similarity of ``query`` to each of ``ids`` that has a vector."""
        rows = [(n, self._rows[n]) for n in ids if n in self._rows]
        if not rows:
            return {}
        sims = self._matrix[[r for _, r in rows]].dot(query)
        return {n: float(s) for (n, _), s in zip(rows, sims, strict=True)}

    def nearest(self, query: np.ndarray, k: int) -> list[tuple[str, float]]:
        """The ``k`` nodes most similar to ``query``, best first: ``(id, cosine)``."""
        xp = numpy()
        n = len(self._ids)
        if n == 0 or k < 1:
            return []
        if n >= self.approximate_from:
            if self._stale():
                self.fit()
            if self.approximate:
                want = max(2 * k, math.ceil(self.candidates * max(1.0, k / CALIBRATION_K)))
                if want * EXACT_SHARE < n:
                    return self._two_stage(query, k, want)
        # einsum: numpy's own single-threaded loop. A BLAS matrix-vector product (``@``)
        # went to OpenBLAS's threads, which spin after each call: on the shared 2-CPU machine
        # it took 36 ms against 16 at 100k nodes (benchmarks/vector_entry.py).
        sims = xp.einsum("ij,j->i", self._matrix[:n], query)
        top = xp.argpartition(-sims, k - 1)[:k] if k < n else xp.arange(n)
        order = top[xp.argsort(-sims[top], kind="stable")]
        return [(self._ids[i], float(sims[i])) for i in order]

    def _two_stage(self, query: np.ndarray, k: int, want: int) -> list[tuple[str, float]]:
        """The sketch's best ``want`` (about: at least that many), scored again exactly."""
        xp = numpy()
        assert self._sketch is not None and self._axes is not None
        n = len(self._ids)
        rough = xp.einsum("ij,j->i", self._sketch[:n], xp.einsum("j,jk->k", query, self._axes))
        rows = _best_rows(rough, want)
        sims = xp.einsum("ij,j->i", self._matrix[rows], query)
        top = xp.argpartition(-sims, k - 1)[:k] if k < len(rows) else xp.arange(len(rows))
        order = top[xp.argsort(-sims[top], kind="stable")]
        return [(self._ids[rows[i]], float(sims[i])) for i in order]

    def _stale(self) -> bool:
        """Whether the sketch (or the decision to stay exact) is due for a fit: never made,
        or a :data:`REFIT_CHANGES` share of the vectors changed since."""
        if self._fitted_size < 0:
            return True
        return self._changes > REFIT_CHANGES * max(self._fitted_size, len(self._ids))

    def fit(self) -> None:
        """Fit the sketch on the stored vectors and calibrate its candidate count (or decide
        to stay exact); a few hundred ms at 100k vectors of 384 dimensions."""
        xp = numpy()
        n, d, m = len(self._ids), self.dimension, self.sketch_dims
        self._fitted_size, self._changes = n, 0
        self.fits += 1
        self._axes = self._sketch = None
        self.candidates, self.calibrated_recall = 0, None
        if n < max(self.approximate_from, 2 * CALIBRATION_K + 2) or m >= d // 2:
            return
        rng = xp.random.default_rng(n)  # deterministic for a given index
        matrix = self._matrix[:n]
        sample = matrix[rng.choice(n, min(n, FIT_SAMPLE), replace=False)]
        # the principal axes of the (uncentred) second moment: the directions that carry the
        # most of a dot product between two of these vectors
        _, vectors = xp.linalg.eigh((sample.T @ sample).astype(xp.float64))
        axes = xp.ascontiguousarray(vectors[:, ::-1][:, :m]).astype(xp.float32)
        sketch = xp.zeros((self._matrix.shape[0], m), dtype=xp.float32)
        for start in range(0, n, 65536):
            end = min(n, start + 65536)
            sketch[start:end] = matrix[start:end] @ axes
        ranks = []
        asked = rng.choice(n, min(n, CALIBRATION_QUERIES), replace=False)
        for start in range(0, len(asked), 16):
            part = asked[start:start + 16]
            exact = matrix[part] @ matrix.T
            rough = (sketch[part] @ sketch[:n].T)
            exact[xp.arange(len(part)), part] = -xp.inf  # a query is not its own neighbour
            rough[xp.arange(len(part)), part] = -xp.inf
            for e, r in zip(exact, rough, strict=True):
                best = r[xp.argpartition(-e, CALIBRATION_K - 1)[:CALIBRATION_K]]
                above = xp.sort(r[r >= best.min()])  # ranks in the sketch's order
                ranks.append(len(above) - xp.searchsorted(above, best, side="right"))
        needed = int(xp.quantile(xp.concatenate(ranks), TARGET_RECALL)) + 1
        candidates = max(2 * CALIBRATION_K, math.ceil(needed * CANDIDATE_MARGIN))
        if candidates * EXACT_SHARE >= n:
            return  # no structure the sketch can use: exact is as fast
        self._axes, self._sketch, self.candidates = axes, sketch, candidates
        self.calibrated_recall = float(xp.mean(xp.concatenate(ranks) < candidates))


def _best_rows(scores: np.ndarray, want: int) -> np.ndarray:
    """Rows of at least ``want`` of the highest ``scores`` (more where it is cheaper): a
    threshold read from every 16th score, checked, else a partial sort."""
    xp = numpy()
    n = len(scores)
    if want >= n:
        return xp.arange(n)
    sample = scores[::16]
    j = min(len(sample), (want * 3) // 32 + 2)  # about 1.5 × want rows pass
    if j < len(sample):
        threshold = xp.partition(sample, len(sample) - j)[len(sample) - j]
        rows = xp.flatnonzero(scores >= threshold)
        if want <= len(rows) <= 2 * want:
            return rows
    return xp.argpartition(-scores, want - 1)[:want]


class Vectors:
    """An agent's vectors: written with its nodes, read into a :class:`VectorIndex`.

    Every method runs in the agent's tasks (the scheduler thread, or the caller's thread for
    an inline recall) except :meth:`embed_call`'s function, which runs in a model-call
    thread; one lock guards the in-memory state.
    """

    def __init__(self, store: MemoryStore, nodes: NodeStore, embedder: Embedder,
                 agent_id: str) -> None:
        numpy()
        self.store, self.nodes, self.embedder, self.agent_id = store, nodes, embedder, agent_id
        self.name = str(embedder.name)
        self.index: VectorIndex | None = None
        self.dimension: int | None = None
        #: live nodes without a vector (or whose vector is of a text compression rewrote)
        self.missing: set[str] = set()
        self.loaded = False
        self.failures = 0
        self.requests = 0
        self._down_until = 0.0
        self._logged_down = False
        self._queries: dict[str, np.ndarray] = {}
        self._lock = threading.RLock()

    # -- loading -------------------------------------------------------------------------------

    def load(self) -> None:
        """Read the store's vectors into the index (once); drop them if another model made
        them (every node then waits for a vector of this one)."""
        with self._lock:
            if self.loaded:
                return
            xp = numpy()
            rows = self.store.rows(self.store.render("vector_model"))
            stored_name, stored_dim, stored_text = rows[0] if rows else (None, None, None)
            mine = self.embedder.dimension
            if stored_name is not None and (
                str(stored_name) != self.name
                or not isinstance(stored_dim, int)
                or (mine is not None and stored_dim != mine)
                or stored_text != TEXT_RECIPE
            ):
                what = f"model {stored_name!r}, dimension {stored_dim}"
                if stored_text != TEXT_RECIPE:
                    what += f", texts {stored_text or 'content alone'!r}"
                if self.store.read_only:  # inspection: never mixed, nothing written
                    log.warning(
                        "memory_rdf: agent %r: its vectors were made by another embedding "
                        "model (%s), not %r: no memory is found by meaning", self.agent_id,
                        what, self.name)
                    self.loaded = True
                    return
                self._drop_all(what)
                stored_name = None
            if stored_name is not None and isinstance(stored_dim, int):
                self.dimension = stored_dim
                ids: list[str] = []
                vectors: list[np.ndarray] = []
                bad: list[str] = []
                for iri, text in self.store.rows(self.store.render("vectors_all")):
                    nid = node_id(str(iri))
                    vector = decode(str(text), stored_dim)
                    if vector is None:
                        bad.append(nid)
                        continue
                    ids.append(nid)
                    vectors.append(vector)
                index = VectorIndex(stored_dim)
                if ids:
                    index.bulk(ids, xp.vstack(vectors))
                self.index = index
                if bad and not self.store.read_only:
                    batch = WriteBatch()
                    batch.update("delete_vectors", nodes=[node_ref(n) for n in bad])
                    self.store.commit(batch)
            self.missing = {
                node_id(str(r[0])) for r in self.store.rows(self.store.render("vectors_missing"))
            }
            self.loaded = True

    def _drop_all(self, what: str) -> None:
        log.warning(
            "memory_rdf: agent %r: its vectors were made by another embedding model (%s); "
            "they are dropped and every memory is embedded again with %r (see "
            "stats()['vectors_missing'])", self.agent_id, what, self.name)
        batch = WriteBatch()
        batch.update("clear_vectors")
        self.store.commit(batch)
        self.index = None
        self.dimension = None

    # -- embedding -----------------------------------------------------------------------------

    def available(self) -> bool:
        """False while the embedder cools down after a failure (:data:`COOL_DOWN`)."""
        return time.monotonic() >= self._down_until

    def _embed(self, texts: list[str]) -> list[np.ndarray]:
        """The unit vectors of ``texts`` (in a model-call thread). Raises what the embedder
        raised; a wrong dimension for this store is a ModelError from the check."""
        from memory_rdf._embedders import check_vectors

        self.requests += 1
        try:
            raw = self.embedder.embed(list(texts))
            vectors = check_vectors(raw, len(texts), None, f"embedder {self.name!r}")
        except BaseException:
            self.failures += 1
            raise
        return [unit(v) for v in vectors]

    def _failed(self, what: str, exc: BaseException) -> None:
        pause = getattr(self.embedder, "cool_down", COOL_DOWN)
        pause = float(pause) if isinstance(pause, int | float) else COOL_DOWN
        self._down_until = time.monotonic() + pause
        if not self._logged_down:
            self._logged_down = True
            who = current_agent.get() or self.agent_id
            log.warning(
                "memory_rdf: agent %r: the embedder %r failed while %s (%s: %s); recall "
                "answers from the lexical entries and memories wait for their vectors "
                "until it is back (stats()['vectors_missing'])",
                who, self.name, what, type(exc).__name__, exc)

    def _recovered(self) -> None:
        if self._logged_down:
            self._logged_down = False
            log.warning("memory_rdf: agent %r: the embedder %r answers again",
                        self.agent_id, self.name)

    def embed_nodes(self, ids: Sequence[str]) -> Generator[AwaitCall, None, int]:
        """Embed the content of ``ids`` (plus up to :data:`FILL_BATCH` nodes still missing
        a vector) off the scheduler thread, and write their vectors; returns how many were
        written. Never raises for the embedder: a failure leaves the nodes missing."""
        self.load()
        with self._lock:
            wanted = list(dict.fromkeys(ids))
            self.missing.update(wanted)
            if not self.available():
                return 0
            asked = set(wanted)
            extra = [n for n in self.missing if n not in asked]
            todo = wanted + extra[: max(0, FILL_BATCH - len(wanted))]
        if not todo:
            return 0
        written = 0
        for part in chunks(todo, FILL_BATCH):
            texts = self.nodes.existing(list(part))  # id → content, live nodes only
            with self._lock:
                self.missing.difference_update(n for n in part if n not in texts)
            if not texts:
                continue
            order = list(texts)
            call = AwaitCall(functools.partial(self._embed, self.texts(texts)))
            yield call
            try:
                vectors = call.result()
            except Exception as exc:  # ModelError, or anything an embedder of one's own raises
                self._failed("embedding memories", exc)
                return written
            self._recovered()
            written += self._write(order, vectors)
        return written

    def texts(self, contents: dict[str, str]) -> list[str]:
        """The texts embedded for the nodes of ``contents`` (id → content), in its order: each
        content between its remember's previous and next segments' (:data:`TEXT_RECIPE`)."""
        before: dict[str, str] = {}
        after: dict[str, str] = {}
        for part in chunks(list(contents)):
            query = self.store.render("context_texts", nodes=[node_ref(n) for n in part])
            for iri, relation, text in sorted(self.store.rows(query), key=str):
                side = before if str(relation) == PREVIOUS else after
                side.setdefault(node_id(str(iri)), str(text))
        return ["\n".join(t for t in (before.get(n), c, after.get(n)) if t)
                for n, c in contents.items()]

    def context_users(self, ids: Sequence[str]) -> set[str]:
        """The live nodes whose vectors embed the text of one of ``ids`` (their neighbours in
        their remember), ``ids`` left out."""
        return set(self._users(ids)).difference(ids)

    def _users(self, ids: Sequence[str]) -> dict[str, set[str]]:
        """Each live node whose vector embeds the text of some of ``ids`` → those of ``ids``
        (one ``context_users`` query per :func:`chunks` of them)."""
        out: dict[str, set[str]] = {}
        for part in chunks(list(dict.fromkeys(ids))):
            query = self.store.render("context_users", nodes=[node_ref(n) for n in part])
            for node, other in self.store.rows(query):
                out.setdefault(node_id(str(node)), set()).add(node_id(str(other)))
        return out

    def _write(self, order: list[str], vectors: list[np.ndarray]) -> int:
        """Write the vectors of ``order`` (nodes still live: checked again here, since the
        call ran off the thread) in one commit, with the model's record the first time."""
        alive = self.nodes.existing(order)
        pairs = [(n, v) for n, v in zip(order, vectors, strict=True) if n in alive]
        with self._lock:
            dim = len(vectors[0]) if vectors else None
            if dim is None:
                return 0
            if self.dimension is not None and dim != self.dimension:
                self._drop_all(f"model {self.name!r}, dimension {self.dimension}; it now "
                               f"answers {dim}")
                self.missing = {n for n in self._live_ids()}
            batch = WriteBatch()
            if self.dimension is None:
                self.dimension = dim
                self.index = VectorIndex(dim)
                batch.insert([triple(*t) for t in model_record(self.name, dim)],
                             graph=V.VECTOR_GRAPH)
            assert self.index is not None
            replaced = [n for n, _ in pairs if n in self.index]
            if replaced:
                batch.update("delete_vectors", nodes=[node_ref(n) for n in replaced])
            batch.insert([triple(node_ref(n), V.VECTOR, lit(encode(v))) for n, v in pairs],
                         graph=V.VECTOR_GRAPH)
            index = self.index

            def apply() -> None:
                for n, v in pairs:
                    index.put(n, v)
                self.missing.difference_update(order)

            batch.after_commit(apply)
            self.store.commit(batch)
            return len(pairs)

    def _live_ids(self) -> list[str]:
        return [node_id(str(r[0])) for r in self.store.rows(self.store.render("vectors_missing"))]

    def changed_with(self, batch: WriteBatch, rewritten: Sequence[str],
                     forgotten: Sequence[str]) -> None:
        """Add to ``batch`` — a write rewriting ``rewritten`` and forgetting ``forgotten``
        (whose own vectors go with them, ``forget_node(s).ru``): compression's flush, or a
        remember's eviction from the fixed pool — the deletion of the stored vectors of
        their old text: the rewritten nodes' and their neighbours' that embed the text of a
        rewritten or forgotten one (looked up now, before the write cuts the forgotten
        nodes' links). One write, so a crash never leaves a vector of the old text in the
        store; once it commits, they are missing, to be made again. Recall keeps the old
        vectors of the rewritten nodes and of their neighbours in memory until then, not
        those that embed a forgotten text."""
        with self._lock:
            if self.loaded and self.index is None:
                return  # the store holds no vector: every node is counted missing already
        gone = set(forgotten)
        users = self._users([*rewritten, *forgotten])
        erased = sorted(n for n, texts in users.items() if n not in gone and texts & gone)
        outdated = sorted({*rewritten, *users}.difference(gone))
        if outdated:
            batch.update("delete_vectors", nodes=[node_ref(n) for n in outdated])
        batch.after_commit(lambda: self._outdated(outdated, forgotten, erased))

    def forget_with(self, batch: WriteBatch, ids: Sequence[str]) -> list[str]:
        """Add to ``batch`` (forgetting ``ids``) the deletion of the vectors that embed their
        text (their neighbours', looked up before the forget cuts the links); returns those
        neighbours, for :meth:`forgotten`."""
        users = sorted(self.context_users(ids))
        if users:
            batch.update("delete_vectors", nodes=[node_ref(n) for n in users])
        return users

    def forgotten(self, ids: Sequence[str], erased: Sequence[str] = ()) -> None:
        """``ids`` were forgotten, and the vectors of ``erased`` (:meth:`forget_with`) with
        them: those are made again without the forgotten text."""
        self._outdated(erased, ids, erased)

    def _outdated(self, outdated: Sequence[str], forgotten: Sequence[str],
                  erased: Sequence[str]) -> None:
        """After a commit that deleted the stored vectors of ``outdated`` and forgot
        ``forgotten``: they are missing (the forgotten ones no longer), and the search drops
        the vectors of ``forgotten`` and ``erased`` (those that embed a forgotten text). Not
        loaded yet: :meth:`load` reads the same from the store."""
        with self._lock:
            if not self.loaded:
                return
            self.missing.update(outdated)
            self.missing.difference_update(forgotten)
            if self.index is not None:
                for n in [*forgotten, *erased]:
                    self.index.remove(n)

    # -- the query -----------------------------------------------------------------------------

    def query_call(self, text: str) -> Callable[[], np.ndarray | None]:
        """A function giving the unit vector of ``text`` (None: the embedder failed or cools
        down; logged once): call it off the scheduler thread."""

        def run() -> np.ndarray | None:
            with self._lock:
                cached = self._queries.get(text)
            if cached is not None:
                return cached
            if not self.available():
                return None
            try:
                (vector,) = self._embed([text])
            except Exception as exc:
                self._failed("embedding a recall's query", exc)
                return None
            self._recovered()
            with self._lock:
                if len(self._queries) >= QUERY_CACHE:
                    self._queries.pop(next(iter(self._queries)))
                self._queries[text] = vector
            return vector

        return run

    def query_vector(self, text: str, wait: float = QUERY_WAIT) -> np.ndarray | None:
        """The unit vector of ``text``, made in a thread of its own and waited for at most
        ``wait`` seconds; None when the embedder failed, cools down, or is slower (then it is
        left alone for its cool-down; logged once). For a recall made in the caller's
        thread."""
        with self._lock:
            cached = self._queries.get(text)
        if cached is not None or not self.available():
            return cached
        future: Future[np.ndarray | None] = Future()
        run = self.query_call(text)

        def target() -> None:
            try:
                future.set_result(run())
            except BaseException as exc:  # pragma: no cover - run() catches what it can
                future.set_exception(exc)

        threading.Thread(target=target, daemon=True, name="memory-rdf-query-embedding").start()
        try:
            return future.result(timeout=max(wait, 0.0))
        except FutureTimeout:
            self._failed("embedding a recall's query",
                         TimeoutError(f"no vector within {wait:g} s"))
            return None

    def nearest(self, query: np.ndarray | None, k: int) -> list[tuple[str, float]]:
        """The ``k`` live nodes nearest ``query``, best first; vectors of nodes found gone
        (forgotten since) are dropped from the index."""
        self.load()
        with self._lock:
            index = self.index
            if query is None or index is None or len(query) != index.dimension:
                return []
            found = index.nearest(query, k)
        if not found:
            return []
        alive = self.nodes.existing([n for n, _ in found])
        gone = [n for n, _ in found if n not in alive]
        if gone:
            with self._lock:
                for n in gone:
                    index.remove(n)
            found = [p for p in found if p[0] in alive]
        return found

    def stats(self) -> dict[str, Any]:
        self.load()
        with self._lock:
            return {
                "embedder": self.name,
                "vectors": len(self.index) if self.index is not None else 0,
                "vectors_missing": len(self.missing),
                "vector_dimension": self.dimension,
                # how a semantic search is answered now: through the sketch, or exactly
                "vector_search": ("two-stage" if self.index is not None
                                  and self.index.approximate else "exact"),
                "embedder_requests": self.requests,
                "embedder_failures": self.failures,
            }

