"""The read mirror (issue 16, ``Config.read_mirror``): an in-memory copy of the agent's store
answers its reads, kept in step with every commit. On real stores: the mirror holds exactly the
disk store's quads after remember, compression, forget, purge and a bulk load; recall and
``sparql()`` answer the same with the mirror on and off; the automatic choice; bad values;
a mirror that fails to apply an update is rebuilt from disk."""

from __future__ import annotations

import gc
import logging
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pyoxigraph as ox
import pytest

from memory_rdf import Config, ConfigError, MemoryManager, _manager
from memory_rdf import _vocab as V
from memory_rdf._oxigraph import (
    AgentStore,
    WriteBatch,
    iri_ref,
    link_index,
    link_ref,
    lit,
    mirror_budget,
    mirror_fits,
    node_ref,
    triple,
)
from memory_rdf._oxigraph import mirror as mirror_module

from helpers import (
    FAST,
    AfterUpdate,
    ScriptedModel,
    derived_index,
    index,
    quads,
    remember,
    same_as_built,
    same_texts,
    say,
    sigint_once,
)

MIRROR = FAST.replace(read_mirror=True, focus_limit=3, delete_threshold=30)
NO_MIRROR = FAST.replace(read_mirror=False, focus_limit=3, delete_threshold=30)

RECALLS: list[tuple[list[str], list[str] | None, int]] = [
    ([], None, 1), ([], None, 2), ([], None, 4), (["JWT"], None, 3),
    (["token", "release"], None, 4), (["Miso"], ["owns"], 2),
]
QUERIES = [
    "SELECT ?n ?c WHERE { ?n memory:content ?c } ORDER BY ?n",
    "SELECT ?s ?t ?w ?r WHERE { ?l memory:source ?s ; memory:target ?t ; memory:strength ?w "
    "OPTIONAL { ?l memory:relation ?r } } ORDER BY ?s ?t",
    "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }",
    "ASK { ?n memory:keyword \"JWT\" }",
    "CONSTRUCT { ?n memory:phrase ?p } WHERE { ?n memory:phrase ?p }",
]


def assert_in_step(mem: MemoryManager) -> None:
    """The mirror holds exactly the disk store's quads (every graph), and its link index is
    exactly the one derived afresh from them; the disk store holds no index."""
    store = mem.store
    assert isinstance(store, AgentStore)
    assert store.wait_mirror(60), store.mirror_state
    assert store._mirror is not None and store._mirror.store is not None
    assert quads(store._mirror.store) == quads(store.store)
    assert index(store._mirror.store) == derived_index(store.store)
    assert not index(store.store)
    assert same_as_built(store._mirror.store, store.store)
    assert same_texts(store._mirror.texts, store.store)


def answers(mem: MemoryManager) -> list[Any]:
    out: list[Any] = [mem.recall(k, relations=r, depth=d, max_chars=0) for k, r, d in RECALLS]
    # (a CONSTRUCT has no order: the engines' iteration orders differ)
    out += [sorted(a) if isinstance(a, list) and q.startswith("CONSTRUCT") else a
            for q in QUERIES for a in [mem.sparql(q)]]
    out.append(mem.stats()["nodes"])
    return out


def build(mem: MemoryManager, model: ScriptedModel) -> None:
    model.relations[("Li Na owns the release", "we decided JWT for login")] = "owns"
    remember(mem, "we decided JWT for login | the token expires after two hours")
    remember(mem, "Li Na owns the release | the release is on December 15")
    remember(mem, "the cat is called Miso | Miso likes the JWT talk")


def test_mirror_stays_in_step_and_answers_as_the_disk_store(
    data_dir: Path, model: ScriptedModel
) -> None:
    states: list[list[Any]] = []
    with MemoryManager("agent", data_dir=data_dir, config=MIRROR, model=model) as mem:
        assert_in_step(mem)  # an empty store
        build(mem, model)
        assert_in_step(mem)
        states.append(answers(mem))
        for _ in range(4):  # decay, shortening (delete_threshold 30), forgetting
            mem.run_compression_slice()
        assert_in_step(mem)
        ids = {m["content"]: m["id"] for m in mem.memories(limit=None)}
        assert mem.forget([ids["the token expires after two hours"]]) == 1
        assert_in_step(mem)
        remember(mem, "my address is 42 Wallaby Way | the cat sleeps a lot")
        assert_in_step(mem)
        ids = {m["content"]: m["id"] for m in mem.memories(limit=None)}
        assert mem.forget([ids["my address is 42 Wallaby Way"]], purge=True) == 1
        assert_in_step(mem)  # rebuilt from the rewritten store
        assert mem.store.local.mirror_state == "on"  # type: ignore[union-attr]
        states.append(answers(mem))
        assert "Wallaby" not in str(states[-1])
    # the same store, read from disk: every answer identical
    with MemoryManager("agent", data_dir=data_dir, config=NO_MIRROR, model=model) as mem:
        assert mem.store.local.mirror_state == "off"  # type: ignore[union-attr]
        assert answers(mem) == states[-1]
    with MemoryManager("agent", data_dir=data_dir, config=MIRROR, model=model) as mem:
        assert_in_step(mem)
        assert answers(mem) == states[-1]


def test_answers_before_and_after_the_mirror_is_built_agree(
    tmp_path: Path, data_dir: Path, model: ScriptedModel
) -> None:
    with MemoryManager("a", data_dir=data_dir, config=NO_MIRROR, model=model) as mem:
        build(mem, model)
        mem.run_compression_slice()
        disk = answers(mem)
    with MemoryManager("a", data_dir=data_dir, config=MIRROR, model=model) as mem:
        assert_in_step(mem)
        assert answers(mem) == disk


