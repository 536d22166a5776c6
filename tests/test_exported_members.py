"""The public surface: what ``memory_rdf`` and its public modules promise, and that the CLI and
the docs stand on it alone (STYLE: "a small public surface over private rooms")."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import memory_rdf

ROOT = Path(memory_rdf.__file__).resolve().parent
REPO = ROOT.parent

#: Modules a user may import; everything else in the package is private (leading underscore).
PUBLIC_MODULES = ["memory_rdf", "memory_rdf.backup", "memory_rdf.cli", "memory_rdf.demo",
                  "memory_rdf.inspect",
                  "memory_rdf.mcp_server", "memory_rdf.small_model", "memory_rdf.tools"]


def _public_modules() -> list[str]:
    names = ["memory_rdf"]
    for info in pkgutil.walk_packages([str(ROOT)], prefix="memory_rdf."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            names.append(info.name)
    return sorted(names)


def test_the_public_modules_are_the_ones_listed() -> None:
    found = _public_modules()
    # modules other engineers add (tools, an MCP server, …) must be listed here on purpose
    unlisted = sorted(set(found) - set(PUBLIC_MODULES))
    assert all(name.split(".")[-1] in KNOWN_LATER for name in unlisted), unlisted
    assert set(PUBLIC_MODULES) <= set(found)


#: Public modules that may appear beside the listed ones (each still checked below).
KNOWN_LATER = {"tools", "mcp", "server", "mcp_server", "endpoint", "stores"}


@pytest.mark.parametrize("name", _public_modules())
def test_every_public_name_is_in_all_and_nothing_private_is(name: str) -> None:
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{name} has no __all__"
    assert exported == sorted(exported, key=str), f"{name}.__all__ is not sorted"
    assert len(set(exported)) == len(exported)
    for attr in exported:
        assert hasattr(module, attr), f"{name}.__all__ names a missing {attr}"
        assert attr == "__version__" or not attr.startswith("_"), f"{name} exports {attr}"
    # every public function or class the module defines is promised in __all__ (the package
    # root: everything it re-exports from its private modules)
    for attr, value in vars(module).items():
        if attr.startswith("_") or attr in exported or not callable(value):
            continue
        owner = getattr(value, "__module__", None) or ""
        ours = owner.startswith("memory_rdf.") if name == "memory_rdf" else owner == name
        assert not ours, f"{name}.{attr} is public but not in __all__"


def test_the_package_exports_the_documented_names() -> None:
    expected = {
        "Config", "ConfigError", "HTTPModel", "HeuristicModel", "InvalidInputError",
        "InvalidTypeError", "MemoryClosedError", "MemoryManager", "MemoryRDFError",
        "MemorySystem", "Message", "ModelError", "OllamaModel", "OpenAIModel",
        "PermanentModelError", "Processed", "QueryLimitError", "QueryRefusedError",
        "QueryTimeoutError", "QueueFullError",
        "SchemaVersionError", "SmallModel", "SparqlError", "StoreError", "StoreLockedError",
        "StoreUnavailableError",
        "Templates",
        "UnknownAgentError", "UpdateRefusedError", "__version__", "coerce_messages", "inspect",
        "model_from_env",
    }
    assert expected <= set(memory_rdf.__all__)
    for name in memory_rdf.__all__:
        value = getattr(memory_rdf, name)
        if isinstance(value, type) and issubclass(value, Exception):
            assert issubclass(value, memory_rdf.MemoryRDFError), name


def _imports(path: Path) -> list[tuple[str, str | None, int]]:
    """(module, name or None, line) of every import of memory_rdf in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[tuple[str, str | None, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] == "memory_rdf":
                found += [(node.module, a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.Import):
            found += [(a.name, None, node.lineno) for a in node.names
                      if a.name.split(".")[0] == "memory_rdf"]
    return found


def test_the_cli_imports_only_public_names() -> None:
    """The command line is a user of the library, not an insider."""
    imports = _imports(ROOT / "cli.py")
    assert imports, "cli.py imports nothing from memory_rdf?"
    for module, name, line in imports:
        assert not any(p.startswith("_") for p in module.split(".")), (
            f"cli.py:{line} imports the private module {module}")
        if name is None:
            continue
        assert not name.startswith("_") or name == "__version__", f"cli.py:{line}: {name}"
        target = importlib.import_module(module)
        if name not in getattr(target, "__all__", ()):
            # a public submodule imported from its package
            importlib.import_module(f"{module}.{name}")


def test_the_cli_reaches_into_no_private_attribute() -> None:
    text = (ROOT / "cli.py").read_text(encoding="utf-8")
    tree = ast.parse(text)
    private = [
        f"{node.lineno}: .{node.attr}" for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr.startswith("_")
        and not node.attr.startswith("__")
    ]
    assert private == []


DOC_PAGES = ["README.md", *sorted(f"docs/{p.name}" for p in (REPO / "docs").glob("*.md"))]


@pytest.mark.parametrize("doc", DOC_PAGES)
def test_the_docs_import_no_private_module(doc: str) -> None:
    text = (REPO / doc).read_text(encoding="utf-8")
    assert not re.findall(r"memory_rdf\._\w+", text)


def test_the_readme_layout_names_every_module() -> None:
    """docs/how-it-works.md's "How the code is laid out" stays true: every module and
    subpackage is in it."""
    text = (REPO / "docs" / "how-it-works.md").read_text(encoding="utf-8") + "\n## "
    match = re.search(r"^## How the code is laid out\n(.*?)^## ", text, re.S | re.M)
    assert match, "docs/how-it-works.md has no 'How the code is laid out' section"
    section = match.group(1)
    names = {p.name for p in ROOT.glob("*.py")}
    names |= {f"{p.name}/" for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith("__")}
    missing = sorted(n for n in names if f"`{n}`" not in section)
    assert missing == []


def test_the_layout_lists_every_storage_module_with_its_lines() -> None:
    """The storage package's table in "How the code is laid out" names each module of
    ``_oxigraph/`` with its line count, kept roughly true (within 25% or 40 lines)."""
    text = (REPO / "docs" / "how-it-works.md").read_text(encoding="utf-8") + "\n## "
    match = re.search(r"^## How the code is laid out\n(.*?)^## ", text, re.S | re.M)
    assert match
    stated = {name: int(lines) for name, lines in
              re.findall(r"^\| `(\w+\.py)` \| (\d+) \|", match.group(1), re.M)}
    actual = {p.name: len(p.read_text(encoding="utf-8").splitlines())
              for p in (ROOT / "_oxigraph").glob("*.py")}
    assert sorted(stated) == sorted(actual)
    off = {name: (stated[name], lines) for name, lines in actual.items()
           if abs(stated[name] - lines) > max(40, lines // 4)}
    assert off == {}, "update the line counts in docs/how-it-works.md"
