"""The data of a picture: a breadth-first walk from the focus on one read-only snapshot.

:func:`collect_view` is an *operation* for :func:`memory_rdf._inspect.inspect_agent`: it walks
live links (either direction) ``depth`` hops from the focus nodes; every query is a shipped
``graph_*.rq`` file rendered with serialized terms; the result (:class:`GraphView`) is plain
data for the renderers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from memory_rdf._focus import FocusManager
from memory_rdf._nodes import chunks
from memory_rdf._oxigraph import MemoryStore, node_id, node_ref, render
from memory_rdf._text import is_cjk_text, relation_display, strip_role_prefixes

__all__ = [
    "DEFAULT_DEPTH",
    "DEFAULT_LIMIT",
    "DEFAULT_THRESHOLD",
    "GraphView",
    "ViewLink",
    "ViewNode",
    "collect_view",
]

#: Hops from the focus shown by default (the same as recall's default_search_depth).
DEFAULT_DEPTH = 2
#: Most live nodes in one picture; the walk keeps the most strongly linked ones beyond that.
DEFAULT_LIMIT = 200
#: Links below this strength are not live (``Config.link_break_threshold``'s default).
DEFAULT_THRESHOLD = 0.01


def shown_relation(name: str | None, content: str) -> str | None:
    """``name`` as the picture shows it: the Chinese form when ``content`` (the link source's
    text) is mostly Chinese, else the English one (SPEC §5.4 v3, one table:
    :data:`memory_rdf._text.RELATION_NAMES`); other names as stored."""
    if not name:
        return name
    return relation_display(name, chinese=is_cjk_text(strip_role_prefixes(content)))


@dataclass(frozen=True)
class ViewNode:
    """A node in the picture; ``ghost`` nodes stand for forgotten link targets."""

    id: str
    hop: int
    phrase: str = ""
    content: str = ""
    keywords: tuple[str, ...] = ()
    importance: float = 0.0
    focus_rank: int | None = None  # 0 = the newest focus node
    scans: int = 0
    original_length: int | None = None
    created: str | None = None
    hidden_links: int = 0  # live links to nodes outside the picture
    ghost: bool = False


@dataclass(frozen=True)
class ViewLink:
    """One directed link between nodes of the picture (``dangling``: its target is forgotten)."""

    source: str
    target: str
    strength: float
    relation: str | None = None
    dangling: bool = False


@dataclass
class GraphView:
    """What :func:`collect_view` read: live nodes (hop order), ghosts, and the links among them."""

    agent_id: str
    depth: int
    nodes: list[ViewNode] = field(default_factory=list)
    ghosts: list[ViewNode] = field(default_factory=list)
    links: list[ViewLink] = field(default_factory=list)
    total_nodes: int = 0
    left_out: int = 0  # found within depth through drawn nodes, but beyond the node limit

    @property
    def dangling(self) -> list[ViewLink]:
        return [link for link in self.links if link.dangling]

    def pairs(self) -> list[tuple[str, str, ViewLink | None, ViewLink | None]]:
        """One entry per connected pair ``(a, b, link a→b, link b→a)`` in first-seen order —
        what the pictures draw as one line."""
        out: dict[tuple[str, str], list[ViewLink | None]] = {}
        for link in self.links:
            key = (link.source, link.target)
            rev = (link.target, link.source)
            if rev in out:
                out[rev][1] = link
            else:
                out.setdefault(key, [None, None])[0] = link
        return [(a, b, ab, ba) for (a, b), (ab, ba) in out.items()]


def _links_touching(store: MemoryStore, ids: Sequence[str]) -> list[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = []
    for part in chunks(ids):
        rows.extend(store.rows(render("graph_links", nodes=[node_ref(i) for i in part])))
    return rows


def collect_view(
    store: MemoryStore,
    depth: int = DEFAULT_DEPTH,
    limit: int = DEFAULT_LIMIT,
    threshold: float = DEFAULT_THRESHOLD,
) -> GraphView:
    """Read the network within ``depth`` hops of the focus (live links, either direction).

    Importance is summed over every live link of a node, drawn or not; at most ``limit`` live
    nodes are kept (per hop, the most strongly linked first). An operation for
    :func:`~memory_rdf._inspect.inspect_agent`: it returns plain data.
    """
    if depth < 0:
        raise ValueError("depth must be >= 0")
    path = store.path
    view = GraphView(agent_id=path.name if path is not None
                     else str(getattr(store, "agent_id", "memory")), depth=depth)
    view.total_nodes = int(store.scalar(render("node_count"), 0))
    focus = FocusManager(store, 1).ids()
    hop: dict[str, int] = {nid: 0 for nid in focus[: max(limit, 1)]}
    left_out = set(focus) - set(hop)
    # (source, target) -> (strength, relation, target alive); every link touching a visited node
    links: dict[tuple[str, str], tuple[float, str | None, bool]] = {}
    frontier = list(hop)
    for h in range(depth + 1):
        if not frontier:
            break
        best: dict[str, float] = {}
        for source, target, strength, relation, alive in _links_touching(store, frontier):
            s, t = node_id(source), node_id(target)
            w = float(strength)
            links[(s, t)] = (w, relation, alive is not None)
            if h == depth or w < threshold or alive is None:
                continue
            for other in (s, t):
                if other not in hop:
                    best[other] = max(best.get(other, 0.0), w)
        room = max(limit - len(hop), 0)
        ranked = sorted(best, key=lambda nid: (-best[nid], nid))
        left_out.update(ranked[room:])
        frontier = ranked[:room]
        for nid in frontier:
            hop[nid] = h + 1
    view.left_out = len(left_out - set(hop))

    importance = dict.fromkeys(hop, 0.0)
    hidden = dict.fromkeys(hop, 0)
    for (s, t), (w, _rel, alive) in links.items():
        if w < threshold:
            continue
        for end in (s, t):
            if end in importance:
                importance[end] += w
        if alive and (s in hop) != (t in hop):
            hidden[s if s in hop else t] += 1

    ids = list(hop)
    details: dict[str, tuple[Any, ...]] = {}
    keywords: dict[str, list[str]] = {nid: [] for nid in ids}
    for part in chunks(ids):
        refs = [node_ref(i) for i in part]
        for row in store.rows(render("graph_nodes", nodes=refs)):
            details[node_id(row[0])] = row[1:]
        for iri, keyword in store.rows(render("graph_keywords", nodes=refs)):
            keywords[node_id(iri)].append(str(keyword))
    rank = {nid: i for i, nid in enumerate(focus)}
    for nid in sorted(ids, key=lambda n: (hop[n], rank.get(n, 0), -importance[n], n)):
        phrase, content, scans, original, created = details.get(nid, (None,) * 5)
        view.nodes.append(ViewNode(
            id=nid, hop=hop[nid], phrase=str(phrase or ""), content=str(content or ""),
            keywords=tuple(keywords[nid]), importance=importance[nid],
            focus_rank=rank.get(nid), scans=int(scans or 0),
            original_length=int(original) if original is not None else None,
            created=str(created) if created is not None else None, hidden_links=hidden[nid],
        ))

    ghost_hop: dict[str, int] = {}
    text = {n.id: n.content for n in view.nodes}
    for (s, t), (w, stored, alive) in links.items():
        if w < threshold or s not in hop:
            continue
        rel = shown_relation(None if stored is None else str(stored), text.get(s, ""))
        if alive and t in hop:
            view.links.append(ViewLink(s, t, w, rel))
        elif not alive:
            view.links.append(ViewLink(s, t, w, rel, dangling=True))
            ghost_hop[t] = min(ghost_hop.get(t, hop[s] + 1), hop[s] + 1)
    view.ghosts = [ViewNode(id=t, hop=h, ghost=True) for t, h in ghost_hop.items()]
    order = {n.id: i for i, n in enumerate([*view.nodes, *view.ghosts])}
    view.links.sort(key=lambda k: (order[k.source], order[k.target]))
    return view
