"""Test helpers: a scripted small model implementing the real protocol, and shortcuts.

The scripted model answers what the tests control: ``segment`` splits every message on
``" | "``; ``process`` keeps the text (or truncates it to the target), uses the first 10
characters as phrase and the upper-case words as keywords; ``relation`` answers from a table
(default: no name). Failures can be injected per call kind, and calls can be slowed down.
"""

from __future__ import annotations

import re
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyoxigraph as ox
import pytest

from memory_rdf import Config, MemoryManager, Processed, Templates
from memory_rdf import _vocab as V
from memory_rdf._oxigraph.link_index import KEPT, derive, derive_both
from memory_rdf._oxigraph.text_table import values


@dataclass
class ScriptedModel:
    relations: dict[tuple[str, str], str] = field(default_factory=dict)
    default_relation: str = ""
    keywords: dict[str, list[str]] = field(default_factory=dict)  # content -> keywords override
    fail: dict[str, int] = field(default_factory=dict)  # call kind -> failures left (-1 = always)
    calls: dict[str, int] = field(default_factory=dict)
    delay: float = 0.0
    compress_delay: float = 0.0  # sleep in process() calls that carry a target length
    compress_calls: list[tuple[str, int]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def _enter(self, kind: str) -> None:
        with self.lock:
            self.calls[kind] = self.calls.get(kind, 0) + 1
            left = self.fail.get(kind, 0)
            if left:
                if left > 0:
                    self.fail[kind] = left - 1
                raise RuntimeError(f"scripted {kind} failure")
        if self.delay:
            time.sleep(self.delay)

    def segment(self, text: str) -> list[str]:
        self._enter("segment")
        out: list[str] = []
        for line in text.split("\n"):
            _, _, content = line.partition(": ")
            out.extend(p.strip() for p in content.split(" | ") if p.strip())
        return out

    def process(self, text: str, target_length: int | None = None) -> Processed:
        self._enter("process")
        if target_length is not None:
            with self.lock:
                self.compress_calls.append((text, target_length))
            if self.compress_delay:
                time.sleep(self.compress_delay)
        content = text if target_length is None else text[:target_length]
        keywords = self.keywords.get(content, [w for w in content.split() if w.isupper()])
        return Processed(content, content[:10], keywords)

    def relation(self, node_content: str, focus_content: str) -> str:
        self._enter("relation")
        return self.relations.get((node_content, focus_content), self.default_relation)


class AfterUpdate:
    """pyoxigraph's disk store whose update() runs ``after()`` once the write is in: a Ctrl-C
    (or another signal's handler raising) that arrives right after a disk write."""

    def __init__(self, real: ox.Store, after: Callable[[], None]) -> None:
        self.real, self.after = real, after

    def update(self, *args: Any, **kwargs: Any) -> None:
        self.real.update(*args, **kwargs)
        self.after()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def sigint_once() -> Callable[[], None]:
    """A call that sends this process one SIGINT (Ctrl-C), the first time it is made (the
    store's owner thread applies disk updates): the KeyboardInterrupt is raised wherever the
    main thread then handles signals."""
    sent: list[bool] = []

    def send() -> None:
        if not sent:
            sent.append(True)
            signal.raise_signal(signal.SIGINT)

    return send


FAST = Config(retry_initial_delay=0.0, retry_max_delay=0.0, max_retries=2, auto_compress=False)


def say(*contents: str, role: str = "user") -> list[dict[str, str]]:
    return [{"role": role, "content": c} for c in contents]


def remember(mem: MemoryManager, *contents: str) -> None:
    """Remember one message whose content is split on ' | ' into segments, and wait for it."""
    mem.remember(say(*contents))
    assert mem.wait_idle(timeout=30)


#: An aggregate that runs for about a second over what :func:`fill_for_a_heavy_count` writes
#: (a COUNT is computed inside ``Store.query``: nothing stops it once it started).
HEAVY_COUNT = "SELECT (COUNT(*) AS ?n) WHERE { ?a <urn:p> ?x . ?b <urn:p> ?y }"


def fill_for_a_heavy_count(store: Any) -> list[dict[str, int]]:
    """Write 3,000 triples into the ``AgentStore`` ``store`` (around the library: a test's
    own data) for :data:`HEAVY_COUNT`; returns its answer."""
    rows = " ".join(f"<urn:s{i}> <urn:p> {i} ." for i in range(3000))
    store.store.update(f"INSERT DATA {{ {rows} }}")
    return [{"n": 3000 * 3000}]


def read_in_another_thread(store: Any, read: Callable[[], Any]) -> tuple[threading.Thread,
                                                                         list[Any]]:
    """Start ``read`` in a thread and return once it has the ``AgentStore`` ``store`` in hand;
    the thread and the list its answer goes to."""
    answers: list[Any] = []
    reader = threading.Thread(target=lambda: answers.append(read()))
    reader.start()
    deadline = time.monotonic() + 10
    while not store._users.active:
        assert time.monotonic() < deadline and reader.is_alive(), "the read never started"
        time.sleep(0.001)
    return reader, answers


def open_once_released(open_store: Callable[[], Any], timeout: float = 30) -> Any:
    """``open_store()`` retried while it raises StoreLockedError (a lock released by a thread
    of its own once a read ended), for up to ``timeout`` seconds."""
    from memory_rdf import StoreLockedError

    deadline = time.monotonic() + timeout
    while True:
        try:
            return open_store()
        except StoreLockedError:
            assert time.monotonic() < deadline, "the agent was never released"
            time.sleep(0.05)


def memory_rdf_command() -> str:
    """The installed ``memory-rdf`` console script of this interpreter's environment (next to
    ``sys.executable``; else the one on PATH). Fails, not skips, when it is missing: the
    command line is tested through the entry point users run."""
    bindir = Path(sys.executable).parent
    for name in ("memory-rdf", "memory-rdf.exe"):
        if (bindir / name).is_file():
            return str(bindir / name)
    found = shutil.which("memory-rdf")
    if found is None:
        pytest.fail(
            f"the memory-rdf console script is not installed next to {sys.executable} nor on "
            "PATH: install the package into this environment (pip install -e . or "
            "pip install \".[test]\") so the CLI tests can run the real entry point",
            pytrace=False,
        )
    return found


def quads(store: ox.Store) -> set[str]:
    """The triples of the memory network (default graph) that the read mirror keeps as they are
    (``link_index.KEPT``): on the mirror and on the disk store alike."""
    return {str(q) for q in store.quads_for_pattern(None, None, None, ox.DefaultGraph())
            if q.predicate.value in KEPT}


def index(store: ox.Store) -> set[str]:
    """The read mirror's link quads in ``store`` (its graphs under ``V.MIRROR_LINKS``)."""
    return {str(q) for q in store.quads_for_pattern(None, None, None, None)
            if isinstance(q.graph_name, ox.NamedNode)
            and q.graph_name.value.startswith(V.MIRROR_LINKS)}


def derived_index(disk: ox.Store) -> set[str]:
    """The link quads a mirror built from scratch out of ``disk`` holds."""
    return index(derive(disk))


def same_texts(table: Any, disk: ox.Store) -> bool:
    """The read mirror's text table holds what one built afresh from ``disk`` would (each
    slot's values as a set: their order is the writes')."""
    def norm(nodes: dict[str, tuple[Any, ...]]) -> dict[str, tuple[frozenset[str], ...]]:
        return {nid: tuple(frozenset(repr(v) for v in values(slot)) for slot in row)
                for nid, row in nodes.items()}
    return table is not None and norm(table.nodes) == norm(derive_both(disk)[1].nodes)


def same_as_built(mirror: ox.Store, disk: ox.Store) -> bool:
    """The mirror holds exactly what one built afresh from ``disk`` would, and nothing else."""
    return {str(q) for q in mirror} == {str(q) for q in derive(disk)}


_DATED = re.compile(r"^\[(记忆|memory) \d{4}-\d{2}-\d{2}\] ", re.MULTILINE)


def undated(text: str) -> str:
    """A recall text with the day taken out of every entry's first bracket (SPEC §5.4 v3:
    ``[memory 2024-05-01] …`` → ``[memory] …``), for tests about what is recalled, not when."""
    return _DATED.sub(lambda m: f"[{m.group(1)}] ", text)


#: Entries marked as before SPEC §5.4 v3, undated and in one language (dated, language-following
#: entries: test_recall_text.py), for tests about what is recalled and how much fits.
UNDATED = Templates(memory="[记忆] {content}")


def with_undated_entries(
    make_manager: Callable[..., MemoryManager],
) -> Callable[..., MemoryManager]:
    """The shared ``make_manager`` fixture's factory, with :data:`UNDATED` entries unless a
    test sets its templates."""

    def make(agent: str = "agent", config: Config = FAST, **kw: object) -> MemoryManager:
        if config.templates == Templates():
            config = config.replace(templates=UNDATED)
        return make_manager(agent, config=config, **kw)

    return make