def test_the_automatic_choice(data_dir: Path, model: ScriptedModel,
                              monkeypatch: pytest.MonkeyPatch) -> None:
    assert Config().read_mirror is None
    assert mirror_fits(100_000, 16 * 2**30)  # 1.3 GB, a quarter of 16 GB free: yes
    assert not mirror_fits(1_000_000, 16 * 2**30)  # 13 GB: no
    assert mirror_fits(10_000, None) and not mirror_fits(100_000, None)  # 1 GiB fallback
    with MemoryManager("auto", data_dir=data_dir, config=FAST, model=model) as mem:
        build(mem, model)
        assert_in_step(mem)
    # the same store when (as measured at open) no memory is available: no mirror
    monkeypatch.setattr(mirror_budget, "available_memory", lambda: 0)
    with MemoryManager("auto", data_dir=data_dir, config=FAST, model=model) as mem:
        store = mem.store
        assert isinstance(store, AgentStore)
        assert not store.wait_mirror(60)
        assert store.mirror_state == "too large"
        assert mem.stats()["read_mirror"] == "too large"
        assert "JWT" in mem.recall(["JWT"], depth=2)
    # False: never; True: whatever the memory
    with MemoryManager("auto", data_dir=data_dir, config=NO_MIRROR, model=model) as mem:
        assert mem.store.local.mirror_state == "off"  # type: ignore[union-attr]
        assert mem.stats()["read_mirror"] == "off"
    with MemoryManager("auto", data_dir=data_dir, config=MIRROR, model=model) as mem:
        assert_in_step(mem)


def test_the_automatic_choice_counts_the_process_s_other_mirrors(
        data_dir: Path, model: ScriptedModel, monkeypatch: pytest.MonkeyPatch) -> None:
    # Many agents in one process: their mirrors together stay within the share of memory,
    # not a quarter of what is left, agent after agent.
    for agent in ("a", "b"):
        with MemoryManager(agent, data_dir=data_dir, config=NO_MIRROR, model=model) as mem:
            build(mem, model)
            store = mem.store
            assert isinstance(store, AgentStore)
            estimate = (mirror_module._nodes_estimate(store.store)
                        * mirror_budget.MIRROR_BYTES_PER_NODE)
    # room for one of the two: a needs 4x its size available, a and b together 7x
    monkeypatch.setattr(mirror_budget, "available_memory", lambda: 5 * estimate)
    with MemoryManager("a", data_dir=data_dir, config=FAST, model=model) as a:
        a_store = a.store
        assert isinstance(a_store, AgentStore) and a_store.wait_mirror(60)
        assert mirror_budget.MIRROR_BUDGET.reserved() == estimate
        with MemoryManager("b", data_dir=data_dir, config=FAST, model=model) as b:
            b_store = b.store
            assert isinstance(b_store, AgentStore) and not b_store.wait_mirror(60)
            assert b_store.mirror_state == "too large"
            assert "JWT" in b.recall(["JWT"], depth=2)  # read from disk, same answers
    assert mirror_budget.MIRROR_BUDGET.reserved() == 0  # closing gives the share back
    with MemoryManager("b", data_dir=data_dir, config=FAST, model=model) as b:
        b_store = b.store
        assert isinstance(b_store, AgentStore) and b_store.wait_mirror(60)


@pytest.mark.parametrize("value", ["yes", 1, 0, 0.5, "None"])
def test_bad_read_mirror_values_are_refused(value: object) -> None:
    with pytest.raises(ConfigError, match="read_mirror must be a bool or None"):
        Config(read_mirror=value)  # type: ignore[arg-type]


def test_a_mirror_that_fails_an_update_is_rebuilt_from_disk(
    tmp_path: Path, data_dir: Path, model: ScriptedModel, caplog: pytest.LogCaptureFixture
) -> None:
    other = tmp_path / "other"
    ox.Store(str(other)).flush()
    with MemoryManager("agent", data_dir=data_dir, config=MIRROR, model=model) as mem:
        remember(mem, "we decided JWT for login | the token expires after two hours")
        assert_in_step(mem)
        store = mem.store
        assert isinstance(store, AgentStore) and store._mirror is not None
        # a real store that refuses every update stands in for a mirror gone wrong
        store._mirror.store = ox.Store.read_only(str(other))
        with caplog.at_level(logging.WARNING, logger="memory_rdf"):
            remember(mem, "Li Na owns the release")
        assert "did not apply an update" in caplog.text
        assert "JWT" in mem.recall(["JWT"], depth=2)  # from disk, or from the rebuilt mirror
        assert_in_step(mem)
        assert "Li Na" in mem.recall(["Li Na"], depth=2)


def test_bulk_load_and_close_while_building(tmp_path: Path) -> None:
    from benchmarks._workload import generate

    path = tmp_path / "big"
    generate(path, 1500, progress=False)
    nquads = tmp_path / "extra.nq"
    nquads.write_text('<https://example.org/s> <https://example.org/p> "o" .\n')
    store = AgentStore(path, mirror=True)
    assert store.mirror_state == "loading"
    store.close()  # stops the build: the lock is released at once
    store = AgentStore(path, mirror=True)
    try:
        # a commit while the mirror is being built is replayed on it
        batch = WriteBatch()
        batch.insert(['<https://example.org/during> <https://example.org/p> "build" .'])
        store.commit(batch)
        assert store.wait_mirror(120)
        assert store._mirror is not None and store._mirror.store is not None
        assert quads(store._mirror.store) == quads(store.store)
        store.bulk_load_nquads(nquads)  # outside commit(): the mirror is built again
        assert store.wait_mirror(120)
        assert store._mirror is not None and store._mirror.store is not None
        assert quads(store._mirror.store) == quads(store.store)
        assert store.ask("ASK { <https://example.org/s> <https://example.org/p> \"o\" }")
    finally:
        store.close()
    shutil.rmtree(path)


