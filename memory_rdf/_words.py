"""The words of a recall's query and of its results (SPEC §5.4, §5.5): the query's terms and
the other forms of its English words, a result's stemmed words for ranking, and a keyword's
rarity (BM25's idf). Used by the keyword entry and the ranking (:mod:`memory_rdf._search`),
and by the SQLite peer of the benchmarks, which must cut and weigh words the same way."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

from memory_rdf._text import ENGLISH_WORD, stem, tokenize, tokenize_for_index

#: Endings tried for the other forms of an English query word (:func:`word_forms`).
_ENDINGS = ("", "e", "s", "es", "ed", "ing", "er", "ers", "ion", "ions", "al", "ly")


def word_forms(term: str) -> list[str]:
    """Other forms of an English query word that share its stem (:func:`stem`) — "vacationed"
    → "vacation", "vacations", … — for the keyword entry to look up among the index terms
    (exact terms, so the index stays as stored). Words that are not English letters: none."""
    if not ENGLISH_WORD.fullmatch(term):
        return []
    root = stem(term)
    bases = {root, root[:-1] + "y"} if root.endswith("i") else {root}
    out = []
    for base in sorted(bases):
        for ending in _ENDINGS:
            form = base + ending
            if form != term and len(form) > 2 and stem(form) == root:
                out.append(form)
    return list(dict.fromkeys(out))


@functools.lru_cache(maxsize=4096)
def rank_words(text: str) -> frozenset[str]:
    """The stemmed index terms of a text (:func:`~memory_rdf._text.tokenize_for_index`: the
    ``memory:term`` rule, stop words dropped, Chinese in the segmenter's search mode).
    Cached by text: tokenizing costs ~35-50 µs per 150-300 characters, paid for every ranked
    hit of every recall, and the same nodes are ranked again by later recalls."""
    return frozenset(stem(t) for t in tokenize_for_index(text))


def query_terms(keywords: Sequence[str]) -> list[str]:
    """The query's terms (SPEC §5.5), de-duplicated in order of first appearance.

    :func:`~memory_rdf._text.tokenize`: Chinese in jieba's precise mode, while the nodes'
    ``memory:term`` values are cut in its search mode (:func:`~memory_rdf._text.index_terms`),
    which keeps every precise-mode word and adds the shorter words inside compounds. So a
    query word found in a node's text is one of its terms, "车牌" finds "车牌号", and a long
    query word is one term, not its parts counted again."""
    return list(dict.fromkeys(t for k in keywords for t in tokenize(k)))


def with_word_forms(terms: Sequence[str]) -> list[str]:
    """``terms`` and the other forms of their English words (:func:`word_forms`), each once,
    in order: what the keyword entry looks up."""
    return list(dict.fromkeys(f for t in terms for f in (t, *word_forms(t))))


def bm25_idf(nodes: int, df: int) -> float:
    """BM25's idf, in the always-positive form ln(1 + (N - df + 0.5) / (df + 0.5))."""
    n = max(nodes, df)
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


def keyword_weight(nodes: int, dfs: Sequence[int]) -> float:
    """The rarity of one recall keyword: the mean BM25 idf (:func:`bm25_idf`) of its query
    terms, given their document frequencies (a term no node carries counts as df 0, the
    rarest); a keyword without any term (only stop words) weighs as a term every node has."""
    if not dfs:
        return bm25_idf(nodes, nodes)
    return sum(bm25_idf(nodes, df) for df in dfs) / len(dfs)
