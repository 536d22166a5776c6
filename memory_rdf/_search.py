"""Recall: a best-first walk from the seeds over live links (SPEC §5.4, §5.5).

The walk itself is a few lines of Python over one global priority queue. The graph it walks
is fetched from the store level by level: one ``outgoing_links`` query per hop for the whole
frontier (never one per node), one ``matching_nodes`` query for the keyword test, and text
only for the results. Every node the walk can expand (hop < depth along its first, best
path) is within ``depth - 1`` hops of a seed, so fetching BFS levels ``0 … depth-1`` gives the
walk every edge it can use. On the SPEC §2 layout the level queries return the frontier's
dangling links too, so the perception entries (SPEC §5.4) need a lookup only for results that
were never expanded (``dangling_targets`` through the shortcut triples, then
``dangling_link_details``); on the read mirror the level queries read the live link graphs
only, and the results' dangling links are looked up (``mirror_lost``); see
``benchmarks/PROFILE.md``.

The seeds are the focus (SPEC §5.4) and/or the keyword entry (SPEC §5.5,
:meth:`Searcher.keyword_seeds`): the nodes whose index terms best match the query's terms,
ranked BM25-style over the term index alone — on an embedded store its derived in-memory copy
(:mod:`memory_rdf._oxigraph.term_index`), else in SPARQL (``keyword_entry.rq``).
"""

from __future__ import annotations

import functools
import heapq
import operator
import re
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import chain
from typing import Any

from memory_rdf import _vocab as V
from memory_rdf._config import EntryTemplates, Templates
from memory_rdf._links import LinkStore, by_strength
from memory_rdf._listing import Listing, Window
from memory_rdf._nodes import Match, NodeStore
from memory_rdf._oxigraph import MemoryStore, lit, node_id, render
from memory_rdf._oxigraph.term_index import TermIndex, read_index
from memory_rdf._ranking import (
    RANK_ALL_BY_SIMILARITY,
    Hit,
    current_first,
    rank,
    strength_band,
)
from memory_rdf._text import (
    keyword_rules,
    relation_display,
    relation_forms,
    writes_chinese,
)
from memory_rdf._types import as_utc
from memory_rdf._words import (
    bm25_idf,
    keyword_weight,
    query_terms,
    with_word_forms,
)

#: Most postings (node, term) one keyword entry reads. Query terms are scored rarest first
#: while their document frequencies fit in this budget (the rarest always is, its postings
#: read up to the budget); the more frequent rest — the lowest idf, so the smallest share of
#: any score — is left out. Bounds the entry's cost whatever the store size (SPEC §7: rows
#: read, not stored, are what a query costs).
POSTING_BUDGET = 10_000
#: Nodes with the largest matched-idf sums whose length is looked up for BM25's length
#: normalization (one index probe each): this many, or 5 × max_entry_nodes when more.
CANDIDATES = 50
#: Document frequencies at least this large are cached with N and avgdl (and dropped with
#: them): counting a frequent term's postings is the costly part of the df query (~0.3 µs a
#: posting on the read mirror: two terms of df 674 and 724 took 0.45 ms, a third of a
#: two-keyword recall; was 1,000, issue 16), and a term carried by 100 nodes or more moves
#: its idf by a few percent at most before the next refresh. Rarer terms are always counted
#: afresh (≤ 0.03 ms each), so a term remembered a moment ago is found at once.
DF_CACHE_MIN = 100
#: N and avgdl are recomputed (one aggregate over every node) once the creation counter has
#: advanced by more than this fraction of the cached N since they were last computed.
STATS_REFRESH = 0.1

#: Results whose texts (and perceptions) are read in one go while the recall text is built
#: within a budget (``max_chars``); without one, all of them at once.
RENDER_CHUNK = 32
#: Question marks: a result whose text holds one asks something, and within a budget its
#: reply follows it (:meth:`Searcher.render`).
QUESTION_MARKS = ("?", "？")