def test_recalls_from_many_threads_agree(data_dir: Path, model: ScriptedModel) -> None:
    """An idle agent's recall runs in the calling thread; concurrent callers take turns (the
    agent is busy while one runs) and a recall still waits behind a remember made before."""
    import threading

    with MemoryManager("agent", data_dir=data_dir, config=MIRROR, model=model) as mem:
        build(mem, model)
        want = [mem.recall(k, relations=r, depth=d, max_chars=0) for k, r, d in RECALLS]
        got: list[list[str]] = []

        def run() -> None:
            got.append([mem.recall(k, relations=r, depth=d, max_chars=0)
                        for _ in range(10) for k, r, d in RECALLS])

        threads = [threading.Thread(target=run) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert got == [want * 10] * 4
        model.delay = 0.2
        mem.remember([{"role": "user", "content": "a slow remember about Zanzibar"}])
        assert "Zanzibar" in mem.recall(["Zanzibar"], depth=0)  # waited behind it
        assert mem.wait_idle(30)


# -- the mirror's link index (issue 16: one triple per link, only in the mirror) --------------


def store_in_step(store: AgentStore) -> None:
    assert store._mirror is not None and store._mirror.store is not None
    assert quads(store._mirror.store) == quads(store.store)
    assert index(store._mirror.store) == derived_index(store.store)
    assert not index(store.store)  # never on disk
    assert same_texts(store._mirror.texts, store.store)


def test_the_link_index_follows_every_kind_of_write(tmp_path: Path) -> None:
    """Writes of every shape the index must follow, straight through WriteBatch: links
    created whole (the remember path), a relation changed, a link re-targeted, strengths
    rewritten (nothing to do), a target forgotten (its incoming links go to the dangling
    graph) and created again, a scanCount deleted alone, links deleted, an unknown template."""
    from memory_rdf._links import LinkData, link_triples
    from memory_rdf._nodes import NodeData, node_triples

    def node(nid: str) -> list[str]:
        return node_triples(NodeData(nid, f"text {nid}", f"p {nid}", ["k"], _created(), 7, 1))

    store = AgentStore(tmp_path / "agent", mirror=True)
    try:
        assert store.wait_mirror(30)
        steps: list[WriteBatch] = []
        batch = WriteBatch()  # three nodes and four links, one to a node that does not exist
        batch.insert([t for n in "abc" for t in node(n * 32)])
        batch.insert([t for s, t, r in (("a", "b", "下文"), ("b", "c", ""), ("c", "a", "涉及"),
                                        ("a", "d", "x y")) for t in link_triples(
            LinkData(s * 32, t * 32, 0.5, r))])
        steps.append(batch)
        batch = WriteBatch()  # a relation renamed, a strength rewritten
        ab = link_ref("a" * 32, "b" * 32)
        batch.delete([triple(ab, V.RELATION, lit("下文"))])
        batch.insert([triple(ab, V.RELATION, lit("上文")),
                      triple(link_ref("b" * 32, "c" * 32), V.STRENGTH,
                                    lit(0.25))])
        steps.append(batch)
        batch = WriteBatch()  # c forgotten: c→a goes, b→c dangles
        batch.update("forget_nodes", nodes=[node_ref("c" * 32)])
        steps.append(batch)
        batch = WriteBatch()  # d created: the dangling a→d becomes live
        batch.insert(node("d" * 32))
        steps.append(batch)
        batch = WriteBatch()  # d's scanCount deleted alone: a→d dangles again
        batch.delete([triple(node_ref("d" * 32), V.SCAN_COUNT, lit(0))])
        steps.append(batch)
        batch = WriteBatch()  # b→c deleted
        batch.update("delete_links", links=[link_ref("b" * 32, "c" * 32)])
        steps.append(batch)
        batch = WriteBatch()  # an update the mirror knows nothing about: built again
        batch.update("wipe_agent", memory=iri_ref("https://example.org/elsewhere"),
                     lease=node_ref("e" * 32))
        steps.append(batch)
        for step in steps:
            store.commit(step)
            assert store.wait_mirror(30)
            store_in_step(store)
        assert index(store._mirror.store)  # type: ignore[union-attr]
        # a→b re-targeted by hand: a link no longer named by its ends (link:a--b from a to a)
        # cannot be followed by its IRI: the mirror is given up, reads go to disk.
        batch = WriteBatch()
        batch.delete([triple(ab, V.TARGET, node_ref("b" * 32))])
        batch.insert([triple(ab, V.TARGET, node_ref("a" * 32))])
        store.commit(batch)
        assert not store.wait_mirror(30)
        assert store.mirror_state == "failed"
        rows = store.rows(store.render("focus_nodes"))  # answered by the disk store
        assert rows == []
    finally:
        store.close()


def test_a_compression_commit_reads_nothing_for_the_link_index(
    data_dir: Path, model: ScriptedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A compression slice's commit is followed on the mirror without reading the disk store:
    strengths rewritten in place (the link quad deleted and inserted with the new strength),
    links deleted and nodes forgotten by their IRIs; the scanCount it rewrites on every
    scanned node, which stays live, is vouched index-neutral (no liveness to look up). The
    mirror stays exact all the same, through decay, shortening and forgetting."""
    commits: list[WriteBatch] = []
    real_commit = AgentStore.commit
    reread: list[str] = []
    real_reread = link_index._reread

    def commit(self: AgentStore, batch: WriteBatch) -> None:
        commits.append(batch)
        real_commit(self, batch)

    def spy(mirror: ox.Store, disk: ox.Store, link: str) -> None:
        reread.append(link)
        real_reread(mirror, disk, link)

    config = MIRROR.replace(decay_rate=0.6, delete_threshold=8)  # ages in a few scans
    with MemoryManager("agent", data_dir=data_dir, config=config, model=model) as mem:
        build(mem, model)
        # the first memories far from the focus, whose links into them do not decay
        remember(mem, "the office moves to Berlin | the new desk is by the window")
        remember(mem, "lunch is at noon | the meeting room is booked")
        assert_in_step(mem)
        monkeypatch.setattr(AgentStore, "commit", commit)
        monkeypatch.setattr(link_index, "_reread", spy)
        reports = [mem.run_compression_slice() for _ in range(12)]
        monkeypatch.undo()
        assert sum(r["scanned"] for r in reports) > 0, reports
        assert sum(r["compressed"] for r in reports) > 0, reports
        assert sum(r["forgotten"] for r in reports) > 0, reports
        plans = [link_index.plan(batch) for batch in commits]
        assert plans and not reread
        for todo in plans:
            assert not todo.structural
            assert todo.liveness == set(todo.forgotten), todo.liveness
        assert any(todo.forgotten for todo in plans)
        assert any(todo.replaced for todo in plans)  # batch.strengths: read as data
        assert_in_step(mem)


def _created() -> Any:
    from datetime import UTC, datetime

    return datetime(2026, 1, 1, tzinfo=UTC)


def test_sparql_never_sees_the_link_index(data_dir: Path, model: ScriptedModel) -> None:
    with MemoryManager("agent", data_dir=data_dir, config=MIRROR, model=model) as mem:
        build(mem, model)
        assert_in_step(mem)
        store = mem.store
        assert isinstance(store, AgentStore) and store._mirror is not None
        assert store._mirror.store is not None and index(store._mirror.store)
        for query in (f"SELECT * WHERE {{ GRAPH <{V.MIRROR_LINKS}out> {{ ?s ?p ?o }} }}",
                      "SELECT * WHERE { GRAPH ?g { ?s ?p ?o } }",
                      f"ASK {{ ?s ?p ?o FILTER(STRSTARTS(STR(?p), \"{V.LINK}\")) }}"):
            assert mem.sparql(query) in ([], False)
        on = mem.sparql("SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }")
        # The whole SPEC §2 graph, which the mirror does not hold: link resources, their
        # class, the shortcuts, the index terms (every user query reads the disk store).
        assert mem.sparql("ASK { ?l a memory:Link ; memory:source ?s ; memory:target ?t ; "
                          "memory:strength ?w . ?s memory:link ?t }") is True
        assert mem.sparql("ASK { ?n a memory:Node ; memory:term ?term ; "
                          "memory:termCount ?c }") is True
        assert not any(str(q.predicate) in (V.A, V.LINK_P, V.TERM)
                       for q in store._mirror.store)
    with MemoryManager("agent", data_dir=data_dir, config=NO_MIRROR, model=model) as mem:
        assert mem.sparql("SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }") == on


def _mirror_reads(mem: MemoryManager) -> list[tuple[str, Any]]:
    """Each query the agent's read mirror answers from now on, with its rows (None: not
    served by the mirror), in order."""
    store = mem.store
    assert isinstance(store, AgentStore)
    reads: list[tuple[str, Any]] = []
    real = store.mirror_rows

    def spy(query: str) -> Any:
        found = real(query)
        reads.append((query, found))
        return found

    store.mirror_rows = spy  # type: ignore[method-assign]
    return reads


def test_recall_reads_the_link_index_when_mirrored(data_dir: Path, model: ScriptedModel) -> None:
    """The walk's levels come from the index (mirror_level.rq, or mirror_outgoing.rq for a few
    sources) while a mirror serves reads,
    from the SPEC §2 layout otherwise, with the same answers (the tests above compare them)."""
    with MemoryManager("agent", data_dir=data_dir, config=MIRROR, model=model) as mem:
        build(mem, model)
        assert_in_step(mem)
        asked = _mirror_reads(mem)
        text = mem.recall([], depth=3, max_chars=0)
        assert text and any(q.startswith(LEVEL_QUERIES) for q, _ in asked)


#: The walk's level queries on the read mirror: a row a source, or a row a link (a few sources).
LEVEL_QUERIES = ("# mirror_level", "# mirror_outgoing")


def _level_graphs(reads: list[tuple[str, Any]]) -> set[tuple[bool, str | None] | None]:
    """``(lost, relation)`` of every link graph the walk's level queries named (FROM NAMED)."""
    import re

    return {link_index.graph_link(g) for q, _ in reads if q.startswith(LEVEL_QUERIES)
            for g in re.findall(r"FROM NAMED <([^>]+)>", q)}


