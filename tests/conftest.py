"""Shared fixtures: real temporary Oxigraph stores and the scripted small model.

A test module that sets ``BACKENDS = ("embedded", "endpoint")`` runs each test using
``make_manager``/``mem`` twice: on an embedded store and on a loopback ``oxigraph serve``
(SPEC §8), one server for the whole session, cleared after each test.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from memory_rdf import Config, MemoryManager

from helpers import FAST, ScriptedModel
from servers import Server, Virtuoso, oxigraph_command


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    own = any(m.args and m.args[0] == "backend"
              for m in metafunc.definition.iter_markers("parametrize"))
    if "backend" in metafunc.fixturenames and not own:  # test_http_models names its own
        backends = getattr(metafunc.module, "BACKENDS", ("embedded",))
        if "endpoint" in backends:  # Virtuoso too, where it is installed (else skipped)
            backends = (*backends, "virtuoso")
        metafunc.parametrize("backend", backends, indirect=True)


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    return str(getattr(request, "param", "embedded"))


@pytest.fixture(scope="session")
def oxigraph_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One ``oxigraph serve`` on loopback for the session."""
    if oxigraph_command() is None:
        pytest.skip("the oxigraph CLI is not installed (it comes with pip install '.[test]')")
    server = Server(tmp_path_factory.mktemp("oxigraph")).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def virtuoso(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One Virtuoso 7 on loopback for the session (Debian's virtuoso-opensource)."""
    from benchmarks._servers import virtuoso_available

    if not virtuoso_available():
        pytest.skip("Virtuoso is not installed (virtuoso-t: apt-get install "
                    "virtuoso-opensource; .ci/run installs it when it can)")
    server = Virtuoso(tmp_path_factory.mktemp("virtuoso"))
    yield server
    server.stop()


@pytest.fixture
def model() -> ScriptedModel:
    return ScriptedModel()


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "memory_data"


@pytest.fixture
def make_manager(
    data_dir: Path, model: ScriptedModel, backend: str, request: pytest.FixtureRequest
) -> Iterator[Callable[..., MemoryManager]]:
    made: list[MemoryManager] = []
    server: Server | None = None
    endpoint = None
    if backend in ("endpoint", "virtuoso"):
        server = request.getfixturevalue("oxigraph_server" if backend == "endpoint"
                                         else "virtuoso")
        endpoint = server.endpoint()

    def make(agent: str = "agent", config: Config = FAST, **kw: object) -> MemoryManager:
        where: dict[str, object] = (
            {"endpoint": endpoint} if endpoint is not None else {"data_dir": data_dir}
        )
        mem = MemoryManager(agent, config=config, model=kw.pop("model", model),  # type: ignore[arg-type]
                            **where, **kw)  # type: ignore[arg-type]
        mem.initialize()
        made.append(mem)
        return mem

    yield make
    for mem in made:
        mem.close(timeout=10)
    if server is not None and endpoint is not None:
        endpoint.close()
        server.clear()


@pytest.fixture
def mem(make_manager: Callable[..., MemoryManager]) -> MemoryManager:
    return make_manager()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 20 MB tmpfs to fill up (a full disk); skipped where it cannot be mounted (needs root
    on Linux)."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        pytest.skip("mounts a 20 MB tmpfs to fill it up: needs root on Linux")
    where = tmp_path / "tmpfs"
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", str(where)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)
