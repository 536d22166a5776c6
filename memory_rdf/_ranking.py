"""Recall's ranking (SPEC §5.4 v2, v3; §5.7): a walk's results ordered by how well they
match the query (keywords, path strength, similarity), then current facts first among the
results that match alike. :class:`memory_rdf._search.Searcher` calls :func:`rank` and
:func:`current_first`; the constants are the measured choices of benchmarks/RECALL.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from datetime import datetime

from memory_rdf._nodes import Match
from memory_rdf._text import stem
from memory_rdf._types import as_utc
from memory_rdf._words import query_terms, rank_words

#: Ranking (SPEC §5.4 v2, :func:`rank`): a keyword found in one of the node's own
#: ``memory:keyword`` values counts (1 + OWN_BONUS) times.
OWN_BONUS = 0.25
#: Ranking: a keyword the node matches only as a substring of a longer word (the walk's
#: matching rule, SPEC §5.4 step 4: "art" in "party"), not as a word of its own (after
#: stemming: "painted" and "paintings" are one word), counts this much.
SUBSTRING_CREDIT = 0.5
#: Ranking: the exponent of path strength in the score (0 = match quality alone, ties by the
#: walk's order; 1 = match quality × path strength).
STRENGTH_EXPONENT = 0.1
#: Current facts first (SPEC §5.4 v3, :func:`current_first`): two results match a recall
#: alike when they match the same keywords and their path strengths lie
#: in the same band of this factor ((1/F^(b+1), 1/F^b]: with 4, every seed at a quarter of
#: the best keyword score or more is alike a focus node).
ALIKE_BAND = 4.0
#: Semantic entry (SPEC §5.7): the share of a result's score that is its similarity to the
#: query (the rest is the keyword match above); with no keywords it is all of it. Small: on
#: long conversations the words of a question are the stronger signal (LoCoMo dev, raw
#: turns: BM25 52.4%, all-MiniLM-L6-v2 47.0%), so similarity orders results that match
#: alike and brings meaning-only matches after the word matches (benchmarks/RECALL.md,
#: decision 24: 0.5 → 55.8 on conversations 41-42, 0.25 → 64.6, 0.1 → 65.5, keywords 62.8).
SEMANTIC_WEIGHT = 0.1
#: Semantic entry: every result's similarity is part of its rank, not only the nearest
#: nodes' (the others counted 0, so a result matching every keyword but outside the nearest
#: 3 × max_entry_nodes ranked below a meaning-only match: 55.8 → 63.9 at weight 0.5).
RANK_ALL_BY_SIMILARITY = True
#: Semantic entry: the results' similarity bands (:func:`rank`'s alike key) are this wide,
#: as a fraction of sem (:func:`rank`: of the way from the results' median similarity to the
#: best; below the median, of the best similarity).
SIMILARITY_BAND = 0.2
#: Semantic entry: a result's similarity counts from the median of the results'
#: similarities up to the best (0 → 1), so what most results share (the speaker, the topic
#: of the conversation) weighs nothing and what stands out above it weighs in full; below the
#: median, similarity only breaks ties, at this much of the best: a result closer in
#: meaning still comes before an alike one farther (benchmarks/RECALL.md, decision 27:
#: LoCoMo dev with all-MiniLM-L6-v2, 66.2 → 66.7 on conversations 41-42, 61.9 → 63.2 held
#: out on 43/44/47).
SIMILARITY_TIE = 0.01


@dataclass(frozen=True)
class Hit:
    node: str
    strength: float
    hop: int


def strength_band(strength: float) -> int:
    """The band of a path strength (:data:`ALIKE_BAND`): 0 for (1/F, 1], 1 for (1/F², 1/F], …"""
    if strength >= 1.0:
        return 0
    if strength <= 0.0:
        return 1 << 30
    return int(math.floor(math.log(strength) / -math.log(ALIKE_BAND) + 1e-9))


def _credits(
    m: Match, stems: Sequence[frozenset[str]], n: int
) -> tuple[float, ...]:
    """The credit of each of ``n`` keywords for one matched node (see :func:`rank`)."""
    words = rank_words(" ".join((m.content, *m.keywords))) if stems else frozenset()
    out = []
    for k in range(n):
        terms = stems[k] if k < len(stems) else frozenset()
        if terms and terms <= words:
            out.append(1.0)
        elif k in m.matched:
            out.append(SUBSTRING_CREDIT if terms else 1.0)
        else:
            out.append(0.0)
    return tuple(out)


def rank(
    hits: Sequence[Hit],
    details: dict[str, Match],
    weights: Sequence[float],
    keywords: Sequence[str] = (),
    similar: dict[str, float] | None = None,
) -> tuple[list[Hit], list[Hashable]]:
    """The walk's results ordered by relevance (SPEC §5.4 v2), best first, and each one's
    alike key (:func:`current_first`, SPEC §5.4 v3):

        credit(n, k) = 1                 when every term of k is a word of n (stemmed)
                       SUBSTRING_CREDIT  when n matches k (§5.4 v3 rule 4) otherwise: a Han
                                         keyword inside a longer word, an English one by a
                                         part of a joined word ("gpt" in "gpt-4")
                       0                 otherwise
        match(n) = Σ_k w(k) · credit(n, k) · (1 + OWN_BONUS · [k in n's own keywords])
                   / Σ_k w(k) · (1 + OWN_BONUS)
        score(n) = match(n) · strength(n) ** STRENGTH_EXPONENT

    The terms of k are its query terms (:func:`query_terms`), the words of n the terms of its
    matching content and own keywords (:func:`rank_words`), both stemmed (:func:`stem`); a
    keyword without terms (stop words only) gets credit 1 when it matches. w(k) is
    the keyword's rarity (:func:`keyword_weight`), strength(n) the path strength. The sort is
    stable on the walk's best-first order, so when every result matches equally (the same
    credits, own or not) the order is the walk's, ties included: the score is then a
    non-decreasing function of path strength, which the walk's order never increases.
    Measured choices (benchmarks/RECALL.md): word match over substring, stems, the bonus and
    the exponent; BM25's term frequency and length normalization were left out.

    The alike key of a result is the set of keywords it matches (however: own keyword or
    not, whole word or part) and its path strength's band (:func:`strength_band`): results
    with equal keys match the query alike (:func:`current_first`).

    With the semantic entry (SPEC §5.7), ``similar`` maps the results to their cosine
    similarity to the query (every result's when :meth:`Searcher.recall` is given the
    index, negative ones as 0), and similarity is part of the score, counted from the
    results' median similarity (:data:`SIMILARITY_TIE`)::

        s(n)     = similarity(n)                            (0 for a node not in ``similar``)
        med      = the median of the results' s, below the best
        sem(n)   = max(0, (s(n) - med) / (best - med)) + SIMILARITY_TIE · s(n) / best
        score(n) = ((1 - SEMANTIC_WEIGHT) · match(n) + SEMANTIC_WEIGHT · sem(n))
                   · strength(n) ** STRENGTH_EXPONENT          (no keywords: sem(n) alone)

    and the alike key holds the similarity's band (:data:`SIMILARITY_BAND`) too: of sem(n)
    from the median up, of s(n) / best below it (bands of their own), so results far apart
    in meaning are never alike.
    """
    total = sum(w * (1 + OWN_BONUS) for w in weights) or 1.0
    stems = [frozenset(stem(t) for t in query_terms([k])) for k in keywords]
    best = max(similar.values(), default=0.0) if similar else 0.0
    share = (SEMANTIC_WEIGHT if weights else 1.0) if best > 0 else 0.0
    med = 0.0
    if similar and best > 0 and hits:
        ordered = sorted(similar.get(hit.node, 0.0) for hit in hits)
        med = min(ordered[len(ordered) // 2], best * 0.999)
    scores: list[float] = []
    keys: list[Hashable] = []
    for hit in hits:
        m = details.get(hit.node)
        sem, band = 0.0, 0
        if similar and best > 0:
            s = similar.get(hit.node, 0.0)
            sem = max(0.0, (s - med) / (best - med)) + SIMILARITY_TIE * s / best
            band = _band(min(sem, 1.0), share) if s >= med else -1 - _band(s / best, share)
        if m is None:  # matched by meaning alone (or, without a query, every node matches)
            scores.append(share * sem * hit.strength**STRENGTH_EXPONENT)
            keys.append((frozenset(), strength_band(hit.strength), band))
            continue
        credits = _credits(m, stems, len(weights))
        quality = sum(
            w * c * (1 + (OWN_BONUS if k in m.own else 0.0))
            for k, (w, c) in enumerate(zip(weights, credits, strict=True))
        )
        lexical = quality / total
        scores.append(((1 - share) * lexical + share * sem) * hit.strength**STRENGTH_EXPONENT)
        keys.append((frozenset(m.matched), strength_band(hit.strength), band))
    order = sorted(range(len(hits)), key=lambda i: (-scores[i], i))
    return [hits[i] for i in order], [keys[i] for i in order]


def _band(sem: float, share: float) -> int:
    """The similarity band of a result (:func:`rank`'s alike key); 0 without a semantic
    entry, so the key is what it always was."""
    if share <= 0:
        return 0
    return int(math.floor((1.0 - sem) / SIMILARITY_BAND + 1e-9))


def current_first(
    hits: Sequence[Hit],
    keys: Sequence[Hashable],
    dates: Callable[[list[str]], dict[str, tuple[datetime | None, datetime]]],
) -> list[Hit]:
    """Current facts first (SPEC §5.4 v3): among results that match the query alike (equal
    ``keys``: the same keywords matched, path strengths in the same
    :data:`ALIKE_BAND` band — :func:`rank`; with one keyword, the band alone; a recall
    without keywords has no query to match and keeps the walk's order), the one
    said later (``said_at``, else ``created_at``) takes the first of their places; the places
    each set of alike results holds in the ranked order do not change, so every other
    pair keeps its order. Dates are read (``dates``) only for results that have an alike
    partner. Equal times keep the ranked order."""
    groups: dict[Hashable, list[int]] = {}
    for i, key in enumerate(keys):
        groups.setdefault(key, []).append(i)
    shared = [members for members in groups.values() if len(members) > 1]
    if not shared:
        return list(hits)
    when = dates([hits[i].node for members in shared for i in members])

    def said(i: int) -> float:
        said_at, created = when.get(hits[i].node, (None, None))
        moment = said_at or created
        return as_utc(moment).timestamp() if isinstance(moment, datetime) else -math.inf

    out = list(hits)
    for members in shared:
        latest_first = sorted(members, key=lambda i: (-said(i), i))
        for place, i in zip(members, latest_first, strict=True):
            out[place] = hits[i]
    return out
