"""The HTML picture: one self-contained page (inline SVG; the page, its CSS and script are
package data in ``memory_rdf/web/``; nothing is fetched from anywhere)."""

from __future__ import annotations

import html
import json
import math
from string import Template
from typing import Any

from memory_rdf._graphview.collect import GraphView, ViewNode
from memory_rdf._graphview.layout import Layout, layout, strength_of
from memory_rdf._resources import web_text

__all__ = ["render_html"]


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
        strength = strength_of(ab, ba)
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


def _page() -> Template:
    """``web/graph.html``: ``$name`` placeholders for the parts filled in per picture."""
    return Template(web_text("graph.html"))


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
    return _page().substitute(
        title=_e(title), css=web_text("graph.css"), agent=_e(view.agent_id),
        summary=_e(" · ".join(summary)), canvas=canvas, focus_items=focus_items,
        top_items=top_items, legend=_legend(), hint=_e(hint),
        data=_json_for_script(_page_data(view, lay)), js=web_text("graph.js"),
    )