def test_a_relation_filter_is_applied_by_the_level_query(
    data_dir: Path, model: ScriptedModel
) -> None:
    """With ``relations``, the walk's level query reads only the links of those relations
    (their live link graphs): no row is read only to be dropped in Python, and the answer is
    the one without a mirror."""
    with MemoryManager("agent", data_dir=data_dir, config=MIRROR, model=model) as mem:
        build(mem, model)
        assert_in_step(mem)
        reads = _mirror_reads(mem)
        assert mem.recall(["JWT"], depth=3, max_chars=0)
        assert {g[1] for g in _level_graphs(reads) if g} - {"owns"}  # other relations too
        reads.clear()
        text = mem.recall(["JWT"], relations=["owns"], depth=3, max_chars=0)
        assert _level_graphs(reads) == {(False, "owns")}
        assert any(found for q, found in reads if q.startswith(LEVEL_QUERIES))
    with MemoryManager("agent", data_dir=data_dir, config=NO_MIRROR, model=model) as mem:
        assert mem.recall(["JWT"], relations=["owns"], depth=3, max_chars=0) == text


def test_the_level_query_reads_live_links_only(data_dir: Path, model: ScriptedModel) -> None:
    """The walk's level query reads the link graphs of live targets only, a row a source
    (its targets and strengths; issue 38): a dangling link is looked up for the results alone
    (``mirror_lost``), and the perception entry it makes is the one read without a mirror."""
    with MemoryManager("agent", data_dir=data_dir, config=MIRROR, model=model) as mem:
        build(mem, model)
        ids = {m["content"]: m["id"] for m in mem.memories(limit=None)}
        assert mem.forget([ids["the token expires after two hours"]]) == 1
        assert_in_step(mem)
        reads = _mirror_reads(mem)
        text = mem.recall(["JWT"], depth=3, max_chars=0, entry="both")
        assert "expires" not in text and "I have forgotten" in text  # a perception entry
        graphs = _level_graphs(reads)
        assert graphs and all(g is not None and not g[0] for g in graphs), graphs
        # a row a source (its targets as "target …", their strengths) or a row a link
        targets = [t for q, found in reads if q.startswith(LEVEL_QUERIES) for r in found
                   for t in (r[1].value.split(" ") if q.startswith("# mirror_level")
                             else [r[1].value])]
        assert targets and all(len(r) == 3 for q, found in reads
                               if q.startswith(LEVEL_QUERIES) for r in found)
        lost = V.NODE + ids["the token expires after two hours"]
        assert lost not in targets
        assert any(q.startswith("# mirror_lost") for q, _ in reads)
    with MemoryManager("agent", data_dir=data_dir, config=NO_MIRROR, model=model) as mem:
        assert mem.recall(["JWT"], depth=3, max_chars=0, entry="both") == text


