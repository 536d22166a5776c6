"""The derived term index of an embedded store: ``term → nodes`` postings and each node's
``memory:termCount``, held in memory beside the triples, for the keyword entry (SPEC §5.5).

The ``memory:term`` / ``memory:termCount`` triples stay the truth; this index is derived from
them. It is built from the store the first time it is asked for (:meth:`TermIndexes.current`,
in the store owner's turn, so no commit lands meanwhile) and then kept in step with every
commit: :meth:`TermIndexes.committed` reads the batch's ``INSERT DATA`` / ``DELETE DATA`` of
term triples and the templates that delete them (``forget_node(s)``, ``delete_node_text(s)``).
Anything else that may change terms — another template that deletes terms, a bulk load, a
purge's rewrite, a commit interrupted or refused — marks it stale (:meth:`TermIndexes.stale`),
and the next keyword entry derives it again. A generation counter, moved by every commit,
tells whether the index is current; a keyword entry that finds no current index (and cannot
build one) uses the SPARQL path (``keyword_entry.rq``), as an endpoint store always does.

Measured (benchmarks/profile_both.py, 10k nodes, 82k term triples): the BM25 query in SPARQL
took 7–13 ms; the same ranking over this index well under a millisecond.
"""

from __future__ import annotations

import heapq
import json
import re
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from functools import cache, lru_cache
from itertools import chain
from typing import TYPE_CHECKING, Any, TypeVar, cast

import pyoxigraph as ox

from memory_rdf import _vocab as V
from memory_rdf._oxigraph.batch import WriteBatch
from memory_rdf._oxigraph.block_caches import after_whole_read
from memory_rdf._oxigraph.render import _template, _terms
from memory_rdf._text import UNFOLDED, WIDE_MARKS, fold, fold_class, has_marks

if TYPE_CHECKING:
    from memory_rdf._oxigraph.agent_store import AgentStore

T = TypeVar("T")

#: Switch for measuring (benchmarks): False makes every keyword entry take the SPARQL path.
ENABLED = True
#: Most nodes (over all terms) :meth:`TermIndex.descending` keeps in order: 8 bytes each,
#: ~0.5 MB at most.
DESCENDING_KEPT = 65_536

_TERM = ox.NamedNode(V.MEMORY + "term")
_TERM_COUNT = ox.NamedNode(V.MEMORY + "termCount")
_CONTENT = ox.NamedNode(V.MEMORY + "content")
_KEYWORD = ox.NamedNode(V.MEMORY + "keyword")
_XSD_STRING = ox.NamedNode(V.XSD + "string")
_TERM_NEEDLE = f" {V.m('term')} "
_COUNT_NEEDLE = f" {V.m('termCount')} "
_TEXT_NEEDLES = (f" {V.m('content')} ", f" {V.m('keyword')} ")
#: A node's text signature (:func:`signature`) has at least this many bits, at most
#: :data:`SIGNATURE_MAX`: about four bits a gram of its texts, a power of two.
SIGNATURE_MIN = 64
SIGNATURE_MAX = 512
#: The signature sizes (:func:`signature`): powers of two from the least to the most.
_SIZES = tuple(1 << b for b in range(SIGNATURE_MIN.bit_length() - 1, SIGNATURE_MAX.bit_length()))
_FORGET = ("forget_node", "forget_nodes")
_DELETE_TEXT = ("delete_node_text", "delete_node_texts")


#: Templates that delete every triple of link resources only (``?link ?p ?o``): a link
#: carries no index terms.
_LINKS_ONLY = frozenset({"delete_link", "delete_links"})
#: What a template does in the journal, the metadata or the vectors graph touches no terms.
_OTHER_GRAPHS = re.compile(r"GRAPH \$(?:journal|meta|vectors) \{[^{}]*\}")


@cache
def _neutral(template: str) -> bool:
    """Whether a shipped update template leaves every node's terms and term count as they
    are: outside the journal and metadata graphs it names neither predicate and deletes no
    ``?p ?o`` wildcard (or only a link's)."""
    if template in _LINKS_ONLY:
        return True
    text = _OTHER_GRAPHS.sub("", _template(template + ".ru"))
    return "memory:term" not in text and "#term" not in text and "?p ?o" not in text


