"""The durable task journal and store metadata, in named graphs (SPEC §2, §5.1).

A remember is journalled (one ``update()``) before ``remember()`` returns and is removed in the
same atomic write that lands the memory, so a crash at any instant either leaves the task in
the journal (processed at the next ``initialize()``) or the whole memory in the store.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from memory_rdf import _vocab as V
from memory_rdf._exceptions import SchemaVersionError, StoreError
from memory_rdf._oxigraph import (
    AgentStore,
    MemoryStore,
    Row,
    Term,
    WriteBatch,
    iri_ref,
    lit,
    render,
    triple,
)
from memory_rdf._oxigraph.integrity import first_problem


@dataclass
class JournalTask:
    id: str
    seq: int
    text: str
    status: str  # "pending" | "failed"
    attempts: int = 0
    error: str = ""
    accepted_at: datetime | None = None
    said_at: datetime | None = None  # earliest message timestamp → the nodes' saidAt (§5.6)


def task_ref(task_id: str) -> Term:
    return iri_ref(V.TASK + task_id)


def unreadable(store: MemoryStore, what: str) -> StoreError:
    """The error for a store whose data this library cannot read (a value of the wrong type,
    written by hand or by a backup from elsewhere), naming a triple that shows it when the
    store is embedded (issue 33 F7)."""
    problem = None
    if isinstance(store, AgentStore):
        with contextlib.suppress(Exception):
            problem = first_problem(store.store, 2**62)  # any length: only the data's form
    return StoreError(
        f"the memory store {store.location} holds data memory_rdf cannot read: "
        f"{problem or what}; it is left untouched (restore a backup of the agent, or "
        "export it and correct the data)"
    )


class Journal:
    def __init__(self, store: MemoryStore) -> None:
        self._store = store
        last = store.scalar(store.render("journal_last_seq"), 0)
        if not isinstance(last, int) or isinstance(last, bool):
            raise unreadable(store, f"a journalled task's memory:taskSeq {last!r}")
        self._seq = last

    def add(self, text: str, said_at: datetime | None = None,
            task_id: str | None = None) -> JournalTask:
        """Write a pending task durably (one update) and return it (``task_id``: its id,
        chosen by the caller, else a new one)."""
        self._seq += 1
        task = JournalTask(task_id or uuid.uuid4().hex, self._seq, text, "pending", 0, "",
                           _now(), said_at)
        batch = WriteBatch()
        # Not after a withdrawal of the same task (a SPARQL server that did not answer in
        # time may run this write after the one that withdrew it: see :meth:`withdraw`).
        batch.insert_unless(self._triples(task), V.JOURNAL_GRAPH, _withdrawn(task.id))
        self._store.commit(batch)
        return task

    def _triples(self, task: JournalTask) -> list[str]:
        t = task_ref(task.id)
        out = [
            triple(t, V.A, V.m("Task")),
            triple(t, V.m("taskSeq"), lit(task.seq)),
            triple(t, V.m("taskText"), lit(task.text)),
            triple(t, V.m("taskStatus"), lit(task.status)),
            triple(t, V.m("attempts"), lit(task.attempts)),
        ]
        if task.accepted_at is not None:
            out.append(triple(t, V.m("acceptedAt"), lit(task.accepted_at)))
        if task.error:
            out.append(triple(t, V.m("lastError"), lit(task.error)))
        if task.said_at is not None:
            out.append(triple(t, V.m("taskSaidAt"), lit(task.said_at)))
        return out

    def remove(self, batch: WriteBatch, task_id: str) -> None:
        """Add the task's removal to ``batch`` (the write that lands the memory)."""
        batch.update("remove_task", task=task_ref(task_id))

    def discard(self, task_id: str) -> None:
        batch = WriteBatch()
        self.remove(batch, task_id)
        self._store.commit(batch)

    def withdraw(self, task_id: str) -> None:
        """Take back a task whose :meth:`add` was refused (a SPARQL endpoint that did not answer
        within ``store_timeout``, SPEC §8 v3): its triples are removed and a mark
        (``memory:taskStatus "withdrawn"``, on its own) stays in their place, in one update.
        The server may still run the unanswered write, and in any order with this one (it
        answers requests in parallel): an :meth:`add` run after the mark inserts nothing,
        and a task that has the mark is not read (:meth:`tasks`, :meth:`count`)."""
        batch = WriteBatch()
        self.remove(batch, task_id)
        batch.insert([_withdrawn(task_id)], graph=V.JOURNAL_GRAPH)
        self._store.commit(batch)

    def mark_failed(self, task: JournalTask, error: str) -> None:
        task.status, task.error = "failed", error
        batch = WriteBatch()
        self.remove(batch, task.id)
        batch.insert(self._triples(task), graph=V.JOURNAL_GRAPH)
        self._store.commit(batch)

    def requeue(self, task: JournalTask) -> None:
        """Make a failed task pending again, in one update (nothing is lost on a crash)."""
        task.status, task.attempts, task.error = "pending", 0, ""
        batch = WriteBatch()
        self.remove(batch, task.id)
        batch.insert(self._triples(task), graph=V.JOURNAL_GRAPH)
        self._store.commit(batch)

    @property
    def last_seq(self) -> int:
        """The sequence number of the newest task journalled so far."""
        return self._seq

    def cut_texts(self, batch: WriteBatch, texts: Sequence[str],
                  accepted_by: int | None = None) -> int:
        """Add to ``batch``: every failed task's text, and every pending one's accepted up to
        sequence number ``accepted_by`` (None: none), with each of ``texts`` cut out, and
        each message of theirs (a node's content is one or more "role: message" lines, and
        the same message may sit in a task of other wording) — a message left empty is
        dropped, and a task left with no message: forget(purge=True) leaves none of a
        forgotten text in the journal (SPEC §5.6, issue 33 F9). A pending task accepted
        after the forget is a remember of its text anew. Returns how many changed."""
        changed = 0
        needles = _needles(texts)
        for task in self.tasks():
            if task.status == "pending" and (accepted_by is None or task.seq > accepted_by):
                continue
            text = task.text
            for needle in needles:
                text = text.replace(needle, "")
            if text == task.text:
                continue
            changed += 1
            self.remove(batch, task.id)
            # one "role: content" line per message (SPEC §4): drop the lines left empty
            lines = [ln for ln in text.split("\n") if ln.partition(": ")[2].strip()]
            if lines:
                task.text = "\n".join(lines)
                batch.insert(self._triples(task), graph=V.JOURNAL_GRAPH)
        return changed

    def tasks(self, status: str | None = None) -> list[JournalTask]:
        rows = self._store.rows(self._store.render("journal_tasks"))
        out = [
            JournalTask(t[len(V.TASK):], seq, text, st, att, err or "", at, said)
            for t, seq, text, st, att, err, at, said in rows
        ]
        for task in out:
            if not (isinstance(task.seq, int) and isinstance(task.text, str)
                    and task.status in ("pending", "failed") and isinstance(task.attempts, int)
                    and isinstance(task.error, str)
                    and all(d is None or isinstance(d, datetime)
                            for d in (task.accepted_at, task.said_at))):
                raise unreadable(self._store, f"the journalled task <{V.TASK}{task.id}>")
        return [t for t in out if status is None or t.status == status]

    def count(self, status: str) -> int:
        return int(self._store.scalar(self._store.render("journal_count", status=lit(status)), 0))