def test_the_level_query_names_its_graphs_with_serialized_terms_only() -> None:
    """``# @named`` renders ``FROM NAMED`` of serialized graph terms; dropped for None (every
    graph, as the file runs as-is); an empty list, which would read every graph too, and a raw
    string are refused."""
    from memory_rdf._oxigraph import render

    live = iri_ref(V.MIRROR_LINKS + "out")
    common = {"sources": [node_ref("0" * 32)], "threshold": lit(0.01)}
    assert f"FROM NAMED {live}" in render("mirror_level", graphs=[live], **common)
    assert "FROM NAMED <" not in render("mirror_level", graphs=None, **common)
    with pytest.raises(ValueError, match="every graph"):
        render("mirror_outgoing", graphs=[], **common)
    with pytest.raises(TypeError):
        render("mirror_outgoing", graphs=["<urn:x> } DELETE WHERE { ?s ?p ?o"], **common)


def test_a_level_read_a_row_a_source_keeps_the_links_the_row_query_keeps() -> None:
    """``mirror_level.rq`` (a source's links in one row, split by ``level_links``) gives the
    links ``mirror_outgoing.rq`` gives a row each (``link_rows``: the walk's small levels),
    whatever a strength's datatype or lexical form: kept or dropped alike, the same floats
    (issue 38)."""
    from memory_rdf._links import level_links, link_rows
    from memory_rdf._oxigraph import render

    xsd = "http://www.w3.org/2001/XMLSchema#"
    live, other = ox.NamedNode(V.MIRROR_LINKS + "out"), ox.NamedNode(V.MIRROR_LINKS + "out/x")
    a, b, c = (ox.NamedNode(V.NODE + n) for n in ("a" * 32, "b" * 32, "c" * 32))
    strengths = [ox.Literal("0.5", datatype=ox.NamedNode(xsd + "double")),
                 ox.Literal("0.001", datatype=ox.NamedNode(xsd + "double")),
                 ox.Literal("1", datatype=ox.NamedNode(xsd + "integer")),
                 ox.Literal("+3", datatype=ox.NamedNode(xsd + "integer")),
                 ox.Literal("0.25", datatype=ox.NamedNode(xsd + "decimal")),
                 ox.Literal("1.0E2", datatype=ox.NamedNode(xsd + "double")),
                 ox.Literal("INF", datatype=ox.NamedNode(xsd + "double")),
                 ox.Literal(" 0.5", datatype=ox.NamedNode(xsd + "double")),
                 ox.Literal("0.5 0.6", datatype=ox.NamedNode(xsd + "double")),
                 ox.Literal("abc", datatype=ox.NamedNode(xsd + "double")),
                 ox.Literal("0.7"), ox.NamedNode("urn:x")]
    store = ox.Store()
    for i, w in enumerate(strengths):
        target = ox.NamedNode(V.NODE + f"{i:032x}")
        store.add(ox.Quad(a if i % 2 else b, target, w, live))
        store.add(ox.Quad(a, target, w, other))
        store.add(ox.Quad(c, target, w, live))  # not a source asked for
    params = {"sources": [node_ref("a" * 32), node_ref("b" * 32)], "threshold": lit(0.01)}
    for graphs in ([iri_ref(live.value)], [iri_ref(live.value), iri_ref(other.value)]):
        by_row: dict[str, list[tuple[str, float]]] = {}
        for s, t, w in store.query(render("mirror_outgoing", graphs=graphs, **params)):
            by_row.setdefault(s.value[len(V.NODE):], []).append(
                (t.value[len(V.NODE):], float(w.value)))
        grouped = level_links(list(store.query(render("mirror_level", graphs=graphs, **params))))
        assert {s: sorted(ls) for s, ls in grouped.items()} == {
            s: sorted(ls) for s, ls in by_row.items()}
        rows = link_rows(list(store.query(render("mirror_outgoing", graphs=graphs, **params))))
        assert {s: sorted(ls) for s, ls in rows.items()} == {
            s: sorted(ls) for s, ls in by_row.items()}
        assert sum(map(len, grouped.values())) == (6 if len(graphs) == 1 else 12)


