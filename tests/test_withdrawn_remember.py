"""A remember refused because a SPARQL endpoint did not answer in time (SPEC §8 v3) is
withdrawn, and stays withdrawn whatever order the server runs the two writes in.

The refused journal write may still be waiting in the server (stopped, or only slow), and a
server answers requests in parallel: the write that withdraws it may run first. CI met it: a
refused remember was run after all (``tests/test_store_timeout.py``). Here each order is made
on purpose, with the journal's own writes, on an embedded store and on real servers.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from pyoxigraph import Literal

from memory_rdf import MemoryManager
from memory_rdf._journal import Journal
from memory_rdf._oxigraph import WriteBatch

from helpers import remember

BACKENDS = ("embedded", "endpoint")


def _holds(mem: MemoryManager, text: str) -> bool:
    """Whether any graph of the store holds ``text`` as an object (the journal included)."""
    return mem.store.ask(f"ASK {{ GRAPH ?g {{ ?s ?p {Literal(text)} }} }}")


def test_a_journal_write_the_server_runs_after_its_withdrawal_stores_nothing(
    make_manager: Callable[..., MemoryManager],
) -> None:
    mem = make_manager()
    journal = Journal(mem.store)
    late = uuid.uuid4().hex
    journal.withdraw(late)
    journal.add("user: the late write", task_id=late)  # what the server ran last
    assert not _holds(mem, "user: the late write")
    assert mem.pending_remembers() == 0
    assert journal.tasks() == []


def test_a_journal_write_that_landed_before_its_withdrawal_is_removed(
    make_manager: Callable[..., MemoryManager],
) -> None:
    mem = make_manager()
    journal = Journal(mem.store)
    early = journal.add("user: the early write").id
    assert mem.pending_remembers() == 1
    journal.withdraw(early)
    assert not _holds(mem, "user: the early write")
    assert mem.pending_remembers() == 0


def test_a_task_written_beside_its_withdrawal_mark_is_neither_counted_nor_run(
    make_manager: Callable[..., MemoryManager],
) -> None:
    # Both writes ran at once, neither seeing the other: the task and the mark are both there.
    mem = make_manager()
    remember(mem, "what was accepted")
    journal = Journal(mem.store)
    task = journal.add("user: refused yet written")
    journal.withdraw(task.id)
    both = WriteBatch()
    both.insert(journal._triples(task), graph="https://w3id.org/memory-rdf/graph/journal")
    mem.store.commit(both)
    assert _holds(mem, "user: refused yet written")
    assert mem.pending_remembers() == 0
    assert mem.stats()["pending_tasks"] == 0
    assert [t.text for t in journal.tasks()] == []
    mem.close(timeout=10)
    # Opened again (an embedded store's journal is checked as it opens), nothing of it runs.
    again = make_manager()
    assert again.wait_idle(30)
    contents = {r["c"] for r in again.sparql(  # type: ignore[index]
        "SELECT ?c WHERE { ?n memory:content ?c }")}
    assert contents == {"what was accepted"}
    assert again.pending_remembers() == 0