@functools.lru_cache(maxsize=8)
def keep_apart(separator: str) -> Callable[[str], str]:
    """What keeps a recall's entries apart when their text holds the separator's line: for a
    separator whose visible part stands on a line of its own (``"\\n---\\n"``, the default;
    also ``"\\n\\n---\\n\\n"`` or ``"\\r\\n---\\r\\n"``), every line of an entry that is that
    line (a Markdown rule in a remembered reply, ``---``) gets one space before it, so that
    splitting the recall text at the separator gives back its entries, each starting with
    its marker (SPEC §5.4; the tool descriptions tell models that lines of ``---`` separate
    them). A separator within a line (``" | "``) or of whitespace only: entries are left as
    they are.

    >>> keep_apart("\\n---\\n")("[记忆] intro\\n---\\nmore\\n---")
    '[记忆] intro\\n ---\\nmore\\n ---'
    >>> keep_apart("\\r\\n\\r\\n===\\r\\n")("[记忆] a\\r\\n===\\r\\nb")
    '[记忆] a\\r\\n ===\\r\\nb'
    """
    core = separator.strip()
    at = separator.find(core) if core else -1
    before, after = separator[:at], separator[at + len(core):]
    if not core or "\n" in core or "\n" not in before or "\n" not in after:
        return lambda entry: entry
    line = before[before.rindex("\n") + 1:] + core + after[:after.index("\n")].rstrip("\r")
    own_line = re.compile(f"^{re.escape(line)}(?=\r?$)", re.MULTILINE)
    # Most entries hold no such line: a substring test (~0.2 µs) spares them the regex (~1.4).
    return lambda entry: own_line.sub(lambda m: " " + m.group(), entry) if line in entry else entry


def asks(content: str) -> bool:
    """Whether a node's text asks something (holds a question mark, :data:`QUESTION_MARKS`)."""
    return any(mark in content for mark in QUESTION_MARKS)


def scored_terms(terms: Sequence[str], df: Mapping[str, int]) -> list[str]:
    """The terms the keyword entry scores (SPEC §5.5): those some node carries (``df`` > 0),
    rarest first, while their postings stay within :data:`POSTING_BUDGET` (the rarest one
    always, however many postings it has)."""
    present = sorted((t for t in terms if df.get(t, 0) > 0), key=lambda t: df[t])
    scored: list[str] = []
    postings = 0
    for term in present:
        if scored and postings + df[term] > POSTING_BUDGET:
            break
        scored.append(term)
        postings += df[term]
    return scored


@dataclass(frozen=True)
class Seed:
    """A starting point: ``rank`` orders ties (0 = most recent focus node)."""

    node: str
    strength: float
    rank: int


def walk(
    seeds: Sequence[Seed],
    adjacency: dict[str, list[tuple[str, float]]],
    matches: set[str] | None,
    depth: int,
    limit: int,
    skip: set[str] | None = None,
) -> list[Hit]:
    """The best-first walk of SPEC §5.4 steps 2–3 over an in-memory adjacency.

    ``adjacency[node]`` lists ``(target, strength)`` of the live, relation-filtered links to
    live nodes; ``matches`` is None when every node matches. Priority: higher path
    strength, then more recent seed, then discovery order. ``skip``: nodes that match
    nothing and are never expanded (no path of fewer than ``depth`` hops reaches them):
    visiting them changes nothing, so they are not pushed.
    """
    heap: list[tuple[float, int, int, str, int]] = []
    # node → (priority, seed rank) of its best entry pushed so far. An entry that is not
    # better than that one would pop after it (its order is larger) and be skipped as
    # visited: it is not pushed at all (the same pops, a heap a fraction of the size:
    # ~5 pushes a node reached at depth 4 were ~1).
    best: dict[str, tuple[float, int]] = {}
    order = 0
    for seed in seeds:
        heap.append((-seed.strength, seed.rank, order, seed.node, 0))
        order += 1
        key = (-seed.strength, seed.rank)
        if seed.node not in best or key < best[seed.node]:
            best[seed.node] = key
    heapq.heapify(heap)
    visited: set[str] = set(skip) if skip else set()
    hits: list[Hit] = []
    push, pop, known = heapq.heappush, heapq.heappop, best.get
    while heap:
        neg, rank, _, node, hop = pop(heap)
        if node in visited:
            continue
        visited.add(node)
        if matches is None or node in matches:
            hits.append(Hit(node, -neg, hop))
            if limit and len(hits) >= limit:
                break
        if hop < depth:
            nxt = hop + 1
            for target, strength in adjacency.get(node, ()):
                if target in visited:
                    continue
                key = (neg * strength, rank)
                before = known(target)
                if before is not None and key >= before:
                    continue
                best[target] = key
                push(heap, (key[0], rank, order, target, nxt))
                order += 1
    return hits


