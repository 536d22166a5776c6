"""A workload generator: stores shaped exactly as the real remember path shapes them.

It replays remembers (``per_remember`` segments each) with the same triple builders the
library uses (``node_triples``, ``link_triples``, the focus LRU) and the same answers as
:class:`~benchmarks._common.FastModel` (phrase, keywords, relation names), writes N-Quads and
loads them with Oxigraph's bulk loader — fast enough for 100k and 1M nodes.

``decay`` > 0 ages the links as compression scans would have (every scan round decays a link
twice, once per end): strength × 0.97^k with k = ``decay`` × the link's age (0 for the newest
links, 1 for the oldest) plus a random 0–3, so old nodes fall below importance 1 — with
``decay`` = 120, about the oldest fifth — while the focus neighbourhood stays strong;
``forgotten`` > 0 forgets that fraction of the nodes the way compression does
(SPEC §5.2: the node's triples and the links out of it go, links into it stay, dangling).
Both default to 0: then the store is, node for node, what ``MemoryManager.remember`` builds
from the same segments with ``FastModel`` — :func:`check_against_remember` proves it.
"""

from __future__ import annotations

import random
import tempfile
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from benchmarks._common import FastModel, sentence
from memory_rdf import _vocab as V
from memory_rdf._links import LinkData, link_triples
from memory_rdf._nodes import NodeData, node_triples
from memory_rdf._oxigraph import AgentStore, iri_ref, lit, triple
from memory_rdf._remember import NEXT, PREVIOUS, new_node_id
from memory_rdf._text import index_terms
from memory_rdf._types import clean_keywords


def generate(
    path: Path,
    nodes: int,
    *,
    per_remember: int = 5,
    focus_limit: int = 5,
    decay: float = 0.0,
    forgotten: float = 0.0,
    seed: int = 1,
    terms: bool = True,
    progress: bool = True,
) -> None:
    """Create the agent store at ``path`` holding ``nodes`` nodes (before forgetting).

    The texts depend only on ``seed`` (segment ``i`` is ``sentence(Random(seed), i)`` in
    order), so :func:`remember_segments` replays the same conversation through the real path.
    """
    texts = random.Random(seed)
    aging = random.Random(seed + 1)  # decay and forgetting never shift the texts
    model = FastModel()
    start = datetime(2026, 1, 1, tzinfo=UTC)
    focus: list[tuple[str, int, str]] = []  # (id, focusOrder, content), newest first
    lost: set[str] = set()
    order = 0
    seq = 0
    with tempfile.NamedTemporaryFile("w", suffix=".nq", delete=False, encoding="utf-8") as out:
        made = 0
        while made < nodes:
            n = min(per_remember, nodes - made)
            ids = [new_node_id() for _ in range(n)]
            contents: list[str] = []
            lines: list[str] = []
            for nid in ids:
                seq += 1
                text = sentence(texts, seq)
                p = model.process(text)
                keywords = clean_keywords(p.keywords)
                contents.append(p.content)
                # The newest `focus_limit` nodes end in the focus: those are never forgotten.
                if forgotten > 0 and seq <= nodes - focus_limit and aging.random() < forgotten:
                    lost.add(nid)
                    continue
                node = NodeData(
                    nid, p.content, p.phrase, keywords, start + timedelta(microseconds=seq),
                    len(p.content), seq, 0, index_terms(p.content, keywords) if terms else [],
                )
                lines += node_triples(node)
            links: list[LinkData] = []
            age = 1 - seq / nodes
            for a, b in zip(ids, ids[1:], strict=False):
                links += [LinkData(a, b, _aged(0.5, decay, age, aging), NEXT),
                          LinkData(b, a, _aged(0.5, decay, age, aging), PREVIOUS)]
            for nid, content in zip(ids, contents, strict=True):
                for fid, _, fcontent in focus:
                    rel = model.relation(content, fcontent)
                    links += [LinkData(nid, fid, _aged(1.0, decay, age, aging), rel),
                              LinkData(fid, nid, _aged(1.0, decay, age, aging), rel)]
            for link in links:
                if link.source not in lost:
                    lines += link_triples(link)
            # Focus LRU (SPEC §5.1 step 4): the newest min(limit, n) new nodes go in front.
            for nid, content in list(zip(ids, contents, strict=True))[-focus_limit:]:
                order += 1
                focus.insert(0, (nid, order, content))
            focus = focus[:focus_limit]
            out.write("\n".join(lines) + "\n")
            made += n
            if progress and made % 50_000 < per_remember:
                print(f"  generated {made:>8} nodes", end="\r", flush=True)
        f = V.FOCUS
        tail = [triple(f, V.A, V.FOCUS_CLASS)]
        for nid, o, _ in focus:
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


