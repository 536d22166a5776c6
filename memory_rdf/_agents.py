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
import unicodedata
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
    "agents",
    "agent_path",
    "default_data_dir",
    "refuse_shared_directory",
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

#: Names that Windows gives to devices in every directory, with any extension (``con``,
#: ``NUL.txt``, ``COM1``): a store directory of that name cannot be made there.
_WINDOWS_DEVICES = re.compile(r"(?:CON|PRN|AUX|NUL|COM[0-9\u00b9\u00b2\u00b3]"
                              r"|LPT[0-9\u00b9\u00b2\u00b3])(?:\..*)?", re.IGNORECASE)
#: Whether ids are checked for Windows' file names (:func:`windows_name_problem`).
_WINDOWS = os.name == "nt"


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
    if not unicodedata.is_normalized("NFC", agent_id):
        raise InvalidInputError(
            f"agent_id {agent_id!r} is not in Unicode's composed form (NFC): write it as "
            f"{unicodedata.normalize('NFC', agent_id)!r} (macOS's file systems would take the "
            "two spellings for one directory)"
        )
    return agent_id


def _refuse_windows_name(agent_id: str) -> None:
    """On Windows, an id that cannot be a directory of its own (:func:`windows_name_problem`)
    is refused before its directory is made or opened; an endpoint agent makes none."""
    problem = windows_name_problem(agent_id) if _WINDOWS else None
    if problem:
        raise InvalidInputError(
            f"agent_id {agent_id!r} cannot be a directory on Windows: {problem}")


def windows_name_problem(agent_id: str) -> str | None:
    """Why Windows could not keep ``agent_id`` as a directory of its own, or None. Checked on
    Windows only, where an agent's directory is made or opened (:func:`agent_path`,
    :func:`refuse_shared_directory`); elsewhere, and for an agent on a SPARQL endpoint, these
    ids work, as SPEC §2 allows.

    >>> windows_name_problem("nul.txt")
    "it is the name of a device ('NUL')"
    >>> windows_name_problem("v2.")
    "Windows drops a trailing '.': it would be 'v2'"
    >>> windows_name_problem("agent.v2") is None
    True
    """
    if _WINDOWS_DEVICES.fullmatch(agent_id):
        return f"it is the name of a device ({agent_id.partition('.')[0].upper()!r})"
    if agent_id.endswith("."):
        return f"Windows drops a trailing '.': it would be {agent_id.rstrip('.')!r}"
    return None


def refuse_shared_directory(path: Path) -> None:
    """Refuse an agent directory that another entry of the data directory also reaches.

    SPEC §2: ``{data_dir}/{agent_id}`` holds that agent's store and nothing of any other
    agent's. A file system that ignores case (macOS's and Windows' by default) or Unicode
    normalization (macOS) opens ``Alice``'s directory for ``alice``, and a symbolic link
    can make two names one directory: the second id would read and write the first one's
    memory. Checked before anything is created or written (nothing to do when ``path`` does
    not exist yet). Raises :class:`~memory_rdf.InvalidInputError` naming the other entry.

    An entry whose name is ``path``'s in another Unicode normalization is ``path`` itself
    (HFS+ lists names decomposed; ids are composed, :func:`validate_agent_id`). A data
    directory that cannot be listed (search permission only) is not checked. The check lists
    the data directory once per open: ~10 ms with 10,000 entries.
    """
    _refuse_windows_name(path.name)
    try:
        reached = path.stat()
        entries = list(os.scandir(path.parent))
    except OSError:  # not there yet, or a data directory that cannot be listed
        return
    names = set()
    for entry in entries:
        name = unicodedata.normalize("NFC", entry.name)
        names.add(name)
        if name == path.name:
            continue
        try:
            # DirEntry.inode() costs no system call on POSIX: only a link or the same inode
            # needs the entry's own stat (which follows links).
            if not entry.is_symlink() and entry.inode() != reached.st_ino:
                continue
            same = os.path.samestat(entry.stat(), reached)
        except OSError:
            continue
        if same:
            raise InvalidInputError(
                f"agent_id {path.name!r} reaches the same directory as {entry.name!r} in "
                f"{path.parent} (this file system ignores case, or one is a link to the "
                "other): every agent's memory is its own; choose an id that differs by more "
                "than case"
            )
    if path.name not in names:
        raise InvalidInputError(
            f"agent_id {path.name!r}: this file system opens {path} under another name; "
            "choose another id"
        )


def default_data_dir() -> Path:
    """``$MEMORY_RDF_DATA_DIR``, else ``memory_data`` (relative to the working directory)."""
    return Path(os.environ.get(DATA_DIR_ENV) or DEFAULT_DATA_DIR)


def agent_path(agent_id: str, data_dir: str | os.PathLike[str] | None = None) -> Path:
    """``{data_dir}/{agent_id}``, after checking the id (nothing is touched)."""
    base = Path(data_dir) if data_dir is not None else default_data_dir()
    path = base / validate_agent_id(agent_id)
    _refuse_windows_name(agent_id)
    return path


def agents(data_dir: str | os.PathLike[str] | SparqlEndpoint | None = None) -> list[str]:
    """Ids of the agents that have a store in ``data_dir`` (or memory on the endpoint),
    sorted. Entries that are not a valid id's store (a rewrite's ``~new``, files, other
    directories) are left out. Creates nothing; a data directory that does not exist has
    none."""
    from memory_rdf._remote import SparqlEndpoint, remote_agents

    if isinstance(data_dir, SparqlEndpoint):
        return remote_agents(data_dir)
    base = Path(data_dir) if data_dir is not None else default_data_dir()
    try:
        entries = list(os.scandir(base))
    except FileNotFoundError:
        return []
    found = []
    for entry in entries:
        name = unicodedata.normalize("NFC", entry.name)
        try:
            validate_agent_id(name)
        except (InvalidInputError, InvalidTypeError):
            continue
        if (Path(entry.path) / STORE_MARKER).is_file():
            found.append(name)
    return sorted(found)


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
