"""The process-wide disk-writer thread that applies large updates to the disk
stores while the committing thread applies them to the read mirror.
"""

from __future__ import annotations

import os
import queue
import threading
from functools import lru_cache
from typing import Any

import pyoxigraph as ox

from memory_rdf import _vocab as V


@lru_cache(maxsize=1)
def _parallel_writes() -> bool:
    """More than one CPU to run the disk update and the mirror's on."""
    try:
        return len(os.sched_getaffinity(0)) > 1
    except AttributeError:  # pragma: no cover - not Linux
        return (os.cpu_count() or 1) > 1


class _DiskWriter:
    """The thread that applies large updates to the disk stores (AgentStore._commit_at_once),
    one for the process: a commit hands it the update and waits for its answer.

    Started before the first read mirror's build thread, and kept: a writer thread started
    after a build had ended applied the same compression updates ~2.4× slower (0.98 against
    0.41 s for 1,800 scans at 100k nodes, taking turns in one process), which made the two
    stores at once slower than one after the other (PROFILE.md, eleventh pass). The likely
    cause: glibc hands a new thread the allocator arena a finished thread left, here the
    build thread's, which holds the whole in-memory copy.
    """

    def __init__(self) -> None:
        self.pid = os.getpid()
        self._work: queue.SimpleQueue[tuple[ox.Store, str, queue.SimpleQueue[Any]]] = (
            queue.SimpleQueue())
        threading.Thread(target=self._run, name="memory-rdf-disk-write", daemon=True).start()

    def _run(self) -> None:
        while True:
            store, text, answer = self._work.get()
            outcome: BaseException | None = None
            try:
                store.update(text, prefixes=V.PREFIXES)
            except BaseException as exc:  # handed to the committing thread
                outcome = exc
            # Drop the store before answering: once answered, the committer may let the store
            # go (close, a purge's swap), and the last reference closes it (SPEC §7).
            del store, text
            answer.put(outcome)
            del answer, outcome

    def start(self, store: ox.Store, text: str) -> queue.SimpleQueue[Any]:
        """Apply ``text`` to ``store``; the queue answers None, or the exception raised."""
        answer: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._work.put((store, text, answer))
        return answer


_writer: _DiskWriter | None = None
_writer_lock = threading.Lock()


def _disk_writer() -> _DiskWriter:
    """The process's disk writer, made again in a child process (a forked copy has no
    thread)."""
    global _writer
    with _writer_lock:
        if _writer is None or _writer.pid != os.getpid():
            _writer = _DiskWriter()
        return _writer
