"""Node store: memory nodes as ids with content, phrase, keywords and index terms (SPEC §2)."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from memory_rdf import _vocab as V
from memory_rdf._oxigraph import (
    MemoryStore,
    Term,
    WriteBatch,
    lit,
    node_id,
    node_ref,
    render,
    to_python,
    triple,
)
from memory_rdf._text import KeywordRule, fold, is_han, keyword_rules, with_full_width

T = TypeVar("T")

#: Largest VALUES list per query: bigger lists made Oxigraph pick a bad plan (SPEC §7).
CHUNK = 500


@dataclass(frozen=True)
class Match:
    """How one node matches the recall keywords (indices into the keyword list)."""

    matched: frozenset[int]
    own: frozenset[int]  # those found in one of the node's own memory:keyword values
    #: the matching texts, lower-cased: the content when it holds a keyword ("" otherwise),
    #: and the node's own keywords that hold one (for the ranking's word match)
    content: str = ""
    keywords: tuple[str, ...] = ()
    #: when the node was said (None when unknown) and created (SPEC §5.4 v3)
    said_at: datetime | None = None
    created_at: datetime | None = None


def importances(store: MemoryStore, refs: Sequence[Term], threshold: Term) -> dict[str, float]:
    """``id → importance`` (SPEC §5.2 step 2: the sum of its live links' strengths, at least
    ``threshold``) of those of the nodes ``refs`` that have a live link (the others: 0)."""
    query = render("importances", nodes=list(refs), threshold=threshold)
    # Rounded: SUM adds in the store's iteration order, and the read mirror's differs from the
    # disk store's (13.6 vs 13.599999999999998): ties (eviction, memories()) would otherwise
    # depend on which store answered, not on the node id.
    return {node_id(iri): round(float(value or 0.0), 9) for iri, value in store.rows(query)}


def _needles(rules: Sequence[KeywordRule], unfolded: Collection[str] | None) -> list[str]:
    """What the store's ``CONTAINS`` looks for: the rules' needles, and their full-width
    forms when nothing tells which texts do not fold alike (``unfolded`` None)."""
    needles = list(dict.fromkeys(n for r in rules for n in r.needles))
    return with_full_width(needles) if unfolded is None else needles


def _contains(rules: Sequence[KeywordRule], unfolded: Collection[str] | None
              ) -> dict[str, list[str]]:
    """The ``matching_*.rq`` filter's parameter: the needles (:func:`_needles`) tested on the
    lower-cased text (``keywords``); or on the text as it is (``caseless``) when every needle
    is Han script only: no character lower-cases to a Han one or from one, so a text holds
    such a needle exactly when its ``LCASE`` does, and only the texts that hold one are
    lower-cased (issue 38). (Their full-width forms, :func:`with_full_width`, are
    themselves: only ASCII characters have one.) The mirror's text table tests the same."""
    if all(is_han(c) for r in rules for n in r.needles for c in n):
        return {"caseless": _needles(rules, unfolded)}
    return {"keywords": _needles(rules, unfolded)}


def _terms(needles: dict[str, list[str]]) -> dict[str, list[Term]]:
    return {name: [lit(n) for n in found] for name, found in needles.items()}


def _split(ids: Sequence[str], unfolded: Collection[str] | None
           ) -> tuple[Sequence[str], list[str]]:
    """``ids`` split into those the store tests with ``CONTAINS`` and the ``unfolded`` ones,
    whose texts it returns whole (order kept)."""
    if not unfolded:
        return ids, []
    return [i for i in ids if i not in unfolded], [i for i in ids if i in unfolded]


