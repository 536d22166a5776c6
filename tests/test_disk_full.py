"""A full disk (issue 33 F6): remembers accepted before the disk filled are not stranded. They
stay queued, counted in stats()["pending_tasks"] and keeping wait_idle() False, and are stored
once the disk has room again, in the running process. On a real (small) tmpfs: mounting needs
root, so the test is skipped elsewhere."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from memory_rdf import MemoryManager, StoreError

from helpers import FAST

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or os.geteuid() != 0,
    reason="mounts a 20 MB tmpfs to fill it up: needs root on Linux",
)


def fill(disk: Path, leave: int) -> Path:
    """A file taking all of ``disk``'s free space but ``leave`` bytes."""
    filler = disk / "filler"
    free = shutil.disk_usage(disk).free
    with open(filler, "wb") as f:
        f.write(b"\0" * max(free - leave, 0))
    return filler


def contents(mem: MemoryManager) -> set[str]:
    rows = mem.sparql("SELECT ?c WHERE { ?n memory:content ?c }", limit=None)
    return {r["c"] for r in rows}  # type: ignore[index,union-attr]


def test_remembers_accepted_before_the_disk_filled_are_stored_once_it_has_room(
    small_disk: Path, model: object
) -> None:
    config = FAST.replace(auto_compress=False, retry_initial_delay=0.05, retry_max_delay=0.2)
    mem = MemoryManager("agent", data_dir=small_disk / "data", config=config,
                        model=model).initialize()  # type: ignore[arg-type]
    try:
        mem.remember([{"role": "user", "content": "before the disk filled"}])
        assert mem.wait_idle(timeout=60)
        filler = fill(small_disk, 400 * 1024)
        accepted: list[str] = []
        refused = 0
        for i in range(400):
            text = f"item {i:03d} " + "x" * 200
            try:
                mem.remember([{"role": "user", "content": text}])
                accepted.append(text)
            except StoreError:
                refused += 1  # the journal write itself: refused at the call, nothing stored
        assert refused > 0, "the disk never filled up"
        stored = contents(mem)  # sparql(): not queued behind the remembers, as memories() is
        stranded = [t for t in accepted if t not in stored]
        assert stranded, "every accepted remember was stored before the disk was full"
        # While the disk is full: no lie. Every accepted remember not stored is pending.
        assert not mem.wait_idle(timeout=1)
        stats = mem.stats()
        assert stats["pending_tasks"] == mem.pending_remembers() == len(stranded)
        assert stats["failed_tasks"] == 0

        filler.unlink()  # room again: no restart needed
        assert mem.wait_idle(timeout=120)
        stored = contents(mem)
        assert [t for t in accepted if t not in stored] == []
        assert mem.pending_remembers() == 0
        assert mem.stats()["pending_tasks"] == 0 and mem.stats()["failed_tasks"] == 0
        # and the store takes new remembers again
        mem.remember([{"role": "user", "content": "after the disk had room"}])
        assert mem.wait_idle(timeout=60)
        assert any("after the disk had room" in m["content"]
                   for m in mem.memories(limit=None))  # type: ignore[misc]
    finally:
        mem.close()
    with MemoryManager("agent", data_dir=small_disk / "data", config=config,
                       model=model) as again:  # type: ignore[arg-type]
        assert again.wait_idle(timeout=60)
        texts = [m["content"] for m in again.memories(limit=None)]  # type: ignore[misc]
        assert len(texts) == len(set(texts)) == len(accepted) + 2  # none twice
