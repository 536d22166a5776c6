"""Listing memories and the time window of SPEC §5.6 (``memories()``, ``since`` / ``until``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from memory_rdf import _vocab as V
from memory_rdf._exceptions import InvalidInputError
from memory_rdf._nodes import NodeStore, chunks, importances
from memory_rdf._oxigraph import MemoryStore, Term, lit, node_id, node_ref, render
from memory_rdf._oxigraph.term_index import TermIndex, read_index
from memory_rdf._text import keyword_rules, significant_keywords, with_full_width
from memory_rdf._types import as_utc, parse_time

#: Stand-ins for an open end of the window (the queries always compare against a bound).
_EARLIEST = datetime(1, 1, 1, tzinfo=UTC)
_LATEST = datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)


@dataclass(frozen=True)
class Window:
    """``[since, until)`` on a node's said time (``memory:saidAt``), else its createdAt."""

    since: datetime | None
    until: datetime | None

    def terms(self) -> dict[str, Term]:
        return {
            "since": lit(self.since or _EARLIEST),
            "until": lit(self.until or _LATEST),
        }


_OPEN = Window(None, None)

#: Candidate memories whose words a listing by keywords compares at a time.
MATCH_CHUNK = 200


def _unfolded_ids(index: TermIndex, needles: Sequence[str]) -> set[str]:
    """The ids of the nodes whose texts are compared whole for ``needles``: with a text that
    does not fold alike (:meth:`TermIndex.read_whole
    <memory_rdf._oxigraph.term_index.TermIndex.read_whole>`)."""
    cut = len(V.NODE)
    return {iri[cut:] for iri in index.read_whole(index.unfolded | index.marked, needles)}


def _newest(row: tuple[Any, ...]) -> tuple[datetime, datetime]:
    """The sort key of ``memories_matching.rq``'s ``DESC(?when) DESC(?created)``."""
    _, created, said = row

    def utc(moment: object) -> datetime:
        return as_utc(moment) if isinstance(moment, datetime) else _EARLIEST

    return utc(said or created), utc(created)


def make_window(since: object, until: object) -> Window | None:
    """``since`` / ``until`` of SPEC §5.6 as UTC datetimes (None when neither is given).

    Raises :class:`InvalidTypeError` / :class:`InvalidInputError` naming the argument.
    """
    if since is None and until is None:
        return None
    start = None if since is None else parse_time(since, "since")
    end = None if until is None else parse_time(until, "until")
    if start is not None and end is not None and start >= end:
        raise InvalidInputError(f"since ({since}) must be earlier than until ({until})")
    return Window(start, end)


class Listing:
    """Pages of an agent's memories, newest first, with their keywords and importance."""

    def __init__(self, store: MemoryStore, threshold: float) -> None:
        self._store = store
        self._threshold = lit(float(threshold))

    def page(
        self,
        keywords: Sequence[str] | None,
        window: Window | None,
        limit: int | None,
        offset: int,
    ) -> list[dict[str, Any]]:
        if keywords:
            order = self._matching_page(keywords, window, limit, offset)
        else:
            query = render("memories", limit=limit, offset=offset or None,
                           **(window or _OPEN).terms())
            order = self._store.rows(query)
        ids = [node_id(r[0]) for r in order]
        details: dict[str, tuple[Any, ...]] = {}
        keywords_of: dict[str, list[str]] = {}
        importance: dict[str, float] = {}
        for part in chunks(ids):
            refs = [node_ref(i) for i in part]
            for row in self._store.rows(render("memory_details", nodes=refs)):
                details[node_id(row[0])] = row[1:]
            for iri, keyword in self._store.rows(render("node_keywords", nodes=refs)):
                keywords_of.setdefault(node_id(iri), []).append(keyword)
            importance.update(importances(self._store, refs, self._threshold))
        out: list[dict[str, Any]] = []
        for nid, (_, created, said) in zip(ids, order, strict=True):
            if nid not in details:  # forgotten between the two reads (another writer)
                continue
            content, phrase, scans, original, focus, pinned = details[nid]
            out.append({
                "id": nid,
                "content": content,
                "phrase": phrase,
                "keywords": sorted(keywords_of.get(nid, [])),
                "created_at": created,
                "said_at": said,
                "scan_count": int(scans),
                "original_length": int(original),
                "importance": importance.get(nid, 0.0),
                "in_focus": bool(focus),
                "pinned": bool(pinned),
            })
        return out

    def _matching_page(
        self,
        keywords: Sequence[str],
        window: Window | None,
        limit: int | None,
        offset: int,
    ) -> list[tuple[Any, ...]]:
        """One page of ``memories_matching.rq``'s rows, newest first, of the nodes that match
        ``keywords`` as a recall matches (SPEC §5.4 v3 rule 4, :meth:`NodeStore.match_details`):
        the store lists the nodes whose texts hold a needle, newest first; their words are
        compared a chunk at a time until the page is full."""
        rules = keyword_rules(significant_keywords(keywords))
        # the nodes with a text the store's CONTAINS cannot fold (the term index's, when a
        # keyword recall built it) are listed too, and their texts compared whole; without
        # the index, the needles' full-width forms are looked for too (NodeStore.match_details)
        needles = list(dict.fromkeys(n for r in rules for n in r.needles))
        unfolded: set[str] | None = read_index(
            self._store, lambda ix: _unfolded_ids(ix, needles), derive=False)
        if unfolded is None:
            needles = with_full_width(needles)
        rows = self._store.rows(render("memories_matching", keywords=[lit(n) for n in needles],
                                       limit=None, offset=None, **(window or _OPEN).terms()))
        if unfolded:
            rows = self._with_unfolded(rows, unfolded, window)
        nodes = NodeStore(self._store)
        words = [r.text for r in rules]
        kept: list[tuple[Any, ...]] = []
        end = None if limit is None else offset + limit
        for part in chunks(rows, MATCH_CHUNK):
            matched = nodes.match_details([node_id(r[0]) for r in part], words, unfolded)
            kept.extend(r for r in part if node_id(r[0]) in matched)
            if end is not None and len(kept) >= end:
                break
        return kept[offset:end]

    def _with_unfolded(self, rows: list[tuple[Any, ...]], unfolded: set[str],
                       window: Window | None) -> list[tuple[Any, ...]]:
        """``memories_matching.rq``'s rows with those of the ``unfolded`` live nodes (inside
        ``window``) it left out, in its order: newest first, then the node's IRI."""
        seen = {node_id(r[0]) for r in rows}
        extra = sorted(unfolded - seen)
        if window is not None and extra:
            timely = self.in_window(extra, window)
            extra = [i for i in extra if i in timely]
        dates = NodeStore(self._store).dates(extra)
        if not dates:
            return rows
        out = [*rows, *((V.NODE + i, created, said) for i, (said, created) in dates.items())]
        out.sort(key=lambda r: str(r[0]))
        out.sort(key=_newest, reverse=True)
        return out

    def in_window(self, ids: Sequence[str], window: Window) -> set[str]:
        """The ids said (or, without a said time, created) inside ``window``."""
        out: set[str] = set()
        for part in chunks(ids):
            query = render("nodes_in_window", nodes=[node_ref(i) for i in part], **window.terms())
            out.update(node_id(iri) for iri in self._store.column(query))
        return out
