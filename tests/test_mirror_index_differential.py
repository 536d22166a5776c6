"""The read mirror's link index (issue 16), checked adversarially through the public API: one
seeded random sequence of writes of every kind runs on two agents, one whose reads come from
the read mirror (``read_mirror=True``) and one read from disk (``read_mirror=False``). After
every step their recalls (keyword sets, relation filters, depths 1-4, the three entry modes),
``memories()`` and ``stats()`` must agree, and the mirror (its kept triples and its one quad
per link, issue 38) must be exactly the one built afresh from the disk store.

The writes: remembers of one to three segments (each new node linked to the focus nodes, with
relation names from a table), compression slices driven until nodes are shortened and
forgotten (dangling links) and links decay under ``link_break_threshold`` and break, the fixed
pool's evictions (``max_nodes``, inside a remember's own write), ``pin`` / ``unpin``,
``forget`` and ``forget(purge=True)`` (the links into the forgotten nodes taken along),
reopening the store (the mirror built again; a remember made while it builds, or queued at
close and replayed from the journal at the reopen), and renewals of the mirror (its size
threshold lowered).

Node ids are made deterministic (the same for both agents) so that the two stores hold the same
network and their compression and eviction make the same choices. The seed is fixed; set
``MIRROR_DIFF_SEED`` / ``MIRROR_DIFF_STEPS`` to explore more sequences.
"""

from __future__ import annotations

import os
import random
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyoxigraph as ox
import pytest

from memory_rdf import MemoryManager, _remember
from memory_rdf import _vocab as V
from memory_rdf._oxigraph import AgentStore, WriteBatch, link_ref, lit, node_ref, triple
from memory_rdf._oxigraph import mirror as mirror_module

from helpers import (
    FAST,
    ScriptedModel,
    derived_index,
    index,
    quads,
    same_as_built,
    same_texts,
    say,
)

#: Seed 4 made the two stores diverge before the fixed pool's importances were rounded: SPARQL's
#: SUM adds in the store's iteration order, which differs between the mirror and the disk
#: store, so a tie between two eviction candidates went one way or the other by the last bit.
SEED = int(os.environ.get("MIRROR_DIFF_SEED", "4"))
STEPS = int(os.environ.get("MIRROR_DIFF_STEPS", "60"))

#: Short texts (delete_threshold 12) that compression shortens and forgets within a few slices;
#: upper-case words are the scripted model's keywords.
WORDS = ["JWT", "login", "TOKEN", "release", "Miso", "CAT", "deploy", "Berlin", "SQL", "graph",
         "coffee", "DOCKER", "Li Na", "budget", "tests"]
RELATIONS = ["", "", "owns", "about", "涉及", "x y"]  # "" twice: most links unnamed
RELATION_FILTERS: list[list[str] | None] = [
    None, ["owns"], ["下文"], ["上文"], ["about", "涉及"], ["x y"], ["下文", "owns"], [],
]
KEYWORD_SETS: list[list[str]] = [[], ["JWT"], ["token", "release"], ["cat"], ["SQL", "graph"],
                                 ["zzz-none"], ["Li Na"], ["e"]]

CONFIG = FAST.replace(
    focus_limit=3, delete_threshold=12, decay_rate=0.6, link_break_threshold=0.2,
    link_initial_strength=0.5, focus_link_strength=1.0, compression_batch_size=4,
    max_nodes=14, max_search_results=30,
)


class RelationModel(ScriptedModel):
    """The scripted model, naming a link by a stable hash of its two texts."""

    def relation(self, node_content: str, focus_content: str) -> str:
        self._enter("relation")
        key = zlib.crc32(f"{node_content}\x00{focus_content}".encode())
        return RELATIONS[key % len(RELATIONS)]