def _withdrawn(task_id: str) -> str:
    """The mark a withdrawn task leaves in the journal (:meth:`Journal.withdraw`)."""
    return triple(task_ref(task_id), V.m("taskStatus"), lit(WITHDRAWN))


#: The ``memory:taskStatus`` of a withdrawn task's mark.
WITHDRAWN = "withdrawn"


def _needles(texts: Sequence[str]) -> list[str]:
    """What a purge cuts out of journalled tasks: each text, and each of its lines without
    its "role: " (the message as a task of other wording holds it), longest first."""
    found: set[str] = set()
    for text in texts:
        if text.strip():
            found.add(text)
        for line in text.split("\n"):
            for piece in (line, line.partition(": ")[2]):
                if piece.strip():
                    found.add(piece.strip())
    return sorted(found, key=len, reverse=True)


def refuse_foreign(store: MemoryStore, metadata: list[Row] | None = None) -> None:
    """:class:`SchemaVersionError` for an embedded Oxigraph store that memory_rdf did not
    write: data, but neither our metadata nor any memory (issue 17: it was adopted, called
    "pre-release memory_rdf", listed by ``stats`` and passed by ``validate``)."""
    if store.path is None:
        return  # an endpoint's other graphs are other agents'
    if metadata is None:
        metadata = store.rows(store.render("store_metadata"))
    if (not metadata and store.ask(render("any_data"))
            and not store.ask(render("any_memory_content"))):
        raise SchemaVersionError(
            f"{store.location} is an Oxigraph store that memory_rdf did not write (it holds "
            "RDF data but no memory_rdf metadata); it is left untouched: choose another "
            "agent id or data directory"
        )