def chunks(items: Sequence[T], size: int = CHUNK) -> Iterable[Sequence[T]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


@dataclass
class NodeData:
    """A node as written: everything SPEC §2 puts on ``node:{id}``."""

    id: str
    content: str
    phrase: str
    keywords: list[str]
    created_at: datetime
    original_length: int
    seq: int  # creation sequence number of the agent (orders scans, SPEC §5.3)
    scan_count: int = 0
    terms: list[str] = field(default_factory=list)
    said_at: datetime | None = None  # SPEC §5.6: earliest timestamp of the remember's messages


def node_triples(node: NodeData) -> list[str]:
    s = node_ref(node.id)
    out = [
        triple(s, V.A, V.NODE_CLASS),
        triple(s, V.CONTENT, lit(node.content)),
        triple(s, V.PHRASE, lit(node.phrase)),
        triple(s, V.CREATED_AT, lit(node.created_at)),
        triple(s, V.SCAN_COUNT, lit(node.scan_count)),
        triple(s, V.SCAN_ORDER, lit(V.scan_key(node.scan_count, node.seq))),
        triple(s, V.ORIGINAL_LENGTH, lit(node.original_length)),
    ]
    if node.said_at is not None:
        out.append(triple(s, V.SAID_AT, lit(node.said_at)))
    out.extend(triple(s, V.KEYWORD, lit(k)) for k in dict.fromkeys(node.keywords))
    if node.terms:
        out.extend(triple(s, V.TERM, lit(t)) for t in node.terms)
        out.append(triple(s, V.TERM_COUNT, lit(len(node.terms))))
    return out


class NodeStore:
    def __init__(self, store: MemoryStore) -> None:
        self._store = store

    def add(self, batch: WriteBatch, node: NodeData) -> None:
        batch.insert(node_triples(node))

    def count(self) -> int:
        return int(self._store.scalar(render("node_count"), 0))

    def texts(self, ids: Sequence[str]) -> dict[str, tuple[str, str]]:
        """``id → (content, phrase)`` for the given ids (missing ids are absent)."""
        out: dict[str, tuple[str, str]] = {}
        table = self._store.text_table()
        if table is not None:  # the read mirror's (same rows)
            for nid, content, phrase in table.texts(ids):
                out[nid] = (content, phrase)
            return out
        for part in chunks(ids):
            query = render("node_texts", nodes=[node_ref(i) for i in part])
            for iri, content, phrase in self._store.rows(query):
                out[node_id(iri)] = (content, phrase)
        return out

    def existing(self, ids: Sequence[str]) -> dict[str, str]:
        """``id → content`` of those of ``ids`` that are memory nodes now."""
        out: dict[str, str] = {}
        for part in chunks(ids):
            query = render("existing_nodes", nodes=[node_ref(i) for i in part])
            for iri, content in self._store.rows(query):
                out[node_id(iri)] = content
        return out

    def pinned(self) -> list[str]:
        """The pinned nodes' ids, in id order (SPEC §5.6 v3)."""
        return [node_id(iri) for iri in self._store.column(render("pinned_nodes"))]

    def set_pinned(self, batch: WriteBatch, ids: Sequence[str], pinned: bool) -> None:
        """Pin (``node:{id} memory:pinned true``) or unpin the given nodes, as part of
        ``batch``. A ``false`` flag (only an import can bring one) goes either way, so a node
        never carries two."""
        refs = [node_ref(i) for i in ids]
        batch.delete(triple(ref, V.PINNED, lit(value)) for ref in refs
                     for value in ((False,) if pinned else (True, False)))
        if pinned:
            batch.insert(triple(ref, V.PINNED, lit(True)) for ref in refs)

    def matching(self, ids: Sequence[str], keywords: Sequence[str],
                 unfolded: Collection[str] | None = None) -> set[str]:
        """The ids that match one of ``keywords`` (SPEC §5.4 v3 rule 4,
        :class:`~memory_rdf._text.KeywordRule`): a Latin-script keyword by the stems of the
        words of the node's content or of one of its keywords, a Han one as a
        case-insensitive substring. Only Han keywords: the store answers alone, but for the
        ``unfolded`` ids (see :meth:`match_details`)."""
        rules = keyword_rules(keywords)
        if all(r.han for r in rules):
            needles = _contains(rules, unfolded)
            tested, whole = _split(ids, unfolded)
            out: set[str] = set()
            table = self._store.text_table()
            if table is not None:  # the read mirror's (same rows)
                (kind, found), = needles.items()
                out = table.matching(tested, found, kind == "caseless")
            for part in chunks(tested if table is None else ()):
                query = render(
                    "matching_nodes", nodes=[node_ref(i) for i in part], **_terms(needles)
                )
                out.update(node_id(iri) for iri in self._store.column(query))
            if whole:
                out.update(self.match_details(whole, keywords, set(whole)))
            return out
        return set(self.match_details(ids, keywords, unfolded))

    def match_details(self, ids: Sequence[str], keywords: Sequence[str],
                      unfolded: Collection[str] | None = None) -> dict[str, Match]:
        """``id → Match`` for the ids that match (SPEC §5.4 v3 rule 4): the indices of the
        ``keywords`` the node's content or one of its keywords matches, and those one of its
        own keywords matches. Same matching set as :meth:`matching`. The store returns the
        texts that hold one of the rules' needles (lower-cased), which are then compared
        word by word here, folded (:func:`~memory_rdf._text.fold`).

        ``unfolded``: the ids one of whose texts may not fold alike (the term index's
        :attr:`~memory_rdf._oxigraph.term_index.TermIndex.unfolded`): the store returns their
        texts whole, as its ``CONTAINS`` cannot fold them. None when nothing tells: the store
        then also looks for the needles' full-width forms
        (:func:`~memory_rdf._text.with_full_width`)."""
        rules = keyword_rules(keywords)
        needles = _contains(rules, unfolded)
        tested, whole = _split(ids, unfolded)
        parts: list[tuple[Sequence[str], dict[str, list[str]]]]
        parts = [(part, needles) for part in chunks(tested)]
        parts += [(part, {}) for part in chunks(whole)]
        found: dict[str, tuple[set[int], set[int], list[str], list[str]]] = {}
        # a node's times as read (terms, from the embedded store): converted once a node, for
        # its last row, as they were for every row (a node has ~2 rows: content, keywords)
        times: dict[str, tuple[Any, Any]] = {}
        as_terms = False
        table = self._store.text_table()
        for part, needed in parts:
            if table is not None:  # the read mirror's (same rows; node ids, Python values)
                (kind, some), = needed.items() or [("", None)]
                rows = table.matching_texts(part, some, kind == "caseless")
            else:
                query = render("matching_texts", nodes=[node_ref(i) for i in part],
                               **_terms(needed))
                raw = self._store.term_rows(query)
                as_terms = raw is not None
                rows = self._store.rows(query) if raw is None else [
                    (iri.value, text.value, to_python(own), created, said)
                    for iri, text, own, created, said in raw]
            for iri, text, own, created, said in rows:
                # a lower-cased ASCII text is its own fold (fold_class): folded once a text
                folded = text if text.isascii() else fold(text)
                hit = {i for i, r in enumerate(rules) if r.matches(text, folded)}
                if not hit:
                    continue
                nid = node_id(iri)  # (an id as it is: the table's rows)
                matched, owned, contents, keywords = found.setdefault(nid, (set(), set(), [], []))
                times[nid] = (said, created)
                matched |= hit
                if own:
                    owned |= hit
                    keywords.append(text)
                else:
                    contents.append(text)
        return {
            nid: Match(frozenset(m), frozenset(o), " ".join(c), tuple(sorted(k)),
                       *(to_python(t) if as_terms else t for t in times[nid]))
            for nid, (m, o, c, k) in found.items()
        }

    def dates(self, ids: Sequence[str]) -> dict[str, tuple[datetime | None, datetime]]:
        """``id → (said_at or None, created_at)`` of the given live nodes (SPEC §5.4 v3)."""
        out: dict[str, tuple[datetime | None, datetime]] = {}
        table = self._store.text_table()
        if table is not None:  # the read mirror's (same rows)
            for nid, created, said in table.dates(ids):
                out[nid] = (said, created)
            return out
        for part in chunks(ids):
            query = render("node_dates", nodes=[node_ref(i) for i in part])
            for iri, created, said in self._store.rows(query):
                out[node_id(iri)] = (said, created)
        return out

    def entries(
        self, ids: Sequence[str]
    ) -> dict[str, tuple[str, str, datetime | None, datetime]]:
        """``id → (content, phrase, said_at or None, created_at)``: what a recall entry shows
        of each given live node (SPEC §5.4 v3; missing ids are absent)."""
        out: dict[str, tuple[str, str, datetime | None, datetime]] = {}
        table = self._store.text_table()
        if table is not None:  # the read mirror's (same rows)
            for nid, content, phrase, created, said in table.entries(ids):
                out[nid] = (content, phrase, said, created)
            return out
        for part in chunks(ids):
            query = render("node_entries", nodes=[node_ref(i) for i in part])
            for iri, content, phrase, created, said in self._store.rows(query):
                out[node_id(iri)] = (content, phrase, said, created)
        return out

    def get(self, nid: str) -> NodeData | None:
        """One node with all its properties, or None when it does not exist."""
        rows = self._store.quads(V.NODE + nid, None, None, None)
        if not rows:
            return None
        props: dict[str, list[object]] = {}
        for _, p, o in rows:
            props.setdefault(p, []).append(o)

        def one(local: str) -> object:
            return props.get(V.MEMORY + local, [None])[0]

        return NodeData(
            id=nid,
            content=str(one("content")),
            phrase=str(one("phrase")),
            keywords=sorted(str(k) for k in props.get(V.MEMORY + "keyword", [])),
            created_at=one("createdAt"),  # type: ignore[arg-type]
            original_length=int(one("originalLength")),  # type: ignore[call-overload]
            seq=int(one("scanOrder")) & ((1 << V.SEQ_BITS) - 1),  # type: ignore[call-overload]
            scan_count=int(one("scanCount")),  # type: ignore[call-overload]
            terms=sorted(str(t) for t in props.get(V.MEMORY + "term", [])),
            said_at=one("saidAt"),  # type: ignore[arg-type]
        )
