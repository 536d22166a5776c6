"""Every docstring example in the package runs (STYLE: "docs that cannot rot")."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
from pathlib import Path

import pytest

import memory_rdf

ROOT = Path(memory_rdf.__file__).resolve().parent


def _modules_with_examples() -> list[str]:
    names = ["memory_rdf"]
    names += [i.name for i in pkgutil.walk_packages([str(ROOT)], prefix="memory_rdf.")]
    finder = doctest.DocTestFinder()
    return sorted(
        name for name in names
        if any(t.examples for t in finder.find(importlib.import_module(name)))
    )


def test_the_package_has_examples() -> None:
    assert {"memory_rdf", "memory_rdf._manager", "memory_rdf.inspect"} <= set(
        _modules_with_examples())


@pytest.mark.parametrize("name", _modules_with_examples())
def test_docstring_examples_run(name: str, tmp_path: Path,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    module = importlib.import_module(name)
    tests = [t for t in doctest.DocTestFinder().find(module) if t.examples]
    monkeypatch.chdir(tmp_path)  # an example that writes relative paths writes here
    monkeypatch.delenv("MEMORY_RDF_DATA_DIR", raising=False)
    monkeypatch.delenv("MEMORY_RDF_MODEL", raising=False)  # the built-in heuristic model
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in tests:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} docstring example(s) of {name} failed"
