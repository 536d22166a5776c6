"""An agent's memory is someone's conversations: its store directory is created readable by
its owner only, whatever the umask, and a purge's rewrite keeps the directory's permissions
(the user's own choice included) instead of falling back to RocksDB's 0755."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_rdf import MemoryManager, MemorySystem

from helpers import FAST, ScriptedModel, remember

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")


@pytest.fixture
def open_umask() -> Iterator[None]:
    """The usual desktop umask, under which RocksDB alone makes world-readable files."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_agent_and_a_new_data_directory_are_private(tmp_path: Path, open_umask: None) -> None:
    data = tmp_path / "deep" / "memory_data"
    with MemoryManager("alice", data_dir=data, config=FAST, model=ScriptedModel()) as mem:
        remember(mem, "my bank PIN is 4321")
        assert mode(data / "alice") == 0o700
        assert mode(data) == 0o700  # created here: it lists the agents
        assert mode(tmp_path / "deep") == 0o755  # a parent made on the way: the umask's
        assert mode(data / "~locks") == 0o700 and mode(data / "~locks" / "alice") == 0o600
    # other users cannot list or read any file of the store
    for path in (data / "alice").rglob("*"):
        assert not mode(path.parent) & 0o077


def test_an_existing_data_directory_keeps_its_permissions(tmp_path: Path,
                                                          open_umask: None) -> None:
    data = tmp_path / "shared"
    data.mkdir(mode=0o755)
    with MemorySystem(data_dir=data, config=FAST, model=ScriptedModel()) as system:
        remember(system.agent("bob"), "hello")
    assert mode(data) == 0o755
    assert mode(data / "bob") == 0o700


def test_a_purge_keeps_the_directory_permissions(tmp_path: Path, open_umask: None) -> None:
    data = tmp_path / "memory_data"
    with MemoryManager("carol", data_dir=data, config=FAST, model=ScriptedModel()) as mem:
        remember(mem, "the door code is 1234 | the cat is called Miso")
        os.chmod(data / "carol", 0o750)  # the user shares it with their group
        ids = [m["id"] for m in mem.memories(limit=None)]  # type: ignore[index]
        mem.forget(ids[:1], purge=True)
        assert mode(data / "carol") == 0o750
        os.chmod(data / "carol", 0o700)
        mem.forget(ids[:1], purge=True)
        assert mode(data / "carol") == 0o700  # not RocksDB's 0755
        assert sorted(p.name for p in data.iterdir()) == ["carol", "~locks"]  # no copy left
