"""Pinning and erasure without trace (SPEC §5.6 v3): ``pin`` / ``unpin`` keep a memory from
fading (never compressed, forgotten or evicted; a seed of every recall), and
``forget(ids, purge=True)`` takes the links into the forgotten nodes along — on real
temporary stores and on a SPARQL endpoint."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_rdf import MemoryManager, backup
from memory_rdf import _vocab as V

from helpers import FAST, ScriptedModel, remember

BACKENDS = ("embedded", "endpoint")

#: One focus node, fast decay: what is not protected fades within a few dozen slices.
FADING = FAST.replace(focus_limit=1, decay_rate=0.8)
NAME = "my name is Priya and I like green tea"
TWIN = "my twin is Tomas and he likes black coffee"


def _ids(mem: MemoryManager) -> dict[str, str]:
    return {m["content"]: m["id"] for m in mem.memories(limit=None)}


def _by_content(mem: MemoryManager) -> dict[str, dict[str, object]]:
    return {m["content"]: m for m in mem.memories(limit=None)}


def _two_old_memories(mem: MemoryManager) -> dict[str, str]:
    """NAME and TWIN, equal in age and links, then two remembers that move the focus on."""
    remember(mem, f"{NAME} | {TWIN}")
    remember(mem, "filler one")
    remember(mem, "filler two")
    ids = _ids(mem)
    assert mem.stats()["focus"] == [ids["filler two"]]
    return ids


def _slices(mem: MemoryManager, n: int) -> None:
    for _ in range(n):
        mem.run_compression_slice(timeout=60)


def test_a_pinned_memory_survives_compression_its_twin_does_not(make_manager) -> None:
    mem = make_manager(config=FADING)
    ids = _two_old_memories(mem)
    assert mem.pin([ids[NAME]]) == 1
    _slices(mem, 60)
    listed = _by_content(mem)
    name = listed[NAME]  # intact: the same text, never scanned
    assert name["pinned"] is True and name["scan_count"] == 0 and name["id"] == ids[NAME]
    assert TWIN not in listed  # the twin was shortened (or forgotten)
    twin = [m for m in listed.values() if m["id"] == ids[TWIN]]
    assert not twin or (len(str(twin[0]["content"])) < len(TWIN)
                        and twin[0]["scan_count"] == 60)
    # links out of the pinned node do not decay; the links into it from the twin do
    rows = mem.sparql(f"SELECT ?w WHERE {{ ?l memory:source node:{ids[NAME]} ; "
                      "memory:strength ?w }")
    assert [r["w"] for r in rows] == [FADING.link_initial_strength]  # type: ignore[index]
    assert mem.stats()["pinned"] == 1


def test_without_the_pin_the_same_memory_fades(make_manager) -> None:
    """The control of the test above: nothing but the pin protects NAME."""
    mem = make_manager(config=FADING)
    _two_old_memories(mem)
    _slices(mem, 60)
    assert NAME not in _by_content(mem)
    assert mem.stats()["pinned"] == 0


def test_pin_and_unpin_count_changes_and_ignore_unknown_ids(make_manager) -> None:
    mem = make_manager(config=FADING)
    ids = _two_old_memories(mem)
    unknown = "0" * 32
    assert mem.pin([ids[NAME], unknown, f"node:{ids[NAME].upper()}"]) == 1
    assert mem.pin((ids[NAME],)) == 0  # already pinned
    assert mem.pin([]) == 0
    # stored as SPEC §5.6 v3 says, one xsd:boolean true in the memory graph
    assert mem.sparql(f"ASK {{ node:{ids[NAME]} memory:pinned true }}") is True
    rows = mem.sparql("SELECT ?n WHERE { ?n memory:pinned ?v }")
    assert len(rows) == 1  # type: ignore[arg-type]
    assert [m["pinned"] for m in mem.memories(limit=None)] == [
        m["id"] == ids[NAME] for m in mem.memories(limit=None)]
    assert mem.unpin([ids[TWIN], unknown]) == 0  # not pinned
    assert mem.unpin([ids[NAME]]) == 1
    assert mem.unpin([ids[NAME]]) == 0
    assert mem.sparql("ASK { ?n memory:pinned ?v }") is False
    assert not any(m["pinned"] for m in mem.memories(limit=None))


@pytest.mark.parametrize(
    ("ids", "error"),
    [
        ("0123abcd" * 4, TypeError),  # a bare str is not a list of ids
        (None, TypeError),
        ([1234], TypeError),
        (["not an id!"], ValueError),
        (["0" * 32, "} DELETE WHERE { ?s ?p ?o"], ValueError),  # one bad id: nothing pinned
    ],
)
@pytest.mark.parametrize("method", ["pin", "unpin"])
def test_pin_bad_input_raises_and_stores_nothing(
    mem: MemoryManager, method: str, ids: object, error: type[Exception]
) -> None:
    remember(mem, "stays")
    nid = _ids(mem)["stays"]
    if method == "unpin":
        assert mem.pin([nid]) == 1
    with pytest.raises(error, match="ids|memory id"):
        getattr(mem, method)(ids)
    assert mem.stats()["pending_tasks"] == 0
    assert mem.stats()["pinned"] == (1 if method == "unpin" else 0)


def test_unpin_returns_a_memory_to_normal_decay(make_manager) -> None:
    mem = make_manager(config=FADING)
    ids = _two_old_memories(mem)
    assert mem.pin([ids[NAME], ids[TWIN]]) == 2
    _slices(mem, 30)
    listed = _by_content(mem)
    assert listed[NAME]["scan_count"] == 0 and listed[TWIN]["scan_count"] == 0
    assert mem.unpin([ids[NAME], ids[TWIN]]) == 2
    _slices(mem, 60)
    after = _by_content(mem)
    assert NAME not in after and TWIN not in after  # shortened or forgotten, as any memory
    assert mem.stats()["pinned"] == 0


def test_a_pinned_memory_is_a_seed_of_every_recall(make_manager) -> None:
    mem = make_manager(config=FADING)
    ids = _two_old_memories(mem)
    # out of the focus and out of reach of a walk of depth 0: not recalled from the focus
    assert "Priya" not in mem.recall(["Priya"], entry="focus", depth=0)
    assert mem.pin([ids[NAME]]) == 1
    assert "Priya" in mem.recall(["Priya"], entry="focus", depth=0)
    assert "Priya" in mem.recall(["Priya"], entry="both", depth=0)
    # at path strength 1.0, so a walk goes on from it: the twin is one hop away
    assert "Tomas" in mem.recall(["Tomas"], entry="focus", depth=1)
    assert "Tomas" not in mem.recall(["Tomas"], entry="focus", depth=0)
    # a pinned node that is in the focus too is one seed, recalled once
    remember(mem, "Priya again")
    assert mem.pin([_ids(mem)["Priya again"]]) == 1
    text = mem.recall(["Priya"], entry="focus", depth=0)
    assert text.count("Priya again") == 1 and NAME in text
    assert mem.unpin([ids[NAME]]) == 1
    assert NAME not in mem.recall(["Priya"], entry="focus", depth=0)


def test_the_fixed_pool_never_evicts_a_pinned_memory(make_manager) -> None:
    mem = make_manager(config=FAST.replace(focus_limit=1, max_nodes=4))
    remember(mem, "the WIFI password is kiwi")
    kept = _ids(mem)["the WIFI password is kiwi"]
    assert mem.pin([kept]) == 1
    for i in range(12):
        remember(mem, f"chatter {i}")
    listed = _by_content(mem)
    assert len(listed) == 4  # the pool holds
    assert listed["the WIFI password is kiwi"]["pinned"] is True
    assert "chatter 0" not in listed and "chatter 11" in listed


def test_an_explicit_forget_wins_over_the_pin(make_manager) -> None:
    mem = make_manager(config=FADING)
    ids = _two_old_memories(mem)
    assert mem.pin([ids[NAME]]) == 1
    assert mem.forget([ids[NAME]]) == 1
    assert NAME not in _by_content(mem)
    assert mem.stats()["pinned"] == 0
    assert mem.sparql("ASK { ?n memory:pinned ?v }") is False
    assert "Priya" not in mem.recall(["Priya"], entry="both", depth=3)


# -- forget(purge=True) leaves no trace ---------------------------------------------------------

TOM = "I'm Tom, I live in Leeds"
ECHO = "the Osaka trip is booked"


def _linked_pair(mem: MemoryManager) -> dict[str, str]:
    """TOM, then ECHO linked to it (ECHO → TOM and TOM → ECHO), then the focus moves on."""
    remember(mem, f"{TOM} | {ECHO}")
    remember(mem, "Osaka in spring")
    return _ids(mem)


@pytest.mark.parametrize("purge", [False, True])
def test_forget_with_purge_removes_the_links_into_the_forgotten(
    make_manager, purge: bool
) -> None:
    mem = make_manager(config=FAST.replace(focus_limit=1))
    ids = _linked_pair(mem)
    tom = ids[TOM]
    before = mem.stats()
    assert mem.forget([tom], purge=purge) == 1
    incoming = mem.sparql(f"ASK {{ {{ ?l memory:target node:{tom} }} UNION "
                          f"{{ ?n memory:link node:{tom} }} }}")
    text = mem.recall(["Osaka"], entry="focus", depth=3, max_chars=None)
    both = mem.recall(["Osaka"], entry="both", depth=3, max_chars=None)
    assert "Osaka trip" in text and "Osaka trip" in both
    assert "Leeds" not in text + both
    after = mem.stats()
    if purge:  # no trace: nothing points at it, and recall says nothing of a forgotten memory
        assert incoming is False
        assert after["dangling_links"] == before["dangling_links"] == 0
        assert after["links"] == before["links"] - 2
        for said in (text, both):
            assert "forgotten" not in said and "遗忘" not in said
    else:  # SPEC §5.2: the link from ECHO stays, dangling; the agent knows it once knew
        assert incoming is True
        assert after["dangling_links"] == 1
        assert "forgotten" in text or "遗忘" in text
    # the other links are untouched: ECHO still reaches the focus and back
    assert mem.sparql(f"ASK {{ node:{ids[ECHO]} memory:link node:{ids['Osaka in spring']} }}")


def test_purge_keeps_the_links_between_survivors_and_forgets_many_at_once(
    make_manager,
) -> None:
    mem = make_manager(config=FAST.replace(focus_limit=3))
    remember(mem, "alpha Leeds | beta Leeds | gamma | delta")
    ids = _ids(mem)
    links = mem.stats()["links"]
    # alpha and beta link each other, gamma and delta link them: all of it goes
    assert mem.forget([ids["alpha Leeds"], ids["beta Leeds"]], purge=True) == 2
    stats = mem.stats()
    assert stats["dangling_links"] == 0
    assert mem.sparql("ASK { ?s ?p ?o FILTER(CONTAINS(STR(?o), 'Leeds')) }") is False
    survivors = {ids["gamma"], ids["delta"]}
    rows = mem.sparql("SELECT ?s ?t WHERE { ?l memory:source ?s ; memory:target ?t }")
    ends = {(str(r["s"]).rsplit("/", 1)[1], str(r["t"]).rsplit("/", 1)[1])  # type: ignore[index]
            for r in rows}  # type: ignore[union-attr]
    assert ends and all(s in survivors and t in survivors for s, t in ends)
    assert stats["links"] == len(ends) < links
    assert mem.recall([], entry="focus", depth=3).count("---") == 1  # gamma and delta only


def test_a_pin_survives_export_and_restore(tmp_path: Path) -> None:
    data, other = tmp_path / "data", tmp_path / "other"
    with MemoryManager("src", data_dir=data, config=FADING, model=ScriptedModel()) as mem:
        ids = _two_old_memories(mem)
        assert mem.pin([ids[NAME]]) == 1
    saved = tmp_path / "src.nq"
    saved.write_bytes(backup.export("src", data))
    assert f"<{V.MEMORY}pinned>".encode() in saved.read_bytes()
    backup.restore("copy", saved, other)
    with MemoryManager("copy", data_dir=other, config=FADING, model=ScriptedModel()) as mem:
        assert _by_content(mem)[NAME]["pinned"] is True
        _slices(mem, 40)
        assert _by_content(mem)[NAME]["scan_count"] == 0
        assert "Priya" in mem.recall(["Priya"], entry="focus", depth=0)


@pytest.mark.parametrize("pinned", [True, False])
def test_a_pinned_memory_without_any_link_is_kept(make_manager, pinned: bool) -> None:
    """Importance 0 forgets a node at its next scan (SPEC §5.2 step 3), unless it is pinned."""
    mem = make_manager(config=FAST.replace(focus_limit=1))
    remember(mem, "the first thing said")
    remember(mem, "the second thing said")
    ids = _ids(mem)
    first = ids["the first thing said"]
    assert mem.forget([ids["the second thing said"]], purge=True) == 1  # its links in go too
    assert mem.memories()[0]["importance"] == 0.0 and mem.stats()["focus"] == []
    if pinned:
        assert mem.pin([first]) == 1
    report = mem.run_compression_slice(timeout=60)
    assert report["scanned"] == int(not pinned) and report["forgotten"] == int(not pinned)
    assert [m["id"] for m in mem.memories()] == ([first] if pinned else [])


def test_pin_timeouts_are_checked_before_anything_is_queued(mem: MemoryManager) -> None:
    remember(mem, "my locker code is 4711")
    (node,) = mem.memories()
    for call in (mem.pin, mem.unpin):
        for bad in (1e300, float("inf"), -1):
            with pytest.raises(ValueError, match="timeout"):
                call([node["id"]], timeout=bad)
        with pytest.raises(TypeError, match="timeout"):
            call([node["id"]], timeout="5")  # type: ignore[arg-type]
    assert mem.stats()["pinned"] == 0 and mem.stats()["pending_tasks"] == 0
    assert mem.pin([node["id"]], timeout=30) == 1