def _grams(text: str) -> set[str]:
    """The characters and the two-character substrings of a lower-cased text."""
    grams = set(text)
    grams.update([text[i : i + 2] for i in range(len(text) - 1)])
    return grams


def signature(texts: Iterable[str], bits: int = 0) -> int:
    """A node's text signature: a one-hash Bloom filter of the characters and character
    pairs of its texts (content and keywords), lower-cased and folded as the recall's keyword
    test compares them (``LCASE``, ``str.lower``, then :func:`~memory_rdf._text.fold`: "ＳＱＬ"
    as "sql"), each text on its own (no pair spans two). The filter's size m (a power of two,
    :data:`SIGNATURE_MIN` … :data:`SIGNATURE_MAX`) is kept in the value itself, as its
    highest bit (bit m). ``bits``: a signature to add the texts to (its size is kept)."""
    grams: set[str] = set()
    for text in texts:
        grams |= _grams(fold(text.lower()))
    if bits:
        size = bits.bit_length() - 1
    else:
        size = SIGNATURE_MIN
        while size < SIGNATURE_MAX and size < 4 * len(grams):
            size *= 2
        bits = 1 << size
    mask = size - 1
    for gram in grams:
        bits |= 1 << (hash(gram) & mask)
    return bits


def needle_grams(needle: str) -> tuple[int, ...] | None:
    """The hashes :meth:`TermIndex.may_hold` tests for a lower-cased needle: its character
    pairs (its one character); None for the empty needle, which every text holds."""
    if not needle:
        return None
    if len(needle) == 1:
        return (hash(needle),)
    return tuple(dict.fromkeys(hash(needle[i : i + 2]) for i in range(len(needle) - 1)))


@lru_cache(maxsize=64)
def _needle_bits(needles: tuple[str, ...]) -> dict[int, list[int]] | None:
    """For :meth:`TermIndex.may_hold`: each needle's bits in a signature of each size, by the
    signature's ``bit_length`` (m + 1: its size bit set too), so that a node is tested with
    one AND a needle; None when there is no needle or an empty one (every text holds it)."""
    wanted = [needle_grams(n) for n in needles]
    if not wanted or any(w is None for w in wanted):
        return None
    return {size + 1: [sum({1 << (h & (size - 1)) for h in hashes}) | 1 << size
                       for hashes in wanted if hashes is not None]
            for size in _SIZES}