def _aged(strength: float, decay: float, age: float, rng: random.Random) -> float:
    if decay <= 0:
        return strength
    return strength * 0.97 ** (round(decay * age) + rng.randint(0, 3))


# ---------------------------------------------------------------------------------------------
# The check: generate() against the real remember path
# ---------------------------------------------------------------------------------------------


def remember_segments(nodes: int, per_remember: int = 5, seed: int = 1) -> list[list[str]]:
    """The segments :func:`generate` writes, grouped by remember (same texts, same order)."""
    rng = random.Random(seed)
    out: list[list[str]] = []
    seq = 0
    while seq < nodes:
        n = min(per_remember, nodes - seq)
        out.append([sentence(rng, seq + k + 1) for k in range(n)])
        seq += n
    return out


def structure(store: AgentStore) -> dict[str, Any]:
    """What must not differ between two stores built from the same segments.

    Node count, the multiset of (relation, strength) over links, focus size, out- and
    in-degree distributions, triples per predicate in the default graph, and the multiset of
    contents (ids, timestamps and focusOrder values legitimately differ).
    """
    q = "SELECT ?s ?t ?w ?r WHERE { ?l memory:source ?s ; memory:target ?t ; " \
        "memory:strength ?w . OPTIONAL { ?l memory:relation ?r } }"
    links = store.rows(q)
    nodes = store.column("SELECT ?n WHERE { ?n memory:scanCount ?c }")
    out_deg = Counter(s for s, _, _, _ in links)
    in_deg = Counter(t for _, t, _, _ in links)
    predicates = store.rows(
        "SELECT ?p (COUNT(*) AS ?n) WHERE { ?s ?p ?o } GROUP BY ?p"
    )
    return {
        "nodes": len(nodes),
        "links": Counter((r or "", float(w)) for _, _, w, r in links),
        "focus": len(store.column("SELECT ?n WHERE { ?f memory:member ?n }")),
        "out_degree": Counter(out_deg.get(n, 0) for n in nodes),
        "in_degree": Counter(in_deg.get(n, 0) for n in nodes),
        "predicates": {p: int(n) for p, n in predicates},
        "contents": Counter(store.column("SELECT ?c WHERE { ?n memory:content ?c }")),
    }


def check_against_remember(
    workdir: Path, nodes: int = 200, *, per_remember: int = 5, focus_limit: int = 5, seed: int = 1
) -> dict[str, Any]:
    """Build ``nodes`` nodes twice — with :func:`generate` and through
    ``MemoryManager.remember`` with :class:`FastModel` on the same segments — and assert the
    two stores have the same :func:`structure`. Returns the structure (for reporting)."""
    from memory_rdf import Config, MemoryManager

    fast = workdir / "generated"
    generate(fast, nodes, per_remember=per_remember, focus_limit=focus_limit, seed=seed,
             progress=False)
    config = Config(focus_limit=focus_limit, auto_compress=False, max_queue_size=100_000)
    with MemoryManager("remembered", data_dir=workdir, config=config, model=FastModel()) as mem:
        for segments in remember_segments(nodes, per_remember, seed):
            mem.remember([{"role": "user", "content": s} for s in segments])
        mem.wait_idle()
    stores = {}
    for name in ("generated", "remembered"):
        store = AgentStore(workdir / name, read_only=True)
        try:
            stores[name] = structure(store)
        finally:
            store.close()
    a, b = stores["generated"], stores["remembered"]
    differ = [key for key in a if a[key] != b[key]]
    if differ:
        details = "; ".join(f"{k}: generate()={_short(a[k])} remember()={_short(b[k])}"
                            for k in differ)
        raise AssertionError(f"generate() differs from the remember path in {details}")
    return a


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) < 300 else text[:300] + "…"
