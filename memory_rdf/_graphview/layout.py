"""Where each node of a picture sits: focus in the middle, one ring per hop, ring order by
the angle of the neighbours already placed (deterministic: the same store gives the same
picture). Labels are wrapped by :func:`memory_rdf._wrap.wrap_label`."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from memory_rdf._graphview.collect import GraphView, ViewLink, ViewNode
from memory_rdf._wrap import cell_len, wrap_label

__all__ = ["Layout", "layout", "node_radius", "strength_of"]


def _label_width(lines: Iterable[str], font_px: float = 12.0) -> float:
    return max((cell_len(line) for line in lines), default=0) * font_px * 0.55


def node_radius(node: ViewNode, top: float = 1.0) -> float:
    """Radius in px: area in proportion to importance, relative to the most important node
    drawn (``top``), from 5 to 24 px; ghosts are small."""
    if node.ghost:
        return 9.0
    return 5.0 + 19.0 * math.sqrt(max(node.importance, 0.0) / max(top, 1.0))


def strength_of(ab: ViewLink | None, ba: ViewLink | None) -> float:
    return max((k.strength for k in (ab, ba) if k is not None), default=0.0)


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
        w = max(strength_of(ab, ba), 0.05)
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
