"""Where an agent's memory lives: agent-id validation (SPEC §2), the default data directory
and the file that marks a directory as a store. Nothing here opens a store.

>>> agent_path("agent_001", "memory_data").as_posix()
'memory_data/agent_001'
>>> validate_agent_id("../etc")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
memory_rdf._exceptions.InvalidInputError: agent_id '../etc' is invalid: use letters, ...
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from memory_rdf._exceptions import InvalidInputError, InvalidTypeError

if TYPE_CHECKING:
    from memory_rdf._remote import SparqlEndpoint

__all__ = [
    "DATA_DIR_ENV",
    "DEFAULT_DATA_DIR",
    "STORE_MARKER",
    "agent_exists",
    "agent_path",
    "default_data_dir",
    "validate_agent_id",
]

#: The environment variable naming the data directory (read by :func:`default_data_dir`).
DATA_DIR_ENV = "MEMORY_RDF_DATA_DIR"
#: The data directory when neither an argument nor the environment names one.
DEFAULT_DATA_DIR = "memory_data"

#: RocksDB writes this file first when it creates a database; a directory without it holds no
#: store (and a read-only open would fail on it).
STORE_MARKER = "CURRENT"

_AGENT_ID_CHARS = re.compile(r"[\w.-]+")
#: Most UTF-8 bytes of an id: a file name holds 255 bytes (not characters), and the store's
#: rewrite adds ``~copy.nq`` to it.
AGENT_ID_MAX_BYTES = 240


def validate_agent_id(agent_id: object) -> str:
    """SPEC §2: 1–128 letters, digits, ``_``, ``-``, ``.``; not ``.`` or ``..``; and at most
    :data:`AGENT_ID_MAX_BYTES` bytes in UTF-8 (the file system counts bytes).

    Letters and digits are Unicode ones (``助手`` is a valid id); path separators, spaces and
    control characters never are. Checked before any file is touched.
    """
    if not isinstance(agent_id, str):
        raise InvalidTypeError(f"agent_id must be a str, got {type(agent_id).__name__}")
    if not 1 <= len(agent_id) <= 128:
        raise InvalidInputError(f"agent_id must be 1–128 characters, got {len(agent_id)}")
    if agent_id in (".", "..") or not _AGENT_ID_CHARS.fullmatch(agent_id):
        raise InvalidInputError(
            f"agent_id {agent_id!r} is invalid: use letters, digits, '_', '-', '.' "
            "(not '.' or '..')"
        )
    size = len(agent_id.encode("utf-8"))
    if size > AGENT_ID_MAX_BYTES:
        raise InvalidInputError(
            f"agent_id is {size} bytes in UTF-8; at most {AGENT_ID_MAX_BYTES} fit in a file "
            "name (a CJK character takes 3)"
        )
    return agent_id


def default_data_dir() -> Path:
    """``$MEMORY_RDF_DATA_DIR``, else ``memory_data`` (relative to the working directory)."""
    return Path(os.environ.get(DATA_DIR_ENV) or DEFAULT_DATA_DIR)


def agent_path(agent_id: str, data_dir: str | os.PathLike[str] | None = None) -> Path:
    """``{data_dir}/{agent_id}``, after checking the id (nothing is touched)."""
    base = Path(data_dir) if data_dir is not None else default_data_dir()
    return base / validate_agent_id(agent_id)


def agent_exists(agent_id: str, data_dir: str | os.PathLike[str] | SparqlEndpoint | None = None
                 ) -> bool:
    """True when ``{data_dir}/{agent_id}`` holds a store (its marker file), or, ``data_dir``
    being a :class:`~memory_rdf.SparqlEndpoint`, when the agent has memory there (SPEC §8).
    Creates nothing."""
    from memory_rdf._remote import SparqlEndpoint, remote_agent_exists

    if isinstance(data_dir, SparqlEndpoint):
        validate_agent_id(agent_id)
        return remote_agent_exists(data_dir, agent_id)
    return (agent_path(agent_id, data_dir) / STORE_MARKER).is_file()
