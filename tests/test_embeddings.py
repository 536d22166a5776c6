"""Recall by meaning (SPEC §5.7): embedders on a real loopback server speaking the OpenAI and
Ollama embedding protocols (a deterministic concept table, ``_embed_server``), vectors kept
in the agent's store, the semantic entry through the public API, tools, MCP and the CLI."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import pytest
from _embed_server import Embeddings, cosine, embedding_server, vector
from _sst import sst_contents
from mcp import Client, StdioServerParameters

from memory_rdf import (
    HeuristicModel,
    InvalidInputError,
    MemoryManager,
    MemorySystem,
    ModelError,
    OllamaEmbedder,
    OpenAIEmbedder,
    PermanentModelError,
    backup,
    inspect,
)
from memory_rdf.tools import call_tool, openai_tools

from helpers import FAST, memory_rdf_command, say

BACKENDS = ("embedded", "endpoint")
REPO = Path(__file__).resolve().parent.parent
CHECKOUT = {"PYTHONPATH": os.pathsep.join(filter(None, [str(REPO),
                                                        os.environ.get("PYTHONPATH")]))}

RYOKAN = "We stayed at a lovely ryokan near the station in Kyoto"
DEPLOY = "The deploy to production is on Friday at noon"
LUGUAN = "我们在京都住的旅馆离车站很近"
XIAOMAO = "我家的小猫叫年糕"
#: Stays on "remembers" for a real config: no automatic compression, quick retries.
CONFIG = FAST.replace(focus_limit=1)


@pytest.fixture
def server() -> Iterator[tuple[str, type[Embeddings]]]:
    with embedding_server() as served:
        yield served


@pytest.fixture
def embedder(server: tuple[str, type[Embeddings]]) -> Iterator[OpenAIEmbedder]:
    with OpenAIEmbedder("concepts", server[0] + "/v1", retries=0, cool_down=0.2) as emb:
        yield emb


def _remember(mem: MemoryManager, *contents: str) -> None:
    for content in contents:
        mem.remember(say(content))
    assert mem.wait_idle(timeout=60)


def test_the_fake_embedder_puts_paraphrases_near_and_strangers_far() -> None:
    assert cosine(vector("hotel"), vector(RYOKAN)) > 0.5
    assert cosine(vector("宾馆"), vector(LUGUAN)) > 0.5
    assert cosine(vector("猫"), vector(XIAOMAO)) > 0.5
    assert cosine(vector("hotel"), vector(DEPLOY)) < 0.2
    assert cosine(vector("宾馆"), vector(XIAOMAO)) < 0.2


# -- the ryokan/hotel and the Chinese paraphrase cases, through the public API ------------------


def test_hotel_finds_the_ryokan_by_meaning(make_manager: Callable[..., MemoryManager],
                                           embedder: OpenAIEmbedder) -> None:
    mem = make_manager(config=CONFIG, embedder=embedder)
    _remember(mem, RYOKAN, DEPLOY, "We bought a new guitar for the concert")
    assert mem.recall(["hotel"], entry="keywords") == ""  # no shared word: lexically nothing
    found = mem.recall(["hotel"], entry="semantic")
    assert "ryokan" in found
    assert "deploy" not in found and "guitar" not in found  # far in meaning: not matched
    assert "ryokan" in mem.recall(["hotel"], entry="both")
    # the question as text, no keywords
    assert "ryokan" in mem.recall([], entry="semantic", query="Which hotel did we stay at?")
    stats = mem.stats()
    assert stats["vectors"] == stats["nodes"] == 3 and stats["vectors_missing"] == 0
    assert stats["embedder"] == "concepts" and stats["vector_search"] == "exact"


def test_a_chinese_paraphrase_is_found(make_manager: Callable[..., MemoryManager],
                                      embedder: OpenAIEmbedder) -> None:
    mem = make_manager(config=CONFIG, embedder=embedder)
    _remember(mem, LUGUAN, XIAOMAO, DEPLOY)
    assert mem.recall(["宾馆"], entry="keywords") == ""
    found = mem.recall(["宾馆"], entry="semantic")
    assert "旅馆" in found and "小猫" not in found and "deploy" not in found
    assert "旅馆" in mem.recall(["宾馆"], entry="both")
    assert "小猫" in mem.recall([], entry="semantic", query="我们养的猫叫什么？")


def test_similarity_ranks_a_paraphrase_among_lexical_matches(
        make_manager: Callable[..., MemoryManager], embedder: OpenAIEmbedder) -> None:
    """SPEC §5.7: similarity is part of the rank — with the question as query, the memory
    that means it comes before one that only shares a word."""
    mem = make_manager(config=CONFIG, embedder=embedder)
    _remember(mem, "Kyoto trains were late again", RYOKAN, DEPLOY)
    text = mem.recall(["Kyoto"], entry="both", query="the hotel in Kyoto")
    assert text.index("ryokan") < text.index("trains")


def test_the_ollama_embedder(make_manager: Callable[..., MemoryManager],
                             server: tuple[str, type[Embeddings]]) -> None:
    with OllamaEmbedder("concepts", server[0], retries=0) as emb:
        mem = make_manager(config=CONFIG, embedder=emb)
        _remember(mem, RYOKAN, DEPLOY)
        assert "ryokan" in mem.recall(["hotel"], entry="semantic")
        assert emb.dimension == len(vector("x"))
    assert all(texts for texts in server[1].requests)


def test_recall_async_and_arecall_make_the_query_vector_off_the_caller(
        make_manager: Callable[..., MemoryManager], embedder: OpenAIEmbedder) -> None:
    mem = make_manager(config=CONFIG, embedder=embedder)
    _remember(mem, RYOKAN, DEPLOY)
    assert "ryokan" in mem.recall_async(["hotel"], entry="semantic").result(30)

    async def main() -> str:
        return await mem.arecall([], entry="semantic", query="an inn for the night")

    assert "ryokan" in anyio.run(main)


# -- without an embedder nothing changes ---------------------------------------------------------


def test_without_an_embedder_the_semantic_entry_is_refused_and_stats_unchanged(
        mem: MemoryManager) -> None:
    _remember(mem, RYOKAN)
    with pytest.raises(InvalidInputError, match="embedder"):
        mem.recall(["hotel"], entry="semantic")
    assert "vectors" not in mem.stats()
    assert mem.recall(["hotel"], query="any hotel") == ""  # query= needs an embedder to count
    with pytest.raises(TypeError, match="query"):
        mem.recall(["hotel"], query=3)  # type: ignore[arg-type]


def test_an_embedder_that_is_not_one_is_refused(data_dir: Path) -> None:
    with pytest.raises(TypeError, match="Embedder"):
        MemoryManager("a", data_dir=data_dir, embedder="openai:all-minilm")  # type: ignore[arg-type]


def test_numpy_missing_says_what_to_install(tmp_path: Path) -> None:
    code = ("import sys; sys.modules['numpy'] = None\n"
            "from memory_rdf import MemoryManager, OpenAIEmbedder, ConfigError\n"
            "emb = OpenAIEmbedder('m', 'http://127.0.0.1:9/v1')\n"
            "try:\n    MemoryManager('a', data_dir=sys.argv[1], embedder=emb)\n"
            "except ConfigError as exc:\n    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                         text=True, env={**os.environ, **CHECKOUT}, timeout=120)
    assert "pip install 'memory-rdf[embeddings]'" in out.stdout, out.stderr


# -- tools, MCP, CLI -----------------------------------------------------------------------------


def test_call_tool_passes_the_question(make_manager: Callable[..., MemoryManager],
                                       embedder: OpenAIEmbedder) -> None:
    mem = make_manager(config=CONFIG, embedder=embedder)
    call_tool(mem, "remember", {"messages": say(RYOKAN, DEPLOY)})
    assert mem.wait_idle(timeout=60)
    schema = {t["function"]["name"]: t for t in openai_tools()}["recall"]["function"]
    assert "query" in schema["parameters"]["properties"]
    answer = call_tool(mem, "recall",
                       {"keywords": ["hotel"], "query": "Which inn did we sleep at?"})
    assert "ryokan" in answer
    answer = call_tool(mem, "recall", json.dumps(
        {"keywords": [], "entry": "semantic", "query": "宾馆"}))
    assert "ryokan" in answer


def test_mcp_recall_by_meaning(tmp_path: Path, server: tuple[str, type[Embeddings]]) -> None:
    data_dir = tmp_path / "memory_data"
    params = StdioServerParameters(
        command=memory_rdf_command(),
        args=["serve", "--data-dir", str(data_dir), "--embedder", "openai:concepts",
              "--embedder-url", server[0] + "/v1"],
        env={"MEMORY_RDF_MODEL": "heuristic", **CHECKOUT},
    )

    async def main() -> None:
        async with Client(params) as client:
            ack = await client.call_tool("remember", {"messages": say(LUGUAN)})
            assert not ack.is_error
            ack = await client.call_tool("remember", {"messages": say(DEPLOY)})
            assert not ack.is_error
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert "query" in tools["recall"].input_schema["properties"]
            found = await client.call_tool(
                "recall", {"keywords": ["宾馆"], "query": "我们住的宾馆在哪里？"})
            assert not found.is_error
            assert "旅馆" in found.content[0].text
            hotel = await client.call_tool("recall", {"keywords": [], "entry": "semantic",
                                                      "query": "hotel"})
            assert "旅馆" in hotel.content[0].text and "deploy" not in hotel.content[0].text

    anyio.run(main)
    assert server[1].requests  # the server embedded through the spawned process


def test_cli_remembers_and_recalls_by_meaning(tmp_path: Path,
                                              server: tuple[str, type[Embeddings]]) -> None:
    data_dir = str(tmp_path / "memory_data")
    env = {**os.environ, **CHECKOUT, "MEMORY_RDF_MODEL": "heuristic",
           "MEMORY_RDF_EMBEDDER": "openai:concepts", "MEMORY_RDF_EMBEDDER_URL": server[0] + "/v1"}
    messages = tmp_path / "chat.json"
    messages.write_text(json.dumps({"sessions": [{"messages": say(RYOKAN)},
                                                 {"messages": say(DEPLOY)}]}))
    cmd = memory_rdf_command()
    done = subprocess.run([cmd, "remember", "trip", str(messages), "--data-dir", data_dir],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    found = subprocess.run(
        [cmd, "recall", "trip", "--entry", "semantic", "--query", "hotel", "--data-dir",
         data_dir], capture_output=True, text=True, env=env, timeout=120)
    assert found.returncode == 0, found.stderr
    assert "ryokan" in found.stdout and "deploy" not in found.stdout
    no_embedder = {k: v for k, v in env.items() if not k.startswith("MEMORY_RDF_EMBEDDER")}
    refused = subprocess.run([cmd, "recall", "trip", "hotel", "--entry", "semantic",
                              "--data-dir", data_dir], capture_output=True, text=True,
                             env=no_embedder, timeout=120)
    assert refused.returncode == 2 and "embedder" in refused.stderr
    bad = subprocess.run([cmd, "recall", "trip", "hotel", "--embedder", "minilm",
                          "--data-dir", data_dir], capture_output=True, text=True,
                         env=no_embedder, timeout=120)
    assert bad.returncode == 2 and "openai:MODEL" in bad.stderr


# -- vectors are part of the memory ---------------------------------------------------------------


def _vector_lines(nquads: bytes) -> list[str]:
    return [line for line in nquads.decode().splitlines()
            if "ontology#vector>" in line and "graph/vectors" in line]


def test_export_and_import_keep_the_vectors(data_dir: Path, embedder: OpenAIEmbedder,
                                            server: tuple[str, type[Embeddings]],
                                            tmp_path: Path) -> None:
    with MemoryManager("trip", data_dir=data_dir, config=CONFIG, embedder=embedder) as mem:
        _remember(mem, RYOKAN, DEPLOY)
    dump = backup.export("trip", data_dir)
    assert len(_vector_lines(dump)) == 2
    assert b"embeddingModel" in dump
    assert b"ontology#vector>" not in inspect.export("trip", data_dir, format="turtle")
    (tmp_path / "trip.nq").write_bytes(dump)
    backup.restore("copy", tmp_path / "trip.nq", data_dir)
    made = len(server[1].requests)
    with MemoryManager("copy", data_dir=data_dir, config=CONFIG, embedder=embedder) as mem:
        assert "ryokan" in mem.recall(["hotel"], entry="semantic")
        assert mem.stats()["vectors_missing"] == 0
    assert server[1].requests[made:] == [["hotel"]]  # only the query: the vectors came along


def test_an_import_with_a_broken_vector_graph_is_refused(data_dir: Path,
                                                         embedder: OpenAIEmbedder,
                                                         tmp_path: Path) -> None:
    with MemoryManager("trip", data_dir=data_dir, config=CONFIG, embedder=embedder) as mem:
        _remember(mem, RYOKAN)
    dump = backup.export("trip", data_dir).decode()
    planted = dump + ('<https://example.org/x> <https://w3id.org/memory-rdf/ontology#vector> '
                      '"AAAA" <https://w3id.org/memory-rdf/graph/vectors> .\n')
    (tmp_path / "bad.nq").write_text(planted)
    with pytest.raises(InvalidInputError, match="vector"):
        backup.restore("bad", tmp_path / "bad.nq", data_dir)
    assert not (data_dir / "bad").exists()


def _files_holding(root: Path, needle: str) -> list[str]:
    data = needle.encode()

    def holds(path: Path) -> bool:
        raw = path.read_bytes()
        return data in raw or (path.suffix == ".sst" and data in sst_contents(raw))

    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and holds(p))


def test_forget_takes_the_vector_and_purge_erases_its_bytes(
        data_dir: Path, embedder: OpenAIEmbedder) -> None:
    with MemoryManager("trip", data_dir=data_dir, config=CONFIG, embedder=embedder) as mem:
        _remember(mem, RYOKAN, DEPLOY, XIAOMAO)
        ids = {m["content"]: m["id"] for m in mem.memories(limit=None)}
        lines = _vector_lines(backup.export("trip", data_dir))
        stored = {re.search(r"node/(\w+)>", ln).group(1):  # type: ignore[union-attr]
                  re.search(r'"([A-Za-z0-9+/=]+)"', ln).group(1) for ln in lines}  # type: ignore[union-attr]
        ryokan_id, deploy_id = ids[f"user: {RYOKAN}"], ids[f"user: {DEPLOY}"]
        assert mem.forget([deploy_id]) == 1
        assert deploy_id not in str(_vector_lines(backup.export("trip", data_dir)))
        assert mem.stats()["vectors"] == 2
        mem.store.flush()  # as a long-running agent would have
        assert _files_holding(data_dir / "trip", stored[ryokan_id])
        assert mem.forget([ryokan_id], purge=True) == 1
        assert _files_holding(data_dir, stored[ryokan_id]) == []
        assert _files_holding(data_dir, stored[deploy_id]) == []
        assert mem.recall(["hotel"], entry="semantic") == ""
        assert "小猫" in mem.recall(["猫"], entry="semantic")  # the others still work
    assert _files_holding(data_dir, stored[ryokan_id]) == []


#: A memory long enough for a scan to shorten (with :func:`_shortened_by_a_scan`'s links).
LONG = "We stayed at a ryokan in Kyoto and then went on by train to the coast for sushi"


@contextlib.contextmanager
def _shortened_by_a_scan(data_dir: Path, embedder: OpenAIEmbedder,
                         remember: bool = True) -> Iterator[MemoryManager]:
    """An agent whose links are weak (importance 0.6: a scan shortens its memories), open,
    with :data:`LONG` and another memory remembered and their vectors made (``remember``)."""
    from helpers import ScriptedModel

    weak = CONFIG.replace(link_initial_strength=0.3)
    with MemoryManager("trip", data_dir=data_dir, config=weak, model=ScriptedModel(),
                       embedder=embedder) as mem:
        if remember:
            mem.remember(say(f"{LONG} | {DEPLOY}"))
            assert mem.wait_idle(timeout=60)
        yield mem


def test_compression_makes_the_vector_again(data_dir: Path, embedder: OpenAIEmbedder,
                                            server: tuple[str, type[Embeddings]]) -> None:
    long = LONG
    with _shortened_by_a_scan(data_dir, embedder) as mem:
        before = len(server[1].requests)
        report = mem.run_compression_slice(timeout=60)
        assert report["compressed"] >= 1
        shortened = [m["content"] for m in mem.memories(limit=None)
                     if m["content"] != long and long.startswith(m["content"])]
        assert shortened
        again = [t for request in server[1].requests[before:] for t in request]
        # embedded again, as shortened: its vector, and its neighbour's that embeds its text
        assert sum(shortened[0] in t for t in again) == 2
        assert not any(long in t for t in again)
        assert mem.stats()["vectors_missing"] == 0
        assert mem.stats()["vectors"] == mem.stats()["nodes"]
        assert "ryokan" in mem.recall(["hotel"], entry="semantic")


def test_a_rewrite_whose_vector_is_not_made_yet_is_still_missing_after_a_restart(
        data_dir: Path, embedder: OpenAIEmbedder, server: tuple[str, type[Embeddings]]) -> None:
    """Compression rewrote a memory while the embedder was down: its old vector leaves the
    store with the rewrite (SPEC §5.7: made again when compression rewrites it), so a restart
    counts it missing and fills it with the shortened text, never keeping the old one."""
    long = LONG
    with _shortened_by_a_scan(data_dir, embedder) as mem:
        assert mem.stats()["vectors_missing"] == 0
        server[1].mode = "down"
        report = mem.run_compression_slice(timeout=60)
        assert report["compressed"] >= 1
        assert mem.stats()["vectors_missing"] >= 1
    server[1].mode = "ok"
    with _shortened_by_a_scan(data_dir, embedder, remember=False) as mem:
        missing = mem.stats()["vectors_missing"]
        assert missing >= 1  # the rewrite's vector is known missing after the restart
        made = len(server[1].requests)
        assert mem.fill_vectors(timeout=60) == missing
        again = _texts_since(server, made)
        shortened = [m["content"] for m in mem.memories(limit=None)
                     if m["content"] != long and long.startswith(m["content"])]
        assert shortened and any(shortened[0] in t for t in again)
        assert not any(long in t for t in again)
        assert mem.stats()["vectors_missing"] == 0


#: A child process: opens the agent of :func:`_shortened_by_a_scan`, with its vectors loaded
#: or not (argv[3]), and runs a compression slice; it dies right after the slice's first write.
DIE_AFTER_THE_REWRITE = """
import os, sys
from pathlib import Path
from memory_rdf import OpenAIEmbedder
from test_embeddings import _shortened_by_a_scan

