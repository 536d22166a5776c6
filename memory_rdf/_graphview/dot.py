"""The Graphviz picture: DOT text, and SVG when Graphviz's ``dot`` program is installed."""

from __future__ import annotations

import math
import shutil
import subprocess

from memory_rdf._exceptions import MemoryRDFError
from memory_rdf._graphview.collect import GraphView, ViewNode
from memory_rdf._graphview.layout import strength_of
from memory_rdf._wrap import wrap_label

__all__ = ["dot_available", "render_dot", "render_svg"]


#: Longest text put in one DOT string: Graphviz refuses a quoted string beyond 16,384 bytes
#: (a whole picture failed on one long memory), and a CJK character takes 3.
DOT_TEXT_MAX = 2_000


def _dot_str(text: str) -> str:
    """A DOT double-quoted string: backslashes and quotes escaped, line breaks as ``\\n``,
    NUL dropped (it ends the string for Graphviz), at most :data:`DOT_TEXT_MAX` characters."""
    if len(text) > DOT_TEXT_MAX:
        text = text[: DOT_TEXT_MAX - 1] + "…"
    escaped = text.replace("\x00", "").replace("\\", "\\\\").replace('"', '\\"')
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
        strength = strength_of(ab, ba)
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