def test_a_level_row_pairs_each_target_with_its_own_strength() -> None:
    """``mirror_level.rq``'s two strings (targets, strengths) pair up: each target with its
    own link's strength on a real store, whatever the links' order; a row whose two lists
    differ in length is refused, not cut (issue 38)."""
    from memory_rdf._links import level_links
    from memory_rdf._oxigraph import render

    live = ox.NamedNode(V.MIRROR_LINKS + "out")
    double = ox.NamedNode("http://www.w3.org/2001/XMLSchema#double")
    source = ox.NamedNode(V.NODE + "a" * 32)
    store = ox.Store()
    expected = []
    for i in range(40):
        target, strength = f"{i:032x}", f"0.{(i * 7919) % 1000:03d}1"
        store.add(ox.Quad(source, ox.NamedNode(V.NODE + target),
                          ox.Literal(strength, datatype=double), live))
        expected.append((target, float(strength)))
    rows = list(store.query(render("mirror_level", graphs=[iri_ref(live.value)],
                                   sources=[node_ref("a" * 32)], threshold=lit(0.0))))
    assert sorted(level_links(rows)["a" * 32]) == sorted(expected)
    lone = ox.Literal("0.5")
    with pytest.raises(ValueError, match="2 targets and 1 strengths"):
        level_links([(source, ox.Literal(f"{V.NODE}b {V.NODE}c"), lone)])


def test_a_strength_is_parsed_once_and_the_cache_stays_bounded() -> None:
    """The strengths' cache gives ``float`` of a lexical form, and starts again empty when it
    holds :data:`STRENGTHS_KEPT` values (issue 38)."""
    from memory_rdf import _links

    cache = _links._strength.__self__
    cache.clear()
    assert _links._strength("0.5") == 0.5 and _links._strength("1.0E2") == 100.0
    assert _links._strength("INF") == float("inf") and len(cache) == 3
    for i in range(_links.STRENGTHS_KEPT + 10):
        assert _links._strength(f"0.{i}1") == float(f"0.{i}1")
    assert 0 < len(cache) <= _links.STRENGTHS_KEPT


def test_every_update_template_is_known_to_the_link_index() -> None:
    """A shipped update either touches nothing the index is derived from (listed), or is
    followed by link_index.plan; an unknown one makes the mirror derive its whole index again
    (correct, but ~1 s at 10k nodes under the write lock): a new template must be placed."""
    from memory_rdf._resources import update_names

    followed = {"forget_node", "forget_nodes", "delete_link", "delete_links"}
    endpoint_only = {"wipe_agent"}  # names the memory graph: never run on an embedded store
    assert set(update_names()) == link_index._INDEX_NEUTRAL | followed | endpoint_only


def test_the_mirrored_templates_read_only_what_the_mirror_holds() -> None:
    """The shipped queries the read mirror answers (``MIRRORED_TEMPLATES``) name no predicate
    but the ones it keeps, no class, no graph, and no variable in a predicate's place: on the
    mirror's layout they answer what they answer on disk. The ``mirror_*.rq`` queries read
    its link graphs only."""
    import re

    from memory_rdf._resources import query_names, query_text

    for name in link_index.MIRRORED_TEMPLATES:
        body = "\n".join(line for line in query_text(name).splitlines()
                         if not line.lstrip().startswith(("#", "PREFIX")))
        named = set(re.findall(r"memory:(\w+)", body))
        assert named and named <= set(link_index.KEPT_NAMES), (name, named)
        iris = set(re.findall(r"<[^>\s]*>", body)) - {f"<{V.FOCUS_LIST}>"}
        assert "GRAPH" not in body and " a " not in body and not iris, (name, iris)
        for pattern in re.findall(r"\?\w+ (\?\w+) ", body):
            assert pattern not in ("?p", "?predicate"), (name, pattern)
    mirror_queries = {n for n in query_names() if n.startswith("mirror_")}
    assert mirror_queries == {"mirror_outgoing", "mirror_level", "mirror_lost",
                              "mirror_chunk_links"}
    for name in mirror_queries:
        body = "\n".join(line for line in query_text(name).splitlines()
                         if not line.lstrip().startswith("#"))
        assert "memory:" not in body and "GRAPH ?g" in body, name


def test_a_store_dropped_without_close_gives_its_mirror_share_back() -> None:
    # The budget holds its stores weakly: one collected without close() no longer counts
    # against the others' automatic choice, and no later store inherits its share by id.
    budget = mirror_budget._MirrorBudget()

    class Owner:
        pass

    kept, dropped = Owner(), Owner()
    assert budget.claim(kept, 10, True) and budget.claim(dropped, 20, True)
    assert budget.reserved() == 30 * mirror_budget.MIRROR_BYTES_PER_NODE
    del dropped
    gc.collect()
    assert budget.reserved() == 10 * mirror_budget.MIRROR_BYTES_PER_NODE
    budget.release(kept)
    assert budget.reserved() == 0


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """The mirror's copy in 2 kB chunks: a 200-node dump goes through hundreds of them."""
    monkeypatch.setattr(mirror_module, "MIRROR_CHUNK", 2048)


def _generated_dump(tmp_path: Path) -> tuple[ox.Store, bytes]:
    from benchmarks._workload import generate

    generate(tmp_path / "agent", 200, progress=False)
    disk = ox.Store.read_only(str(tmp_path / "agent"))
    return disk, disk.dump(format=ox.RdfFormat.N_TRIPLES, from_graph=ox.DefaultGraph())


