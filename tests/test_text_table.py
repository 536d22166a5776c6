"""The read mirror's text table (issue 38; memory_rdf._oxigraph.text_table): the nodes' texts
and times held in a Python table beside the mirror's store, kept in step with every commit and
answering the text reads (``node_texts``, ``node_dates``, ``node_entries``,
``matching_nodes``, ``matching_texts``, ``scan_state``'s content) exactly as SPARQL on the disk
store answers them.

Random batches of every write that touches texts (nodes created, forgotten, their texts
deleted and rewritten as compression does, keywords added and taken off one by one, times
added and removed, pins, Chinese and English texts, texts whose lower case Python and the
engine compute differently) run on a mirrored store; after each, the table is exactly the one
a build derives from the disk store, and every text read answers the same through the table
as through SPARQL on disk.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyoxigraph as ox

from memory_rdf import _vocab as V
from memory_rdf._compression import _Chunk
from memory_rdf._nodes import NodeData, NodeStore, node_triples
from memory_rdf._oxigraph import AgentStore, MemoryStore, WriteBatch, lit, node_ref, triple
from memory_rdf._oxigraph.link_index import derive_both
from memory_rdf._oxigraph.text_table import KEYWORD, TextTable, lower, odd_characters, values

TEXTS = ["we decided JWT for login", "登录 uses JWT tokens", "数据库 迁移 到 PostgreSQL",
         "ΣΑΣ ΟΔΟΣ", "İstanbul trip", "ＳＱＬ full width", "Straße ẞ", "ǅemal", "\ua7cb odd",
         "the CAT sat", "猫 and cat", "coffee ☕ Berlin", "ΑΣ'Β"]
KEYWORDS = ["JWT", "登录", "Login", "ΣΑΣ", "İ", "数据库", "ＳＱＬ", "cat", "Berlin", "\ua7cb"]
QUERIES: list[list[str]] = [["jwt"], ["登录"], ["数据库", "登录"], ["sql"], ["ςας", "σας"],
                            ["i̇stanbul"], ["cat", "猫"], ["straße"], ["berlin", "login"],
                            ["\ua7cb"], ["zzz"]]


class DiskView(MemoryStore):
    """The same store read from disk only, as with no mirror (the SPARQL path): rows from
    the disk store, no text table, no terms."""

    def __init__(self, store: AgentStore) -> None:
        self._inner = store

    @property
    def location(self) -> str:
        return self._inner.location

    def rows(self, query: str) -> list[Any]:
        return self._inner.index_rows(query)

    def ask(self, query: str) -> bool:
        return self._inner.ask(query)

    def commit(self, batch: WriteBatch) -> None:
        raise AssertionError("read only")

    def quads(self, subject: Any, predicate: Any, obj: Any, graph: Any) -> list[Any]:
        return self._inner.quads(subject, predicate, obj, graph)

    def user_query(self, query: str, **kwargs: Any) -> Any:
        raise AssertionError("not used")

    def user_query_serialized(self, query: str, fmt: str, **kwargs: Any) -> Any:
        raise AssertionError("not used")

    def dump(self, fmt: str, *, default_graph_only: bool) -> bytes:
        raise AssertionError("not used")

    def close(self) -> None:
        pass


def _engine_lcase(text: str) -> str:
    rows = ox.Store().query(f"SELECT (LCASE({ox.Literal(text)}) AS ?l) {{}}")
    assert isinstance(rows, ox.QuerySolutions)
    value = next(iter(rows))[0]
    assert value is not None
    return value.value


def test_lower_is_the_engine_s_lcase() -> None:
    odd = odd_characters().pattern
    assert "\u03a3" in odd and "\ua7cb" in odd  # capital sigma; a Unicode 16 capital
    samples = [*TEXTS, *KEYWORDS, "ΣΑΣ.", "aΣ b", "ΑΣ\u0301", "Σ", "İ", "ß", "Ǆ", "ﬃ",
               "\U00010d50x", "\u1c89", "MiXeD ÄÖÜ"]
    for text in samples:
        assert lower(text) == _engine_lcase(text), text


def _norm(nodes: dict[str, tuple[Any, ...]]) -> dict[str, tuple[frozenset[str], ...]]:
    """The table's rows with each slot's values as a set (their order is the writes')."""
    return {nid: tuple(frozenset(repr(v) for v in values(slot)) for slot in row)
            for nid, row in nodes.items()}


def _node(nid: str, rng: random.Random, seq: int) -> NodeData:
    said = None if rng.random() < 0.4 else datetime(2024, 5, 1, tzinfo=UTC) + timedelta(
        seconds=rng.randint(0, 10**6), microseconds=rng.choice([0, 100000, 123456]))
    return NodeData(nid, rng.choice(TEXTS), rng.choice(TEXTS)[:8],
                    rng.sample(KEYWORDS, rng.randint(0, 3)),
                    datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=seq),
                    20, seq, rng.randint(0, 2), said_at=said)


def _reads(store: MemoryStore, ids: Sequence[str], queries: list[list[str]],
           unfolded: set[str]) -> list[Any]:
    nodes = NodeStore(store)
    out: list[Any] = [nodes.texts(ids), nodes.dates(ids), nodes.entries(ids)]
    for keywords in queries:
        out.append(sorted(nodes.matching(ids, keywords)))
        out.append(sorted(nodes.matching(ids, keywords, unfolded)))
        out.append(nodes.match_details(ids, keywords))
        out.append(nodes.match_details(ids, keywords, unfolded))
    chunk = _Chunk.read(store, ids, True)
    out.append({n: (c.content, c.original, c.scans, c.key) for n, c in chunk.nodes.items()})
    return out


