"""Every Python example of README.md and docs/*.md runs as a fresh user would run it: its own
process, a fresh working directory, nothing imported that the block does not import.

Examples that talk to a server get a real one on loopback: the SPARQL endpoint examples an
``oxigraph serve`` (their ``db.internal`` URL replaced), the Ollama example the fake LLM server
that speaks Ollama's protocol, the embeddings example a loopback embedding server. The OpenAI
and Anthropic tool loops need those SDKs and keys: they are only checked for the names they
import from memory_rdf. The docs/inspecting.md examples, and every ``memory-rdf sparql demo …``
line of the docs, read agent ``demo``, made first by ``memory-rdf demo``.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks._fake_llm import FakeLLM

from helpers import memory_rdf_command
from servers import Server

REPO = Path(__file__).resolve().parent.parent
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SDK_LOOPS = ("from openai import", "import anthropic")


def _examples() -> list[tuple[str, str]]:
    found = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for match in re.finditer(r"```python\n(.*?)```", text, flags=re.S):
            line = text.count("\n", 0, match.start()) + 1
            found.append((f"{doc.relative_to(REPO)}:{line}", match.group(1)))
    return found


EXAMPLES = _examples()


def _demo_queries() -> list[tuple[str, str]]:
    found = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
            for line in block.splitlines():
                if line.startswith("memory-rdf sparql demo '"):
                    found.append((doc.name, line))
    return found


DEMO_QUERIES = _demo_queries()


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A working directory whose ./memory_data holds agent ``demo`` (docs/inspecting.md)."""
    cwd = tmp_path_factory.mktemp("docs_demo")
    result = subprocess.run([memory_rdf_command(), "demo"], cwd=cwd, capture_output=True,
                            text=True, timeout=300, env=_env())
    assert result.returncode == 0, result.stderr
    return cwd


@pytest.fixture
def endpoint(oxigraph_server: Server) -> Iterator[Server]:
    """The session's ``oxigraph serve`` (conftest), emptied after the example."""
    yield oxigraph_server
    oxigraph_server.clear()


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_RDF_")}
    env.pop("PYTHONPATH", None)  # the installed package, as a user has it
    return env


def test_the_docs_have_python_examples() -> None:
    assert len(EXAMPLES) >= 10
    assert any("inspecting.md" in where for where, _ in EXAMPLES)


def test_the_docs_name_every_public_method_and_config_field() -> None:
    """SPEC §3 and §4: what a user can call or configure is findable in the docs (the README
    and the pages of docs/ it links to)."""
    from memory_rdf import Config, MemoryManager, MemorySystem

    text = "\n".join(doc.read_text(encoding="utf-8") for doc in DOCS)
    names = [f.name for f in dataclasses.fields(Config)]
    names += [n for cls in (MemoryManager, MemorySystem) for n in dir(cls)
              if not n.startswith("_")]
    missing = sorted({n for n in names if not re.search(rf"\b{n}\b", text)})
    assert missing == []


def test_no_example_keeps_its_memory_in_a_fixed_absolute_directory() -> None:
    """A fixed path outlives the example: the next run remembers everything again (README's
    replies example printed each entry twice on a second run)."""
    for where, code in EXAMPLES:
        assert not re.search(r"data_dir\s*=\s*[\"']/", code), where


@pytest.mark.parametrize("where,code", EXAMPLES, ids=[w for w, _ in EXAMPLES])
def test_python_example_runs(where: str, code: str, tmp_path: Path, request: pytest.FixtureRequest
                             ) -> None:
    if any(marker in code for marker in SDK_LOOPS):
        _check_memory_rdf_imports(code)
        return
    cwd = tmp_path
    if "inspecting.md" in where:
        cwd = request.getfixturevalue("demo_dir")
    if "db.internal" in code:
        server = request.getfixturevalue("endpoint")
        code = code.replace("http://db.internal:7878", server.base)
    if "OpenAIEmbedder(" in code:  # docs/embeddings.md: the loopback embedding server
        from _embed_server import embedding_server

        with embedding_server(models=("all-minilm",)) as (url, _):
            result = _run(code.replace("http://localhost:8080/v1", f"{url}/v1"), cwd)
    elif "OllamaModel(" in code:
        with FakeLLM(models=("qwen2.5:7b",)) as llm:
            code = code.replace('OllamaModel("qwen2.5:7b",',
                                f'OllamaModel("qwen2.5:7b", "{llm.url}",')
            result = _run(code, cwd)
    else:
        result = _run(code, cwd)
    assert result.returncode == 0, f"{where}:\n{result.stderr[-3000:]}"
    if "print(" in code:
        assert result.stdout.strip(), f"{where} printed nothing"


def _run(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True,
                          text=True, timeout=300, env=_env())


def _check_memory_rdf_imports(code: str) -> None:
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(
                "memory_rdf"):
            module = importlib.import_module(node.module)
            for alias in node.names:
                assert hasattr(module, alias.name), f"{node.module}.{alias.name}"


@pytest.mark.parametrize("where,line", DEMO_QUERIES)
def test_sparql_example_runs_on_the_demo(where: str, line: str, demo_dir: Path) -> None:
    args = shlex.split(line, comments=True)
    result = subprocess.run([memory_rdf_command(), *args[1:], "--format", "json"], cwd=demo_dir,
                            capture_output=True, text=True, timeout=120, env=_env())
    assert result.returncode == 0, f"{where}: {line}\n{result.stderr}"
    assert json.loads(result.stdout)["results"]["bindings"], f"{where}: no rows: {line}"
