"""The private copy a read-only :class:`~.agent_store.AgentStore` reads (:class:`Snapshot`):
inspection never opens an agent's live directory itself (SPEC §6, §7).

Opening the live directory read-only beside a writer is undefined behaviour in RocksDB
(pyoxigraph says so): measured here, a read-only open taken while a writer was flushing made
about one query in six loop for ever, holding a core and growing by ~400 MB/s (it hung CI).
So a read-only store copies the agent's files (:func:`copy_store_files`) into a temporary
directory of its own, reads the copy, and deletes it when it is closed — or, a store dropped
without ``close()`` (an rdflib graph going out of scope), when it is garbage-collected, or at
the latest when the process exits (``weakref.finalize``). Its callers keep no bookkeeping.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import weakref
from pathlib import Path

import pyoxigraph as ox

#: Copies tried before :func:`copy_store_files` gives up on a writer that keeps changing its
#: file set, and the pause between two tries (seconds).
COPY_ATTEMPTS = 16
COPY_RETRY_DELAY = 0.05
#: The prefix of every copy's temporary directory.
PREFIX = "memory-rdf-snapshot-"


class Snapshot:
    """A private copy of the store at ``path``, owned by ``owner`` (the read-only store that
    reads it): deleted by :meth:`delete`, or when ``owner`` is garbage-collected, or at exit."""

    def __init__(self, owner: object, path: Path) -> None:
        #: The copy (named as ``path``, so the agent keeps its name).
        self.path = copy_store_files(path)
        self._delete = weakref.finalize(owner, remove_copy, self.path)

    def open(self) -> ox.Store:
        """The copy opened read-only (no lock taken, nothing written); the copy is deleted
        when it cannot be opened."""
        try:
            return ox.Store.read_only(str(self.path))
        except BaseException:
            self.delete()
            raise

    def delete(self) -> None:
        """Delete the copy (once; later calls do nothing)."""
        self._delete()


def copy_store_files(path: Path) -> Path:
    """A private copy of the RocksDB files of the store at ``path``, taken while its writer
    may be at work, in a new temporary directory (same name as ``path``); returns the copy's
    path. Nothing in ``path`` is written.

    The copy is consistent: table files (``*.sst``) never change once written, so they are
    hard-linked where the file system allows (copied otherwise); the manifest and the
    write-ahead logs are copied as they are, and RocksDB reads a log's torn last record as a
    crash's (the copy holds every write batch up to some point, each whole). If the writer
    changed its file set meanwhile (a new manifest record: a flush or compaction, which may
    delete files the copy names), the copy is taken again; after :data:`COPY_ATTEMPTS` tries,
    :class:`OSError`; at once when ``path`` holds no store (no ``CURRENT`` file).
    """
    if not (path / "CURRENT").is_file():
        raise FileNotFoundError(f"no memory store at {path}")
    for _ in range(COPY_ATTEMPTS):
        root = Path(tempfile.mkdtemp(prefix=PREFIX))
        copy = root / path.name
        try:
            copy.mkdir(mode=0o700)
            if _copy_once(path, copy):
                return copy
        except FileNotFoundError:
            pass  # a file deleted under the copy: the writer changed its file set
        except BaseException:
            shutil.rmtree(root, ignore_errors=True)
            raise
        shutil.rmtree(root, ignore_errors=True)
        time.sleep(COPY_RETRY_DELAY)
    raise OSError(f"cannot take a consistent copy of {path}: its writer keeps changing it")


def _copy_once(path: Path, copy: Path) -> bool:
    """One try of :func:`copy_store_files`: True when the writer's file set stayed the same."""
    current = (path / "CURRENT").read_bytes()
    manifest = path / current.decode("ascii", "replace").strip()
    before = manifest.stat().st_size
    for name in sorted(os.listdir(path)):
        source = path / name
        if name == "LOCK" or name.startswith("LOG") or not source.is_file():
            continue
        target = copy / name
        if name.endswith(".sst"):
            try:
                os.link(source, target)
                continue
            except OSError as exc:
                if isinstance(exc, FileNotFoundError):
                    raise
        shutil.copyfile(source, target)
    (copy / "CURRENT").write_bytes(current)
    return (path / "CURRENT").read_bytes() == current and manifest.stat().st_size == before


def remove_copy(copy: Path) -> None:
    """Delete a copy :func:`copy_store_files` made (its temporary directory)."""
    if copy.parent.name.startswith(PREFIX):
        shutil.rmtree(copy.parent, ignore_errors=True)
