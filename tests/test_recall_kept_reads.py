"""What a recall keeps of the store between recalls (issue 38): the focus and the pinned nodes
are read once per commit generation of an embedded store, and read afresh after every kind
of commit (remember, pin and unpin, forget, a compression scan); an endpoint store is read
each time."""

from __future__ import annotations

import heapq
import random
from typing import Any

import pytest

from memory_rdf import Config, MemoryManager
from memory_rdf import _vocab as V
from memory_rdf._oxigraph import AgentStore
from memory_rdf._oxigraph.term_index import TermIndex

from helpers import remember

SEED_QUERIES = ("# focus_nodes", "# pinned_nodes")


def _seed_reads(mem: MemoryManager) -> list[str]:
    """The names of the seed queries (``focus_nodes``, ``pinned_nodes``) run from now on."""
    store = mem.store
    asked: list[str] = []
    real = store.rows

    def rows(query: str) -> Any:
        if query.startswith(SEED_QUERIES):
            asked.append(query.split(" ", 2)[1])
        return real(query)

    store.rows = rows  # type: ignore[method-assign]
    return asked


def _id(mem: MemoryManager, word: str) -> str:
    """The id of the one memory whose content holds ``word``."""
    (found,) = [str(m["id"]) for m in mem.memories(limit=None) if word in str(m["content"])]
    return found


def _seeds(mem: MemoryManager) -> list[str]:
    """The nodes a focus-only recall starts from (focus newest first, then pinned)."""
    return [s.node for s in mem._seeder.seeds([], "focus").seeds]


def _recall(mem: MemoryManager, asked: list[str], word: str, depth: int = 0) -> str:
    """A focus-only recall of ``word``; the recall right after it reads no seed again."""
    text = mem.recall([word], entry="focus", depth=depth)
    again = len(asked)
    assert mem.recall([word], entry="focus", depth=depth) == text
    assert len(asked) == again
    return text


def test_the_focus_and_the_pins_are_read_again_after_each_kind_of_commit(
    make_manager,
) -> None:
    mem = make_manager(config=Config(auto_compress=False, focus_limit=1))
    remember(mem, "the harbour office opens at nine")
    remember(mem, "the ferry to the island leaves at ten")
    ferry, harbour = _id(mem, "ferry"), _id(mem, "harbour")
    asked = _seed_reads(mem)
    assert "ferry" in _recall(mem, asked, "ferry")
    assert "harbour" not in _recall(mem, asked, "harbour")
    assert sorted(asked) == ["focus_nodes", "pinned_nodes"]  # once for all four recalls

    # remember: a new focus (a kept focus would still start from the ferry)
    remember(mem, "the museum is closed on mondays")
    asked.clear()
    assert "museum" in _recall(mem, asked, "museum")
    assert "ferry" not in _recall(mem, asked, "ferry")
    assert sorted(asked) == ["focus_nodes", "pinned_nodes"]

    # pin and unpin: the harbour memory is a seed, then no longer
    assert mem.pin([harbour]) == 1
    assert "harbour" in _recall(mem, asked, "harbour")
    assert mem.unpin([harbour]) == 1
    assert "harbour" not in _recall(mem, asked, "harbour")

    # forget: the forgotten focus node is no seed any more
    museum = _id(mem, "museum")
    assert _seeds(mem) == [museum] == mem.stats()["focus"]
    assert mem.pin([ferry]) == 1
    assert _seeds(mem) == [museum, ferry]
    assert mem.forget([museum]) == 1
    assert _seeds(mem) == [ferry]
    assert "museum" not in _recall(mem, asked, "museum", depth=3)
    assert "ferry" in _recall(mem, asked, "ferry")

    # a compression scan commits too (it changes neither list): read again
    mem.run_compression_slice(timeout=60)
    asked.clear()
    seeds = _seeds(mem)
    assert sorted(asked) == ["focus_nodes", "pinned_nodes"]
    assert seeds == [*mem.stats()["focus"], ferry]


@pytest.mark.parametrize("backend", ["endpoint"], indirect=True)
def test_an_endpoint_store_is_read_at_every_recall(make_manager) -> None:
    mem = make_manager()
    remember(mem, "the harbour office opens at nine")
    asked = _seed_reads(mem)
    for _ in range(2):
        assert "harbour" in mem.recall(["harbour"], entry="focus", depth=0)
    assert sorted(asked) == ["focus_nodes", "focus_nodes", "pinned_nodes", "pinned_nodes"]