def test_text_reads_follow_random_write_batches(tmp_path: Path) -> None:
    rng = random.Random(38)
    names = [f"{i:032x}" for i in range(1, 9)]
    store = AgentStore(tmp_path / "agent", mirror=True)
    seq = 0
    try:
        assert store.wait_mirror(60)
        disk = DiskView(store)
        for step in range(120):
            batch = WriteBatch()
            done: list[str] = []
            for _ in range(rng.randint(1, 3)):
                kind = rng.randrange(8)
                nid = rng.choice(names)
                ref = node_ref(nid)
                if kind <= 1:  # created (again: the texts of both sets are kept)
                    seq += 1
                    batch.insert(node_triples(_node(nid, rng, seq)))
                elif kind == 2:
                    if rng.random() < 0.5:
                        batch.update("forget_nodes", nodes=[ref])
                    else:
                        batch.update("forget_node", node=ref)
                elif kind == 3:  # compression's rewrite: texts deleted, new ones inserted
                    batch.update("delete_node_texts", nodes=[ref])
                    batch.insert([triple(ref, V.CONTENT, lit(rng.choice(TEXTS))),
                                  triple(ref, V.PHRASE, lit("short"))])
                elif kind == 4:
                    batch.update("delete_node_text", node=ref)
                elif kind == 5:  # one keyword added or taken off
                    verb = batch.insert if rng.random() < 0.5 else batch.delete
                    verb([triple(ref, V.KEYWORD, lit(rng.choice(KEYWORDS)))])
                elif kind == 6:  # a second time, or one taken off
                    verb = batch.insert if rng.random() < 0.5 else batch.delete
                    verb([triple(ref, V.SAID_AT, lit(datetime(2024, 1, 1, tzinfo=UTC)))])
                else:
                    NodeStore(store).set_pinned(batch, [nid], rng.random() < 0.5)
                done.append(f"{kind} {nid[-1]}")
            store.commit(batch)
            mirror = store._mirror
            assert mirror is not None and mirror.texts is not None, (step, done)
            assert _norm(mirror.texts.nodes) == _norm(derive_both(store.store)[1].nodes), (
                step, done)
            assert store.text_table() is mirror.texts
            # (a node with two contents, phrases or times: which one a read keeps is the
            # engine's row order, not the same on disk; its keywords are a set either way)
            ids = [n for n in names if all(len(values(slot)) <= 1 for i, slot in enumerate(
                mirror.texts.nodes.get(n, ())) if i != KEYWORD)] + ["f" * 32]
            unfolded = set(rng.sample(names, 3))
            queries = [rng.choice(QUERIES) for _ in range(3)]
            assert _reads(store, ids, queries, unfolded) == _reads(disk, ids, queries,
                                                                   unfolded), (step, done)
    finally:
        store.close()


def test_the_table_is_built_from_the_store_and_answers_its_reads(tmp_path: Path) -> None:
    """A mirror built from a store written before it (the dump routed to the table), and one
    built again after more writes, answer as the disk store; the store without a mirror has no
    table (the SPARQL path)."""
    rng = random.Random(7)
    names = [f"{i:032x}" for i in range(1, 40)]
    store = AgentStore(tmp_path / "agent", mirror=False)
    try:
        batch = WriteBatch()
        for seq, nid in enumerate(names):
            batch.insert(node_triples(_node(nid, rng, seq)))
        store.commit(batch)
        assert store.text_table() is None
        before = _reads(store, names, QUERIES, set(names[:5]))
    finally:
        store.close()
    store = AgentStore(tmp_path / "agent", mirror=True)
    try:
        assert store.wait_mirror(60)
        table = store.text_table()
        assert table is not None and len(table.nodes) == len(names)
        assert _reads(store, names, QUERIES, set(names[:5])) == before
        assert _reads(DiskView(store), names, QUERIES, set(names[:5])) == before
    finally:
        store.close()


def test_a_commit_s_rewrite_is_seen_whole_by_readers() -> None:
    """A compression commit deletes a node's text, then inserts the shorter one: a reader in
    another thread sees the old row or the new one, never the node without its content
    between the two (the in-memory store applied both in one update)."""
    table = TextTable()
    node = f"<{V.NODE}n1>"

    def triples(content: str, forgotten: str) -> list[ox.Triple]:
        lines = (f"{node} <{V.MEMORY}content> {ox.Literal(content)} .\n"
                 f"<{V.NODE}{forgotten}> <{V.MEMORY}phrase> {ox.Literal('gone')} .\n")
        return list(ox.parse(lines.encode(), format=ox.RdfFormat.N_TRIPLES))

    table.add(triples("the long original text", "n2"))
    before = dict(table.nodes)
    with table.commit():
        table.remove(triples("the long original text", "n9"))
        table.forget(["n2"])
        assert table.nodes == before  # nothing changed for readers yet
        assert table.contents("n1") == ("the long original text",)
        table.add(triples("short text", "n3"))
    assert table.contents("n1") == ("short text",)
    assert "n2" not in table.nodes and "n3" in table.nodes
    with contextlib.suppress(RuntimeError), table.commit():
        table.forget(["n1"])
        raise RuntimeError("the commit failed half-way")
    assert table.contents("n1") == ("short text",)  # a failed change is not put in place
