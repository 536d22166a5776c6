"""The agent's writer lock (:class:`AgentLock`): one writer of an agent's directory,
in any process, under any spelling of its path; let go of in a forked child.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import weakref
from pathlib import Path

from memory_rdf._exceptions import (
    StoreError,
    StoreLockedError,
)
from memory_rdf._oxigraph.errors import _store_message

#: The agents open for writing in this process, by the (device, inode) of their lock file: the
#: path each was opened by. See :class:`AgentLock`.
_OPEN_AGENTS: dict[tuple[int, int], str] = {}
_OPEN_AGENTS_LOCK = threading.Lock()


#: The directory of the agents' lock files in a data directory ('~' is in no agent id).
LOCKS_DIR = "~locks"


def _lock_path(path: Path) -> Path:
    """``{data_dir}/~locks/{agent}``: the agent's lock file, outside its directory."""
    return path.parent / LOCKS_DIR / path.name


class AgentLock:
    """The one writer of an agent's directory, in any process, under any spelling.

    RocksDB's own lock lives inside the store directory, which a purge swaps for a fresh copy
    (:meth:`AgentStore.rewrite`), and it refuses a second open in one process only when the
    path is spelled the same: ``data`` and ``/abs/data``, ``data/../data`` or a link opened one
    store twice (the two instances wrote over each other's files, and the store never opened
    again), and a second opener during a purge finished or undid the swap under it (the
    agent's memories lost). This lock is taken before anything in the directory is read or
    repaired and held until the store is released: an exclusive ``flock`` (Windows: a byte
    lock) on the file ``~locks/{agent}`` of the data directory, which no swap touches, plus an
    in-process table by the file's device and inode, for file systems whose ``flock`` is per
    process (NFS). Raises :class:`StoreLockedError` when another holder has it.
    """

    def __init__(self, path: Path, what: str) -> None:
        lock_path = _lock_path(path)
        self._key: tuple[int, int] | None = None
        self._release_lock = threading.Lock()
        try:
            # The data directory, when this makes it, and ~locks: readable by the owner only.
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            lock_path.parent.mkdir(mode=0o700, exist_ok=True)
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:  # a read-only data directory, ~locks taken by a file, …
            raise StoreError(_store_message(what, exc)) from exc
        try:
            st = os.fstat(fd)
            key = (st.st_dev, st.st_ino)
            with _OPEN_AGENTS_LOCK:
                holder = _OPEN_AGENTS.get(key)
                if holder is not None:
                    raise StoreLockedError(
                        f"{what}: already open in this process (as {holder}): close that "
                        "MemoryManager or MemorySystem first (close(), or open it in a `with` "
                        "block), or keep using it; MemorySystem.agent() gives the open one"
                    )
                _OPEN_AGENTS[key] = str(path)
                self._key = key
            try:
                _lock_file(fd)
            except OSError as exc:
                self._forget_key()
                raise StoreLockedError(
                    f"{what}: held by another process (or already open in this one); close "
                    "it there first, or inspect it read-only"
                ) from exc
        except BaseException:
            self._forget_key()
            os.close(fd)
            raise
        self._fd: int | None = fd
        _LIVE_LOCKS.add(self)

    def _forget_key(self) -> None:
        with _OPEN_AGENTS_LOCK:
            if self._key is not None:
                _OPEN_AGENTS.pop(self._key, None)
            self._key = None

    def release(self) -> None:
        """Let the next writer in (idempotent). The file stays: deleting a lock file another
        process may have just opened would let two writers in."""
        with self._release_lock:
            fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            _unlock_file(fd)
        os.close(fd)
        self._forget_key()

    def _forsake(self) -> None:
        """In a forked child: the lock is the parent's. Close this copy of the descriptor
        without unlocking (the lock belongs to the parent's open file) and hold nothing."""
        # No lock taken here: a thread of the parent may have held it as the process forked.
        self._release_lock = threading.Lock()
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._key = None


#: Every AgentLock held in this process (for a fork's child to let go of its copies).
_LIVE_LOCKS: weakref.WeakSet[AgentLock] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    """A forked child holds none of its parent's agents: an inherited ``flock`` would keep
    the agent held after the parent ends, and a child's release would unlock the parent's
    live store."""
    global _OPEN_AGENTS_LOCK
    _OPEN_AGENTS_LOCK = threading.Lock()  # a parent's thread may have held it at the fork
    for lock in list(_LIVE_LOCKS):
        lock._forsake()
    _LIVE_LOCKS.clear()
    _OPEN_AGENTS.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
    import msvcrt

    def _lock_file(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)

    def _unlock_file(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
else:
    import fcntl

    def _lock_file(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)

    def _unlock_file(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)
