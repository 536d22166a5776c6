"""Pictures of an agent's memory: the network around its focus (``memory-rdf graph``).

Two halves:

* :func:`collect_view` — an *operation* for :func:`memory_rdf._inspect.inspect_agent`: a
  breadth-first walk from the focus nodes over live links (either direction), ``depth`` hops,
  on one read-only snapshot. Every query is a shipped ``graph_*.rq`` file rendered with
  serialized terms. The result (:class:`GraphView`) is plain data.
* renderers — :func:`render_html` (one self-contained page: inline SVG, CSS and a little
  JavaScript, nothing fetched from anywhere), :func:`render_dot` (Graphviz) and
  :func:`render_svg` (``dot`` run on that, when Graphviz is installed).

What the pictures encode (the same in both formats):

* a node's size grows with its **importance** — the sum of its live link strengths, the number
  compression compares with 1 (SPEC §5.2) — counted over *all* its links, shown or not;
* a line's width and opacity grow with **link strength**; a pair of nodes linked both ways is
  one line (both directions are listed in its tooltip), a one-way link has an arrow;
* **focus** nodes (what the agent is thinking about now) are amber and sit in the middle;
  the other nodes sit on rings by their hop distance from the focus;
* a **dangling** link — whose target was forgotten — is a dashed line to a faded "forgotten"
  placeholder: the memory of having known something.

>>> import tempfile
>>> from memory_rdf import MemoryManager
>>> from memory_rdf._inspect import inspect_agent
>>> data = tempfile.mkdtemp()
>>> with MemoryManager("pic", data_dir=data) as mem:
...     mem.remember([{"role": "user", "content": "我们用 PostgreSQL 存订单"}])
...     _ = mem.wait_idle()
>>> view = inspect_agent("pic", data, lambda s: collect_view(s, depth=2))
>>> len(view.nodes), view.nodes[0].focus_rank
(1, 0)
>>> render_dot(view).startswith("digraph")
True
"""

from __future__ import annotations

import html
import json
import math
import shutil
import subprocess
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from memory_rdf._exceptions import MemoryRDFError
from memory_rdf._focus import FocusManager
from memory_rdf._nodes import chunks
from memory_rdf._store import AgentStore, node_id, node_ref, render

__all__ = [
    "DEFAULT_DEPTH",
    "DEFAULT_LIMIT",
    "FORMATS",
    "GraphView",
    "ViewLink",
    "ViewNode",
    "collect_view",
    "dot_available",
    "render_dot",
    "render_html",
    "render_svg",
    "render_view",
    "wrap_label",
]

#: Hops from the focus shown by default (the same as recall's default_search_depth).
DEFAULT_DEPTH = 2
#: Most live nodes in one picture; the walk keeps the most strongly linked ones beyond that.
DEFAULT_LIMIT = 200
#: Output formats of :func:`render`.
FORMATS = ("html", "dot", "svg")
#: Links below this strength are not live (``Config.link_break_threshold``'s default).
DEFAULT_THRESHOLD = 0.01


# ---------------------------------------------------------------------------------------------
# The data
# ---------------------------------------------------------------------------------------------


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