def fuse(lists: Sequence[Sequence[Seed]], first_rank: int, limit: int) -> list[Seed]:
    """The seeds of several entries fused by reciprocal rank (SPEC §5.7): a node's fused
    score is Σ 1 / (RRF_K + its rank in each list), its strength that score ÷ the best, at
    most ``limit`` seeds, ranked from ``first_rank`` in fused order."""
    scores: dict[str, float] = {}
    for seeds in lists:
        for r, seed in enumerate(sorted(seeds, key=lambda s: s.rank)):
            scores[seed.node] = scores.get(seed.node, 0.0) + 1.0 / (RRF_K + r + 1)
    if not scores:
        return []
    order = sorted(scores, key=lambda n: -scores[n])[:limit]
    top = scores[order[0]]
    return [Seed(n, scores[n] / top, first_rank + i) for i, n in enumerate(order)]


#: Reciprocal-rank fusion's constant (:func:`fuse`).
RRF_K = 60


def entry_fields(content: str, said_at: datetime | None, created_at: datetime) -> dict[str, str]:
    """What a memory entry's template is filled with (SPEC §5.4 v3): ``content``, ``date``
    (YYYY-MM-DD, UTC, of the said time where known, else the creation time), ``said_at`` (that
    time, ISO 8601) and ``created_at`` (ISO 8601)."""
    created = as_utc(created_at) if isinstance(created_at, datetime) else None
    said = as_utc(said_at) if isinstance(said_at, datetime) else created
    # each time written once (a said time not known is the creation time); the date is the
    # ISO form's first ten characters (years are written with four digits)
    created_iso = created.isoformat() if created is not None else ""
    said_iso = created_iso if said is created or said is None else said.isoformat()
    return {"content": content, "date": said_iso[:10], "said_at": said_iso,
            "created_at": created_iso}


_TARGET = operator.itemgetter(0)
_STRENGTH = operator.itemgetter(1)


@dataclass(frozen=True)
class Graph:
    """What a recall reads of the network before walking it (:meth:`Searcher.fetch`)."""

    #: node → ``(target, strength)`` of its live links to live nodes, for every node whose
    #: links were read (the BFS levels ``0 … depth-1``), strongest first, then target id.
    adjacency: dict[str, list[tuple[str, float]]]
    #: every node reached, seeds first, in BFS order.
    reached: list[str]
    #: node → relations of its live dangling links (strongest first), for the nodes of
    #: ``adjacency`` that have any; None when the level queries did not read them (the read
    #: mirror's: only the results' are looked up, :meth:`Searcher.render`).
    dangling: dict[str, list[str]] | None
    #: the nodes ``depth`` hops from the seeds and no fewer (never expanded by the walk).
    last: Sequence[str] = ()


@dataclass(frozen=True)
class CollectionStats:
    """BM25's collection statistics, as of the creation counter ``generation``."""

    nodes: int  # N
    avgdl: float  # mean memory:termCount over all nodes (a node without terms counts 0)
    generation: int


