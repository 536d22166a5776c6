"""Back up an agent and restore it: a complete backup is the agent's store as N-Quads or TriG
(``memory-rdf export AGENT -o FILE.nq``, or :func:`export` here), which holds the memory
network, the journal of remembers not yet processed and the store's metadata; :func:`restore`
makes a new agent of it, in any data directory.

>>> import tempfile
>>> from pathlib import Path
>>> from memory_rdf import MemoryManager, backup
>>> data = tempfile.mkdtemp()
>>> with MemoryManager("agent_007", data_dir=data) as mem:
...     mem.remember([{"role": "user", "content": "PostgreSQL 存订单"}])
...     _ = mem.wait_idle()
>>> saved = Path(data, "agent_007.nq")
>>> _ = saved.write_bytes(backup.export("agent_007", data))
>>> backup.restore("agent_008", saved, data)["nodes"]
1
>>> with MemoryManager("agent_008", data_dir=data) as mem:
...     print(mem.recall(["PostgreSQL"]))
[记忆 ...] user: PostgreSQL 存订单
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memory_rdf._agents import agent_path
from memory_rdf._config import Config
from memory_rdf._exceptions import InvalidInputError, StoreError
from memory_rdf._oxigraph import restore_backup
from memory_rdf._remote import SparqlEndpoint
from memory_rdf.inspect import DataDir, stats
from memory_rdf.inspect import export as _export

__all__ = ["BACKUP_FORMATS", "export", "restore"]

#: Formats that hold a whole store (the memory graph and the named graphs): what restore reads.
BACKUP_FORMATS = ("nquads", "trig")

_SUFFIXES = {".nq": "nquads", ".nquads": "nquads", ".trig": "trig"}


def export(agent_id: str, data_dir: DataDir = None, *, format: str = "nquads") -> bytes:
    """A complete backup of the agent (read-only, works while the agent runs): its store as
    N-Quads (default) or TriG. The same as :func:`memory_rdf.inspect.export` in those
    formats; an agent on a SPARQL endpoint gives the local layout, so it restores into a
    data directory."""
    if format not in BACKUP_FORMATS:
        raise InvalidInputError(f"a backup is one of {BACKUP_FORMATS}, got {format!r}")
    return _export(agent_id, data_dir, format=format)


def restore(agent_id: str, source: str | os.PathLike[str], data_dir: DataDir = None, *,
            format: str | None = None,
            progress: Callable[[int, int], None] | None = None,
            max_remember_chars: int | None = None) -> dict[str, Any]:
    """Make the new agent ``agent_id`` in ``data_dir`` from the backup file ``source``
    (N-Quads or TriG, as :func:`export` writes; ``format`` None: from the suffix, ``.nq`` or
    ``.trig``). The backup may come from another agent id or another machine: the store's
    metadata takes the new id. Journalled remembers in the backup are processed when the
    agent is next opened. Returns :func:`memory_rdf.inspect.stats` of the new agent.

    The store is built beside the data directory's agents in a directory of its own (a name
    no agent can have) and takes the agent's name only once complete and checked, under the
    agent's writer lock: an error leaves no agent behind, and no other process or thread opens
    or restores the agent meanwhile.

    The backup is checked before the agent exists: anything this memory_rdf would not have
    written is refused, named by one triple that shows it — what the SHACL shapes
    (``ontology/shapes.ttl``) refuse, checked without pyshacl, and the library's own
    invariants: numbers that parse and are in range, valid dateTimes, no blank nodes nor
    IRIs of other vocabularies, focus members that are nodes, texts of at most
    ``max_remember_chars`` characters (None: ``Config().max_remember_chars``), and journalled
    remembers that ``remember()`` would have accepted.

    ``progress(loaded, size)``, if given, is called with the bytes of the file loaded so far
    and its size as the load goes (every MiB, from the calling thread), for a progress bar:
    ``memory-rdf import`` shows one on a terminal.

    Raises:
        InvalidInputError: an invalid id, an agent that already has a store, a format that
            is not a whole store's (Turtle and N-Triples hold the memory graph only), or a
            file that is not a memory_rdf backup (it does not parse, has graphs an agent's
            store does not have, no memory_rdf metadata, or data memory_rdf would not have
            written); or ``data_dir`` an endpoint
            (load the N-Quads with the server's own tools there).
        SchemaVersionError: the backup is of a schema version this memory_rdf cannot read.
        StoreError: ``source`` cannot be read, or the store cannot be written.
        StoreLockedError: the agent is open, or being restored, elsewhere.
    """
    if isinstance(data_dir, SparqlEndpoint):
        raise InvalidInputError(
            "restore makes an agent in a data directory; for a SPARQL endpoint load the "
            "backup with the server's own tools (its graphs are the local layout)"
        )
    path = agent_path(agent_id, data_dir)
    fmt = _format_of(Path(source), format)
    if not Path(source).is_file():
        raise StoreError(f"cannot read the backup {source}: no such file")
    if max_remember_chars is None:
        max_remember_chars = Config().max_remember_chars
    elif (isinstance(max_remember_chars, bool) or not isinstance(max_remember_chars, int)
          or max_remember_chars < 1):
        raise InvalidInputError(
            f"max_remember_chars must be an int >= 1, got {max_remember_chars!r}")
    restore_backup(path, Path(source), fmt, agent_id, progress, max_chars=max_remember_chars)
    return stats(agent_id, data_dir)


def _format_of(source: Path, format: str | None) -> str:
    if format is not None:
        if format not in BACKUP_FORMATS:
            raise InvalidInputError(
                f"a backup to restore is one of {BACKUP_FORMATS} (a whole store), got "
                f"{format!r}"
            )
        return format
    by_suffix = _SUFFIXES.get(source.suffix.lower())
    if by_suffix is None:
        raise InvalidInputError(
            f"cannot tell the format of {source} from its suffix: a backup is N-Quads (.nq) "
            "or TriG (.trig), as 'memory-rdf export AGENT -o FILE.nq' writes (Turtle and "
            "N-Triples hold the memory graph only); or give the format"
        )
    return by_suffix
