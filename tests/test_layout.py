"""The storage package's walls (issue 36): ``memory_rdf/_oxigraph/`` is the only part of
memory_rdf that imports pyoxigraph (or oxrdflib, its rdflib store), and none of its modules
grows past ~800 lines. Read from the source with ``ast``: lazy imports inside functions
count too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import memory_rdf

ROOT = Path(memory_rdf.__file__).resolve().parent
PACKAGE = ROOT / "_oxigraph"
#: Modules that talk to the store engine directly.
ENGINE = {"pyoxigraph", "oxrdflib"}
#: The most lines a module of the storage package may have.
MAX_LINES = 800


def _engine_imports(path: Path) -> list[str]:
    """``line: module`` of every import of pyoxigraph or oxrdflib in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found += [f"{node.lineno}: {n}" for n in names if n.split(".")[0] in ENGINE]
    return found


def test_only_the_storage_package_imports_pyoxigraph() -> None:
    outside = {
        str(path.relative_to(ROOT)): imports
        for path in sorted(ROOT.rglob("*.py"))
        if PACKAGE not in path.parents and (imports := _engine_imports(path))
    }
    assert outside == {}, "import pyoxigraph only in memory_rdf/_oxigraph/ (give it a helper)"


def test_the_check_sees_top_level_and_lazy_imports() -> None:
    # the detector above finds the engine where it is: at the top of a module, and imported
    # inside a function (rdflib_view imports oxrdflib only when a graph is asked for)
    assert any(i.endswith(": pyoxigraph") for i in _engine_imports(PACKAGE / "agent_store.py"))
    assert any(i.endswith(": oxrdflib") for i in _engine_imports(PACKAGE / "rdflib_view.py"))


@pytest.mark.parametrize("module", sorted(p.name for p in PACKAGE.glob("*.py")))
def test_no_storage_module_is_over_800_lines(module: str) -> None:
    lines = len((PACKAGE / module).read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"_oxigraph/{module} has {lines} lines: split it by concern"