class Searcher:
    def __init__(
        self,
        nodes: NodeStore,
        links: LinkStore,
        templates: Templates,
        store: MemoryStore | None = None,
        language: str = "auto",
    ) -> None:
        self._nodes = nodes
        self._links = links
        self._templates = templates
        self._language = templates.language or language
        # The keyword entry reads the term index itself; by default through the node store's
        # agent store (the same store, the same thread).
        self._store: MemoryStore = store if store is not None else nodes._store
        self._listing = Listing(self._store, 0.0)
        self._stats: CollectionStats | None = None
        self._frequent_df: dict[str, int] = {}

    # -- keyword entry (SPEC §5.5) -------------------------------------------------------------

    def collection_stats(self, generation: int) -> CollectionStats:
        """N and avgdl for BM25, cached on the searcher.

        ``generation`` is the agent's node-creation counter (``Metadata.node_sequence``: it
        moves by one per node created, for free). The statistics are recomputed — one
        aggregate query over every node, ``keyword_entry_stats.rq`` — the first time and
        then only when more than ``STATS_REFRESH`` × N nodes were created since, so they are
        never more than about a tenth behind the store's growth and cost a scan once per
        such growth, not per recall. Forgetting and compression shrink N and avgdl without
        moving the counter: those changes are picked up at the next refresh (or the next
        ``initialize``). Both only scale idf and length normalization, so a slightly stale
        value changes scores a little, not which nodes carry the query's terms.
        """
        stats = self._stats
        if (
            stats is None
            or generation < stats.generation
            or generation - stats.generation > STATS_REFRESH * stats.nodes
        ):
            rows = self._store.rows(render("keyword_entry_stats"))
            nodes, terms = rows[0] if rows else (0, 0)
            nodes, terms = int(nodes or 0), int(terms or 0)
            avgdl = terms / nodes if nodes and terms else 1.0
            stats = self._stats = CollectionStats(nodes, avgdl, generation)
            self._frequent_df.clear()
        return stats

    def document_frequencies(self, terms: Sequence[str], cap: int) -> dict[str, int]:
        """``term → df`` (number of nodes carrying it), each counted up to ``cap``; terms no
        node carries are absent. Frequent terms' counts come from the cache (``DF_CACHE_MIN``)."""
        out = {t: self._frequent_df[t] for t in terms if t in self._frequent_df}
        todo = [t for t in terms if t not in out]
        if todo:
            # the derived term index (memory_rdf._oxigraph.term_index), else SPARQL
            counted: list[tuple[Any, Any]] | None = read_index(
                self._store, lambda ix: [(t, min(ix.df(t), cap)) for t in todo if ix.df(t)]
            )
            if counted is None:
                literals = [lit(t) for t in todo]
                query = self._store.render(
                    "keyword_entry_df", keywords=literals, terms=literals, postings=int(cap)
                )
                counted = self._store.rows(query)
            for term, df in counted:
                out[term] = int(df)
                if out[term] >= DF_CACHE_MIN:
                    self._frequent_df[term] = min(out[term], cap)
        return out

    def keyword_seeds(
        self,
        keywords: Sequence[str],
        limit: int,
        *,
        first_rank: int = 0,
        generation: int = 0,
    ) -> list[Seed]:
        """The keyword entry of SPEC §5.5: at most ``limit`` seeds, best first.

        The query's terms (:func:`query_terms`) are looked up in the term index; those no node
        carries are dropped, the rest scored rarest first within ``POSTING_BUDGET``, and
        ``keyword_entry.rq`` ranks the nodes carrying them by BM25. Each seed's strength is its
        score ÷ the best score (the best seed has 1.0); ranks follow from ``first_rank`` in
        score order, so after focus seeds (ranks ``0 … f-1``) ties go to the focus. No terms,
        or no node carrying any of them: no seeds.
        """
        terms = query_terms(keywords)
        if not terms or limit < 1:
            return []
        stats = self.collection_stats(generation)  # first: a refresh also drops cached dfs
        # the other forms of English query words too (:func:`word_forms`)
        terms = with_word_forms(terms)
        df = self.document_frequencies(terms, POSTING_BUDGET + 1)
        scored = scored_terms(terms, df)
        if not scored:
            return []
        candidates = max(CANDIDATES, 5 * limit)
        idf = [(t, bm25_idf(stats.nodes, df[t])) for t in scored]
        found: list[tuple[Any, Any]] | None = read_index(  # None: SPARQL's turn
            self._store,
            lambda ix: ix.ranked(idf, stats.avgdl, POSTING_BUDGET, candidates, int(limit)),
        )
        if found is None:
            found = self._sparql_seeds(idf, stats, scored, candidates, limit)
        rows = [(iri, score) for iri, score in found if isinstance(score, float) and score > 0]
        if not rows:
            return []
        best = rows[0][1]
        return [
            Seed(node_id(iri), score / best, first_rank + i)
            for i, (iri, score) in enumerate(rows)
        ]

    def _sparql_seeds(
        self, idf: list[tuple[str, float]], stats: CollectionStats, scored: list[str],
        candidates: int, limit: int,
    ) -> list[tuple[Any, Any]]:
        """``keyword_entry.rq``: ``(node IRI, score)`` best first."""
        entries = [lit(f"{w!r} {stats.avgdl!r} {t}") for t, w in idf]
        query = self._store.render(
            "keyword_entry",
            keywords=entries,
            terms=[lit(t) for t in scored],
            postings=POSTING_BUDGET,
            candidates=candidates,
            results=int(limit),
        )
        return [(iri, score) for iri, score in self._store.rows(query)]

    def fetch(self, seeds: Sequence[Seed], depth: int, relations: Sequence[str] | None) -> Graph:
        """The walk's graph: adjacency of every node within ``depth - 1`` hops, every node
        reached, and the dangling links of every node whose links were read."""
        adjacency: dict[str, list[tuple[str, float]]] = {}
        reached: dict[str, None] = dict.fromkeys(s.node for s in seeds)
        frontier = list(reached)
        lost: list[tuple[str, float, str]] | None = []
        for _ in range(depth):
            if not frontier:
                break
            fetched, dangling = self._links.outgoing(frontier, relations)
            if dangling is None or lost is None:
                lost = None
            else:
                lost.extend(dangling)
            level = [fetched.get(node, []) for node in frontier]
            adjacency.update(zip(frontier, level, strict=True))
            # every target once, in order of discovery (C-level: ~3,600 links at depth 4)
            ends = dict.fromkeys(map(_TARGET, chain.from_iterable(level)))
            frontier = [t for t in ends if t not in reached]
            reached.update(dict.fromkeys(frontier))
        for targets in adjacency.values():
            # Discovery order among one node's links must not depend on the engine's row order:
            # strongest first, then by target id (two stable sorts on C-level keys, instead of
            # a key tuple built per link).
            if len(targets) > 1:
                targets.sort(key=_TARGET)
                targets.sort(key=_STRENGTH, reverse=True)
        # after the loop, the frontier is the level `depth` (or empty, when it ended sooner)
        return Graph(adjacency, list(reached), None if lost is None else by_strength(lost),
                     frontier)

    def keyword_weights(self, keywords: Sequence[str], generation: int) -> list[float]:
        """The rarity weight of each recall keyword (:func:`keyword_weight`), from the term
        index's statistics (``memory:term``, the same counts the keyword entry uses)."""
        stats = self.collection_stats(generation)
        per_keyword = [query_terms([k]) for k in keywords]
        terms = list(dict.fromkeys(t for ts in per_keyword for t in ts))
        df = self.document_frequencies(terms, POSTING_BUDGET + 1) if terms else {}
        return [keyword_weight(stats.nodes, [df.get(t, 0) for t in ts]) for ts in per_keyword]

    def may_match(self, ids: Sequence[str], keywords: Sequence[str]
                  ) -> tuple[Sequence[str], set[str] | None]:
        """Those of ``ids`` that may match ``keywords`` (SPEC §5.4 v3 rule 4): every node
        whose texts, folded (:func:`~memory_rdf._text.fold`), could hold one of the needles
        the keyword test looks for (:class:`~memory_rdf._text.KeywordRule`), by the texts'
        signatures in the derived term index (:meth:`TermIndex.may_hold
        <memory_rdf._oxigraph.term_index.TermIndex.may_hold>`); and those of them with a text
        that does not fold alike (:meth:`TermIndex.read_whole
        <memory_rdf._oxigraph.term_index.TermIndex.read_whole>`: their texts are read whole).
        Without the index: all of them, and None (unknown).
        The nodes left out match nothing, so the store reads no text of theirs: at 10k nodes
        ~15 µs a node reached (benchmarks/PROFILE.md). The index is used when the keyword
        entry has built it (the default recall, SPEC §5.5), never built for this alone: a
        focus-only agent keeps no index in memory."""
        needles = list(dict.fromkeys(n for r in keyword_rules(keywords) for n in r.needles))
        iris = [V.NODE + i for i in ids]

        def read(ix: TermIndex) -> tuple[list[str], list[str]]:
            kept = ix.may_hold(iris, needles)
            return kept, ix.read_whole(kept, needles)

        found = read_index(self._store, read, derive=False)
        if found is None:
            return ids, None
        cut = len(V.NODE)
        return [iri[cut:] for iri in found[0]], {iri[cut:] for iri in found[1]}

    def recall(
        self,
        seeds: Sequence[Seed],
        keywords: Sequence[str],
        relations: Sequence[str] | None,
        depth: int,
        limit: int,
        max_chars: int | None = None,
        *,
        weights: Sequence[float] | None = None,
        window: Window | None = None,
        similar: dict[str, float] | None = None,
        similarity: Callable[[Sequence[str]], dict[str, float]] | None = None,
    ) -> str:
        """The recall text: the walk (SPEC §5.4 steps 2–3), ranked (:func:`rank`) when
        ``weights`` (one per keyword) are given and there are at least two keywords, cut to
        ``limit`` entries (0 = unlimited) and ``max_chars`` characters (None = unlimited).

        ``similar`` (the semantic entry, SPEC §5.7): the nodes close enough in meaning to the
        query, with their similarity: they match whatever their words, and the results are
        ranked with similarity as part of the score."""
        if not seeds:
            return ""
        if relations is not None:
            relations = relation_forms(relations)  # SPEC §5.4 v3: either form of a name
        graph = self.fetch(seeds, depth, relations)
        semantic = similar is not None
        ranked = (weights is not None and len(keywords) >= 2) or semantic
        if semantic and (weights is None or len(weights) != len(keywords)):
            weights = [1.0] * len(keywords)
        details: dict[str, Match] = {}
        # only the nodes whose texts may hold a keyword are tested by the store
        candidates, unfolded = (self.may_match(graph.reached, keywords) if keywords
                                else (graph.reached, None))
        if ranked or (keywords and not all(r.han for r in keyword_rules(keywords))):
            # the texts are compared word by word here, and carry the nodes' times
            details = (self._nodes.match_details(candidates, keywords, unfolded)
                       if keywords else {})
            matches: set[str] | None = set(details) if keywords else None
        else:
            matches = self._nodes.matching(candidates, keywords, unfolded) if keywords else None
        if semantic:
            # close in meaning: a match without a shared word; with no keywords, the query's
            # meaning alone says what matches
            matches = set(similar or ()) if matches is None else matches | set(similar or ())
        if window is not None:
            # SPEC §5.6: nodes outside [since, until) are walked through, never returned.
            timely = self._listing.in_window(graph.reached, window)
            matches = timely if matches is None else matches & timely
        keys: list[Hashable]
        # the last level's nodes that match nothing: the walk need not push them
        skip = None if matches is None else set(graph.last).difference(matches)
        if ranked:
            assert weights is not None
            found = walk(seeds, graph.adjacency, matches, depth, 0, skip)
            scored = similar
            if similar is not None and similarity is not None and RANK_ALL_BY_SIMILARITY:
                # every result's similarity counts in its rank, not only the nearest nodes'
                sims = similarity([h.node for h in found])
                scored = {**{n: max(v, 0.0) for n, v in sims.items()}, **similar}
            hits, keys = rank(found, details, weights, keywords, scored)
        else:
            hits = walk(seeds, graph.adjacency, matches, depth, limit, skip)
            keys = [strength_band(h.strength) for h in hits]
        # the times of the nodes whose texts were compared (read with them)
        known: dict[str, tuple[datetime | None, datetime]] = {
            n: (m.said_at, m.created_at) for n, m in details.items() if m.created_at is not None}
        if keywords or semantic:  # without a query nothing matches alike: the walk's order

            def dates(ids: list[str]) -> dict[str, tuple[datetime | None, datetime]]:
                missing = [n for n in ids if n not in known]
                if missing:
                    known.update(self._nodes.dates(missing))
                return {n: known[n] for n in ids if n in known}

            hits = current_first(hits, keys, dates)
        if ranked and limit:
            hits = hits[:limit]
        # Reply context only where the order is the ranking's and a budget decides how much
        # is read: a ranked recall within max_chars, without a time window (SPEC §5.6).
        replies = ranked and max_chars is not None and window is None
        return self.render([h.node for h in hits], relations, graph, max_chars, replies=replies,
                           dates=known)

    def _entries(
        self, ids: Sequence[str], dates: Mapping[str, tuple[datetime | None, datetime]]
    ) -> dict[str, tuple[str, str, datetime | None, datetime]]:
        """:meth:`NodeStore.entries` of ``ids``; of those whose times are in ``dates``, only
        the content and phrase are read (two lookups a node instead of four)."""
        dated = [n for n in ids if n in dates]
        if not dated:
            return self._nodes.entries(ids)
        rest = [n for n in ids if n not in dates]
        out = self._nodes.entries(rest) if rest else {}
        for nid, (content, phrase) in self._nodes.texts(dated).items():
            said_at, created_at = dates[nid]
            out[nid] = (content, phrase, said_at, created_at)
        return out

    def render(
        self,
        results: Sequence[str],
        relations: Sequence[str] | None,
        graph: Graph,
        max_chars: int | None = None,
        *,
        replies: bool = False,
        dates: Mapping[str, tuple[datetime | None, datetime]] | None = None,
    ) -> str:
        """The recall text of SPEC §5.4, within ``max_chars`` (§5.4 v2: entries in result
        order while the joined text fits; the first entry always whole; a perception entry
        right after its result, counted in the characters). Texts and perceptions are read a
        chunk of results at a time, so a small budget reads few nodes. The dangling links of
        results whose links ``graph`` already read are taken from it; only the others' are
        looked up.

        ``replies``: a result that asks something (its text holds a question mark) is
        followed by its reply — the node that came right after it (:meth:`LinkStore.replies`:
        its "下文", or the first node of the next remember linked to it) — as one more
        memory entry after the result's own entries, unless that node was shown already;
        a node shown as a reply is not shown again as a result. Reply entries count toward
        ``max_chars`` like any entry, not toward the results' ``limit``. (On conversations the
        answer to a question is often the next turn, which shares none of the question's
        words: benchmarks/RECALL.md.)

        ``dates``: ``id → (said_at or None, created_at)`` of results whose times are known
        already (read with their texts by the keyword test): only their content and phrase
        are read.

        Each entry is written in its content's language (SPEC §5.4 v3, :func:`writes_chinese`
        under ``Config.language``): the memory entry dated (:func:`entry_fields`), the
        perception entry's relation names in their display form (:func:`relation_display`)."""
        t = self._templates
        sep = len(t.entry_separator)
        apart = keep_apart(t.entry_separator)
        entries: list[str] = []
        used = 0

        def take(entry: str) -> bool:
            nonlocal used
            entry = apart(entry)
            cost = len(entry) + (sep if entries else 0)
            if entries and max_chars is not None and used + cost > max_chars:
                return False
            entries.append(entry)
            used += cost
            return True

        shown: set[str] = set()
        language = self._language
        forms = {chinese: t.for_language(chinese) for chinese in (False, True)}

        def memory_entry(row: tuple[str, str, datetime | None, datetime]) -> tuple[str, bool]:
            content, _, said_at, created_at = row
            chinese = writes_chinese(content, language)
            text = forms[chinese].memory.format(
                **entry_fields(content, said_at, created_at)
            )
            return text, chinese

        # Without a budget every result is shown: its texts and perceptions are read at once
        # (two queries, not two a chunk: ~0.3 M instructions a query; issue 38).
        chunk = RENDER_CHUNK if max_chars is not None else max(len(results), 1)
        for start in range(0, len(results), chunk):
            part = [nid for nid in results[start : start + chunk] if nid not in shown]
            texts = self._entries(part, dates or {})
            read = graph.dangling
            dangling = {} if read is None else {nid: read[nid] for nid in part if nid in read}
            todo = part if read is None else [nid for nid in part if nid not in graph.adjacency]
            if todo:
                dangling.update(self._links.dangling_outgoing(todo, relations))
            reply: dict[str, str] = {}
            if replies:
                asking = [n for n in part if n in texts and asks(texts[n][0])]
                reply = self._links.replies(asking, relations) if asking else {}
                wanted = [r for r in dict.fromkeys(reply.values()) if r not in texts]
                texts.update(self._nodes.entries(wanted) if wanted else {})
            for nid in part:
                if nid not in texts or nid in shown:  # a result is a live node; or shown
                    continue
                entry, chinese = memory_entry(texts[nid])
                if not take(entry):
                    return t.entry_separator.join(entries)
                shown.add(nid)
                if nid in dangling and not take(
                    perception(forms[chinese], texts[nid][1], dangling[nid])
                ):
                    return t.entry_separator.join(entries)
                after = reply.get(nid)
                if after is not None and after not in shown and after in texts:
                    if not take(memory_entry(texts[after])[0]):
                        return t.entry_separator.join(entries)
                    shown.add(after)
        return t.entry_separator.join(entries)


def perception(t: EntryTemplates, phrase: str, relations: Sequence[str]) -> str:
    """The perception entry of a result with live dangling links of these relations
    (SPEC §5.4): the names in the entry's language, each once; the unnamed form when none has
    a name."""
    names = [
        n for n in dict.fromkeys(relation_display(r, t.chinese) for r in relations if r)
    ]
    if names:
        return t.forgotten_named.format(phrase=phrase, relations=t.relation_separator.join(names))
    return t.forgotten_unnamed.format(phrase=phrase)