@pytest.mark.usefixtures("small_chunks")
def test_the_dump_is_loaded_by_a_loader_thread_chunk_by_chunk(tmp_path: Path) -> None:
    # The dump goes through the loader thread in pieces cut at line ends, and the copy is
    # exactly what a mirror of the disk store holds.
    disk, dump = _generated_dump(tmp_path)
    assert len(dump) > 100 * mirror_module.MIRROR_CHUNK
    started = threading.Event()
    mirror = ox.Store()
    keep = link_index.MirrorFilter()
    sink = mirror_module._LoadSink(mirror, threading.Event(), started.set, keep)
    sink.copy_from(disk)
    mirror.extend(list(keep.link_quads(mirror)))
    assert started.is_set()
    assert sink.loaded == len(dump)
    assert quads(mirror) == quads(disk)
    assert same_as_built(mirror, disk) and index(mirror)
    assert not sink._loader.is_alive()


@pytest.mark.usefixtures("small_chunks")
def test_a_loader_that_fails_stops_the_dump_and_its_thread(tmp_path: Path) -> None:
    disk, dump = _generated_dump(tmp_path)
    ox.Store(str(tmp_path / "other")).flush()
    refusing = ox.Store.read_only(str(tmp_path / "other"))  # refuses every load
    sink = mirror_module._LoadSink(refusing, threading.Event(), lambda: None,
                                   link_index.MirrorFilter())
    with pytest.raises(RuntimeError, match="read-write"):
        sink.copy_from(disk)
    assert sink.loaded < len(dump)  # stopped early
    assert not sink._loader.is_alive()


@pytest.mark.usefixtures("small_chunks")
def test_a_cancelled_build_stops_between_chunks_and_ends_its_thread(tmp_path: Path) -> None:
    disk, _ = _generated_dump(tmp_path)
    cancel = threading.Event()
    # cancelled at the first write
    sink = mirror_module._LoadSink(ox.Store(), cancel, cancel.set, link_index.MirrorFilter())
    with pytest.raises(mirror_module._Cancelled):
        sink.copy_from(disk)
    assert sink.loaded == 0
    assert not sink._loader.is_alive()


def _held_build(monkeypatch: pytest.MonkeyPatch, during: Any) -> threading.Event:
    """Mirror builds call ``during()`` in the build thread once the copy is in, before its link
    index is built (no lock held): the returned event is set once it has returned."""
    done = threading.Event()

    def step(name: str) -> None:
        if name == "indexing" and not done.is_set():
            during()
            done.set()

    monkeypatch.setattr(mirror_module, "build_steps", step)
    return done


def _commit_marker(store: AgentStore, i: int) -> None:
    batch = WriteBatch()
    batch.insert([f'<https://example.org/during{i}> {V.SCAN_ORDER} "{"x" * 200}" .'])
    store.commit(batch)


