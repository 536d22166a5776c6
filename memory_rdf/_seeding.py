"""Where a recall's walk starts (SPEC §5.4 step 2, §5.5, §5.7): the focus, the pinned nodes,
the keyword entry's seeds and the semantic entry's, fused; and the keywords' weights for the
ranking. :class:`Seeder` answers for one agent; :meth:`Searcher.recall
<memory_rdf._search.Searcher.recall>` walks from what it returns.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from memory_rdf._config import Config
from memory_rdf._focus import FocusManager
from memory_rdf._journal import Metadata
from memory_rdf._nodes import NodeStore
from memory_rdf._oxigraph.term_index import KeptReads
from memory_rdf._search import Searcher, Seed, fuse
from memory_rdf._vectors import Vectors

#: Semantic entry (SPEC §5.7): nodes whose similarity to the query is below this never count
#: as close in meaning (cosine). With all-MiniLM-L6-v2, "hotel" and a sentence about a ryokan
#: score 0.31, unrelated sentences 0.13-0.14 (benchmarks' MiniLM, 2026-11-28).
MIN_SIMILARITY = 0.2
#: Semantic entry: nodes looked up as close in meaning, per seed of the entry
#: (``Config.max_entry_nodes`` seeds; the others still match when the walk reaches them).
SEMANTIC_CANDIDATES = 3


@dataclass(frozen=True)
class Seeds:
    """A recall's starting points and what the ranking needs of its entries."""

    #: Where the walk starts, ranked (ties go to the lower rank).
    seeds: list[Seed]
    #: One weight per keyword (None: the walk's order, with fewer than two keywords).
    weights: list[float] | None
    #: The semantic entry's nodes close enough in meaning, with their similarity (None: no
    #: semantic entry in this recall).
    similar: dict[str, float] | None
    #: The similarity to the query of any nodes (None: no semantic entry).
    similarity: Callable[[Sequence[str]], dict[str, float]] | None


class Seeder:
    """The seeds of one agent's recalls."""

    def __init__(
        self, config: Config, focus: FocusManager, nodes: NodeStore, searcher: Searcher,
        metadata: Metadata, vectors: Vectors | None,
    ) -> None:
        self.config, self.focus, self.nodes = config, focus, nodes
        self.searcher, self.metadata, self.vectors = searcher, metadata, vectors
        #: the focus and the pinned nodes, kept between recalls until the next commit (two
        #: queries a recall less, issue 38; an endpoint store is read each time)
        self._kept = KeptReads()

    def _focus(self) -> tuple[str, ...]:
        return tuple(self.focus.ids())

    def _pinned(self) -> tuple[str, ...]:
        return tuple(self.nodes.pinned())

    def seeds(self, keywords: list[str], entry: str, qvec: Any = None) -> Seeds:
        """Seed the walk (SPEC §5.4 step 2, §5.5, §5.7); ``keywords``: the significant ones.

        ``entry="focus"``: the focus nodes at 1.0, ranks 0 … f-1 newest first (§5.4 exactly).
        ``"keywords"``: the keyword entry's seeds (BM25 over the term index, strength = score ÷
        best score). ``"both"``: the focus seeds, then the keyword seeds ranked after them, so
        ties go to the focus. With ``Config(keyword_index=False)`` nodes carry no index terms,
        so the keyword entry finds nothing: ``"keywords"`` recalls ``""`` and ``"both"`` is
        ``"focus"`` (terms left by an earlier indexed run are not used either), and every
        keyword weighs the same in the ranking. ``qvec``: the query's vector (None: the
        embedder failed or there is none; ``"semantic"`` then answers as ``"both"``).
        """
        similar: dict[str, float] | None = None
        meaning: list[Seed] = []
        if entry in ("semantic", "both") and self.vectors is not None and qvec is not None:
            # SPEC §5.7: the nodes nearest the query's meaning seed the walk and match it.
            k = self.config.max_entry_nodes
            found = [(n, s) for n, s in self.vectors.nearest(qvec, SEMANTIC_CANDIDATES * k)
                     if s >= MIN_SIMILARITY]
            similar = dict(found)
            if found:
                best = found[0][1]
                meaning = [Seed(n, s / best, i) for i, (n, s) in enumerate(found[:k])]
        elif entry == "semantic":
            entry = "both"  # the embedder failed: the lexical entries answer (logged once)
        seeds: list[Seed] = []
        if entry in ("focus", "both"):
            focus = self._kept.get(self.nodes._store, "focus", self._focus)
            seeds = [Seed(nid, 1.0, rank) for rank, nid in enumerate(focus)]
        # Pinned nodes seed every recall at 1.0, ranked after the focus (SPEC §5.4 v3).
        seeded = {s.node for s in seeds}
        pinned = [nid for nid in self._kept.get(self.nodes._store, "pinned", self._pinned)
                  if nid not in seeded]
        seeds += [Seed(nid, 1.0, len(seeds) + i) for i, nid in enumerate(pinned)]
        lexical: list[Seed] = []
        if entry in ("keywords", "both") and self.config.keyword_index:
            lexical = self.searcher.keyword_seeds(
                keywords,
                self.config.max_entry_nodes,
                first_rank=len(seeds),
                generation=self.metadata.node_sequence,
            )
        if similar is None:
            seeds += lexical
        elif entry == "semantic":
            seeds += [Seed(s.node, s.strength, len(seeds) + s.rank) for s in meaning]
        else:  # "both": keyword and semantic seeds fused by reciprocal rank (SPEC §5.7)
            seeds += fuse([lexical, meaning], len(seeds), 2 * self.config.max_entry_nodes)
        weights: list[float] | None = None
        if seeds and len(keywords) >= 2:
            if self.config.keyword_index:
                weights = self.searcher.keyword_weights(keywords, self.metadata.node_sequence)
            else:
                weights = [1.0] * len(keywords)
        vectors = self.vectors

        def similarity(ids: Sequence[str]) -> dict[str, float]:
            index = vectors.index if vectors is not None else None
            return index.similarity(qvec, ids) if index is not None else {}

        return Seeds(seeds, weights, similar, similarity if similar is not None else None)

    def keyword_seeds(self, keywords: Sequence[str], limit: int) -> list[Seed]:
        """The keyword entry's seeds alone (SPEC §5.5), at most ``limit``, as a recall takes
        them (the store's current generation of collection statistics)."""
        return self.searcher.keyword_seeds(
            keywords, limit, generation=self.metadata.node_sequence)