class TermIndex:
    """``term → {node IRI}`` and ``node IRI → termCount``, as of the store's commit
    ``generation`` (read and changed only with :attr:`TermIndexes.lock` held); and each
    node's text signature (:func:`signature`), which tells the recall's keyword test which
    nodes cannot hold a needle (:meth:`may_hold`), and which nodes have a text that does not
    fold alike (:attr:`unfolded`, :attr:`marked`)."""

    __slots__ = ("_descending", "generation", "lengths", "marked", "postings", "terms_of",
                 "texts", "unfolded")

    def __init__(self, generation: int) -> None:
        self.generation = generation
        #: term → its nodes: a set, or the node's IRI itself for a term of one node (most
        #: terms: a set takes ~216 bytes however few it holds; never a set of one)
        self.postings: dict[str, set[str] | str] = {}
        #: node → its terms (a tuple: ~8 terms a node, a set would take 4× the memory)
        self.terms_of: dict[str, tuple[str, ...]] = {}
        self.lengths: dict[str, int] = {}
        #: node → the signature of its texts. A superset of what its texts give (a text
        #: deleted leaves its bits: a node is then tested by the store for nothing); a node
        #: without texts has none.
        self.texts: dict[str, int] = {}
        #: the nodes one of whose texts, lower-cased, is not its own fold (full-width letters,
        #: a curly apostrophe…, :data:`~memory_rdf._text.UNFOLDED`): a store's ``CONTAINS`` on
        #: the raw text may miss what the folded text holds, so the keyword test reads their
        #: texts whole; and those whose texts differ from their folds in full-width punctuation
        #: only (:data:`~memory_rdf._text.WIDE_MARKS`: a Chinese "：", "，"), read whole for a
        #: needle that holds punctuation. Supersets too: a text deleted leaves its node.
        self.unfolded: set[str] = set()
        self.marked: set[str] = set()
        #: term → its nodes, IRIs in descending order (:meth:`descending`): kept for the
        #: terms the keyword entry cut by IRI, dropped when the term's postings change.
        self._descending: dict[str, list[str]] = {}

    def may_hold(self, nodes: Sequence[str], needles: Sequence[str]) -> list[str]:
        """Those of ``nodes`` (IRIs) one of whose texts, lower-cased and folded
        (:func:`~memory_rdf._text.fold`), may hold one of the lower-cased, folded ``needles``
        as a substring; the others certainly hold none (a Bloom filter has no false
        negatives). Order kept."""
        by_size = _needle_bits(tuple(needles))
        if by_size is None:
            return list(nodes)
        out = []
        texts = self.texts
        for node in nodes:
            bits = texts.get(node)
            if bits is None:
                continue
            for needs in by_size[bits.bit_length()]:
                if bits & needs == needs:
                    out.append(node)
                    break
        return out

    def add(self, node: str, term: str) -> None:
        # One string object per node and per term, however many postings name it (a quad's
        # value is a new string each time: without this the index took ~2.9 kB a node).
        node, term = sys.intern(node), sys.intern(term)
        if self._descending:
            self._descending.pop(term, None)
        nodes = self.postings.get(term)
        if nodes is None:
            self.postings[term] = node
        elif isinstance(nodes, str):
            if nodes == node:
                return
            self.postings[term] = {nodes, node}
        elif node in nodes:
            return
        else:
            nodes.add(node)
        self.terms_of[node] = (*self.terms_of.get(node, ()), term)

    def remove(self, node: str, term: str) -> None:
        nodes = self.postings.get(term)
        if nodes is None:
            return
        if self._descending:
            self._descending.pop(term, None)
        if isinstance(nodes, str):
            if nodes != node:
                return
            del self.postings[term]
        elif node not in nodes:
            return
        else:
            nodes.discard(node)
            if len(nodes) == 1:
                self.postings[term] = nodes.pop()
        rest = tuple(t for t in self.terms_of.get(node, ()) if t != term)
        if rest:
            self.terms_of[node] = rest
        else:
            self.terms_of.pop(node, None)

    def drop(self, node: str) -> None:
        """Every term of ``node``, its term count and its texts' signature."""
        for term in list(self.terms_of.get(node, ())):
            self.remove(node, term)
        self.lengths.pop(node, None)
        self.texts.pop(node, None)
        self.unfolded.discard(node)
        self.marked.discard(node)

    def add_texts(self, node: str, texts: Sequence[str]) -> None:
        """Texts (content, keywords) written on ``node``: into its signature, and the node
        into :attr:`unfolded` or :attr:`marked` when one of them does not fold alike."""
        node = sys.intern(node)
        self.texts[node] = signature(texts, self.texts.get(node, 0))
        kind = max(fold_class(text.lower()) for text in texts) if texts else 0
        if kind == UNFOLDED:
            self.unfolded.add(node)
        elif kind == WIDE_MARKS:
            self.marked.add(node)

    def read_whole(self, nodes: Iterable[str], needles: Sequence[str]) -> list[str]:
        """Those of ``nodes`` whose texts the keyword test reads whole for ``needles``, as a
        store's ``CONTAINS`` cannot tell whether they hold one: :attr:`unfolded`, and
        :attr:`marked` too when a needle holds punctuation or a space
        (:func:`~memory_rdf._text.has_marks`)."""
        unfolded = self.unfolded
        marked = self.marked if self.marked and has_marks(needles) else None
        if not unfolded and marked is None:
            return []
        return [n for n in nodes if n in unfolded or (marked is not None and n in marked)]

    def descending(self, term: str) -> list[str]:
        """The nodes carrying ``term``, IRIs in descending order; kept until its postings
        change (at most :data:`DESCENDING_KEPT` nodes in all: when full, the kept lists go)."""
        kept = self._descending.get(term)
        if kept is None:
            held = self.postings.get(term, ())
            kept = [held] if isinstance(held, str) else sorted(held, reverse=True)
            if sum(map(len, self._descending.values())) + len(kept) > DESCENDING_KEPT:
                self._descending.clear()
            self._descending[term] = kept
        return kept

    def largest(self, groups: Sequence[tuple[tuple[int, ...], set[str]]],
                entries: Sequence[tuple[str, float]], count: int) -> list[str]:
        """The ``count`` largest IRIs of the nodes of ``groups`` (``(carried, members)``:
        nodes carrying the ``entries`` numbered in ``carried``), descending: one group that
        holds at least a quarter of one of its terms' nodes is read in that term's kept
        order (:meth:`descending`: ~3 µs instead of ~60 for 850 nodes, issue 38); else
        ``heapq.nlargest``. The same IRIs either way (a node is in one group only)."""
        if len(groups) == 1:
            carried, members = groups[0]
            term = min((entries[i][0] for i in carried), key=self.df)
            if 4 * len(members) >= self.df(term):
                out: list[str] = []
                for node in self.descending(term):
                    if node in members:
                        out.append(node)
                        if len(out) == count:
                            break
                return out
        return heapq.nlargest(count, chain.from_iterable(m for _, m in groups))

    def df(self, term: str) -> int:
        nodes = self.postings.get(term)
        return 0 if nodes is None else 1 if isinstance(nodes, str) else len(nodes)

    def ranked(self, entries: Sequence[tuple[str, float]], avgdl: float, postings: int,
               candidates: int, results: int) -> list[tuple[str, float]] | None:
        """``keyword_entry.rq`` over this index: ``(node IRI, score)`` best first, ties by IRI
        descending, at most ``results``; ``entries`` are ``(term, idf)`` in the order the
        query's VALUES list them (the idf sums are added in that order, as SPARQL's SUM does:
        the same doubles). None when a term has more than ``postings`` postings (which of them
        the query reads is the engine's order: the caller asks SPARQL)."""
        # Nodes grouped by which of the terms they carry (set operations, in C: ~1 µs a
        # posting less than a Python loop over them); a group's weight is the sum of its
        # terms' idf in the entries' order, as SPARQL's SUM adds a node's rows.
        groups: list[tuple[tuple[int, ...], set[str]]] = []
        for i, (term, _idf) in enumerate(entries):
            held = self.postings.get(term, ())
            nodes = (held,) if isinstance(held, str) else held
            if len(nodes) > postings:
                return None
            rest = set(nodes)
            split: list[tuple[tuple[int, ...], set[str]]] = []
            for carried, members in groups:
                both = members & rest
                if both:
                    rest -= both
                    members -= both
                    split.append(((*carried, i), both))
                if members:
                    split.append((carried, members))
            if rest:
                split.append(((i,), rest))
            groups = split
        levels: dict[float, list[tuple[tuple[int, ...], set[str]]]] = {}
        for carried, members in groups:
            w: float = 0
            for i in carried:
                w = w + entries[i][1]
            levels.setdefault(w, []).append((carried, members))
        # The candidates: the largest weights, ties by IRI descending; only the last level
        # taken needs its IRIs ordered.
        best: list[tuple[str, float]] = []
        for w in sorted(levels, reverse=True):
            parts = levels[w]
            room = candidates - len(best)
            if sum(len(m) for _, m in parts) > room:
                level = self.largest(parts, entries, room)
            else:
                level = sorted(chain.from_iterable(m for _, m in parts), reverse=True)
            best += [(node, w) for node in level]
            if len(best) >= candidates:
                break
        scored = []
        for node, w in best:
            dl = self.lengths.get(node)
            if dl is None:
                continue
            scored.append((node, w * 2.2 / (1 + 1.2 * (0.25 + 0.75 * dl / avgdl))))
        return heapq.nlargest(results, scored, key=_weight_then_iri)


