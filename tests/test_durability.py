"""Durability and robustness (SPEC §2, §4, §5.1, §5.3, §7): crashes, kill -9, store locks,
close(timeout), failed tasks, faulty models, many threads, schema versions.

Crash tests run the agent in a child Python process (``sys.executable -c``) so that the
process can really die — ``os._exit`` or SIGKILL — and the parent then opens the same store.

**How the kill -9 check stays exact.** The child remembers uniquely marked texts and prints a
marker only after ``remember()`` returned, so every printed marker must end up either as a
node of the store or as a task in the journal (never both, never neither). Compression must
therefore never forget or garble a *marker* node, while it still does real work all the
time (forgetting, shortening, rewriting strengths and scan counts) that a kill can cut into.
The config makes that provable rather than likely:

* ``decay_rate=1.0``: a link's strength never changes, and a link only disappears when its
  source node is forgotten. So a node's *outgoing* links are permanent while it lives.
* A warm-up remember of two segments fills the focus (``focus_limit=2``) before any marker,
  and focus nodes are never forgotten, so every marker node is created with two outgoing
  focus links of strength 0.1: its importance is at least 0.2 for the rest of its life.
* Marker texts are 100 characters, marker first: the compression target is at least
  floor(100 × 0.2) = 20 ≥ ``delete_threshold`` (5), so a marker node is never forgotten, and
  the scripted model shortens by keeping a prefix, so the ≤ 10-character marker survives any
  number of compressions.
* Filler remembers of 2-character segments ("ab | cd | ef") have a target of at most 2 < 5:
  each is forgotten at its first scan, which cuts links into marker nodes (their importance
  drops, so they get shortened again) and leaves dangling links behind.
"""

from __future__ import annotations

import collections
import json
import os
import queue
import random
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pyoxigraph as ox
import pytest

from memory_rdf import (
    Config,
    MemoryManager,
    MemorySystem,
    Processed,
    QueueFullError,
    SchemaVersionError,
    StoreLockedError,
)
from memory_rdf._inspect import inspect_agent, inspect_stats, validate
from memory_rdf._journal import Journal
from memory_rdf._oxigraph import AgentStore, node_id
from memory_rdf._vocab import SCHEMA_VERSION

from helpers import FAST, ScriptedModel, say, undated

ROOT = Path(__file__).resolve().parent.parent
NODE = "https://w3id.org/memory-rdf/node/"
LINK = "https://w3id.org/memory-rdf/link/"
FOCUS = "https://w3id.org/memory-rdf/focus"
META_GRAPH = "https://w3id.org/memory-rdf/graph/meta"
META_SUBJECT = "https://w3id.org/memory-rdf/store"
MEMORY = "https://w3id.org/memory-rdf/ontology#"

#: Rounds of the kill -9 test and seconds of the thread stress test (env-overridable).
KILL_ROUNDS = int(os.environ.get("MEMORY_RDF_KILL_ROUNDS", "8"))
STRESS_SECONDS = float(os.environ.get("MEMORY_RDF_STRESS_SECONDS", "20"))


# ---------------------------------------------------------------------------------------------
# Child processes
# ---------------------------------------------------------------------------------------------


def child_env() -> dict[str, str]:
    """The parent's environment with the repo root (for memory_rdf) and tests/ (for helpers)
    on PYTHONPATH, both computed from this file's location."""
    env = dict(os.environ)
    paths = [str(ROOT), str(ROOT / "tests")]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["PYTHONUNBUFFERED"] = "1"
    return env


