"""The read mirror's text table (issue 38): each node's texts and times — ``memory:content``,
``phrase``, ``keyword``, ``createdAt``, ``saidAt`` (SPEC §2) — held in a Python dict beside
the mirror's in-memory Oxigraph store instead of in it (~300 bytes a quad there, ~9 quads a
node: benchmarks/memory_parts.py), and the mirrored text reads answered from it exactly as
the shipped templates answer them on the disk store (``node_texts``, ``node_dates``,
``node_entries``, ``matching_nodes``, ``matching_texts``; ``scan_state``'s content).

``node id → (content, phrase, keywords, createdAt, saidAt)``: each slot None (absent), one
value, or a tuple of several (RDF is a set: a predicate may hold several values, a keyword
usually does). A value is a ``str`` for an ``xsd:string`` literal, a ``datetime`` for an
``xsd:dateTime`` one (:func:`~.terms.to_python`'s value), else the pyoxigraph term itself (an
import may bring any), converted when read as the SPARQL path converts it. Keywords are
interned (``sys.intern``): at 10k nodes of the benchmarks' workload 38k keywords were 9.6k
distinct strings. Only subjects under ``node:`` are kept (the templates read nothing else).
A node's row is replaced whole, never changed in place: a reader (any thread) sees it before
or after a commit's change, never half of it.

``LCASE`` is Rust's ``str::to_lowercase``; Python's ``str.lower`` agrees except on the
characters :func:`odd_characters` finds (a newer Unicode in Rust: 55 with Python 3.11 and
pyoxigraph 0.5.13) and on the context-dependent capital sigma: a text holding one of those
is lower-cased by the engine itself (:func:`lcase`).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Collection, Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime
from functools import cache
from typing import Any

import pyoxigraph as ox

from memory_rdf import _vocab as V
from memory_rdf._oxigraph.terms import to_python

#: The predicates the table holds (local names), in slot order.
TEXT_NAMES = ("content", "phrase", "keyword", "createdAt", "saidAt")
TEXT_PREDICATES = frozenset(V.MEMORY + name for name in TEXT_NAMES)
TEXT_TOKENS = frozenset(V.m(name) for name in TEXT_NAMES)
_SLOT = {V.MEMORY + name: i for i, name in enumerate(TEXT_NAMES)}
CONTENT, PHRASE, KEYWORD, CREATED, SAID = range(5)
_EMPTY: tuple[Any, ...] = (None,) * 5
_NODE = V.NODE
_XSD_STRING = V.XSD + "string"
_XSD_DATETIME = V.XSD + "dateTime"
#: A text line of the dump for any subject (one not under ``node:`` is dropped).
TEXT_LINE = re.compile(
    rb"^\S+ <" + re.escape(V.MEMORY.encode()) + rb"(?:"
    + b"|".join(n.encode() for n in TEXT_NAMES) + rb")> [^\n]*\n", re.MULTILINE)


def value_of(term: Any) -> Any:
    """A term as the table holds it (see the module's docstring)."""
    if isinstance(term, ox.Literal):
        datatype = term.datatype.value
        if datatype == _XSD_STRING:
            return term.value
        if datatype == _XSD_DATETIME:
            value = to_python(term)
            if isinstance(value, datetime):
                return value
    return term


def _same(a: Any, b: Any) -> bool:
    """The same RDF term (two dateTimes of one instant in two time zones are two terms)."""
    return (type(a) is type(b) and a == b
            and (not isinstance(a, datetime) or a.utcoffset() == b.utcoffset()))


def values(slot: Any) -> tuple[Any, ...]:
    if slot is None:
        return ()
    return slot if isinstance(slot, tuple) else (slot,)


def _pack(items: tuple[Any, ...]) -> Any:
    return None if not items else items[0] if len(items) == 1 else items


def python(value: Any) -> Any:
    """A held value as the SPARQL path's rows give it (:func:`to_python`)."""
    return value if isinstance(value, (str, datetime)) else to_python(value)


@cache
def odd_characters() -> re.Pattern[str]:
    """The characters whose lower case Python and the engine's ``LCASE`` disagree on, found
    by asking the engine (~0.4 s once a process, in a mirror's build), and the capital sigma
    (its lower case depends on what surrounds it)."""
    store = _engine()
    odd = {"\u03a3"}
    step = 1 << 16
    for start in range(0x80, 0x110000, step):
        chars = [chr(c) for c in range(start, min(start + step, 0x110000))
                 if not 0xD800 <= c <= 0xDFFF]
        if not chars:
            continue
        rows = store.query(f"SELECT (LCASE({ox.Literal(chr(10).join(chars))}) AS ?l) {{}}")
        assert isinstance(rows, ox.QuerySolutions)
        lowered = next(iter(rows))[0]
        assert lowered is not None
        odd.update(c for c, low in zip(chars, lowered.value.split("\n"), strict=True)
                   if c.lower() != low)
    return re.compile("[" + "".join(re.escape(c) for c in sorted(odd)) + "]")


@cache
def _engine() -> ox.Store:
    return ox.Store()  # empty: it only evaluates LCASE


def _engine_lcase(text: str) -> str:
    rows = _engine().query(f"SELECT (LCASE({ox.Literal(text)}) AS ?l) {{}}")
    assert isinstance(rows, ox.QuerySolutions)
    lowered = next(iter(rows))[0]
    assert lowered is not None
    return lowered.value


def lower(text: str) -> str:
    """``LCASE`` of a string, as the engine computes it."""
    if text.isascii() or odd_characters().search(text) is None:
        return text.lower()
    return _engine_lcase(text)


def lcase(value: Any) -> str | None:
    """``LCASE(?raw)``'s lexical form, None where the engine gives an error (not a string)."""
    if isinstance(value, str):
        return lower(value)
    if isinstance(value, ox.Literal) and value.language is not None:
        return lower(value.value)
    return None


def _text(value: Any) -> str | None:
    """A value's string for ``CONTAINS`` (None: not a string literal, an error)."""
    if isinstance(value, str):
        return value
    if isinstance(value, ox.Literal) and (value.language is not None
                                           or value.datatype.value == _XSD_STRING):
        return value.value
    return None


class TextTable:
    """``node id → (content, phrase, keywords, createdAt, saidAt)``; see the module."""

    __slots__ = ("_staged", "nodes")

    def __init__(self) -> None:
        self.nodes: dict[str, tuple[Any, ...]] = {}
        #: a commit's rows while :meth:`commit` runs (``_EMPTY``: the node goes), else None
        self._staged: dict[str, tuple[Any, ...]] | None = None

    # -- writes (the mirror's build thread, then the store owner's turn) ----------------------

    @contextmanager
    def commit(self) -> Iterator[None]:
        """Make the writes inside one change for readers: the rows they touch are staged and
        put in place together at the end (one ``dict.update``, atomic for other threads), so
        a recall beside a compression commit never sees a node between its old text's removal
        and its new text's insertion, as the in-memory store's one update did (nothing is put
        in place when the block raises)."""
        staged: dict[str, tuple[Any, ...]] = {}
        self._staged = staged
        try:
            yield
        finally:
            self._staged = None
        nodes = self.nodes
        nodes.update({nid: row for nid, row in staged.items() if row is not _EMPTY})
        for nid, row in staged.items():
            if row is _EMPTY:
                nodes.pop(nid, None)

    def take(self, lines: bytes) -> None:
        """Add the triples of N-Triples ``lines`` (text predicates only)."""
        if lines:
            self.add(ox.parse(lines, format=ox.RdfFormat.N_TRIPLES))

    def add(self, triples: Iterable[ox.Triple]) -> None:
        self._change(triples, adding=True)

    def remove(self, triples: Iterable[ox.Triple]) -> None:
        self._change(triples, adding=False)

    def _change(self, triples: Iterable[ox.Triple], adding: bool) -> None:
        """Insert (``adding``) or delete each triple's value in its node's slot: a set, as
        RDF's (inserting a value held, or deleting one not held, changes nothing)."""
        for t in triples:
            nid, slot = self._key(t)
            if nid is None:
                continue
            row = self._row(nid)
            held = values(row[slot])
            value = value_of(t.object)
            others = tuple(h for h in held if not _same(value, h))
            if adding:
                if len(others) < len(held):
                    continue
                if slot == KEYWORD and type(value) is str:
                    value = sys.intern(value)  # one copy of a keyword many nodes carry
                changed = (*held, value)
            elif len(others) == len(held):
                continue
            else:
                changed = others
            self._put(nid, (*row[:slot], _pack(changed), *row[slot + 1:]))

    def drop_texts(self, ids: Iterable[str]) -> None:
        """``delete_node_text(s)``: the nodes' content, phrase and keywords go."""
        for nid in ids:
            row = self._row(nid)
            if row is not _EMPTY:
                self._put(nid, (None, None, None, *row[KEYWORD + 1:]))

    def forget(self, ids: Iterable[str]) -> None:
        """``forget_node(s)``: every triple of the nodes goes."""
        for nid in ids:
            self._put(nid, _EMPTY)

    def _row(self, nid: str) -> tuple[Any, ...]:
        staged = self._staged
        if staged is not None and nid in staged:
            return staged[nid]
        return self.nodes.get(nid, _EMPTY)

    def _put(self, nid: str, row: tuple[Any, ...]) -> None:
        if row == _EMPTY:
            row = _EMPTY
        if self._staged is not None:
            self._staged[nid] = row
        elif row is _EMPTY:
            self.nodes.pop(nid, None)
        else:
            self.nodes[nid] = row

    @staticmethod
    def _key(t: ox.Triple) -> tuple[str | None, int]:
        subject = t.subject
        slot = _SLOT.get(t.predicate.value)
        if (slot is None or not isinstance(subject, ox.NamedNode)
                or not subject.value.startswith(_NODE)):
            return None, 0
        return subject.value[len(_NODE):], slot

    # -- reads (any thread) --------------------------------------------------------------------

    def rows(self, ids: Iterable[str]) -> Iterator[tuple[str, tuple[Any, ...]]]:
        nodes = self.nodes
        for nid in ids:
            row = nodes.get(nid)
            if row is not None:
                yield nid, row

    def texts(self, ids: Iterable[str]) -> Iterator[tuple[str, Any, Any]]:
        """``node_texts.rq``'s rows: ``(id, content, phrase)``."""
        for nid, row in self.rows(ids):
            for content in values(row[CONTENT]):
                for phrase in values(row[PHRASE]):
                    yield nid, python(content), python(phrase)

    def dates(self, ids: Iterable[str]) -> Iterator[tuple[str, Any, Any]]:
        """``node_dates.rq``'s rows: ``(id, createdAt, saidAt or None)``."""
        for nid, row in self.rows(ids):
            said = values(row[SAID]) or (None,)
            for created in values(row[CREATED]):
                for s in said:
                    yield nid, python(created), None if s is None else python(s)

    def entries(self, ids: Iterable[str]) -> Iterator[tuple[str, Any, Any, Any, Any]]:
        """``node_entries.rq``'s rows: ``(id, content, phrase, createdAt, saidAt or None)``."""
        for nid, row in self.rows(ids):
            said = values(row[SAID]) or (None,)
            for content in values(row[CONTENT]):
                for phrase in values(row[PHRASE]):
                    for created in values(row[CREATED]):
                        for s in said:
                            yield (nid, python(content), python(phrase), python(created),
                                   None if s is None else python(s))

    def contents(self, nid: str) -> tuple[Any, ...]:
        """The node's contents (``scan_state.rq``'s ``?content``), as Python values."""
        row = self.nodes.get(nid)
        return () if row is None else tuple(python(c) for c in values(row[CONTENT]))

    def matching(self, ids: Iterable[str], needles: Collection[str], caseless: bool
                 ) -> set[str]:
        """``matching_nodes.rq``: the ids one of whose contents or keywords holds a needle
        (lower-cased first unless ``caseless``)."""
        out: set[str] = set()
        for nid, row in self.rows(ids):
            for raw in (*values(row[CONTENT]), *values(row[KEYWORD])):
                text = _text(raw) if caseless else lcase(raw)
                if text is not None and any(n in text for n in needles):
                    out.add(nid)
                    break
        return out

    def matching_texts(self, ids: Iterable[str], needles: Collection[str] | None,
                       caseless: bool) -> list[tuple[str, str, bool, Any, Any]]:
        """``matching_texts.rq``'s rows: ``(id, text lower-cased, own, createdAt, saidAt or
        None)`` for every content (own False) and keyword (own True) that holds a needle —
        every one when ``needles`` is None."""
        out: list[tuple[str, str, bool, Any, Any]] = []
        for nid, row in self.rows(ids):
            created = values(row[CREATED])
            if not created:
                continue
            said = values(row[SAID]) or (None,)
            texts: list[tuple[str, bool]] = []
            for own, slot in ((False, CONTENT), (True, KEYWORD)):
                for raw in values(row[slot]):
                    if needles is not None and caseless:
                        held = _text(raw)
                        if held is None or not any(n in held for n in needles):
                            continue
                    text = lcase(raw)
                    if text is None:
                        continue
                    if needles is not None and not caseless and not any(
                            n in text for n in needles):
                        continue
                    texts.append((text, own))
            for text, own in texts:
                for c in created:
                    for s in said:
                        out.append((nid, text, own, python(c),
                                    None if s is None else python(s)))
        return out