def _weight_then_iri(item: tuple[str, float]) -> tuple[float, str]:
    """The key whose largest values come first in ``ORDER BY DESC(?w) DESC(?node)``."""
    return item[1], item[0]


def _literal(obj: str) -> str | None:
    """The value of a serialized plain string literal (``"…"``, as :func:`lit` writes it), or
    None when ``obj`` is something else."""
    if len(obj) < 2 or obj[0] != '"' or obj[-1] != '"':
        return None
    try:
        value = json.loads(obj)
    except ValueError:
        return None
    return value if isinstance(value, str) else None


def _integer(obj: str) -> int | None:
    """The value of a serialized ``xsd:integer`` literal, or None."""
    if obj.startswith('"') and obj.endswith(f'"^^<{V.XSD}integer>'):
        try:
            return int(obj[1 : obj.index('"', 1)])
        except ValueError:
            return None
    return None


def _triples(body: str, needle: str) -> Iterable[tuple[str, str]]:
    """``(subject IRI, serialized object)`` of the lines of ``body`` (one ``s p o .`` a line,
    as :func:`triple` writes them) whose predicate is ``needle``'s."""
    at = body.find(needle)
    while at >= 0:
        start = body.rfind("\n", 0, at) + 1
        subject = body[start:at]
        end = body.find("\n", at)
        line_end = len(body) if end < 0 else end
        if subject.startswith("<") and subject.endswith(">") and " " not in subject:
            obj = body[at + len(needle) : line_end].rstrip()
            obj = obj[:-1].rstrip() if obj.endswith(".") else obj
            yield subject[1:-1], obj
        at = body.find(needle, at + len(needle))