with OpenAIEmbedder("concepts", sys.argv[2] + "/v1", retries=0) as embedder:
    with _shortened_by_a_scan(Path(sys.argv[1]), embedder, remember=False) as mem:
        if sys.argv[3] == "loaded":
            assert mem.stats()["vectors_missing"] == 0  # the vectors are read
        commit = mem.store.commit

        def commit_then_die(batch):
            commit(batch)
            os._exit(0)

        mem.store.commit = commit_then_die
        mem.run_compression_slice(timeout=60)
os._exit(3)  # not reached: the slice writes
"""


@pytest.mark.parametrize("loaded", ["loaded", "not loaded"])
def test_a_rewrite_takes_its_old_vector_out_in_its_own_write(
        data_dir: Path, embedder: OpenAIEmbedder, server: tuple[str, type[Embeddings]],
        loaded: str) -> None:
    """A process killed right after compression wrote a rewrite leaves no vector of the old
    text in the store (SPEC §5.7: made again when compression rewrites the content): the
    rewrite and the removal of the vectors it outdates are one write. Before, the removal
    was a second write (a kill in between kept the old vectors), and none at all in a
    process whose vectors were not read yet (the first slice after a restart)."""
    long = LONG
    with _shortened_by_a_scan(data_dir, embedder) as mem:
        assert mem.stats()["vectors"] == mem.stats()["nodes"] == 2
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(REPO), str(REPO / "tests"), os.environ.get("PYTHONPATH")]))}
    child = subprocess.run([sys.executable, "-c", DIE_AFTER_THE_REWRITE, str(data_dir),
                            server[0], loaded], env=env, capture_output=True, text=True,
                           timeout=120)
    assert child.returncode == 0, child.stderr[-2000:]
    with _shortened_by_a_scan(data_dir, embedder, remember=False) as mem:
        shortened = [m["content"] for m in mem.memories(limit=None)
                     if m["content"] != long and long.startswith(m["content"])]
        assert shortened  # the rewrite landed
        # both vectors embedded the old text (the node's own, and its neighbour's)
        assert _vector_lines(backup.export("trip", data_dir)) == []
        assert mem.stats()["vectors_missing"] == 2
        made = len(server[1].requests)
        assert mem.fill_vectors(timeout=60) == 2
        again = _texts_since(server, made)
        assert sum(shortened[0] in t for t in again) == 2 and not any(long in t for t in again)


def _texts_since(server: tuple[str, type[Embeddings]], made: int) -> list[str]:
    return [t for request in server[1].requests[made:] for t in request]


@pytest.mark.parametrize("purge", [False, True])
def test_a_vector_embeds_its_neighbours_and_is_made_again_without_a_forgotten_one(
        data_dir: Path, embedder: OpenAIEmbedder, server: tuple[str, type[Embeddings]],
        purge: bool) -> None:
    """A node is embedded between its remember's previous and next segments (SPEC §5.7); when
    one of them is forgotten (or purged), the vectors that embedded its text are made again
    without it."""
    from helpers import ScriptedModel

    ramen = "We ate ramen for dinner at the station"
    with MemoryManager("trip", data_dir=data_dir, config=CONFIG, model=ScriptedModel(),
                       embedder=embedder) as mem:
        mem.remember(say(f"{RYOKAN} | {DEPLOY} | {ramen}"))
        assert mem.wait_idle(timeout=60)
        texts = _texts_since(server, 0)
        assert len(texts) == 3
        assert [t for t in texts if RYOKAN in t and DEPLOY in t and ramen in t]  # the middle
        deploy_id = next(m["id"] for m in mem.memories(limit=None) if DEPLOY in m["content"])
        made = len(server[1].requests)
        assert mem.forget([deploy_id], purge=purge) == 1
        assert mem.stats()["vectors_missing"] == 2  # both neighbours embedded its text:
        assert mem.stats()["vectors"] == 0  # erased with it, in the store too
        assert _vector_lines(backup.export("trip", data_dir)) == []
        assert mem.fill_vectors(timeout=60) == 2
        again = _texts_since(server, made)
        assert len(again) == 2 and not any(DEPLOY in t for t in again)
        assert mem.stats()["vectors"] == 2
        assert "ryokan" in mem.recall(["hotel"], entry="semantic")


def test_an_eviction_makes_its_neighbours_vectors_again_without_its_text(
        data_dir: Path, embedder: OpenAIEmbedder, server: tuple[str, type[Embeddings]]) -> None:
    """The fixed pool (``max_nodes``) forgets a memory to make room: the vectors that embedded
    its text (its neighbours', SPEC §5.7) go in the same write and are made again without
    it, as when compression or a forget on request forgets it. Before, they kept its text."""
    from helpers import ScriptedModel

    ramen = "We ate ramen for dinner at the station"
    segments = [RYOKAN, DEPLOY, ramen]
    with MemoryManager("trip", data_dir=data_dir, config=CONFIG.replace(max_nodes=3),
                       model=ScriptedModel(), embedder=embedder) as mem:
        mem.remember(say(" | ".join(segments)))
        assert mem.wait_idle(timeout=60)
        assert mem.stats()["vectors"] == 3
        made = len(server[1].requests)
        mem.remember(say(XIAOMAO))  # one more: one of the three is evicted
        assert mem.wait_idle(timeout=60)
        mem.fill_vectors(timeout=60)
        left = [m["content"] for m in mem.memories(limit=None)]
        (evicted,) = [s for s in segments if s not in left]
        i = segments.index(evicted)
        neighbours = [segments[j] for j in (i - 1, i + 1) if 0 <= j < len(segments)]
        again = _texts_since(server, made)
        assert not any(evicted in t for t in again)
        assert all(any(n in t for t in again) for n in neighbours)  # made again without it
        stats = mem.stats()
        assert stats["vectors"] == stats["nodes"] == 3 and stats["vectors_missing"] == 0


def test_vectors_of_other_texts_are_made_again(
        data_dir: Path, embedder: OpenAIEmbedder, server: tuple[str, type[Embeddings]],
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Vectors that embed each node's content alone (a store from before the texts were
    recorded: no memory:embeddingText) are another way of embedding: made again, never
    mixed with the new ones (SPEC §5.7)."""
    from helpers import ScriptedModel

    with MemoryManager("trip", data_dir=data_dir, config=CONFIG, model=ScriptedModel(),
                       embedder=embedder) as mem:
        mem.remember(say(f"{RYOKAN} | {DEPLOY}"))
        assert mem.wait_idle(timeout=60)
    dump = backup.export("trip", data_dir).decode()
    assert dump.count("ontology#embeddingText>") == 1
    old = "".join(line + "\n" for line in dump.splitlines() if "embeddingText" not in line)
    (tmp_path / "old.nq").write_text(old)
    backup.restore("old", tmp_path / "old.nq", data_dir)
    caplog.set_level(logging.WARNING, logger="memory_rdf")
    with MemoryManager("old", data_dir=data_dir, config=CONFIG, embedder=embedder) as mem:
        assert mem.stats()["vectors_missing"] == 2  # the old vectors are not used
        made = len(server[1].requests)
        assert mem.fill_vectors(timeout=60) == 2
        again = _texts_since(server, made)
        assert len(again) == 2 and all(RYOKAN in t and DEPLOY in t for t in again)
        assert "ryokan" in mem.recall(["hotel"], entry="semantic")
    assert any("another embedding model" in r.getMessage() and "content alone" in r.getMessage()
               for r in caplog.records)
    remade = backup.export("old", data_dir).decode()
    assert remade.count("ontology#embeddingText>") == 1
    assert len(_vector_lines(remade.encode())) == 2


# -- failures stay loud and harmless ------------------------------------------------------------


def test_an_embedder_down_loses_nothing_and_recall_answers_lexically(
        data_dir: Path, embedder: OpenAIEmbedder, server: tuple[str, type[Embeddings]],
        caplog: pytest.LogCaptureFixture) -> None:
    handler = server[1]
    handler.mode = "down"
    caplog.set_level(logging.WARNING, logger="memory_rdf")
    with MemoryManager("trip", data_dir=data_dir, config=CONFIG, embedder=embedder) as mem:
        _remember(mem, RYOKAN, DEPLOY)
        stats = mem.stats()
        assert stats["nodes"] == 2 and stats["failed_tasks"] == 0
        assert stats["vectors_missing"] == 2
        assert "ryokan" in mem.recall(["ryokan"], entry="both")  # the lexical entries answer
        assert "ryokan" in mem.recall(["ryokan"], entry="semantic")
        assert mem.recall(["hotel"], entry="semantic") == ""
        down = [r for r in caplog.records if "embedder 'concepts' failed" in r.getMessage()]
        assert len(down) == 1  # said once, not per call
        handler.mode = "ok"
        threading.Event().wait(0.3)  # the embedder's cool-down (0.2 s) passes
        _remember(mem, "We ate ramen for dinner")  # the next remember fills the missing ones
        stats = mem.stats()
        assert stats["vectors_missing"] == 0 and stats["vectors"] == 3
        assert "ryokan" in mem.recall(["hotel"], entry="semantic")
    assert any("answers again" in r.getMessage() for r in caplog.records)


def test_a_held_embedding_call_never_holds_another_agent(
        data_dir: Path, embedder: OpenAIEmbedder, server: tuple[str, type[Embeddings]]) -> None:
    handler = server[1]
    with MemorySystem(data_dir=data_dir, config=CONFIG, embedder=embedder) as system:
        other = system.agent("other")
        _remember(other, DEPLOY)
        handler.mode, handler.hold_matching = "hold", "ryokan"
        trip = system.agent("trip")
        trip.remember(say(RYOKAN))
        assert handler.holding.wait(30)  # trip's vector is being made, its call held
        # meanwhile the other agent remembers and recalls
        other.remember(say("We bought a new guitar"))
        assert "guitar" in other.recall(["guitar"], entry="keywords", timeout=30)
        assert not trip.wait_idle(timeout=0)  # trip still waits for its call
        handler.mode = "ok"
        handler.release.set()
        assert trip.wait_idle(timeout=60)
        assert "ryokan" in trip.recall(["hotel"], entry="semantic")


def test_another_models_vectors_are_made_again_never_mixed(
        data_dir: Path, server: tuple[str, type[Embeddings]],
        caplog: pytest.LogCaptureFixture) -> None:
    url = server[0] + "/v1"
    with OpenAIEmbedder("concepts", url) as first, \
            MemoryManager("trip", data_dir=data_dir, config=CONFIG, embedder=first) as mem:
        _remember(mem, RYOKAN, DEPLOY)
    caplog.set_level(logging.WARNING, logger="memory_rdf")
    with OpenAIEmbedder("reversed", url) as second, \
            MemoryManager("trip", data_dir=data_dir, config=CONFIG, embedder=second) as mem:
        assert mem.stats()["vectors_missing"] == 2  # nothing of the other model is used
        mem.run_compression_slice(timeout=60)  # the missing vectors are filled in
        stats = mem.stats()
        assert stats["vectors_missing"] == 0 and stats["vectors"] == 2
        assert stats["embedder"] == "reversed"
        assert "ryokan" in mem.recall(["hotel"], entry="semantic")
    assert any("another embedding model" in r.getMessage() for r in caplog.records)
    dump = backup.export("trip", data_dir).decode()
    assert '"reversed"' in dump and '"concepts"' not in dump
    assert len(_vector_lines(dump.encode())) == 2


@pytest.mark.parametrize(("mode", "message"), [
    ("count", "1 vectors for 2 texts"),
    ("nan", "not a finite number"),
    ("dimension", "dimensions, expected"),
])
def test_garbage_answers_are_clear_errors(server: tuple[str, type[Embeddings]], mode: str,
                                          message: str) -> None:
    url, handler = server
    with OpenAIEmbedder("concepts", url + "/v1", retries=0) as emb:
        assert len(emb.embed(["hotel", "cat"])) == 2  # learns the dimension
        handler.mode = mode
        with pytest.raises(ModelError, match=message):
            emb.embed(["hotel", "cat"])


def test_a_wrong_model_or_url_is_an_error_that_says_what_to_fix(
        server: tuple[str, type[Embeddings]]) -> None:
    url, handler = server
    with OpenAIEmbedder("no-such-model", url + "/v1") as emb, \
            pytest.raises(PermanentModelError, match="not found"):
        emb.embed(["hotel"])
    assert len(handler.requests) == 1  # not retried
    with OllamaEmbedder("concepts", url + "/nowhere", retries=0) as emb, \
            pytest.raises(PermanentModelError, match="404|not found"):
        emb.embed(["hotel"])
    with pytest.raises(InvalidInputError, match="base_url"):
        OpenAIEmbedder("concepts", "localhost:8080")


def test_garbage_from_the_embedder_leaves_remembers_whole(
        data_dir: Path, embedder: OpenAIEmbedder, server: tuple[str, type[Embeddings]]) -> None:
    server[1].mode = "nan"
    with MemoryManager("trip", data_dir=data_dir, config=CONFIG, embedder=embedder) as mem:
        _remember(mem, RYOKAN)
        stats = mem.stats()
        assert stats["nodes"] == 1 and stats["vectors"] == 0 and stats["vectors_missing"] == 1
        assert "ryokan" in mem.recall(["ryokan"])


def test_vectors_live_in_their_own_graph_on_both_stores(
        make_manager: Callable[..., MemoryManager], embedder: OpenAIEmbedder) -> None:
    """Embedded or on a SPARQL endpoint (SPEC §8): the vectors are in the agent's vectors
    graph, never in the memory graph sparql() reads, and an export carries them."""
    mem = make_manager(config=CONFIG, embedder=embedder)
    _remember(mem, RYOKAN, LUGUAN)
    assert mem.sparql("ASK { ?n memory:vector ?v }") is False
    assert mem.sparql("ASK { ?s memory:embeddingModel ?m }") is False
    where = mem.endpoint if mem.endpoint is not None else mem.path.parent
    dump = backup.export(mem.agent_id, where)
    assert len(_vector_lines(dump)) == 2
    assert b'"concepts"' in dump


def test_compression_forgetting_a_memory_takes_its_vector(
        data_dir: Path, embedder: OpenAIEmbedder) -> None:
    from helpers import ScriptedModel

    fading = CONFIG.replace(link_initial_strength=0.02)  # importance 0.04: forgotten at a scan
    with MemoryManager("trip", data_dir=data_dir, config=fading, model=ScriptedModel(),
                       embedder=embedder) as mem:
        mem.remember(say(f"{RYOKAN} | {DEPLOY}"))
        assert mem.wait_idle(timeout=60)
        assert mem.stats()["vectors"] == 2
        assert mem.run_compression_slice(timeout=60)["forgotten"] == 1
        assert len(_vector_lines(backup.export("trip", data_dir))) == 1
        assert mem.stats()["vectors"] == 1 and mem.stats()["vectors_missing"] == 0
        assert mem.recall(["hotel"], entry="semantic") == ""


def test_a_slow_query_embedding_answers_lexically(
        data_dir: Path, embedder: OpenAIEmbedder, server: tuple[str, type[Embeddings]],
        caplog: pytest.LogCaptureFixture) -> None:
    """A recall waits a few seconds at most for its query's vector (SPEC §5.7: slow is as
    down): the lexical entries answer while the embedder still holds the request."""
    handler = server[1]
    caplog.set_level(logging.WARNING, logger="memory_rdf")
    with MemoryManager("trip", data_dir=data_dir, config=CONFIG, embedder=embedder) as mem:
        _remember(mem, RYOKAN, DEPLOY)
        handler.mode, handler.hold_matching = "hold", "Kyoto ryokan hotel"
        found = mem.recall(["ryokan"], entry="both", query="Kyoto ryokan hotel")
        assert handler.holding.is_set() and not handler.release.is_set()  # still held
        assert "ryokan" in found
        assert any("no vector within" in r.getMessage() for r in caplog.records)
        handler.release.set()


def test_the_lexical_entries_answer_the_same_with_an_embedder(
        data_dir: Path, embedder: OpenAIEmbedder) -> None:
    """SPEC §5.7: "focus" and "keywords" never use the embedder — the same text with one
    as without."""
    asks = [(["ryokan"], "keywords"), (["Kyoto", "deploy"], "keywords"), (["Friday"], "focus"),
            ([], "focus")]
    with MemoryManager("trip", data_dir=data_dir, config=CONFIG, embedder=embedder) as mem:
        _remember(mem, RYOKAN, DEPLOY, "Kyoto trains were late again", LUGUAN)
        made = embedder.usage()["requests"]
        with_embedder = [mem.recall(k, entry=e) for k, e in asks]
        assert embedder.usage()["requests"] == made  # no query was embedded
    with MemoryManager("trip", data_dir=data_dir, config=CONFIG) as mem:
        assert [mem.recall(k, entry=e) for k, e in asks] == with_embedder
    assert any(with_embedder)


def test_every_results_similarity_counts_in_its_rank(
        make_manager: Callable[..., MemoryManager], embedder: OpenAIEmbedder) -> None:
    """Of two memories matching the keywords alike, the one closer in meaning comes first
    even when it is not among the few nearest nodes the semantic entry looks up (here 3:
    max_entry_nodes 1); they counted 0 and the later said came first (b1, LoCoMo: 55.8 →
    63.9 on conversations 41-42)."""
    mem = make_manager(config=CONFIG.replace(max_entry_nodes=1), embedder=embedder)
    _remember(mem, "In Kyoto we slept at a small hotel",
              "hotel inn hostel ryokan", "a hotel or an inn or a hostel",
              "any hotel, inn or hostel", "hotel, inn, hostel or ryokan",
              "Kyoto trains were late again")
    text = mem.recall(["kyoto"], entry="both", query="which hotel in kyoto")
    assert "small hotel" in text and "trains" in text
    assert text.index("small hotel") < text.index("trains")


def test_a_memory_standing_out_in_meaning_outranks_common_word_matches(
        make_manager: Callable[..., MemoryManager], embedder: OpenAIEmbedder) -> None:
    """Similarity counts from the results' median up (SPEC §5.7, benchmarks/RECALL.md
    decision 27): a memory that means the question, sharing none of its words, comes before
    memories that share only its commonest word and are no closer in meaning than the rest
    (counted from 0, "Kyoto temples at dawn" at cosine 0.24 came first, the ryokan at 0.63
    second: the built-in model's own keywords give the word matches an edge)."""
    mem = make_manager(config=CONFIG, embedder=embedder, model=HeuristicModel())
    _remember(mem, "Kyoto trains were late again", "Kyoto rain all day",
              "Kyoto temples at dawn", "Kyoto ramen for lunch",
              "We slept at a lovely ryokan near the station", "Kyoto shops close early")
    text = mem.recall(["kyoto", "hotel"], entry="both",
                      query="which hotel did we stay at in kyoto")
    entries = text.split("\n---\n")
    assert len(entries) == 6
    assert "ryokan" in entries[0]
    assert "temples" in entries[1]  # the closest of the word matches still leads them


def test_fill_vectors_embeds_a_store_built_without_an_embedder(
        data_dir: Path, embedder: OpenAIEmbedder) -> None:
    """A store only recalled never gets its missing vectors from remembers or slices:
    ``fill_vectors()`` makes them (SPEC §5.7), and the memories are then found by meaning."""
    with MemoryManager("trip", data_dir=data_dir, config=CONFIG) as mem:
        _remember(mem, RYOKAN, DEPLOY, LUGUAN)
        assert mem.fill_vectors() == 0  # no embedder: nothing to make
    with MemoryManager("trip", data_dir=data_dir, config=CONFIG, embedder=embedder) as mem:
        assert mem.stats()["vectors_missing"] == 3
        assert mem.recall(["hotel"], entry="semantic") == ""  # no vector yet
        assert mem.fill_vectors(timeout=60) == 3
        stats = mem.stats()
        assert stats["vectors"] == 3 and stats["vectors_missing"] == 0
        assert "ryokan" in mem.recall(["hotel"], entry="semantic")
        assert mem.fill_vectors() == 0  # nothing left
    with MemoryManager("trip", data_dir=data_dir, config=CONFIG, embedder=embedder) as mem:
        assert mem.stats()["vectors_missing"] == 0  # kept in the store
        assert "旅馆" in mem.recall(["宾馆"], entry="semantic")


def test_fill_vectors_stops_when_the_embedder_is_down(
        data_dir: Path, embedder: OpenAIEmbedder, server: tuple[str, type[Embeddings]]) -> None:
    with MemoryManager("trip", data_dir=data_dir, config=CONFIG) as mem:
        _remember(mem, RYOKAN, DEPLOY)
    server[1].mode = "down"
    with MemoryManager("trip", data_dir=data_dir, config=CONFIG, embedder=embedder) as mem:
        assert mem.fill_vectors(timeout=60) == 0
        assert mem.stats()["vectors_missing"] == 2  # left counted, nothing lost
        assert "ryokan" in mem.recall(["ryokan"], entry="both")