@dataclass
class Agent:
    name: str
    data_dir: Path
    mirror: bool
    ids: Iterator[int] = field(default_factory=lambda: iter(range(1, 1 << 30)))
    mem: MemoryManager | None = None
    renewals: int = 0  # of the mirror, over the store's openings

    def close(self) -> None:
        if self.mem is not None:
            self.renewals += self.mem.stats()["read_mirror_renewals"]
            self.mem.close()

    def open(self) -> MemoryManager:
        config = CONFIG.replace(read_mirror=self.mirror)
        self.mem = MemoryManager("agent", data_dir=self.data_dir, config=config,
                                 model=RelationModel())
        self.mem.initialize()
        return self.mem

    @property
    def store(self) -> AgentStore:
        assert self.mem is not None
        store = self.mem.store
        assert isinstance(store, AgentStore)
        return store


def check_index(agent: Agent, where: str) -> None:
    store = agent.store
    assert store.wait_mirror(60), (where, store.mirror_state)
    mirror = store._mirror
    assert mirror is not None and mirror.store is not None
    assert quads(mirror.store) == quads(store.store), where
    got, want = index(mirror.store), derived_index(store.store)
    assert got == want, (where, sorted(got - want), sorted(want - got))
    assert not index(store.store), where
    assert same_as_built(mirror.store, store.store), where
    assert same_texts(mirror.texts, store.store), where


def answers(mem: MemoryManager, rng: random.Random) -> list[tuple[Any, ...]]:
    """A sample of recalls (the same sample for both agents: ``rng`` is a copy), memories(),
    stats()."""
    out: list[tuple[Any, ...]] = []
    for _ in range(10):
        keywords = rng.choice(KEYWORD_SETS)
        relations = rng.choice(RELATION_FILTERS)
        depth = rng.randint(1, 4)
        entry = rng.choice(["focus", "focus", "keywords", "both"])
        if entry != "focus" and not keywords:
            keywords = ["JWT", "cat"]
        text = mem.recall(keywords, relations=relations, depth=depth, entry=entry, max_chars=0)
        out.append((keywords, relations, depth, entry, text))
    out.append(("memories", [{k: v for k, v in m.items() if k not in ("created_at", "said_at")}
                             for m in mem.memories(limit=None)]))
    stats = mem.stats()
    out.append(("stats", {k: stats[k] for k in ("nodes", "links", "dangling_links", "focus",
                                                "pinned")}))
    return out


def sentence(rng: random.Random) -> str:
    words = rng.sample(WORDS, rng.randint(2, 4))
    return " ".join(words) + rng.choice(["", " today", " was decided", " at noon and later"])