def _links_touching(store: AgentStore, ids: Sequence[str]) -> list[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = []
    for part in chunks(ids):
        rows.extend(store.rows(render("graph_links", nodes=[node_ref(i) for i in part])))
    return rows


def collect_view(
    store: AgentStore,
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
    view = GraphView(agent_id=path.name if path is not None else "memory", depth=depth)
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
    for (s, t), (w, rel, alive) in links.items():
        if w < threshold or s not in hop:
            continue
        if alive and t in hop:
            view.links.append(ViewLink(s, t, w, rel))
        elif not alive:
            view.links.append(ViewLink(s, t, w, rel, dangling=True))
            ghost_hop[t] = min(ghost_hop.get(t, hop[s] + 1), hop[s] + 1)
    view.ghosts = [ViewNode(id=t, hop=h, ghost=True) for t, h in ghost_hop.items()]
    order = {n.id: i for i, n in enumerate([*view.nodes, *view.ghosts])}
    view.links.sort(key=lambda k: (order[k.source], order[k.target]))
    return view


# ---------------------------------------------------------------------------------------------
# Text helpers
# ---------------------------------------------------------------------------------------------


def _cells(ch: str) -> int:
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def _greedy(words: str, width: int) -> list[str]:
    """Lines of at most ``width`` cells, breaking at a space when one is near, else anywhere."""
    out: list[str] = []
    current, used = "", 0
    for ch in words:
        w = _cells(ch)
        if used + w > width and current:
            cut = current.rfind(" ")
            if ch != " " and cut >= 2:
                out.append(current[:cut])
                current = current[cut + 1:]
            else:
                out.append(current.rstrip())
                current = ""
            used = sum(_cells(c) for c in current)
            if ch == " " and not current:
                continue
        current += ch
        used += w
    if current.strip():
        out.append(current.strip())
    return out


def wrap_label(text: str, width: int = 22, lines: int = 2) -> list[str]:
    """``text`` as at most ``lines`` balanced lines of at most ``width`` cells (a CJK character
    counts 2), breaking at spaces where it can; "…" ends a text that does not fit."""
    words = " ".join(text.split())
    total = sum(_cells(c) for c in words)
    if total <= width:
        return [words]
    best: tuple[int, int, list[str]] | None = None
    for w in range(min(width, max(-(-total // lines) + 1, 8)), width + 1):
        out = _greedy(words, w)
        if len(out) > lines:
            continue
        pos, hard = 0, 0  # hard: breaks inside a word (not at a space)
        for line in out[:-1]:
            pos = words.index(line, pos) + len(line)
            hard += pos < len(words) and words[pos] != " "
        score = (hard, max(sum(_cells(c) for c in line) for line in out))
        if best is None or score < best[:2]:
            best = (*score, out)
    if best is not None:
        return best[2]
    out = _greedy(words, width)
    if len(out) <= lines:
        return out
    last = out[lines - 1]
    while last and sum(_cells(c) for c in last) + 1 > width:
        last = last[:-1]
    return [*out[: lines - 1], last.rstrip() + "…"]


def _label_width(lines: Iterable[str], font_px: float = 12.0) -> float:
    return max((sum(_cells(c) for c in line) for line in lines), default=0) * font_px * 0.55


def node_radius(node: ViewNode, top: float = 1.0) -> float:
    """Radius in px: area in proportion to importance, relative to the most important node
    drawn (``top``), from 5 to 24 px; ghosts are small."""
    if node.ghost:
        return 9.0
    return 5.0 + 19.0 * math.sqrt(max(node.importance, 0.0) / max(top, 1.0))


def _strength_of(ab: ViewLink | None, ba: ViewLink | None) -> float:
    return max((k.strength for k in (ab, ba) if k is not None), default=0.0)


# ---------------------------------------------------------------------------------------------
# Layout: focus in the middle, one ring per hop, ring order by the angle of the neighbours
# already placed (deterministic: the same store gives the same picture)
# ---------------------------------------------------------------------------------------------


@dataclass
class Layout:
    pos: dict[str, tuple[float, float]]
    rings: list[float]  # radius of the ring of hop k (k = index), 0 for a centred focus
    labels: dict[str, list[str]]
    radius: dict[str, float]
    box: tuple[float, float, float, float]  # min x, min y, width, height


def layout(view: GraphView) -> Layout:
    every = [*view.nodes, *view.ghosts]
    labels = {
        n.id: (["forgotten"] if n.ghost else wrap_label(n.phrase or n.content or n.id))
        for n in every
    }
    top = max((n.importance for n in view.nodes), default=1.0)
    size = {n.id: node_radius(n, top) for n in every}
    weights: dict[str, list[tuple[str, float]]] = {n.id: [] for n in every}
    for a, b, ab, ba in view.pairs():
        w = max(_strength_of(ab, ba), 0.05)
        weights[a].append((b, w))
        weights[b].append((a, w))
    by_hop: dict[int, list[ViewNode]] = {}
    for n in every:
        by_hop.setdefault(n.hop, []).append(n)

    pos: dict[str, tuple[float, float]] = {}
    angle: dict[str, float] = {}
    rings: list[float] = []
    radius = 0.0
    # Rings are spaced to fit about 1,000 px when the counts allow (labels stay readable at
    # the first zoom), never closer than a node and its label need.
    outer = max(by_hop, default=0)
    gap = min(max((440.0 - 110.0) / max(outer, 1), 85.0), 150.0)
    for h in range(max(by_hop, default=-1) + 1):
        ring = by_hop.get(h, [])
        if not ring:
            rings.append(radius)
            continue
        slot = max(
            max(_label_width(labels[n.id]) + 18.0, 2 * size[n.id] + 24.0) for n in ring
        )
        if h == 0:
            ring.sort(key=lambda n: n.focus_rank if n.focus_rank is not None else 0)
            if len(ring) == 1:
                radius = 0.0
                pos[ring[0].id] = (0.0, 0.0)
                angle[ring[0].id] = -math.pi / 2
                rings.append(0.0)
                continue
            # neighbours on the ring at least a label apart (their labels can be side by side)
            radius = max(100.0, 1.15 * slot / (2 * math.sin(math.pi / len(ring))))
            targets = [-math.pi / 2 + 2 * math.pi * i / len(ring) for i in range(len(ring))]
        else:
            bary: dict[str, float] = {}
            for n in ring:
                x = y = 0.0
                for other, w in weights[n.id]:
                    if other in angle:
                        x += w * math.cos(angle[other])
                        y += w * math.sin(angle[other])
                bary[n.id] = math.atan2(y, x) if (x or y) else 0.0
            ring.sort(key=lambda n: (bary[n.id], n.id))
            step = 2 * math.pi / len(ring)
            # rotate the evenly spaced slots to sit as close as possible to the barycentres
            sx = sum(math.cos(bary[n.id] - i * step) for i, n in enumerate(ring))
            sy = sum(math.sin(bary[n.id] - i * step) for i, n in enumerate(ring))
            offset = math.atan2(sy, sx) if (sx or sy) else -math.pi / 2
            targets = [offset + i * step for i in range(len(ring))]
            step_out = 0.7 * gap if all(n.ghost for n in ring) else gap
            radius = max(radius + step_out, len(ring) * slot / (2 * math.pi))
        rings.append(radius)
        for n, theta in zip(ring, targets, strict=True):
            angle[n.id] = theta
            pos[n.id] = (radius * math.cos(theta), radius * math.sin(theta))

    if pos:
        extent = max(rings, default=0.0)
        xs = [p[0] for p in pos.values()] + [-extent, extent]
        ys = [p[1] for p in pos.values()] + [-extent - 20, extent]
        pad_x = max((_label_width(v) for v in labels.values()), default=60.0) / 2 + 40
        box = (min(xs) - pad_x, min(ys) - 60, max(xs) - min(xs) + 2 * pad_x,
               max(ys) - min(ys) + 120 + 40)
    else:
        box = (-200.0, -120.0, 400.0, 240.0)
    return Layout(pos, rings, labels, size, box)


# ---------------------------------------------------------------------------------------------
# HTML
# ---------------------------------------------------------------------------------------------


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _fmt(x: float) -> str:
    return f"{x:.1f}"


def _hop_class(node: ViewNode) -> str:
    if node.ghost:
        return "ghost"
    if node.focus_rank is not None:
        return "focus"
    return f"hop{min(node.hop, 3)}"


def _tooltip(node: ViewNode) -> str:
    if node.ghost:
        return "A forgotten memory: only the links that pointed at it remain."
    meta = f"importance {node.importance:.2f} · {node.hop} hop(s) from the focus"
    return f"{node.phrase}\n{node.content}\n{meta}"


def _edge_path(p: tuple[float, float], q: tuple[float, float], r_q: float,
               arrow: bool) -> str:
    """A gently curved line from p to q (stopping at q's rim when it ends in an arrow)."""
    (x1, y1), (x2, y2) = p, q
    dx, dy = x2 - x1, y2 - y1
    length = math.hypot(dx, dy) or 1.0
    bend = 0.08 * length
    cx, cy = (x1 + x2) / 2 - dy / length * bend, (y1 + y2) / 2 + dx / length * bend
    if arrow:
        ex, ey = x2 - cx, y2 - cy
        el = math.hypot(ex, ey) or 1.0
        x2, y2 = x2 - ex / el * (r_q + 3), y2 - ey / el * (r_q + 3)
    return f"M{_fmt(x1)},{_fmt(y1)} Q{_fmt(cx)},{_fmt(cy)} {_fmt(x2)},{_fmt(y2)}"


def _svg(view: GraphView, lay: Layout) -> str:
    nodes = {n.id: n for n in [*view.nodes, *view.ghosts]}
    x0, y0, w, h = lay.box
    parts = [
        f'<svg id="graph" xmlns="http://www.w3.org/2000/svg" viewBox="{_fmt(x0)} {_fmt(y0)} '
        f'{_fmt(w)} {_fmt(h)}" preserveAspectRatio="xMidYMid meet" role="img" '
        f'aria-label="Memory network of agent {_e(view.agent_id)}">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="9" '
        'markerHeight="9" markerUnits="userSpaceOnUse" orient="auto"><path '
        'd="M0,1 L9,5 L0,9 z" class="arrowhead"/></marker></defs>',
        '<g id="viewport">',
        '<g class="rings">',
    ]
    for k, radius in enumerate(lay.rings):
        if radius <= 0:
            continue
        parts.append(f'<circle class="ring" r="{_fmt(radius)}"/>')
        if k > 0:  # the focus ring needs no words: its nodes are amber and numbered
            label = f"{k} hop{'s' if k > 1 else ''}"
            parts.append(f'<text class="ring-label" x="0" y="{_fmt(-radius - 8)}">{label}</text>')
    parts.append("</g>")
    parts.append('<g class="links">')
    for i, (a, b, ab, ba) in enumerate(view.pairs()):
        strength = _strength_of(ab, ba)
        dangling = any(k is not None and k.dangling for k in (ab, ba))
        one_way = (ab is None) != (ba is None)
        src, dst = (a, b) if ab is not None else (b, a)
        width = 0.6 + 3.0 * min(strength, 1.0)
        opacity = 0.12 + 0.5 * min(strength, 1.0)
        cls = "link dangling" if dangling else "link"
        arrow = one_way and not dangling
        marker = ' marker-end="url(#arrow)"' if arrow else ""
        d = _edge_path(lay.pos[src], lay.pos[dst], lay.radius[dst], arrow)
        tips = []
        for one in (ab, ba):
            if one is None:
                continue
            s_name = "forgotten" if nodes[one.source].ghost else nodes[one.source].phrase
            t_name = "forgotten" if nodes[one.target].ghost else nodes[one.target].phrase
            rel = f" ({one.relation})" if one.relation else ""
            tips.append(f"{s_name} → {t_name}{rel}: strength {one.strength:.2f}")
        parts.append(
            f'<path class="{cls}" data-edge="{i}" d="{d}" stroke-width="{width:.2f}" '
            f'stroke-opacity="{opacity:.2f}"{marker}><title>{_e(chr(10).join(tips))}</title>'
            "</path>"
        )
    parts.append("</g>")
    parts.append('<g class="nodes">')
    texts = ['<g class="labels">']
    for n in [*view.nodes, *view.ghosts]:
        x, y = lay.pos[n.id]
        r = lay.radius[n.id]
        kind = _hop_class(n)
        cls = f"node {kind}"
        if not n.ghost and n.focus_rank is None and n.importance < 1:
            cls += " fading"
        at = f'transform="translate({_fmt(x)},{_fmt(y)})"'
        parts.append(f'<g class="{cls}" data-node="{_e(n.id)}" {at}>'
                     f"<title>{_e(_tooltip(n))}</title>")
        if n.focus_rank is not None:
            parts.append(f'<circle class="halo" r="{_fmt(r + 7)}"/>')
        parts.append(f'<circle class="dot" r="{_fmt(r)}"/>')
        if n.focus_rank is not None:
            parts.append(f'<text class="rank" y="4">{n.focus_rank + 1}</text>')
        parts.append("</g>")
        # labels in a layer above every node, so no later node hides one
        top = r + (2 if n.focus_rank is None else 8)
        tspans = "".join(
            f'<tspan x="0" dy="{"1em" if j == 0 else "1.15em"}">{_e(line)}</tspan>'
            for j, line in enumerate(lay.labels[n.id])
        )
        texts.append(f'<text class="label {kind}" data-label="{_e(n.id)}" {at} '
                     f'y="{_fmt(top)}">{tspans}</text>')
    parts.append("</g>")
    parts.extend(texts)
    parts.append("</g></g></svg>")
    return "\n".join(parts)


_CSS = """
:root { --ink:#1f2937; --muted:#6b7280; --line:#e5e7eb; --focus:#f59e0b; --focus-dark:#b45309;
  --hop1:#2563eb; --hop2:#60a5fa; --hop3:#a5c8f5; --link:#475569; --ghost:#9ca3af;
  --bg:#f8fafc; }
* { box-sizing: border-box; }
html, body { margin:0; height:100%; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", "PingFang SC", "Hiragino Sans GB",
  "Microsoft YaHei", "Noto Sans CJK SC", "WenQuanYi Micro Hei", sans-serif; color:var(--ink);
  background:var(--bg); display:flex; flex-direction:column; }
header { padding:14px 22px 10px; border-bottom:1px solid var(--line); background:#fff; }
header h1 { font-size:19px; margin:0 0 2px; font-weight:650; }
header h1 .agent { color:var(--focus-dark); }
header p { margin:0; color:var(--muted); font-size:13px; }
main { flex:1; display:flex; min-height:0; }
#canvas { flex:1; position:relative; min-width:0; }
#graph { width:100%; height:100%; display:block; cursor:grab; user-select:none; }
#graph.panning { cursor:grabbing; }
aside { width:330px; border-left:1px solid var(--line); background:#fff; padding:14px 18px;
  overflow:auto; font-size:13px; }
aside h2 { font-size:12px; text-transform:uppercase; letter-spacing:.06em; color:var(--muted);
  margin:14px 0 6px; font-weight:650; }
aside h2:first-child { margin-top:0; }
aside ol { margin:0; padding-left:22px; }
aside li { margin:2px 0; cursor:pointer; }
aside li:hover { color:var(--hop1); }
aside li .num { color:var(--muted); font-size:12px; }
#details { border:1px solid var(--line); border-radius:8px; padding:10px 12px; background:#fbfbfd; }
#details .phrase { font-weight:650; font-size:14px; }
#details .content { white-space:pre-wrap; margin:6px 0; max-height:260px; overflow:auto; }
.meta { color:var(--muted); font-size:12px; }
.chip { display:inline-block; background:#eef2ff; color:#3730a3; border-radius:10px;
  padding:0 7px; margin:2px 3px 0 0; font-size:12px; }
.legend { display:grid; grid-template-columns:34px 1fr; gap:6px 8px; align-items:center;
  font-size:12px; color:#374151; }
.legend svg { width:34px; height:20px; }
.help { color:var(--muted); font-size:12px; margin-top:12px; }
.ring { fill:none; stroke:#e2e8f0; stroke-width:1; stroke-dasharray:2 5; }
.ring-label { font-size:calc(var(--fs, 12) * .9px); fill:#94a3b8; text-anchor:middle; }
.link { fill:none; stroke:var(--link); stroke-linecap:round; transition:stroke-opacity .15s; }
.link.dangling { stroke:var(--ghost); stroke-dasharray:5 4; stroke-opacity:.85; }
.arrowhead { fill:var(--link); }
.node .dot { stroke:#fff; stroke-width:1.5; }
.node.focus .dot { fill:var(--focus); stroke:var(--focus-dark); stroke-width:2; }
.node.focus .halo { fill:var(--focus); opacity:.18; }
.node.hop1 .dot { fill:var(--hop1); }
.node.hop2 .dot { fill:var(--hop2); }
.node.hop3 .dot { fill:var(--hop3); }
.node.fading .dot { fill-opacity:.4; stroke:var(--hop1); stroke-dasharray:2 2; }
.node.ghost .dot { fill:#eef0f3; stroke:var(--ghost); stroke-width:1.5; stroke-dasharray:3 2; }
.node .rank { font-size:11px; font-weight:700; fill:#fff; text-anchor:middle;
  pointer-events:none; }
.label { font-size:calc(var(--fs, 12) * 1px); text-anchor:middle; fill:var(--ink);
  paint-order:stroke; stroke:#f8fafc; stroke-width:calc(var(--fs, 12) * .3px);
  stroke-linejoin:round; pointer-events:none; }
.label.focus { font-weight:650; font-size:calc(var(--fs, 12) * 1.05px); }
.label.ghost { fill:var(--ghost); font-style:italic; font-size:calc(var(--fs, 12) * .9px); }
.label.crowded { display:none; }
.label.on.crowded, .label.sel.crowded { display:inline; }
.node { cursor:pointer; }
#graph.hl .node:not(.on), #graph.hl .label:not(.on) { opacity:.22; }
#graph.hl .link:not(.on) { stroke-opacity:.05; }
#graph.hl .link.on { stroke:#1d4ed8; }
.node.sel .dot { stroke:#111827; stroke-width:3; }
#tip { position:fixed; pointer-events:none; background:#111827; color:#f9fafb; border-radius:8px;
  padding:8px 11px; font-size:12.5px; max-width:420px; box-shadow:0 6px 20px rgba(0,0,0,.25);
  display:none; z-index:10; white-space:pre-wrap; }
#tip b { font-size:13.5px; }
#tip .meta { color:#cbd5e1; }
.empty { position:absolute; inset:0; display:flex; align-items:center; justify-content:center;
  color:var(--muted); font-size:16px; }
"""

_JS = r"""
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("graph-data").textContent);
  var svg = document.getElementById("graph");
  if (!svg) return;
  var tip = document.getElementById("tip");
  var details = document.getElementById("details");
  var nodes = {}, adj = {};
  data.nodes.forEach(function (n) { nodes[n.id] = n; adj[n.id] = []; });
  data.edges.forEach(function (e, i) { adj[e.a].push(i); adj[e.b].push(i); });
  svg.querySelectorAll("title").forEach(function (t) { t.remove(); });
  function esc(s) {
    return String(s).replace(/[&<>"]/g, function (c) {
      return {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}[c];
    });
  }
  function name(id) { var n = nodes[id]; return n.ghost ? "forgotten" : (n.phrase || id); }
  function meta(n) {
    if (n.ghost) return "forgotten — only the links that pointed at it remain";
    var bits = [];
    if (n.focus !== null) bits.push("focus #" + (n.focus + 1));
    bits.push("importance " + n.importance.toFixed(2));
    bits.push(n.hop + (n.hop === 1 ? " hop" : " hops") + " from the focus");
    bits.push("scanned " + n.scans + "×");
    if (n.original) bits.push(n.content.length + " of " + n.original + " characters left");
    if (n.hidden) bits.push(n.hidden + " more link" + (n.hidden > 1 ? "s" : "") + " outside");
    return bits.join(" · ");
  }
  function nodeHtml(n, full) {
    if (n.ghost) return "<b>forgotten memory</b><div class='meta'>" + esc(meta(n)) + "</div>";
    var text = full || n.content.length <= 400 ? n.content : n.content.slice(0, 400) + "…";
    var chips = n.keywords.map(function (k) { return "<span class='chip'>" + esc(k) + "</span>"; });
    return "<div class='phrase'><b>" + esc(n.phrase) + "</b></div><div class='content'>" +
      esc(text) + "</div><div>" + chips.join("") + "</div><div class='meta'>" + esc(meta(n)) +
      "</div>";
  }
  function edgeLines(e) {
    return e.dirs.map(function (d) {
      return esc(name(d.s)) + " → " + esc(name(d.t)) + (d.r ? " (" + esc(d.r) + ")" : "") +
        ": strength " + d.w.toFixed(2) + (d.dangling ? " — target forgotten" : "");
    });
  }
  function place(ev) {
    var x = ev.clientX + 16, y = ev.clientY + 14;
    var w = tip.offsetWidth, h = tip.offsetHeight;
    if (x + w > window.innerWidth - 8) x = ev.clientX - w - 16;
    if (y + h > window.innerHeight - 8) y = window.innerHeight - h - 8;
    tip.style.left = x + "px"; tip.style.top = y + "px";
  }
  function highlight(id) {
    svg.classList.add("hl");
    function on(o) {
      svg.querySelectorAll('[data-node="' + o + '"], [data-label="' + o + '"]')
        .forEach(function (el) { el.classList.add("on"); });
    }
    on(id);
    adj[id].forEach(function (i) {
      var e = data.edges[i];
      svg.querySelector('[data-edge="' + i + '"]').classList.add("on");
      on(e.a); on(e.b);
    });
  }
  function clear() {
    svg.classList.remove("hl");
    svg.querySelectorAll(".on").forEach(function (el) { el.classList.remove("on"); });
  }
  function select(id) {
    svg.querySelectorAll(".sel").forEach(function (el) { el.classList.remove("sel"); });
    var n = nodes[id];
    if (!n) return;
    svg.querySelectorAll('[data-node="' + id + '"], [data-label="' + id + '"]')
      .forEach(function (el) { el.classList.add("sel"); });
    var rows = adj[id].map(function (i) { return edgeLines(data.edges[i]).join("<br>"); });
    details.innerHTML = nodeHtml(n, true) +
      (rows.length ? "<div class='meta' style='margin-top:8px'><b>Links</b><br>" +
       rows.join("<br>") + "</div>" : "");
  }
  svg.addEventListener("mouseover", function (ev) {
    var g = ev.target.closest("[data-node]"), p = ev.target.closest("[data-edge]");
    if (g) {
      var n = nodes[g.getAttribute("data-node")];
      clear(); highlight(n.id);
      tip.innerHTML = nodeHtml(n, false);
    } else if (p) {
      tip.innerHTML = edgeLines(data.edges[+p.getAttribute("data-edge")]).join("<br>");
    } else { return; }
    tip.style.display = "block"; place(ev);
  });
  svg.addEventListener("mousemove", function (ev) {
    if (tip.style.display === "block") place(ev);
  });
  svg.addEventListener("mouseout", function (ev) {
    if (ev.relatedTarget && (ev.relatedTarget.closest("[data-node]") ||
        ev.relatedTarget.closest("[data-edge]"))) return;
    tip.style.display = "none"; clear();
  });
  svg.addEventListener("click", function (ev) {
    var g = ev.target.closest("[data-node]");
    if (g) select(g.getAttribute("data-node"));
  });
  document.querySelectorAll("[data-select]").forEach(function (li) {
    li.addEventListener("click", function () { select(li.getAttribute("data-select")); });
  });
  // labels: about the same size on screen at any zoom; where they would overlap, the more
  // important memory keeps its label (focus first) and the others show on hover
  var vb = svg.viewBox.baseVal, drag = null, pending = false;
  var order = data.nodes.slice().sort(function (a, b) {
    var fa = a.focus === null ? 1e9 : a.focus, fb = b.focus === null ? 1e9 : b.focus;
    return fa - fb || (a.ghost - b.ghost) || b.importance - a.importance;
  });
  function scale() {
    var r = svg.getBoundingClientRect();
    return r.width && r.height ? Math.max(vb.width / r.width, vb.height / r.height) : 1;
  }
  function labels() {
    pending = false;
    // zoomed in (s < 1): 12 px on screen; zoomed out: shrink gently (the layout made room
    // for 12 user units per label line)
    var s = scale();
    svg.style.setProperty("--fs", (12 * (s <= 1 ? s : Math.sqrt(s))).toFixed(3));
    var taken = [], dots = data.nodes.map(function (n) {
      return {id: n.id, x1: n.x - n.r, y1: n.y - n.r, x2: n.x + n.r, y2: n.y + n.r};
    });
    function hits(box, o) {
      return box.x1 < o.x2 && o.x1 < box.x2 && box.y1 < o.y2 && o.y1 < box.y2;
    }
    order.forEach(function (n) {
      var t = svg.querySelector('[data-label="' + n.id + '"]');
      if (!t) return;
      t.classList.remove("crowded");
      var b = t.getBBox(), pad = 3 * scale();
      var box = {x1: n.x + b.x - pad, y1: n.y + b.y - pad, x2: n.x + b.x + b.width + pad,
                 y2: n.y + b.y + b.height + pad};
      var clash = taken.some(function (o) { return hits(box, o); }) ||
        (n.focus === null && dots.some(function (o) { return o.id !== n.id && hits(box, o); }));
      if (clash) t.classList.add("crowded"); else taken.push(box);
    });
  }
  function relabel() { if (!pending) { pending = true; requestAnimationFrame(labels); } }
  labels();
  window.addEventListener("resize", relabel);
  // zoom (wheel) and pan (drag) by moving the viewBox
  function point(ev) {
    var r = svg.getBoundingClientRect();
    var s = Math.max(vb.width / r.width, vb.height / r.height);
    var ox = (r.width * s - vb.width) / 2, oy = (r.height * s - vb.height) / 2;
    return {x: vb.x - ox + (ev.clientX - r.left) * s,
            y: vb.y - oy + (ev.clientY - r.top) * s, s: s};
  }
  svg.addEventListener("wheel", function (ev) {
    ev.preventDefault();
    var p = point(ev), k = Math.exp(ev.deltaY * 0.0015);
    vb.x = p.x - (p.x - vb.x) * k; vb.y = p.y - (p.y - vb.y) * k;
    vb.width *= k; vb.height *= k;
    relabel();
  }, {passive: false});
  svg.addEventListener("mousedown", function (ev) {
    if (ev.target.closest("[data-node]")) return;
    drag = {x: ev.clientX, y: ev.clientY, vx: vb.x, vy: vb.y, s: point(ev).s};
    svg.classList.add("panning");
  });
  window.addEventListener("mousemove", function (ev) {
    if (!drag) return;
    vb.x = drag.vx - (ev.clientX - drag.x) * drag.s;
    vb.y = drag.vy - (ev.clientY - drag.y) * drag.s;
  });
  window.addEventListener("mouseup", function () { drag = null; svg.classList.remove("panning"); });
  // page.html#node=ID opens with that memory selected and its links highlighted
  var wanted = /^#node=(.+)$/.exec(window.location.hash);
  if (wanted && nodes[decodeURIComponent(wanted[1])]) {
    var id = decodeURIComponent(wanted[1]);
    select(id); highlight(id); labels();
  }
})();
"""


def _legend() -> str:
    def swatch(body: str) -> str:
        return f'<svg viewBox="0 0 34 20">{body}</svg>'

    rows = [
        (swatch('<circle cx="17" cy="10" r="9" fill="#f59e0b" opacity=".2"/>'
                '<circle cx="17" cy="10" r="6" fill="#f59e0b" stroke="#b45309" '
                'stroke-width="1.5"/>'),
         "focus: what the agent is thinking about now (number = recency)"),
        (swatch('<circle cx="9" cy="10" r="4" fill="#2563eb"/>'
                '<circle cx="24" cy="10" r="8" fill="#2563eb"/>'),
         "memory; bigger = more important (sum of its link strengths)"),
        (swatch('<circle cx="9" cy="10" r="5" fill="#2563eb"/>'
                '<circle cx="25" cy="10" r="5" fill="#60a5fa"/>'),
         "darker = closer to the focus (1 hop, 2 hops, …)"),
        (swatch('<circle cx="17" cy="10" r="6" fill="#2563eb" fill-opacity=".4" '
                'stroke="#2563eb" stroke-dasharray="2 2"/>'),
         "fading: importance below 1, compression is shortening it"),
        (swatch('<path d="M2,6 H32" stroke="#475569" stroke-width="3.8" stroke-opacity=".75"/>'
                '<path d="M2,15 H32" stroke="#475569" stroke-width="1" stroke-opacity=".3"/>'),
         "link; thicker = stronger (links decay as time passes)"),
        (swatch('<path d="M2,10 H24" stroke="#9ca3af" stroke-width="1.5" '
                'stroke-dasharray="5 4"/><circle cx="28" cy="10" r="5" fill="#f3f4f6" '
                'stroke="#9ca3af" stroke-dasharray="3 2"/>'),
         "link to a forgotten memory (dangling)"),
    ]
    cells = "".join(f"{icon}<span>{_e(text)}</span>" for icon, text in rows)
    return f'<div class="legend">{cells}</div>'


def _page_data(view: GraphView, lay: Layout) -> dict[str, Any]:
    nodes = []
    for n in [*view.nodes, *view.ghosts]:
        x, y = lay.pos[n.id]
        nodes.append({
            "x": round(x, 1), "y": round(y, 1), "r": round(lay.radius[n.id], 1),
            "id": n.id, "phrase": n.phrase, "content": n.content, "keywords": list(n.keywords),
            "importance": round(n.importance, 4), "hop": n.hop, "focus": n.focus_rank,
            "scans": n.scans, "original": n.original_length, "hidden": n.hidden_links,
            "ghost": n.ghost,
        })
    edges = []
    for a, b, ab, ba in view.pairs():
        dirs = [
            {"s": k.source, "t": k.target, "w": round(k.strength, 4), "r": k.relation,
             "dangling": k.dangling}
            for k in (ab, ba) if k is not None
        ]
        edges.append({"a": a, "b": b, "dirs": dirs})
    return {"agent": view.agent_id, "depth": view.depth, "nodes": nodes, "edges": edges}


def _json_for_script(value: object) -> str:
    """JSON safe inside ``<script>``: no ``</script>`` or ``<!--`` can appear in it."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render_html(view: GraphView) -> str:
    """One self-contained HTML page (inline SVG, CSS and script; no network access)."""
    lay = layout(view)
    pairs = view.pairs()
    focus = sorted((n for n in view.nodes if n.focus_rank is not None),
                   key=lambda n: n.focus_rank or 0)
    others = sorted((n for n in view.nodes if n.focus_rank is None),
                    key=lambda n: (-n.importance, n.id))
    fading = sum(1 for n in view.nodes if n.importance < 1)
    dangling = len(view.dangling)
    shown = len(view.nodes)
    summary = [
        f"{shown} of {view.total_nodes} memories within {view.depth} "
        f"hop{'s' if view.depth != 1 else ''} of the focus",
        f"{len(pairs)} connections",
        f"{dangling} link{'s' if dangling != 1 else ''} to forgotten memories",
    ]
    if view.left_out:
        summary.append(f"{view.left_out} more left out (node limit)")

    def item(n: ViewNode, extra: str = "") -> str:
        return (f'<li data-select="{_e(n.id)}">{_e(n.phrase or n.content[:20])}'
                f'{extra}</li>')

    focus_items = "".join(item(n) for n in focus) or "<li>(none)</li>"
    top_items = "".join(
        item(n, f' <span class="num">{n.importance:.2f}</span>') for n in others[:6]
    ) or "<li>(none)</li>"
    hint = (f"{fading} memor{'ies' if fading != 1 else 'y'} below importance 1 are being "
            "shortened by compression; " if fading else "")
    if view.nodes:
        canvas = _svg(view, lay)
    else:
        canvas = '<div class="empty">This agent remembers nothing yet.</div>'
    title = f"Memory of agent {view.agent_id}"
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="memory-rdf graph">
<title>{_e(title)}</title>
<style>{_CSS}</style>
</head>
<body>
<header>
<h1>Memory of agent <span class="agent">{_e(view.agent_id)}</span></h1>
<p>{_e(" · ".join(summary))}</p>
</header>
<main>
<div id="canvas">
{canvas}
</div>
<aside>
<h2>Focus — newest first</h2>
<ol>{focus_items}</ol>
<h2>Most important outside the focus</h2>
<ol>{top_items}</ol>
<h2>Details</h2>
<div id="details"><span class="meta">Hover a memory to read it; click one to keep it
here.</span></div>
<h2>Legend</h2>
{_legend()}
<p class="help">{_e(hint)}Scroll to zoom, drag to pan. Made by <code>memory-rdf graph</code>
from a read-only snapshot of the store.</p>
</aside>
</main>
<div id="tip"></div>
<script type="application/json" id="graph-data">{_json_for_script(_page_data(view, lay))}</script>
<script>{_JS}</script>
</body>
</html>
"""


# ---------------------------------------------------------------------------------------------
# Graphviz
# ---------------------------------------------------------------------------------------------


def _dot_str(text: str) -> str:
    """A DOT double-quoted string: backslashes and quotes escaped, line breaks as ``\\n``."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + escaped.replace("\r", "").replace("\n", "\\n") + '"'


def _dot_id(node: ViewNode) -> str:
    return _dot_str(("g_" if node.ghost else "n_") + node.id)


def render_dot(view: GraphView) -> str:
    """The same picture as Graphviz DOT: one edge per connected pair (``dir=both`` when
    linked both ways), pen width by strength, dashed edges to "forgotten" placeholders."""
    nodes = {n.id: n for n in [*view.nodes, *view.ghosts]}
    title = (f"Memory of agent {view.agent_id}: {len(view.nodes)} of {view.total_nodes} "
             f"memories within {view.depth} hops of the focus")
    out = [
        f"digraph {_dot_str('memory of ' + view.agent_id)} {{",
        f"  graph [layout=neato, overlap=false, sep=\"+10\", splines=true, "
        f"outputorder=edgesfirst, bgcolor=\"#ffffff\", fontname=\"sans-serif\", "
        f"label={_dot_str(title)}, labelloc=t, fontsize=16, pad=0.3];",
        '  node [shape=ellipse, style=filled, fontname="sans-serif", color="#ffffff", '
        'fillcolor="#2563eb", fontcolor="#ffffff", penwidth=1.2];',
        '  edge [color="#47556999", arrowsize=0.6];',
    ]
    fills = {1: "#2563eb", 2: "#60a5fa", 3: "#a5c8f5"}
    for n in [*view.nodes, *view.ghosts]:
        if n.ghost:
            out.append(f'  {_dot_id(n)} [label="forgotten", shape=circle, style="dashed", '
                       'color="#9ca3af", fontcolor="#6b7280", fontsize=11, width=0.6, '
                       'tooltip="a forgotten memory: only links pointing at it remain"];')
            continue
        label = "\n".join(wrap_label(n.phrase or n.content or n.id))
        size = 9 + 2.2 * math.sqrt(max(n.importance, 0.0))
        tip = f"{n.content}\nimportance {n.importance:.2f} · {n.hop} hop(s) from the focus"
        attrs = [f"label={_dot_str(label)}", f"fontsize={size:.1f}",
                 f"tooltip={_dot_str(tip)}"]
        if n.focus_rank is not None:
            attrs += ['fillcolor="#f59e0b"', 'color="#b45309"', "penwidth=3",
                      'fontcolor="#1f2937"', 'style="filled,bold"',
                      f"xlabel={_dot_str('focus #' + str(n.focus_rank + 1))}"]
        else:
            fill = fills[min(n.hop, 3)]
            attrs.append(f'fillcolor="{fill}"')
            if n.hop >= 2:
                attrs.append('fontcolor="#1f2937"')
        out.append(f"  {_dot_id(n)} [{', '.join(attrs)}];")
    for _a, _b, ab, ba in view.pairs():
        strength = _strength_of(ab, ba)
        first = ab if ab is not None else ba
        assert first is not None
        src, dst = nodes[first.source], nodes[first.target]
        both = ab is not None and ba is not None
        names = [f"{k.relation or '(unnamed)'} {k.strength:.2f}" for k in (ab, ba) if k]
        attrs = [f"penwidth={0.5 + 3.5 * min(strength, 1.0):.2f}",
                 f"tooltip={_dot_str(' / '.join(names))}"]
        if both:
            attrs.append("dir=both")
        if first.dangling:
            attrs += ["style=dashed", 'color="#9ca3af"']
        out.append(f"  {_dot_id(src)} -> {_dot_id(dst)} [{', '.join(attrs)}];")
    out.append("}")
    return "\n".join(out) + "\n"


def dot_available() -> bool:
    return shutil.which("dot") is not None


def render_svg(view: GraphView, timeout: float = 300.0) -> bytes:
    """The DOT picture laid out and drawn by Graphviz (needs its ``dot`` program)."""
    exe = shutil.which("dot")
    if exe is None:
        raise MemoryRDFError(
            "SVG output needs Graphviz's dot program (apt-get install graphviz, brew install "
            "graphviz, …); or use --format html, which needs nothing"
        )
    try:
        done = subprocess.run([exe, "-Tsvg"], input=render_dot(view).encode("utf-8"),
                              capture_output=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise MemoryRDFError(f"Graphviz dot failed: {exc}") from exc
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip() or f"exit {done.returncode}"
        raise MemoryRDFError(f"Graphviz dot failed: {' '.join(message.split())}")
    return done.stdout


def render_view(view: GraphView, fmt: str) -> bytes:
    """``view`` in one of :data:`FORMATS`, as bytes ready to write."""
    if fmt == "html":
        return render_html(view).encode("utf-8")
    if fmt == "dot":
        return render_dot(view).encode("utf-8")
    if fmt == "svg":
        return render_svg(view)
    raise ValueError(f"unknown graph format {fmt!r}; choose one of {', '.join(FORMATS)}")
