"""Shared fixtures: real temporary Oxigraph stores and the scripted small model."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from memory_rdf import Config, MemoryManager

from helpers import FAST, ScriptedModel


@pytest.fixture
def model() -> ScriptedModel:
    return ScriptedModel()


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "memory_data"


@pytest.fixture
def make_manager(data_dir: Path, model: ScriptedModel) -> Iterator[Callable[..., MemoryManager]]:
    made: list[MemoryManager] = []

    def make(agent: str = "agent", config: Config = FAST, **kw: object) -> MemoryManager:
        mem = MemoryManager(agent, data_dir=data_dir, config=config,
                            model=kw.pop("model", model))  # type: ignore[arg-type]
        mem.initialize()
        made.append(mem)
        return mem

    yield make
    for mem in made:
        mem.close(timeout=10)


@pytest.fixture
def mem(make_manager: Callable[..., MemoryManager]) -> MemoryManager:
    return make_manager()