def test_mirror_index_differential(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    agents = [Agent("mirror", tmp_path / "a", True), Agent("disk", tmp_path / "b", False)]
    current: list[Agent] = []

    def node_id() -> str:  # deterministic, ordered ids: the same network in both stores
        return f"{next(current[0].ids):032x}"

    monkeypatch.setattr(_remember, "new_node_id", node_id)
    # renewals of the mirror (built again from disk) happen within the sequence
    monkeypatch.setattr(mirror_module, "MIRROR_RENEW_MIN_BYTES", 120_000)
    for agent in agents:
        agent.open()
    rng = random.Random(SEED)
    kinds = ["remember"] * 5 + ["compress"] * 3 + ["forget", "purge", "reopen"]
    log: list[str] = []
    seen = dict.fromkeys(("forgotten", "links_removed", "dangling", "nodes", "perceptions",
                          "pins"), 0)
    try:
        for step in range(STEPS):
            kind = rng.choice(kinds) if step >= 4 else "remember"
            op_rng = random.Random(rng.random())
            if kind == "remember":
                contents = [sentence(op_rng) for _ in range(op_rng.randint(1, 3))]
                log.append(f"remember {contents}")
            elif kind == "compress":
                slices = op_rng.randint(1, 4)
                # now and then a node pinned (or unpinned) first: kept out of the scans
                listed = agents[1].mem.memories(limit=None)  # type: ignore[union-attr]
                toggled = op_rng.choice(listed) if listed and op_rng.random() < 0.5 else None
                log.append(f"compress x{slices}"
                           + (f" after toggling the pin of {toggled['id']}" if toggled else ""))
            elif kind in ("forget", "purge"):
                ids = [m["id"] for m in agents[1].mem.memories(limit=None)]  # type: ignore[union-attr]
                chosen = op_rng.sample(ids, min(len(ids), op_rng.randint(1, 2)))
                log.append(f"{kind} {chosen}")
            else:
                mode = op_rng.choice(["plain", "while the mirror builds", "queued at close"])
                contents = [sentence(op_rng)]
                log.append(f"reopen ({mode}: remember {contents})")
            reports = []
            for agent in agents:
                current[:] = [agent]
                mem = agent.mem
                assert mem is not None
                if kind == "remember":
                    mem.remember(say(" | ".join(contents)))
                    assert mem.wait_idle(30)
                elif kind == "compress":
                    if toggled is not None:
                        toggle = mem.unpin if toggled["pinned"] else mem.pin
                        assert toggle([toggled["id"]]) == 1, log[-1]
                        seen["pins"] += toggle == mem.pin
                    reports.append([
                        {k: r[k] for k in ("scanned", "compressed", "forgotten", "links_removed")}
                        for r in (mem.run_compression_slice() for _ in range(slices))])
                elif kind in ("forget", "purge"):
                    reports.append(mem.forget(chosen, purge=kind == "purge"))
                else:  # a remember queued at close is journalled, done after the reopen
                    if mode == "queued at close":
                        mem.remember(say(contents[0]))
                    agent.close()
                    mem = agent.open()
                    if mode == "while the mirror builds":
                        mem.remember(say(contents[0]))
                    assert mem.wait_idle(30)
            where = f"step {step} ({kind}), seed {SEED}:\n" + "\n".join(log)
            if reports:
                assert reports[0] == reports[1], where
                if kind == "compress":
                    for r in reports[0]:
                        seen["forgotten"] += r["forgotten"]
                        seen["links_removed"] += r["links_removed"]
            check_index(agents[0], where)
            sample = rng.random()
            got = [answers(a.mem, random.Random(sample)) for a in agents]  # type: ignore[arg-type]
            for mine, theirs in zip(got[0], got[1], strict=True):
                assert mine == theirs, where
            stats = got[0][-1][1]
            seen["dangling"] = max(seen["dangling"], stats["dangling_links"])
            seen["nodes"] = max(seen["nodes"], stats["nodes"])
            seen["perceptions"] += sum("遗忘" in str(a[-1]) or "forgot" in str(a[-1])
                                       for a in got[0][:-2])
        # the sequence did reach what it is meant to exercise: forgetting (dangling links seen
        # by recall), broken links, pinned nodes, the fixed pool full, renewals of the mirror
        agents[0].close()
        assert all(seen.values()), seen
        assert seen["nodes"] == CONFIG.max_nodes, seen
        assert agents[0].renewals > 0
    finally:
        for agent in agents:
            if agent.mem is not None:
                agent.mem.close()


def test_link_index_follows_random_write_batches(tmp_path: Path) -> None:
    """Below the public API: random batches of the operation shapes the index follows (nodes
    created, created again, forgotten, a scanCount deleted or rewritten; links created whole,
    created again over an existing one, given a second relation or one taken off, deleted by
    template or whole by DELETE DATA; several in one batch, in any order), committed on a
    mirrored store; after each, the mirror's index is exactly the one derived afresh.

    Links stay whole and named by their ends (``link:a--b`` from a to b), as every write of the
    library makes them: a link re-targeted, half deleted or given a relation before it exists
    (by hand) would need a rebuild of the mirror (the index takes a link to or from a node just
    created for a new link without asking the store)."""
    from datetime import UTC, datetime

    from memory_rdf._links import LinkData, link_triples
    from memory_rdf._nodes import NodeData, node_triples

    names = [c * 32 for c in "abcdef"]
    created = datetime(2026, 1, 1, tzinfo=UTC)

    def node(nid: str, scans: int = 0) -> list[str]:
        return node_triples(NodeData(nid, f"text {nid[0]}", f"p {nid[0]}", ["K"], created, 7, 1,
                                     scans))

    rng = random.Random(SEED)
    store = AgentStore(tmp_path / "agent", mirror=True)
    try:
        assert store.wait_mirror(30)
        for step in range(300):
            batch = WriteBatch()
            done: list[str] = []
            for _ in range(rng.randint(1, 4)):
                kind = rng.randrange(9)
                a, b = rng.choice(names), rng.choice(names)
                ref = link_ref(a, b)
                if kind == 0:
                    batch.insert(node(a, rng.randint(0, 2)))
                elif kind == 1:
                    batch.update("forget_nodes", nodes=[node_ref(n) for n in {a, b}])
                elif kind == 2:
                    batch.delete([triple(node_ref(a), V.SCAN_COUNT,
                                                lit(rng.randint(0, 2)))])
                elif kind in (3, 4):
                    batch.insert(link_triples(LinkData(a, b, rng.choice([0.5, 1.0]),
                                                       rng.choice(RELATIONS))))
                elif kind == 5:  # a relation added to or taken off an existing link
                    if not list(store.store.quads_for_pattern(
                            ox.NamedNode(ref[1:-1]), ox.NamedNode(V.SOURCE[1:-1]), None)):
                        continue
                    verb = batch.insert if rng.random() < 0.5 else batch.delete
                    verb([triple(ref, V.RELATION, lit(rng.choice(RELATIONS[2:])))])
                elif kind in (6, 7):
                    batch.update("delete_links", links=[ref])
                else:  # the whole link by DELETE DATA, whatever its strength and relations
                    batch.delete({t for w in (0.5, 1.0) for r in RELATIONS
                                  for t in link_triples(LinkData(a, b, w, r))})
                done.append(f"{kind} {a[0]}{b[0]}")
            store.commit(batch)
            mirror = store._mirror
            assert mirror is not None and mirror.store is not None
            got, want = index(mirror.store), derived_index(store.store)
            assert got == want, (step, done, sorted(got - want), sorted(want - got))
            assert quads(mirror.store) == quads(store.store)
            assert same_as_built(mirror.store, store.store), (step, done)
            assert same_texts(mirror.texts, store.store), (step, done)
    finally:
        store.close()


def test_a_link_out_of_a_node_forgotten_earlier_in_the_same_batch(tmp_path: Path) -> None:
    """Found by the test above: a batch that forgets a node and then links it again (a link
    created whole, after the forget) kept no index entry for that link (it was written as data,
    then dropped with the forgotten node's entries)."""
    from datetime import UTC, datetime

    from memory_rdf._links import LinkData, link_triples
    from memory_rdf._nodes import NodeData, node_triples

    a, b = "a" * 32, "b" * 32
    created = datetime(2026, 1, 1, tzinfo=UTC)
    store = AgentStore(tmp_path / "agent", mirror=True)
    try:
        assert store.wait_mirror(30)
        batch = WriteBatch()
        for nid in (a, b):
            batch.insert(node_triples(NodeData(nid, "text", "phrase", ["K"], created, 4, 1)))
        store.commit(batch)
        batch = WriteBatch()
        batch.update("forget_nodes", nodes=[node_ref(a)])
        batch.insert(link_triples(LinkData(a, b, 0.5, "owns")))
        store.commit(batch)
        mirror = store._mirror
        assert mirror is not None and mirror.store is not None
        assert index(mirror.store) == derived_index(store.store)
        assert len(index(mirror.store)) == 1  # a → b, live
    finally:
        store.close()
