"""A workload generator: stores shaped exactly as the real remember path shapes them.

It replays remembers (``per_remember`` segments each) with the same triple builders the
library uses (``node_triples``, ``link_triples``, the focus LRU), writes N-Quads and loads them
with Oxigraph's bulk loader — fast enough for 100k and 1M nodes. ``decay`` > 0 ages the links
(strength × 0.97^k for a random k) so that some nodes fall below importance 1.
"""

from __future__ import annotations

import random
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from benchmarks._common import sentence
from memory_rdf import _vocab as V
from memory_rdf._links import LinkData, link_triples
from memory_rdf._nodes import NodeData, node_triples
from memory_rdf._remember import NEXT, PREVIOUS, new_node_id
from memory_rdf._store import AgentStore, iri_ref, lit, triple
from memory_rdf._text import index_terms


def generate(
    path: Path,
    nodes: int,
    *,
    per_remember: int = 5,
    focus_limit: int = 5,
    decay: float = 0.0,
    seed: int = 1,
    terms: bool = True,
    progress: bool = True,
) -> None:
    """Create the agent store at ``path`` holding ``nodes`` nodes."""
    rng = random.Random(seed)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    focus: list[tuple[str, int]] = []  # newest first
    contents: dict[str, str] = {}
    order = 0
    seq = 0
    with tempfile.NamedTemporaryFile("w", suffix=".nq", delete=False, encoding="utf-8") as out:
        made = 0
        while made < nodes:
            n = min(per_remember, nodes - made)
            ids = [new_node_id() for _ in range(n)]
            lines: list[str] = []
            for nid in ids:
                seq += 1
                text = sentence(rng, seq)
                words = [w for w in text.split() if len(w) > 1][:4]
                node = NodeData(
                    nid, text, text[:16], words, start + timedelta(microseconds=seq),
                    len(text), seq, 0, index_terms(text, words) if terms else [],
                )
                lines += node_triples(node)
                contents[nid] = text
            links: list[LinkData] = []
            for a, b in zip(ids, ids[1:], strict=False):
                links += [LinkData(a, b, _aged(0.5, decay, rng), NEXT),
                          LinkData(b, a, _aged(0.5, decay, rng), PREVIOUS)]
            for nid in ids:
                for fid, _ in focus:
                    rel = "涉及" if rng.random() < 0.3 else ""
                    links += [LinkData(nid, fid, _aged(1.0, decay, rng), rel),
                              LinkData(fid, nid, _aged(1.0, decay, rng), rel)]
            for link in links:
                lines += link_triples(link)
            for nid in ids[-focus_limit:]:
                order += 1
                focus.insert(0, (nid, order))
            focus = focus[:focus_limit]
            out.write("\n".join(lines) + "\n")
            made += n
            if progress and made % 50_000 < per_remember:
                print(f"  generated {made:>8} nodes", end="\r", flush=True)
        f = V.FOCUS
        tail = [triple(f, V.A, V.FOCUS_CLASS)]
        for nid, o in focus:
            tail += [triple(f, V.MEMBER, iri_ref(V.NODE + nid)),
                     triple(iri_ref(V.NODE + nid), V.FOCUS_ORDER, lit(o))]
        meta = iri_ref(V.META_SUBJECT)
        g = iri_ref(V.META_GRAPH)
        tail += [
            f"{meta} {V.A} {V.m('StoreMetadata')} {g} .",
            f"{meta} {V.m('schemaVersion')} {lit(V.SCHEMA_VERSION)} {g} .",
            f"{meta} {V.m('agentId')} {lit(path.name)} {g} .",
            f"{meta} {V.m('nodeSequence')} {lit(seq)} {g} .",
            f"{meta} {V.m('lastCreatedAt')} {lit(start + timedelta(microseconds=seq))} {g} .",
        ]
        out.write("\n".join(tail) + "\n")
        name = out.name
    if progress:
        print(f"  loading {nodes} nodes ...            ", end="\r", flush=True)
    store = AgentStore(path)
    try:
        store.bulk_load_nquads(Path(name))
    finally:
        store.close()
        Path(name).unlink()
    if progress:
        print(" " * 40, end="\r")


def _aged(strength: float, decay: float, rng: random.Random) -> float:
    if decay <= 0:
        return strength
    return strength * 0.97 ** rng.randint(0, int(decay))
