"""The read mirrors' memory budget: the automatic choice of a mirror
(:func:`mirror_fits`) and the estimate of every mirror of the process (:data:`MIRROR_BUDGET`).
"""

from __future__ import annotations

import os
import threading
import weakref

#: Memory the read mirror takes per memory node: measured on the benchmark suite's workload
#: (pyoxigraph 0.5.13, ~85 triples per node, 11.6 links out of each) as the process's RSS
#: growth once the mirror is built, divided by the nodes. Issue 38's mirror (one quad per
#: link, the texts, scan state, focus and pins: ~22 quads per node, ~7.5 kB of them) took
#: 13.2 kB per node at 10k nodes beside the store's open, of which ~5.4 kB is the disk store's
#: own memory after its dump read every table (RocksDB's blocks, there with or without a
#: mirror once the store is read); a copy of every graph took ~41 kB (benchmarks/PROFILE.md,
#: "The read mirror"; benchmarks/HISTORY.md).
MIRROR_BYTES_PER_NODE = 13_000
#: The automatic choice (``Config.read_mirror=None``) mirrors a store when its estimated size
#: (nodes at open × MIRROR_BYTES_PER_NODE) is at most this share of the memory available then:
#: on the 24 GB machine of the benchmarks, with 19 GB available, up to ~370k nodes.
MIRROR_MEMORY_SHARE = 0.25
#: The budget when the available memory cannot be read (not Linux, no sysconf): 1 GiB.
MIRROR_FALLBACK_BUDGET = 1 << 30


def available_memory() -> int | None:
    """Bytes of memory available to new allocations (Linux: ``MemAvailable``), or None."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, OSError, ValueError):
        return None


def mirror_fits(nodes: int, available: int | None, reserved: int = 0) -> bool:
    """The automatic choice: does a mirror of ``nodes`` nodes fit the memory budget, next to
    the ``reserved`` bytes the process's other mirrors are estimated to take? The budget is
    MIRROR_MEMORY_SHARE of the memory available without them, so the mirrors of all agents
    of a process together stay within it (not a quarter of what is left, agent after agent)."""
    if available is None:
        budget = float(MIRROR_FALLBACK_BUDGET)
    else:
        budget = (available + reserved) * MIRROR_MEMORY_SHARE
    return reserved + nodes * MIRROR_BYTES_PER_NODE <= budget


class _MirrorBudget:
    """The estimated bytes of every read mirror of the process, by store: what the automatic
    choice of one agent's mirror counts beside its own (a MemorySystem of many agents).

    Held by weak reference: a store dropped without ``close()`` gives its share back when it
    is collected (keyed by ``id()``, its share stayed, and a later store given the same id
    would have taken it over)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reserved: weakref.WeakKeyDictionary[object, int] = weakref.WeakKeyDictionary()

    def claim(self, owner: object, nodes: int, wanted: bool | None) -> bool:
        """Reserve ``owner``'s mirror estimate; with ``wanted=None`` only when it fits."""
        estimate = nodes * MIRROR_BYTES_PER_NODE
        with self._lock:
            others = sum(v for k, v in self._reserved.items() if k is not owner)
            if wanted is None and not mirror_fits(nodes, available_memory(), others):
                return False
            self._reserved[owner] = estimate
            return True

    def release(self, owner: object) -> None:
        with self._lock:
            self._reserved.pop(owner, None)

    def reserved(self) -> int:
        with self._lock:
            return sum(self._reserved.values())


MIRROR_BUDGET = _MirrorBudget()
