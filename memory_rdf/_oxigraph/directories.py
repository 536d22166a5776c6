"""The agent's directory: RocksDB's files in it, the crash repair of an interrupted
purge (:func:`_finish_rewrite`), refusing a directory that is not a store, the info logs kept.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from pathlib import Path

from memory_rdf._exceptions import (
    StoreError,
)

#: Files RocksDB makes in a store directory (anything else there is ours and kept by rewrite).
_ROCKSDB_FILE = re.compile(
    r"^(?:\d+\.(?:sst|log|blob)|CURRENT|IDENTITY|LOCK|LOG(?:\.old\.\d+)?|"
    r"MANIFEST-\d+|OPTIONS-\d+(?:\.dbtmp)?)$"
)


#: RocksDB's info logs that a read-write open keeps: ``LOG`` and this many ``LOG.old.*``.
INFO_LOGS_KEPT = 2


def _prune_info_logs(path: Path) -> None:
    """Delete all but the newest :data:`INFO_LOGS_KEPT` of RocksDB's old info logs.

    Every read-write open renames ``LOG`` to ``LOG.old.{microseconds}`` and starts a new one
    (~140 kB: the options of Oxigraph's column families), and RocksDB keeps 1,000 of them
    (``keep_log_file_num``, which pyoxigraph does not expose): an agent opened once per
    ``memory-rdf recall`` grew by that much every call. The info logs hold RocksDB's
    messages, never a triple; the database's own files (``*.log`` write-ahead logs,
    ``MANIFEST``, ``*.sst``) are not touched."""
    old = sorted(
        (p for p in path.glob("LOG.old.*") if _ROCKSDB_FILE.match(p.name)),
        key=lambda p: int(p.name.rpartition(".")[2]),
    )
    for stale in old[:-INFO_LOGS_KEPT] if INFO_LOGS_KEPT else old:
        with contextlib.suppress(OSError):  # another process pruned it first
            stale.unlink()


def _rewrite_dirs(path: Path) -> tuple[Path, Path]:
    """Where :meth:`AgentStore.rewrite` builds the fresh copy and parks the old directory.
    ``~`` is not allowed in agent ids, so neither can be taken for an agent's store."""
    return path.with_name(path.name + "~new"), path.with_name(path.name + "~old")


def _rewrite_dump(path: Path) -> Path:
    """The N-Quads file a rewrite copies the store through (deleted before it returns)."""
    return path.with_name(path.name + "~copy.nq")


def _refuse_foreign_directory(path: Path) -> None:
    """A directory that is not a store (no RocksDB ``CURRENT``) and holds files RocksDB did
    not make is the user's: refuse it rather than write RocksDB files beside them (issue 17;
    RocksDB renames a file named ``LOG`` that is in its way)."""
    if not path.is_dir() or (path / "CURRENT").is_file():
        return
    foreign = sorted(p.name for p in path.iterdir() if not _ROCKSDB_FILE.match(p.name))
    if foreign:
        shown = ", ".join(foreign[:3]) + (", …" if len(foreign) > 3 else "")
        raise StoreError(
            f"{path} is not a memory store: it holds other files ({shown}); it is left "
            "untouched: choose another agent id or data directory"
        )


def _private_directory(path: Path) -> None:
    """Create an agent's store directory readable by its owner only (``0700``: it holds
    someone's conversations), and the data directory as well when this creates it. A
    directory that exists already keeps its permissions."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # an existing one: unchanged
    path.mkdir(mode=0o700, exist_ok=True)


def _finish_rewrite(path: Path) -> None:
    """Complete or undo a :meth:`AgentStore.rewrite` that a crash interrupted."""
    new, old = _rewrite_dirs(path)
    _rewrite_dump(path).unlink(missing_ok=True)
    if not path.exists() and old.exists() and new.exists():
        os.rename(new, path)  # the copy was complete before the first rename
    if path.exists():
        for leftover in (new, old):
            if leftover.exists():
                shutil.rmtree(leftover, ignore_errors=True)