class Metadata:
    """Schema version, agent id, creation time, last createdAt, kept in the meta graph."""

    def __init__(self, store: MemoryStore, agent_id: str) -> None:
        self._store = store
        s = f"<{V.META_SUBJECT}>"
        rows = self._store.rows(self._store.render("store_metadata"))
        self.node_sequence = 0
        if not rows:
            self.last_created_at: datetime | None = None
            refuse_foreign(store, rows)
            if store.ask(render("any_memory")):
                # Memories but no metadata: written before schema version 1 existed.
                raise SchemaVersionError(
                    f"the memory store {store.location} has memories but no schema metadata "
                    f"(schema version 0, from a pre-release memory_rdf); this one reads version "
                    f"{V.SCHEMA_VERSION} and has no migration for it: export it "
                    "(memory-rdf export AGENT) and remember its contents into a new agent"
                )
            if not store.read_only:
                batch = WriteBatch()
                batch.insert(
                    [
                        triple(s, V.A, V.m("StoreMetadata")),
                        triple(s, V.m("schemaVersion"), lit(V.SCHEMA_VERSION)),
                        triple(s, V.m("agentId"), lit(agent_id)),
                        triple(s, V.m("createdAt"), lit(_now())),
                    ],
                    graph=V.META_GRAPH,
                )
                store.commit(batch)
            return
        version, _agent, last, seq = rows[0]
        if not isinstance(version, int) or not isinstance(seq or 0, int) or not (
                last is None or isinstance(last, datetime)):
            raise unreadable(store, f"the store's metadata ({version!r}, {last!r}, {seq!r})")
        self.node_sequence = int(seq or 0)
        if int(version) > V.SCHEMA_VERSION:
            raise SchemaVersionError(
                f"the memory store {store.location} was written by a newer memory_rdf "
                f"(schema version {version}, this one reads {V.SCHEMA_VERSION}); upgrade memory-rdf"
            )
        if int(version) < V.SCHEMA_VERSION:
            # No older schema version was ever released; a migration from one would go here.
            raise SchemaVersionError(
                f"the memory store {store.location} has schema version {version}, older than the "
                f"version {V.SCHEMA_VERSION} this memory_rdf reads, and no migration exists for "
                "it: export it (memory-rdf export AGENT) and remember its contents into a new agent"
            )
        self.last_created_at = last

    def record_creation(self, batch: WriteBatch, last_created_at: datetime, sequence: int) -> None:
        """Add to ``batch``: the newest createdAt and creation sequence number handed out."""
        s = f"<{V.META_SUBJECT}>"
        batch.update("clear_creation_marks")
        batch.insert(
            [
                triple(s, V.m("lastCreatedAt"), lit(last_created_at)),
                triple(s, V.m("nodeSequence"), lit(sequence)),
            ],
            graph=V.META_GRAPH,
        )
        self.last_created_at = last_created_at
        self.node_sequence = sequence


def _now() -> datetime:
    return datetime.now(UTC)