class Child:
    """A child Python process whose stdout lines are collected by a reader thread."""

    def __init__(self, script: str, *args: object, stdin: bool = False) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", script, *map(str, args)],
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=child_env(),
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.complete: list[str] = []  # every whole line read so far
        self.err: list[str] = []
        self._readers = [
            threading.Thread(target=self._read_out, daemon=True),
            threading.Thread(target=self._read_err, daemon=True),
        ]
        for t in self._readers:
            t.start()

    def _read_out(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.endswith("\n"):  # a line cut by a kill is not a line the child printed
                self.complete.append(line.rstrip("\n"))
                self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.err.append(line)

    def expect(self, wanted: str, timeout: float = 30.0) -> None:
        """Wait until the child printed the line ``wanted`` (now or earlier)."""
        deadline = time.monotonic() + timeout
        while wanted not in self.complete:
            remaining = deadline - time.monotonic()
            try:
                line = self.lines.get(timeout=max(remaining, 0.001))
            except queue.Empty:
                self.fail(f"child did not print {wanted!r} within {timeout} s")
            if line is None and wanted not in self.complete:
                self.fail(f"child ended before printing {wanted!r}")

    def send(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def kill9(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.finish()

    def finish(self, timeout: float = 30.0) -> int:
        rc = self.proc.wait(timeout)
        for t in self._readers:
            t.join(timeout)
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()
        return rc

    def fail(self, message: str) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.finish()
        pytest.fail(f"{message}; child stderr:\n{''.join(self.err)[-4000:]}")


PRELUDE = """
import json, os, random, sys, threading, time
from memory_rdf import Config, MemoryManager, QueueFullError
from helpers import ScriptedModel
data_dir = sys.argv[1]
config = Config(**json.loads(sys.argv[2]))
"""

FAST_KW: dict[str, Any] = {
    "retry_initial_delay": 0.0,
    "retry_max_delay": 0.0,
    "max_retries": 2,
    "auto_compress": False,
}


# ---------------------------------------------------------------------------------------------
# Store checks
# ---------------------------------------------------------------------------------------------


def network_invariants(store: AgentStore, focus_limit: int) -> None:
    """The structure every crash must leave whole (SPEC §2, §5.2), checked by SPARQL."""
    orphans = store.rows(
        "SELECT ?l WHERE { ?l a memory:Link ; memory:source ?s "
        "FILTER NOT EXISTS { ?s a memory:Node } }"
    )
    assert orphans == [], f"links whose source is not a node: {orphans[:5]}"
    links = store.rows(
        "SELECT ?l ?s ?t WHERE { ?l a memory:Link "
        "OPTIONAL { ?l memory:source ?s } OPTIONAL { ?l memory:target ?t } }"
    )
    per_link = collections.Counter(row[0] for row in links)
    assert all(n == 1 for n in per_link.values()), "a link with several sources/targets"
    pairs = set()
    for iri, s, t in links:
        assert s is not None and t is not None, f"link {iri} lacks source or target"
        assert iri == f"{LINK}{node_id(s)}--{node_id(t)}", f"link {iri} is not {s}→{t}"
        pairs.add((s, t))
    shortcuts = set(store.rows("SELECT ?a ?b WHERE { ?a memory:link ?b }"))
    assert shortcuts == pairs, (
        f"shortcuts without link: {list(shortcuts - pairs)[:3]}, "
        f"links without shortcut: {list(pairs - shortcuts)[:3]}"
    )
    focus = store.rows(f"SELECT ?n WHERE {{ <{FOCUS}> memory:member ?n }}")
    assert len(focus) <= focus_limit, focus
    not_nodes = store.rows(
        f"SELECT ?n WHERE {{ <{FOCUS}> memory:member ?n "
        "FILTER NOT EXISTS { ?n a memory:Node ; memory:focusOrder ?o } }"
    )
    assert not_nodes == [], f"focus members that are not nodes: {not_nodes}"
    contentless = store.rows(
        "SELECT ?n WHERE { ?n a memory:Node FILTER NOT EXISTS { ?n memory:content ?c } }"
    )
    assert contentless == [], f"nodes without content: {contentless[:5]}"
    half_forgotten = store.rows(
        f'SELECT DISTINCT ?n WHERE {{ ?n ?p ?o FILTER(STRSTARTS(STR(?n), "{NODE}")) '
        "FILTER NOT EXISTS { ?n a memory:Node } }"
    )
    assert half_forgotten == [], f"triples left of forgotten nodes: {half_forgotten[:5]}"


def assert_conforms(store: AgentStore) -> None:
    conforms, report = validate(store)
    assert conforms, report


def select(mem: MemoryManager, query: str) -> list[dict[str, Any]]:
    """``mem.sparql`` for a SELECT: its rows."""
    rows = mem.sparql(query)
    assert isinstance(rows, list)
    return rows  # type: ignore[return-value]


def contents(store: AgentStore) -> list[str]:
    return [r[0] for r in store.rows("SELECT ?c WHERE { ?n a memory:Node ; memory:content ?c }")]


def dump_quads(path: Path) -> set[str]:
    store = ox.Store.read_only(str(path))
    try:
        return {str(q) for q in store}
    finally:
        del store


# ---------------------------------------------------------------------------------------------
# 1. A remember is durable once remember() returns (SPEC §5.1 last paragraph)
# ---------------------------------------------------------------------------------------------

EXIT_AFTER_REMEMBER = PRELUDE + """
class Slow(ScriptedModel):
    def segment(self, text):
        time.sleep(5)  # the task cannot have run before os._exit below
        return super().segment(text)

mem = MemoryManager("durable", data_dir=data_dir, config=config, model=Slow())
mem.initialize()
for text in json.loads(sys.argv[3]):
    mem.remember([{"role": "user", "content": text}])
os._exit(0)
"""

KILLED_IN_SEGMENT = PRELUDE + """
class Blocked(ScriptedModel):
    def segment(self, text):
        os.write(1, b"segmenting\\n")  # one write: this thread races the main one
        threading.Event().wait()  # never returns
        return []

mem = MemoryManager("durable", data_dir=data_dir, config=config, model=Blocked())
mem.initialize()
for text in json.loads(sys.argv[3]):
    mem.remember([{"role": "user", "content": text}])
os.write(1, b"accepted\\n")
threading.Event().wait()
"""


DURABLE = [
    "the durable launch code is 0451",
    "then the vault moved to Oslo",
    "and the backup key went to Lena",
]


def _recover_durable(data_dir: Path) -> None:
    # The tasks are in the journal, in order, and not in the network, before anyone runs them.
    store = AgentStore(data_dir / "durable")
    try:
        tasks = Journal(store).tasks()
        assert [(t.text, t.status) for t in tasks] == [(f"user: {d}", "pending") for d in DURABLE]
        assert contents(store) == []
    finally:
        store.close()
    with MemoryManager("durable", data_dir=data_dir, config=FAST, model=ScriptedModel()) as mem:
        assert mem.wait_idle(30)
        assert undated(mem.recall(["launch code"])) == f"[memory] {DURABLE[0]}"
        assert mem._journal.tasks() == []
        rows = select(mem, "SELECT ?c ?t WHERE { ?n memory:content ?c ; memory:createdAt ?t }")
        order = [r["c"] for r in sorted(rows, key=lambda r: r["t"])]
        assert order == DURABLE  # processed in the order they were accepted
    with MemoryManager("durable", data_dir=data_dir, config=FAST, model=ScriptedModel()) as mem:
        assert mem.wait_idle(30)
        assert mem.stats()["nodes"] == len(DURABLE)  # processed once, not again


def test_remember_survives_process_exit_before_processing(data_dir: Path) -> None:
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", EXIT_AFTER_REMEMBER, str(data_dir), json.dumps(FAST_KW),
         json.dumps(DURABLE)],
        env=child_env(), capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - start < 5  # it exited while segment() was still sleeping
    _recover_durable(data_dir)


def test_remember_survives_kill_during_segmentation(data_dir: Path) -> None:
    child = Child(KILLED_IN_SEGMENT, data_dir, json.dumps(FAST_KW), json.dumps(DURABLE))
    child.expect("accepted")
    child.expect("segmenting")
    child.kill9()
    assert child.proc.returncode == -signal.SIGKILL
    _recover_durable(data_dir)


# ---------------------------------------------------------------------------------------------
# 2. kill -9 at random moments while remembering and compressing
# ---------------------------------------------------------------------------------------------

KILL_CONFIG: dict[str, Any] = {
    "focus_limit": 2,
    "decay_rate": 1.0,
    "focus_link_strength": 0.1,
    "link_initial_strength": 0.5,
    "delete_threshold": 5,
    "compression_batch_size": 25,
    "retry_initial_delay": 0.0,
    "retry_max_delay": 0.0,
    "max_retries": 1,
    "max_queue_size": 32,
    "auto_compress": True,
}
MARKER = re.compile(r"\bM\d+-\d{5}\b")
PAD = " ".join(["memory"] * 20)  # markers are cut to 100 characters below

LOOP_UNTIL_KILLED = PRELUDE + """
round_ = int(sys.argv[3])
rng = random.Random(round_)
# A slightly slow model (3 ms a call) keeps the store small enough to validate quickly
# while the queue still backs up in the rounds that flood it.
model = ScriptedModel(delay=0.003)
mem = MemoryManager("crash", data_dir=data_dir, config=config, model=model)
mem.initialize()  # resumes what the previous round left in the journal
print("ready", flush=True)
pause = rng.choice([0.0, 0.005, 0.02])  # some rounds flood the queue, some let slices run
i = 0
while True:
    marker = f"M{round_}-{i:05d}"
    text = (marker + " " + PAD)[:100]
    try:
        mem.remember([{"role": "user", "content": text}])
    except QueueFullError:
        time.sleep(0.005)
        continue
    print(marker, flush=True)
    i += 1
    for _ in range(rng.randint(0, 2)):
        try:
            mem.remember([{"role": "user", "content": "ab | cd | ef"[: rng.choice([2, 7, 12])]}])
        except QueueFullError:
            pass
    r = rng.random()
    if r < 0.05:
        try:
            mem.recall(["M"])      # waits for the queue: slices get their turn afterwards
        except QueueFullError:
            pass
    elif r < 0.08:
        mem.run_compression_slice()
    elif r < 0.12:
        time.sleep(0.02)
    if pause:
        time.sleep(pause)
""".replace("PAD", repr(PAD))


def _markers(texts: list[str]) -> list[str]:
    return [m for text in texts for m in MARKER.findall(text)]


@pytest.mark.slow
def test_kill_9_at_random_moments_leaves_a_whole_store(data_dir: Path) -> None:
    config = Config(**KILL_CONFIG)
    path = data_dir / "crash"
    # Warm-up (no marker): fills the focus with two nodes before any marker node exists.
    with MemoryManager("crash", data_dir=data_dir, config=config, model=ScriptedModel()) as mem:
        mem.remember(say("warm up one | warm up two"))
        assert mem.wait_idle(30)
    rng = random.Random(20240607)
    printed: set[str] = set()
    killed_with_pending = killed_with_forgetting = 0
    start = time.monotonic()
    for round_ in range(KILL_ROUNDS):
        child = Child(LOOP_UNTIL_KILLED, data_dir, json.dumps(KILL_CONFIG), round_)
        child.expect("ready")
        time.sleep(rng.uniform(0.2, 1.5))
        if child.proc.poll() is not None:
            child.fail(f"round {round_}: the child died on its own")
        child.kill9()
        now_printed = set(_markers(child.complete))
        printed |= now_printed

        # The store as the kill left it: whole, and every accepted marker in exactly one place.
        store = AgentStore(path)
        try:
            network_invariants(store, config.focus_limit)
            assert_conforms(store)
            stored = _markers(contents(store))
            journalled = _markers([t.text for t in Journal(store).tasks()])
            forgotten = int(store.scalar(
                "SELECT (COUNT(*) AS ?n) WHERE { ?l memory:target ?t "
                "FILTER NOT EXISTS { ?t a memory:Node } }", 0))
        finally:
            store.close()
        dupes = [m for m, n in collections.Counter(stored + journalled).items() if n > 1]
        assert dupes == [], f"round {round_}: markers both stored and journalled: {dupes[:5]}"
        lost = printed - set(stored) - set(journalled)
        assert lost == set(), f"round {round_}: accepted markers lost: {sorted(lost)[:10]}"
        killed_with_pending += bool(journalled)
        killed_with_forgetting += bool(forgotten)

        # initialize() processes the journal: every marker is a node now.
        with MemoryManager("crash", data_dir=data_dir, config=config,
                           model=ScriptedModel()) as mem:
            assert mem.wait_idle(60)
            assert mem._journal.tasks() == []
            stored_now = _markers(
                [r["c"] for r in select(mem, "SELECT ?c WHERE { ?n memory:content ?c }")])
            assert sorted(stored_now) == sorted(set(stored_now)), "a marker stored twice"
            assert printed <= set(stored_now)
            assert set(journalled) <= set(stored_now)
            network_invariants(mem._store, config.focus_limit)  # type: ignore[arg-type]
    elapsed = time.monotonic() - start
    assert len(printed) > KILL_ROUNDS  # the children did work before dying
    assert killed_with_forgetting > 0  # compression forgot nodes (dangling links exist)
    print(f"kill -9: {KILL_ROUNDS} rounds, {len(printed)} markers, "
          f"{killed_with_pending} kills with a non-empty journal, {elapsed:.1f} s")


# ---------------------------------------------------------------------------------------------
# 3. The store lock across processes (SPEC §4, §7)
# ---------------------------------------------------------------------------------------------

HOLD_UNTIL_TOLD = PRELUDE + """
mem = MemoryManager("held", data_dir=data_dir, config=config, model=ScriptedModel())
mem.initialize()
mem.remember([{"role": "user", "content": "held by the child"}])
mem.wait_idle(30)
print("ready", flush=True)
sys.stdin.readline()
mem.close()
print("closed", flush=True)
time.sleep(20)  # keeps running; the parent kills it
"""


def test_store_held_by_another_process(data_dir: Path) -> None:
    child = Child(HOLD_UNTIL_TOLD, data_dir, json.dumps(FAST_KW), stdin=True)
    try:
        child.expect("ready")
        blocked = MemoryManager("held", data_dir=data_dir, config=FAST, model=ScriptedModel())
        with pytest.raises(StoreLockedError, match=re.escape(str(data_dir / "held"))):
            blocked.initialize()
        blocked.close()
        # read-only inspection works while the child holds the store (SPEC §6)
        assert inspect_agent("held", data_dir, inspect_stats)["nodes"] == 1
        child.send("close now")
        child.expect("closed")
        start = time.monotonic()
        with MemoryManager("held", data_dir=data_dir, config=FAST,
                           model=ScriptedModel()) as mem:
            assert time.monotonic() - start < 2.0  # at once, no waiting for the lock
            assert child.proc.poll() is None  # the child process is still alive
            assert undated(mem.recall(["child"])) == "[memory] held by the child"
    finally:
        child.kill9()


# ---------------------------------------------------------------------------------------------
# 4. close(timeout): what is not processed stays journalled, and runs next time, in order
# ---------------------------------------------------------------------------------------------


def test_close_timeout_keeps_unprocessed_remembers_journalled(data_dir: Path) -> None:
    slow = ScriptedModel(delay=0.1)  # each remember: segment + process + relations ≥ 0.2 s
    mem = MemoryManager("slow", data_dir=data_dir, config=FAST, model=slow)
    mem.initialize()
    texts = [f"queued memory {i}" for i in range(8)]
    for text in texts:
        mem.remember(say(text))
    start = time.monotonic()
    mem.close(timeout=0.3)
    closed_in = time.monotonic() - start
    # close waits the timeout plus at most the task running at that moment (≤ 0.7 s here)
    assert closed_in < 1.5, f"close(timeout=0.3) took {closed_in:.2f} s"

    store = AgentStore(data_dir / "slow")
    try:
        done = contents(store)
        left = [t.text for t in Journal(store).tasks("pending")]
    finally:
        store.close()
    assert 1 <= len(done) < len(texts)
    assert set(done) == set(texts[: len(done)])
    assert left == [f"user: {t}" for t in texts[len(done):]]  # journalled, in order

    with MemoryManager("slow", data_dir=data_dir, config=FAST, model=ScriptedModel()) as again:
        assert again.wait_idle(30)
        rows = select(again, "SELECT ?c ?t WHERE { ?n memory:content ?c ; memory:createdAt ?t }")
        order = [r["c"] for r in sorted(rows, key=lambda r: r["t"])]
        assert order == texts
        assert again._journal.tasks() == []


# ---------------------------------------------------------------------------------------------
# 5. Failed tasks: kept, durable, retried or discarded on request (SPEC §5.1 step 1)
# ---------------------------------------------------------------------------------------------


def test_failed_task_survives_reopen_then_retry_and_discard(data_dir: Path) -> None:
    def open_with(model: ScriptedModel) -> MemoryManager:
        return MemoryManager("f", data_dir=data_dir, config=FAST, model=model).initialize()

    broken = ScriptedModel(fail={"segment": -1})
    mem = open_with(broken)
    mem.remember(say("keep this one"))
    assert mem.wait_idle(30)
    st = mem.stats()
    assert (st["failed_tasks"], st["nodes"], st["pending_tasks"]) == (1, 0, 0)
    assert broken.calls["segment"] == 1 + FAST.max_retries
    mem.close()

    mem = open_with(ScriptedModel())
    assert mem.wait_idle(30)
    assert mem.stats()["failed_tasks"] == 1 and mem.stats()["nodes"] == 0  # not auto-retried
    (failed,) = mem.failed_tasks()
    assert failed["text"] == "user: keep this one"
    assert failed["attempts"] == 1 + FAST.max_retries
    assert "scripted segment failure" in failed["error"]
    assert mem.retry_failed() == 1
    assert mem.wait_idle(30)
    assert mem.stats()["failed_tasks"] == 0
    assert undated(mem.recall(["keep"])) == "[memory] keep this one"
    mem.close()

    mem = open_with(ScriptedModel(fail={"segment": -1}))
    mem.remember(say("drop this one"))
    assert mem.wait_idle(30)
    assert mem.stats()["failed_tasks"] == 1
    mem.close()

    mem = open_with(ScriptedModel())
    assert mem.discard_failed() == 1
    assert mem.stats()["failed_tasks"] == 0 and mem._journal.tasks() == []
    mem.close()

    mem = open_with(ScriptedModel())
    assert mem.wait_idle(30)
    st = mem.stats()
    assert (st["failed_tasks"], st["nodes"]) == (0, 1)  # the discard was durable
    assert undated(mem.recall([], depth=3)) == "[memory] keep this one"
    mem.close()


DIE_INSIDE_RETRY_FAILED = PRELUDE + """
from memory_rdf import _journal
mem = MemoryManager("retry", data_dir=data_dir, config=config,
                    model=ScriptedModel(fail={"segment": -1}))
mem.initialize()
mem.remember([{"role": "user", "content": "a memory that must not be lost"}])
mem.wait_idle(30)
assert mem.stats()["failed_tasks"] == 1
def die(*args, **kwargs):  # the process dies right after the journal write
    os._exit(0)
mem._submit_remember = die
mem.retry_failed()
"""


def test_crash_inside_retry_failed_loses_no_task(data_dir: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", DIE_INSIDE_RETRY_FAILED, str(data_dir), json.dumps(FAST_KW)],
        env=child_env(), capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, done.stderr
    store = AgentStore(data_dir / "retry")
    try:
        texts = [t.text for t in Journal(store).tasks()] + contents(store)
    finally:
        store.close()
    assert any("a memory that must not be lost" in t for t in texts), texts
    # and it is pending now: the next initialize processes it
    again = MemoryManager("retry", data_dir=data_dir, config=FAST, model=ScriptedModel())
    with again:
        assert again.wait_idle(30)
        assert undated(again.recall([], depth=0)) == "[memory] a memory that must not be lost"


# ---------------------------------------------------------------------------------------------
# 6. Faulty models: the scheduler keeps serving, nothing accepted is lost
# ---------------------------------------------------------------------------------------------


class RaisingModel(ScriptedModel):
    """segment() raises for texts that say "doomed"; process() and relation() always raise."""

    def segment(self, text: str) -> list[str]:
        if "doomed" in text:
            raise RuntimeError("segment exploded")
        return super().segment(text)

    def process(self, text: str, target_length: int | None = None) -> Processed:
        raise RuntimeError("process exploded")

    def relation(self, node_content: str, focus_content: str) -> str:
        raise ConnectionError("relation exploded")


class GarbageModel(ScriptedModel):
    """Answers garbage most of the time: wrong types, empty lists, None, non-str keywords,
    invalid Unicode, over-long compressions; a valid answer now and then."""

    def __init__(self) -> None:
        super().__init__()
        self.rng = random.Random(11)

    def segment(self, text: str) -> Any:
        good = super().segment(text)
        return self.rng.choice([
            None, [], [1, 2], "a string", [""], ["  ", None], {"segments": good},
            ["bad \ud800 text"], (tuple(good)), good, good,
        ])

    def process(self, text: str, target_length: int | None = None) -> Any:
        good = super().process(text, target_length)
        return self.rng.choice([
            None, "just text", {"content": text}, Processed(42, "p", []),  # type: ignore[arg-type]
            Processed("", "p", ["k"]), Processed("   ", "p", []),
            Processed(good.content, None, ["k"]),  # type: ignore[arg-type]
            Processed(good.content, "p", "keywords"),  # type: ignore[arg-type]
            Processed(good.content, "p", [1, None]),  # type: ignore[list-item]
            Processed(good.content + " \udc80", "p", []),
            Processed(text * 3 + " and then some more words", "p", ["long"]),  # over-long
            good, good,
        ])

    def relation(self, node_content: str, focus_content: str) -> Any:
        return self.rng.choice([None, 7, ["涉及"], b"bytes", "bad \ud800", "涉及", ""])


class AlternatingModel(ScriptedModel):
    """Every other call (of any kind) fails."""

    def _enter(self, kind: str) -> None:
        with self.lock:
            n = self.calls["any"] = self.calls.get("any", 0) + 1
        if n % 2:
            raise TimeoutError(f"call {n} timed out")


TAG = re.compile(r"\bT([a-z]+-\d{3})\b")


def test_faulty_models_never_stop_the_scheduler_or_lose_a_remember(data_dir: Path) -> None:
    config = FAST.replace(max_retries=3, retry_initial_delay=0.002, retry_max_delay=0.01,
                          decay_rate=0.5, focus_limit=3)
    models: dict[str, ScriptedModel] = {
        "raising": RaisingModel(), "garbage": GarbageModel(), "alternating": AlternatingModel(),
    }
    with MemorySystem(data_dir=data_dir, model=ScriptedModel(), config=config) as system:
        agents = {
            name: MemoryManager(name, data_dir=data_dir, config=config, model=m,
                                system=system).initialize()
            for name, m in models.items()
        }
        agents["healthy"] = system.agent("healthy")
        accepted: dict[str, list[str]] = {name: [] for name in agents}
        doomed: set[str] = set()
        for i in range(15):
            for name, mem in agents.items():
                tag = f"{name}-{i:03d}"
                text = f"T{tag} first part | T{tag} second part"
                if name == "raising" and i % 4 == 0:
                    text += " doomed"
                    doomed.add(tag)
                mem.remember(say(text))
                accepted[name].append(tag)
            # the healthy agent is served at once although the others retry and back off
            # a keyword matches whole words (SPEC §5.4 v3): the tag, as written
            assert undated(agents["healthy"].recall([f"Thealthy-{i:03d}"], timeout=10)).startswith(
                f"[memory] Thealthy-{i:03d}")
            for mem in agents.values():
                assert isinstance(mem.recall(["part"], timeout=30), str)
        for mem in agents.values():
            assert mem.wait_idle(60)

        for name, mem in agents.items():
            stored = TAG.findall(" ".join(
                r["c"] for r in select(mem, "SELECT ?c WHERE { ?n memory:content ?c }")))
            failed = [set(TAG.findall(f["text"])).pop() for f in mem.failed_tasks()]
            assert len(failed) == len(set(failed)), name  # each failed remember kept once
            assert set(stored).isdisjoint(failed), name
            assert set(stored) | set(failed) == set(accepted[name]), name  # nothing lost
            st = mem.stats()
            assert st["nodes"] == 2 * len(set(stored)), name  # whole remembers only
            assert st["failed_tasks"] == len(failed) and st["pending_tasks"] == 0, name
            assert mem._journal.tasks("pending") == [], name
        assert set(TAG.findall(" ".join(t["text"] for t in agents["raising"].failed_tasks()))) \
            == doomed
        for name in ("alternating", "healthy"):
            assert agents[name].stats()["failed_tasks"] == 0

        # Compression with the same models: failed or garbage compressions leave nodes as
        # they were, over-long ones are refused; nothing stops the thread.
        for _ in range(6):
            for mem in agents.values():
                report = mem.run_compression_slice(timeout=60)
                assert report["scanned"] >= 0
        for name, mem in agents.items():
            assert_conforms(mem._store)  # type: ignore[arg-type]
            network_invariants(mem._store, config.focus_limit)  # type: ignore[arg-type]
            grown = select(
                mem,
                "SELECT ?c ?o WHERE { ?n memory:content ?c ; memory:originalLength ?o "
                "FILTER(STRLEN(?c) > ?o) }")
            assert grown == [], (name, grown)
            assert isinstance(mem.recall(["part"], timeout=30), str)
        assert models["garbage"].compress_calls or models["alternating"].compress_calls
        assert system._scheduler._thread.is_alive()
        agents["healthy"].remember(say("Tlate-000 still served"))
        assert undated(agents["healthy"].recall(["still served"], timeout=30)) == \
            "[memory] Tlate-000 still served"


# ---------------------------------------------------------------------------------------------
# 7. Many threads, two agents, one system
# ---------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_thread_stress_two_agents_eight_threads(data_dir: Path) -> None:
    config = FAST.replace(focus_limit=3)  # auto_compress=False: nothing is ever forgotten
    errors: list[BaseException] = []
    segments = collections.Counter[str]()
    ops = collections.Counter[str]()
    lock = threading.Lock()
    stop_at = time.monotonic() + STRESS_SECONDS
    with MemorySystem(data_dir=data_dir, model=ScriptedModel(), config=config) as system:
        agents = [system.agent("stress_a"), system.agent("stress_b")]

        def worker(seed: int) -> None:
            rng = random.Random(seed)
            mine = collections.Counter[str]()
            done = collections.Counter[str]()
            try:
                n = 0
                while time.monotonic() < stop_at:
                    mem = rng.choice(agents)
                    op = rng.choice(["remember", "remember", "recall", "stats", "sparql"])
                    if op == "remember":
                        k = rng.randint(1, 3)
                        parts = " | ".join(f"w{seed} m{n} part {j} MARK" for j in range(k))
                        n += 1
                        try:
                            mem.remember(say(parts))
                        except QueueFullError:
                            op = "refused"
                        else:
                            mine[mem.agent_id] += k
                    elif op == "recall":
                        out = mem.recall(["MARK"], depth=rng.randint(0, 3), timeout=60)
                        assert isinstance(out, str)
                    elif op == "stats":
                        st = mem.stats()
                        assert st["nodes"] >= 0 and st["failed_tasks"] == 0
                    else:
                        rows = select(mem, "SELECT (COUNT(?n) AS ?c) WHERE { ?n a memory:Node }")
                        assert rows[0]["c"] >= 0
                    done[op] += 1
            except BaseException as exc:  # noqa: BLE001 - reported by the main thread
                with lock:
                    errors.append(exc)
            finally:
                with lock:
                    segments.update(mine)
                    ops.update(done)

        threads = [threading.Thread(target=worker, args=(s,), daemon=True) for s in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=STRESS_SECONDS + 120)
        assert not any(t.is_alive() for t in threads), "deadlock: a worker never finished"
        assert errors == [], errors[:3]
        for mem in agents:
            assert mem.wait_idle(120)
        counts = {mem.agent_id: mem.stats()["nodes"] for mem in agents}
        assert counts == {a.agent_id: segments[a.agent_id] for a in agents}, (counts, segments)
        assert sum(counts.values()) == sum(segments.values())
        for mem in agents:
            assert mem._journal.tasks() == []
        assert ops["remember"] > 0 and ops["recall"] > 0 and ops["sparql"] > 0


# ---------------------------------------------------------------------------------------------
# 8. A store written by another schema version is refused untouched
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "message"),
    [
        (99, r"schema version 99.*upgrade"),  # written by a newer memory_rdf
        # No older schema was ever released, so there is nothing to migrate: a store that says
        # it is older, or has memories but no metadata at all, is refused too.
        (0, r"schema version 0.*export"),
        (None, r"no schema metadata.*schema version 0.*export"),
    ],
    ids=["newer", "older", "no-metadata"],
)
def test_a_store_of_another_schema_version_is_refused_untouched(
    data_dir: Path, version: int | None, message: str
) -> None:
    with MemoryManager("other", data_dir=data_dir, config=FAST, model=ScriptedModel()) as mem:
        mem.remember(say("written elsewhere | and linked"))
        assert mem.wait_idle(30)
    path = data_dir / "other"
    store = ox.Store(str(path))
    prop = ox.NamedNode(MEMORY + "schemaVersion")
    if version is None:
        store.update(f"CLEAR GRAPH <{META_GRAPH}>")
    else:
        store.update(
            f"DELETE WHERE {{ GRAPH <{META_GRAPH}> {{ <{META_SUBJECT}> {prop} ?v }} }} ;"
            f"INSERT DATA {{ GRAPH <{META_GRAPH}> {{ <{META_SUBJECT}> {prop} {version} }} }}"
        )
    store.flush()
    del store
    before = dump_quads(path)

    mem = MemoryManager("other", data_dir=data_dir, config=FAST, model=ScriptedModel())
    with pytest.raises(SchemaVersionError, match=message) as info:
        mem.initialize()
    assert str(path) in str(info.value)
    mem.close()
    assert dump_quads(path) == before  # nothing was changed
    reopened = ox.Store(str(path))  # and the failed open released the lock
    del reopened


def test_a_new_store_gets_current_metadata(data_dir: Path) -> None:
    with MemoryManager("fresh", data_dir=data_dir, config=FAST, model=ScriptedModel()):
        pass
    quads = dump_quads(data_dir / "fresh")
    assert any("schemaVersion" in q and f'"{SCHEMA_VERSION}"' in q for q in quads)