def test_updates_committed_during_a_build_are_caught_up_outside_the_owner_s_turn(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # 40 commits land while the copy is being made; the build applies them in rounds outside
    # the store owner's turn (a writer commits while it does) and only the last few in it.
    from benchmarks._workload import generate

    monkeypatch.setattr(mirror_module, "MIRROR_CATCH_UP_BYTES", 1000)
    path = tmp_path / "agent"
    generate(path, 300, progress=False)
    store = AgentStore(path, mirror=True)
    writer_blocked: list[bool] = []
    real_apply = mirror_module.apply_plan

    def commit_forty() -> None:  # another thread: the build thread holds no turn here
        worker = threading.Thread(target=lambda: [_commit_marker(store, i) for i in range(40)])
        worker.start()
        worker.join(60)

    def apply_plan(mirror: ox.Store, todo: Any, disk: Any, live: bool = True) -> None:
        if not writer_blocked and threading.current_thread().name == "memory-rdf-mirror":
            # the first update caught up: a writer still gets through meanwhile
            writer = threading.Thread(target=_commit_marker, args=(store, 100))
            writer.start()
            writer.join(10)
            writer_blocked.append(writer.is_alive())
        real_apply(mirror, todo, disk, live)

    monkeypatch.setattr(mirror_module, "apply_plan", apply_plan)
    held = _held_build(monkeypatch, commit_forty)
    try:
        assert store.wait_mirror(120)
        assert held.is_set()
        assert writer_blocked == [False]
        assert store._mirror is not None and store._mirror.store is not None
        assert quads(store._mirror.store) == quads(store.store)
        assert index(store._mirror.store) == derived_index(store.store)
        assert same_as_built(store._mirror.store, store.store)
        assert same_texts(store._mirror.texts, store.store)
        assert any(str(q.subject) == "<https://example.org/during100>"
                   for q in store._mirror.store)
    finally:
        store.close()


def test_compression_committed_during_a_build_is_caught_up_exactly(
        data_dir: Path, model: ScriptedModel, monkeypatch: pytest.MonkeyPatch) -> None:
    """Compression slices (strengths replaced, texts shortened, nodes forgotten) committed
    while the mirror is being built are queued and applied to the new copy afterwards, each
    strength checked against the copy (a link read back from disk holds later ones): the
    mirror ends exactly as one built afresh, and recall answers as without it."""
    config = MIRROR.replace(decay_rate=0.6, delete_threshold=8)
    with MemoryManager("agent", data_dir=data_dir, config=config, model=model) as mem:
        build(mem, model)
        remember(mem, "the office moves to Berlin | the new desk is by the window")
        remember(mem, "lunch is at noon | the meeting room is booked")
    opened: list[MemoryManager] = []
    ready = threading.Event()  # the build may reach its hold before the open returns
    reports: list[dict[str, Any]] = []

    def slices() -> None:
        assert ready.wait(60)
        reports.extend(opened[0].run_compression_slice() for _ in range(8))

    def compress() -> None:  # another thread: the build thread holds no turn here
        worker = threading.Thread(target=slices)
        worker.start()
        worker.join(120)

    held = _held_build(monkeypatch, compress)
    with MemoryManager("agent", data_dir=data_dir, config=config, model=model) as mem:
        opened.append(mem)
        ready.set()
        store = mem.store
        assert isinstance(store, AgentStore)
        assert store.wait_mirror(120)
        assert held.is_set()
        assert sum(r["scanned"] for r in reports) > 0, reports
        assert sum(r["forgotten"] + r["compressed"] for r in reports) > 0, reports
        assert_in_step(mem)
        on = answers(mem)
    with MemoryManager("agent", data_dir=data_dir, config=NO_MIRROR, model=model) as mem:
        assert answers(mem) == on


def test_automatic_compression_waits_for_the_mirror_s_build(
        data_dir: Path, model: ScriptedModel, monkeypatch: pytest.MonkeyPatch) -> None:
    # While the read mirror is being built, automatic slices wait (user calls and explicit
    # slices do not); once it serves reads they run.
    release = threading.Event()
    config = MIRROR.replace(auto_compress=True)
    with MemoryManager("agent", data_dir=data_dir, config=config, model=model) as mem:
        build(mem, model)
        assert mem.wait_idle(30)
    held = _held_build(monkeypatch, lambda: release.wait(60))
    with MemoryManager("agent", data_dir=data_dir, config=config, model=model) as mem:
        store = mem.store
        assert isinstance(store, AgentStore) and store.mirror_building
        assert mem.stats()["read_mirror"] == "loading"
        before = _scan_counts(mem)
        mem.remember(say("a new memory about the release"))  # queues an automatic slice
        assert "new memory" in mem.recall(["release"], depth=2)  # user calls go on
        time.sleep(3 * _manager.MIRROR_WAIT)
        assert not mem.wait_idle(0)  # the slice is waiting
        waiting = _scan_counts(mem)
        new = {n: c for n, c in waiting.items() if n not in before}
        assert len(new) == 1 and list(new.values()) == [0]
        assert {n: c for n, c in waiting.items() if n in before} == before  # nothing scanned
        report = mem.run_compression_slice(timeout=30)  # asked for: runs at once
        assert report["scanned"] > 0
        explicit = _scan_counts(mem)
        assert explicit != waiting
        release.set()
        assert held.wait(30)
        assert mem.wait_idle(30)
        assert not store.mirror_building
        assert _scan_counts(mem) != explicit  # the automatic slice ran
        assert_in_step(mem)
        assert mem.stats()["read_mirror"] == "on"


def _scan_counts(mem: MemoryManager) -> dict[str, int]:
    rows = mem.sparql("SELECT ?n ?s WHERE { ?n memory:scanCount ?s }")
    assert isinstance(rows, list)
    return {r["n"]: r["s"] for r in rows}  # type: ignore[call-overload,index]


def _marker(text: str) -> tuple[WriteBatch, str]:
    batch = WriteBatch()
    batch.insert([f"<{V.NODE}f00d> <{V.MEMORY}scanOrder> {lit(text)} ."])
    return batch, f"ASK {{ ?n memory:scanOrder {lit(text)} }}"


def test_a_ctrl_c_after_the_disk_write_is_held_until_the_mirror_has_it(
    data_dir: Path, model: ScriptedModel
) -> None:
    """SIGINT arriving right after the disk update of an ordinary commit: the commit ends
    (the mirror applies the update too) before the KeyboardInterrupt is raised."""
    with MemoryManager("agent", data_dir=data_dir, config=MIRROR, model=model) as mem:
        remember(mem, "we decided JWT for login")
        assert_in_step(mem)
        store = mem.store
        assert isinstance(store, AgentStore) and store._mirror is not None
        real = store._store
        assert real is not None
        store._store = AfterUpdate(real, sigint_once())  # type: ignore[assignment]
        batch, ask = _marker("written on disk")
        try:
            with pytest.raises(KeyboardInterrupt):
                store.commit(batch)
        finally:
            store._store = real
        assert store.mirror_state == "on"  # kept: it has the write, nothing to build again
        assert store._mirror.store is not None and store._mirror.store.query(
            ask, prefixes=V.PREFIXES)
        assert_in_step(mem)


@pytest.mark.parametrize("building", [False, True], ids=["built", "building"])
def test_a_commit_stopped_after_the_disk_write_builds_the_mirror_again(
    data_dir: Path, model: ScriptedModel, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture, building: bool
) -> None:
    """An exception that is not the store's (KeyboardInterrupt raised by code, SystemExit
    from a signal handler) between the disk update and the mirror's, with the mirror built
    or being built: the copy is built again from the disk store, which has the write."""

    def interrupt() -> None:
        raise KeyboardInterrupt

    reached, release = threading.Event(), threading.Event()
    if building:  # the first build waits, its copy taken, until the commit is done
        _held_build(monkeypatch, lambda: (reached.set(), release.wait(30)))
    else:
        release.set()
    with MemoryManager("agent", data_dir=data_dir, config=MIRROR, model=model) as mem:
        store = mem.store
        assert isinstance(store, AgentStore)
        real = store._store
        assert real is not None
        if building:  # the copy is in: commits are queued for it
            assert reached.wait(30) and store.mirror_state == "loading"
        else:
            remember(mem, "we decided JWT for login")
            assert_in_step(mem)
        store._store = AfterUpdate(real, interrupt)  # type: ignore[assignment]
        batch, ask = _marker("written on disk")
        try:
            with caplog.at_level(logging.WARNING, logger="memory_rdf"), \
                    pytest.raises(KeyboardInterrupt):
                store.commit(batch)
        finally:
            store._store = real
            release.set()
        assert "built again after an interrupted write" in caplog.text
        assert real.query(ask, prefixes=V.PREFIXES)
        assert_in_step(mem)
        assert mem.sparql(ask)