def test_a_link_graph_that_comes_with_a_commit_is_walked_at_once(make_manager) -> None:
    """The read mirror's link graphs (one a relation) are kept a commit generation: the
    first link of a relation, written after a recall of that relation, is walked by the
    next recall (a kept list would not have its graph)."""
    mem = make_manager(config=Config(auto_compress=False, focus_limit=1, read_mirror=True))
    store = mem.store
    assert isinstance(store, AgentStore) and store.wait_mirror(60), store.mirror_state
    remember(mem, "the harbour office opens at nine")
    assert "kiwi" not in mem.recall(["kiwi"], relations=["上文"], depth=1, entry="focus")
    assert not any("%E4%B8%8A%E6%96%87" in g for g in store.mirror_graphs() or [])
    # two segments: the second (the focus) links to the first by 上文, a graph of its own
    remember(mem, "the kiwi stall is by the gate | it sells juice too")
    assert mem.stats()["focus"] == [_id(mem, "juice")]
    assert any("%E4%B8%8A%E6%96%87" in g for g in store.mirror_graphs() or [])
    assert "kiwi stall" in mem.recall(["kiwi"], relations=["上文"], depth=1, entry="focus")
    assert "kiwi stall" not in mem.recall(["kiwi"], relations=["下文"], depth=1, entry="focus")


def _ranked_by_hand(ix: TermIndex, entries: list[tuple[str, float]], avgdl: float,
                    candidates: int, results: int) -> list[tuple[str, float]]:
    """``keyword_entry.rq``'s ranking, node by node: the idf sums (in the entries' order),
    the ``candidates`` largest (ties by IRI descending), BM25 over their lengths."""
    weights: dict[str, float] = {}
    for term, idf in entries:
        held = ix.postings.get(term, ())
        for node in ([held] if isinstance(held, str) else held):
            weights[node] = weights.get(node, 0) + idf
    best = sorted(weights.items(), key=lambda x: (x[1], x[0]), reverse=True)[:candidates]
    scored = [(n, w * 2.2 / (1 + 1.2 * (0.25 + 0.75 * ix.lengths[n] / avgdl)))
              for n, w in best if n in ix.lengths]
    return heapq.nlargest(results, scored, key=lambda x: (x[1], x[0]))


def test_the_kept_order_of_a_terms_nodes_follows_every_change_of_its_postings() -> None:
    """The keyword entry cuts a large level of equal weight by IRI from the term's nodes
    kept in order (TermIndex.descending): nodes added, removed or dropped after the order was
    kept are ranked as if it never had been."""
    rnd = random.Random(5)
    ix = TermIndex(0)
    nodes = [f"{V.NODE}{rnd.getrandbits(128):032x}" for _ in range(400)]
    for node in nodes:
        for term in ("harbour", "ferry", "kiwi"):
            if rnd.random() < 0.7:
                ix.add(node, term)
        ix.lengths[node] = rnd.randint(1, 12)
    queries = [[("harbour", 1.5)], [("harbour", 1.5), ("ferry", 1.5)],
               [("kiwi", 2.0), ("ferry", 0.5), ("harbour", 1.0)]]

    def check() -> None:
        for entries in queries:
            got = ix.ranked(entries, 6.0, 10_000, 20, 10)
            assert got == _ranked_by_hand(ix, entries, 6.0, 20, 10)

    check()
    assert ix._descending  # the order was kept: the changes below must reach it
    top = max(nodes)
    later = [f"{V.NODE}ffff{i:028x}" for i in range(30)]  # above every node so far
    for node in later:
        ix.add(node, "harbour")
        ix.lengths[node] = 3
    check()
    ix.remove(later[-1], "harbour")
    ix.drop(later[-2])
    ix.drop(top)
    check()
    for node in later[:10]:
        ix.remove(node, "harbour")
    ix.add(top, "kiwi")
    ix.lengths[top] = 2
    check()


def _both_ways(mem: MemoryManager, word: str) -> list[tuple[str, float]]:
    """The keyword entry's seeds for ``word`` from the term index, checked against the same
    entry in SPARQL over the ``memory:term`` triples (the truth)."""
    from memory_rdf._oxigraph import term_index

    seeds = [(s.node, s.strength) for s in mem._seeder.keyword_seeds([word], 10)]
    term_index.ENABLED = False
    try:
        truth = [(s.node, s.strength) for s in mem._seeder.keyword_seeds([word], 10)]
    finally:
        term_index.ENABLED = True
    assert seeds == truth
    return seeds


def test_the_keyword_entry_follows_each_kind_of_commit(make_manager) -> None:
    """Sixty memories of one word tie: the entry takes the largest IRIs, in the order the
    term index keeps; remember, forget, pin and compression change the postings, and the
    entry still answers as SPARQL does."""
    mem = make_manager(config=Config(auto_compress=False, focus_limit=1, decay_rate=0.5))
    for i in range(60):
        remember(mem, f"kiwi crate {i}")
    first = _both_ways(mem, "kiwi")
    assert len(first) == 10
    remember(mem, "kiwi crate extra")
    assert mem.forget([first[0][0], first[3][0]]) == 2
    after = _both_ways(mem, "kiwi")
    assert first[0] not in after and first[3][0] not in dict(after)
    assert mem.pin([after[1][0]]) == 1
    _both_ways(mem, "kiwi")
    for _ in range(30):
        mem.run_compression_slice(timeout=60)
    _both_ways(mem, "kiwi")
    _both_ways(mem, "crate")