def apply_batch(index: TermIndex, batch: WriteBatch) -> bool:
    """Follow a committed batch's changes to terms and term counts in ``index``; False when
    the batch does something the index cannot follow (then it must be derived again)."""
    for verb, body, params, graph, _neutral_for_links in batch._ops:
        if verb == "update":
            if body in _FORGET or body in _DELETE_TEXT:
                nodes = params.get("nodes", params.get("node"))
                for term in _terms("nodes", nodes, many=True):
                    if not (term.startswith("<") and term.endswith(">")):
                        return False
                    index.drop(term[1:-1])
            elif not _neutral(body):
                return False
            continue
        if graph is not None:  # the journal, the store's metadata: no terms
            continue
        inserting = verb == "INSERT DATA"
        if _TERM_NEEDLE in body:
            for node, obj in _triples(body, _TERM_NEEDLE):
                value = _literal(obj)
                if value is None:
                    return False
                (index.add if inserting else index.remove)(node, value)
        if _COUNT_NEEDLE in body:
            for node, obj in _triples(body, _COUNT_NEEDLE):
                count = _integer(obj)
                if count is None:
                    return False
                if inserting:
                    index.lengths[sys.intern(node)] = count
                elif index.lengths.get(node) == count:
                    del index.lengths[node]
        if inserting:  # a text deleted leaves its bits (still a superset: see TermIndex)
            written: dict[str, list[str]] = {}
            for needle in _TEXT_NEEDLES:
                if needle in body:
                    for node, obj in _triples(body, needle):
                        value = _literal(obj)
                        if value is None:
                            return False
                        written.setdefault(node, []).append(value)
            for node, texts in written.items():
                index.add_texts(node, texts)
    return True


def build(store: ox.Store, generation: int) -> TermIndex:
    """The index of ``store``'s memory network (its default graph)."""
    index = TermIndex(generation)
    graph = ox.DefaultGraph()
    for quad in store.quads_for_pattern(None, _TERM, None, graph):
        s, o = quad.subject, quad.object
        if isinstance(s, ox.NamedNode) and isinstance(o, ox.Literal) and o.datatype == _XSD_STRING:
            index.add(s.value, o.value)
    for quad in store.quads_for_pattern(None, _TERM_COUNT, None, graph):
        s, o = quad.subject, quad.object
        if isinstance(s, ox.NamedNode) and isinstance(o, ox.Literal):
            try:
                index.lengths[sys.intern(s.value)] = int(o.value)
            except ValueError:
                continue
    texts: dict[str, list[str]] = {}
    for predicate in (_CONTENT, _KEYWORD):
        for quad in store.quads_for_pattern(None, predicate, None, graph):
            s, o = quad.subject, quad.object
            if isinstance(s, ox.NamedNode) and isinstance(o, ox.Literal):
                texts.setdefault(s.value, []).append(o.value)
    for node, values in texts.items():
        index.add_texts(node, values)
    return index


