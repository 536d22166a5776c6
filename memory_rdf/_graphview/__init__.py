"""Pictures of an agent's memory: the network around its focus (``memory-rdf graph``).

One module per job:

* ``collect`` — :func:`collect_view`, an *operation* for
  :func:`memory_rdf._inspect.inspect_agent`: a breadth-first walk from the focus over live
  links on one read-only snapshot, returning plain data (:class:`GraphView`);
* ``layout`` — where each node sits (focus in the middle, one ring per hop);
* ``page`` — :func:`render_html`, one self-contained page (its HTML, CSS and JavaScript are
  package data files in ``memory_rdf/web/``);
* ``dot`` — :func:`render_dot` (Graphviz) and :func:`render_svg` (``dot`` run on that).

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

from memory_rdf._graphview.collect import (
    DEFAULT_DEPTH,
    DEFAULT_LIMIT,
    GraphView,
    ViewLink,
    ViewNode,
    collect_view,
)
from memory_rdf._graphview.dot import dot_available, render_dot, render_svg
from memory_rdf._graphview.page import render_html
from memory_rdf._wrap import wrap_label

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

#: Output formats of :func:`render_view`.
FORMATS = ("html", "dot", "svg")


def render_view(view: GraphView, fmt: str) -> bytes:
    """``view`` in one of :data:`FORMATS`, as bytes ready to write."""
    if fmt == "html":
        return render_html(view).encode("utf-8")
    if fmt == "dot":
        return render_dot(view).encode("utf-8")
    if fmt == "svg":
        return render_svg(view)
    raise ValueError(f"unknown graph format {fmt!r}; choose one of {', '.join(FORMATS)}")
