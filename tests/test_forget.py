"""Listing, forgetting on request and time (SPEC §5.6): memories(), forget(ids, purge),
Message.timestamp → memory:saidAt, since/until on recall — on real temporary stores."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from memory_rdf import MemoryManager, Message

from helpers import FAST, ScriptedModel, remember, say, undated

#: Everything here runs on an embedded store and on a SPARQL endpoint (SPEC §8); the
#: byte-level erasure of purge=True is the embedded store's (tests/test_purge.py).
BACKENDS = ("embedded", "endpoint")

ONE_FOCUS = FAST.replace(focus_limit=1)


def said(*contents: str, at: object) -> list[dict[str, object]]:
    return [{"role": "user", "content": c, "timestamp": at} for c in contents]


def by_content(mem: MemoryManager) -> dict[str, dict[str, object]]:
    return {m["content"]: m for m in mem.memories(limit=None)}


def said_at_values(mem: MemoryManager) -> dict[str, datetime]:
    rows = mem.sparql("SELECT ?c ?t WHERE { ?n memory:content ?c ; memory:saidAt ?t }")
    return {r["c"]: r["t"] for r in rows}  # type: ignore[index,union-attr]


# -- Message.timestamp → memory:saidAt ----------------------------------------------------------


def test_every_node_of_a_remember_carries_the_earliest_timestamp(mem: MemoryManager) -> None:
    mem.remember([
        Message("user", "a | b", timestamp="2024-05-01T10:00:00+02:00"),
        Message("assistant", "c", timestamp=datetime(2024, 5, 1, 7, 59)),  # naive = UTC
        Message("user", "d"),  # no timestamp: the others still count
    ])
    remember(mem, "undated")
    earliest = datetime(2024, 5, 1, 7, 59, tzinfo=UTC)
    assert said_at_values(mem) == {"a": earliest, "b": earliest, "c": earliest, "d": earliest}
    assert by_content(mem)["undated"]["said_at"] is None


def test_said_at_survives_the_journal(make_manager, data_dir: Path) -> None:
    broken = ScriptedModel(fail={"segment": -1})
    mem = make_manager(model=broken)
    mem.remember(said("kept for later", at="2023-01-02T03:04:05Z"))
    assert mem.wait_idle(30)
    assert mem.stats()["failed_tasks"] == 1
    mem.close()
    again = make_manager(model=ScriptedModel())  # a fresh process would read the same journal
    assert again.retry_failed() == 1
    assert again.wait_idle(30)
    assert said_at_values(again) == {"kept for later": datetime(2023, 1, 2, 3, 4, 5, tzinfo=UTC)}


@pytest.mark.parametrize(
    ("timestamp", "error"),
    [("yesterday", ValueError), ("2024-13-01", ValueError), (1714550400, TypeError)],
)
def test_bad_timestamps_raise_at_the_call(
    mem: MemoryManager, timestamp: object, error: type[Exception]
) -> None:
    with pytest.raises(error, match="timestamp"):
        mem.remember(said("x", at=timestamp))
    with pytest.raises(error, match="timestamp"):
        Message("user", "x", timestamp=timestamp)  # type: ignore[arg-type]
    assert mem.stats()["pending_tasks"] == 0 and mem.stats()["nodes"] == 0


# -- memories() ---------------------------------------------------------------------------------


def test_memories_lists_newest_first_with_every_field(make_manager) -> None:
    mem = make_manager(config=ONE_FOCUS)
    mem.remember(said("ALPHA first", at="2024-01-01T00:00:00Z"))
    mem.remember(say("BETA second | gamma third"))  # no timestamp: createdAt (now) counts
    listed = mem.memories()  # no wait_idle: it runs after the remembers (per-agent FIFO)
    assert [m["content"] for m in listed] == ["gamma third", "BETA second", "ALPHA first"]
    gamma, beta, alpha = listed
    assert set(gamma) == {
        "id", "content", "phrase", "keywords", "created_at", "said_at", "scan_count",
        "original_length", "importance", "in_focus", "pinned",
    }
    assert alpha["said_at"] == datetime(2024, 1, 1, tzinfo=UTC)
    assert beta["said_at"] is None and isinstance(beta["created_at"], datetime)
    assert beta["keywords"] == ["BETA"] and beta["phrase"] == "BETA secon"
    assert beta["original_length"] == len("BETA second") and beta["scan_count"] == 0
    assert [m["in_focus"] for m in listed] == [True, False, False]
    # importance = the sum of the node's live links, in and out (SPEC §5.2 step 2), as SPARQL
    for m in listed:
        n = f"node:{m['id']}"
        rows = mem.sparql(
            f"SELECT (SUM(?w) AS ?i) WHERE {{ {{ ?l memory:source {n} }} UNION "
            f"{{ ?l memory:target {n} }} ?l memory:strength ?w }}"
        )
        total = rows[0].get("i", 0.0)  # type: ignore[index,union-attr]
        assert m["importance"] == pytest.approx(total)
    assert beta["importance"] == pytest.approx(0.5 + 0.5 + 1.0 + 1.0)


def test_memories_filters_and_pages(mem: MemoryManager) -> None:
    mem.remember(said("the CAT sleeps", at="2020-06-01"))
    mem.remember(said("a dog barks | cat food", at="2021-06-01"))
    mem.remember(said("nothing here", at="2022-06-01"))
    contents = lambda ms: [m["content"] for m in ms]  # noqa: E731
    assert contents(mem.memories(["cat"])) == ["cat food", "the CAT sleeps"]
    assert contents(mem.memories(["Cat", "nothing"])) == [
        "nothing here", "cat food", "the CAT sleeps"
    ]
    # one remember, one said time: the later segment (created later) first
    assert contents(mem.memories(since="2021-01-01", until="2022-01-01")) == [
        "cat food", "a dog barks"
    ]
    # since is inclusive, until exclusive; aware datetimes in any zone compare as instants
    plus_two = timezone(timedelta(hours=2))
    assert contents(mem.memories(since=datetime(2022, 6, 1, 2, tzinfo=plus_two))) == [
        "nothing here"
    ]
    assert contents(mem.memories(until="2020-06-01T00:00:00Z")) == []
    everything = contents(mem.memories(limit=None))
    assert len(everything) == 4
    assert contents(mem.memories(limit=2)) == everything[:2]
    assert contents(mem.memories(limit=2, offset=2)) == everything[2:]
    assert mem.memories(offset=10) == []


@pytest.mark.parametrize(
    ("kwargs", "error", "field"),
    [
        ({"keywords": "cat"}, TypeError, "keywords"),
        ({"keywords": [3]}, TypeError, "keywords"),
        ({"since": "last week"}, ValueError, "since"),
        ({"until": 20240101}, TypeError, "until"),
        ({"since": "2024-02-01", "until": "2024-01-01"}, ValueError, "since"),
        ({"limit": 0}, ValueError, "limit"),
        ({"limit": True}, TypeError, "limit"),
        ({"offset": -1}, ValueError, "offset"),
        ({"offset": 1.5}, TypeError, "offset"),
    ],
)
def test_memories_bad_input_raises_at_the_call(
    mem: MemoryManager, kwargs: dict[str, object], error: type[Exception], field: str
) -> None:
    with pytest.raises(error, match=field):
        mem.memories(**kwargs)  # type: ignore[arg-type]


# -- since / until on recall --------------------------------------------------------------------


def test_recall_returns_only_the_range_but_walks_through_the_rest(make_manager) -> None:
    mem = make_manager(config=ONE_FOCUS)
    # one focus node: each remember links to the previous one, so the walk from the newest
    # goes new → middle → old
    mem.remember(said("old memory", at="2024-03-01"))
    mem.remember(said("middle memory", at="2020-03-01"))
    mem.remember(said("new memory", at="2025-03-01"))
    assert mem.wait_idle(30)
    everything = mem.recall(["memory"], depth=2)
    assert everything.count("[memory ") == 3
    recent = mem.recall(["memory"], depth=2, since="2023-01-01")
    assert "middle" not in recent  # outside the range: not returned ...
    assert "old memory" in recent and "new memory" in recent  # ... but walked through
    assert mem.recall(["memory"], depth=2, until=datetime(2021, 1, 1)) == (
        "[memory 2020-03-01] middle memory"  # dated by when it was said (SPEC §5.4 v3)
    )
    assert mem.recall_async(["memory"], since="2026-01-01").result(30) == ""
    with pytest.raises(ValueError, match="until"):
        mem.recall(["memory"], until="soon")


def test_arecall_takes_the_range(make_manager) -> None:
    import asyncio

    mem = make_manager(config=ONE_FOCUS)
    mem.remember(said("dated memory", at="2024-03-01"))
    text = asyncio.run(mem.arecall(["memory"], since="2024-01-01", until="2024-06-01"))
    assert undated(text) == "[memory] dated memory"


# -- forget() -----------------------------------------------------------------------------------


def _ids(mem: MemoryManager) -> dict[str, str]:
    return {m["content"]: m["id"] for m in mem.memories(limit=None)}  # type: ignore[misc]


def test_forgotten_memory_is_gone_from_recall_memories_and_sparql(make_manager) -> None:
    mem = make_manager(config=ONE_FOCUS)
    remember(mem, "I live at 42 Wallaby Way | my cat is Miso")
    remember(mem, "we talked about cats")
    ids = _ids(mem)
    address = ids["I live at 42 Wallaby Way"]
    before = mem.stats()
    assert mem.forget([address]) == 1
    assert "Wallaby" not in mem.recall([], depth=3)
    assert "Wallaby" not in str(mem.memories(limit=None))
    assert mem.sparql(f"ASK {{ node:{address} ?p ?o }}") is False
    assert mem.sparql("ASK { ?s ?p ?o FILTER(CONTAINS(STR(?o), 'Wallaby')) }") is False
    # its outgoing links went; the link into it from "my cat is Miso" stays, dangling
    assert mem.sparql(f"ASK {{ ?l memory:source node:{address} }}") is False
    assert mem.sparql(f"ASK {{ ?l memory:target node:{address} }}") is True
    after = mem.stats()
    assert after["nodes"] == before["nodes"] - 1
    assert after["dangling_links"] == before["dangling_links"] + 1
    # the agent still knows it once knew something
    assert "is still linked to a memory I have forgotten" in mem.recall(["Miso"], depth=3)


def test_forget_leaves_the_focus_counts_only_known_ids_and_takes_iris(mem: MemoryManager) -> None:
    remember(mem, "one | two | three")
    ids = _ids(mem)
    assert mem.stats()["focus"][0] == ids["three"]
    unknown = "0" * 32
    forgotten = mem.forget([ids["three"], f"node:{ids['two']}", ids["three"], unknown])
    assert forgotten == 2  # the repeated id once, the unknown one not at all
    assert mem.stats()["focus"] == [ids["one"]]
    assert mem.forget([ids["three"]]) == 0  # already forgotten: unknown now
    assert mem.forget([]) == 0
    assert mem.forget((f"https://w3id.org/memory-rdf/node/{ids['one']}",)) == 1
    assert mem.stats()["nodes"] == 0 and undated(mem.recall([])) == ""


@pytest.mark.parametrize(
    ("ids", "purge", "error"),
    [
        ("0123abcd", False, TypeError),  # a bare str is not a list of ids
        ([1234], False, TypeError),
        (["not an id!"], False, ValueError),
        (["<x> } DELETE WHERE { ?s ?p ?o"], False, ValueError),
        ([""], False, ValueError),
        # strings no id of this library can be (32 hex digits): bad input, not unknown ids
        (["not-an-id"], False, ValueError),
        (["0123abcd"], False, ValueError),
        (["0" * 31 + "g"], False, ValueError),
        (["0" * 33], False, ValueError),
        (["node:" + "0" * 32 + "\n" + "0" * 32], False, ValueError),
        ([("0" * 32)] * 2 + ["missing"], False, ValueError),  # one bad id: nothing forgotten
        (None, False, TypeError),
        (["0" * 32], "yes", TypeError),
    ],
)
def test_forget_bad_input_raises_and_queues_nothing(
    mem: MemoryManager, ids: object, purge: object, error: type[Exception]
) -> None:
    remember(mem, "stays")
    with pytest.raises(error) as raised:
        mem.forget(ids, purge=purge)  # type: ignore[arg-type]
    if error is ValueError:  # the message says what an id looks like
        assert "is not a memory id: ids are 32 hex digits" in str(raised.value)
    assert mem.stats()["pending_tasks"] == 0 and mem.stats()["nodes"] == 1


def test_forget_takes_an_id_in_any_case(mem: MemoryManager) -> None:
    """Ids are hex: an id in upper case (as some tools print hex) is the same id, not an
    unknown one; given in both cases it counts once."""
    remember(mem, "one | two")
    ids = _ids(mem)
    assert ids["one"] == ids["one"].lower()
    assert mem.forget([ids["one"].upper(), ids["one"], f"node:{ids['one'].upper()}"]) == 1
    assert mem.forget([f"https://w3id.org/memory-rdf/node/{ids['two'].upper()}"]) == 1
    assert mem.stats()["nodes"] == 0


def test_forget_runs_after_the_agents_earlier_tasks(make_manager) -> None:
    slow = ScriptedModel(delay=0.2)
    mem = make_manager(model=slow)
    remember(mem, "first")
    first = _ids(mem)["first"]
    mem.remember(say("second"))  # still being processed when forget is called
    assert mem.forget([first]) == 1
    # forget waited for the remember queued before it, without wait_idle
    assert [m["content"] for m in mem.memories()] == ["second"]


def test_compression_after_forget_keeps_the_store_consistent(make_manager) -> None:
    mem = make_manager(config=FAST.replace(focus_limit=1, decay_rate=0.5))
    remember(mem, "aaaa aaaa aaaa | bbbb bbbb bbbb | cccc cccc cccc | dddd")
    ids = _ids(mem)
    assert mem.forget([ids["bbbb bbbb bbbb"]]) == 1
    for _ in range(6):
        mem.run_compression_slice(timeout=30)
    assert mem.sparql(f"ASK {{ node:{ids['bbbb bbbb bbbb']} ?p ?o }}") is False