class TermIndexes:
    """The term index of one :class:`AgentStore`, built on demand and kept in step with its
    commits (see the module's doc)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()  # the index's contents; taken in the owner's turn
        self.generation = 0  # moves with every commit (and every change the index misses)
        self.index: TermIndex | None = None
        self.builds = 0  # times the index was derived from the store (tests, benchmarks)

    def committed(self, batch: WriteBatch) -> None:
        """A batch landed on the store (in the owner's turn)."""
        with self.lock:
            self.generation += 1
            index = self.index
            if index is None:
                return
            try:
                followed = index.generation == self.generation - 1 and apply_batch(index, batch)
            except Exception:  # a batch it cannot read: derived again when asked
                followed = False
            if followed:
                index.generation = self.generation
            else:
                self.index = None

    def stale(self) -> None:
        """The store changed in a way the index did not follow: derive it again when asked."""
        with self.lock:
            self.generation += 1
            self.index = None

    def current(self, owner: AgentStore, read: Callable[[TermIndex], T],
                derive: bool = True) -> T | None:
        """``read(index)`` on the current index, built first if need be (in the store
        owner's turn: no commit lands meanwhile; not with ``derive=False``); None when there
        is none (turned off, or the build failed: the caller takes the SPARQL path)."""
        if not ENABLED:
            return None
        with self.lock:
            index = self.index
            if index is not None and index.generation == self.generation:
                return read(index)
        if not derive:
            return None
        with owner.turn(), owner._users.hold():
            generation = self.generation
            try:
                fresh = build(owner.store, generation)  # the terms: on disk only (issue 38)
            except Exception:  # the SPARQL path answers; the index is tried again next time
                return None
            finally:  # a read of every term and text: the handle's caches are let go
                after_whole_read(owner)
            with self.lock:
                self.builds += 1
                if self.generation != generation:  # pragma: no cover - the turn is held
                    return None
                self.index = fresh
                return read(fresh)


def commit_generation(store: object) -> int | None:
    """The commit generation of ``store`` (an :class:`AgentStore`: its
    :attr:`TermIndexes.generation`, moved by every commit and by every change made outside
    one), or None for another kind of store (an endpoint: nothing read of it may be kept).
    What was read of the store at a generation is what it holds as long as the generation
    is the same: a value read after reading the generation may be kept under it."""
    terms = getattr(store, "terms", None)
    return terms.generation if isinstance(terms, TermIndexes) else None


class KeptReads:
    """Values read of a store, each kept while the store's :func:`commit_generation` stays
    the same (the focus and pinned nodes of recall's seeds, the read mirror's link graphs):
    the generation is read before the value, so a kept value is never older than the
    generation it is kept under. A store without a generation (an endpoint) is read each time;
    a read that gives None (nothing to read now) is not kept."""

    __slots__ = ("_kept",)

    def __init__(self) -> None:
        self._kept: dict[str, tuple[int, Any]] = {}

    def get(self, store: object, what: str, read: Callable[[], T]) -> T:
        generation = commit_generation(store)
        kept = self._kept.get(what)
        if generation is not None and kept is not None and kept[0] == generation:
            return cast(T, kept[1])
        value = read()
        if generation is not None and value is not None:
            self._kept[what] = (generation, value)
        return value


def read_index(store: object, read: Callable[[TermIndex], T], *, derive: bool = True) -> T | None:
    """``read(index)`` on the current term index of ``store`` (an :class:`AgentStore`), or None
    when it has none (another kind of store, the index turned off; not built yet, with
    ``derive=False``): take the SPARQL path."""
    from memory_rdf._oxigraph.agent_store import AgentStore

    if not isinstance(store, AgentStore):
        return None
    return store.terms.current(store, read, derive)
