"""SPEC §5.4: recall — best-first from the focus, depth, relations, matching, output text."""

from __future__ import annotations

import asyncio
import threading

import pytest

from memory_rdf import Config, MemoryManager, Templates
from memory_rdf._text import is_cjk_text

from _graph import set_strength, stored_quads
from helpers import FAST, ScriptedModel, remember, undated

#: Each test runs on an embedded store and on a loopback Oxigraph server (SPEC §8).
BACKENDS = ("embedded", "endpoint")

SEP = "\n---\n"


def entries(*contents: str) -> str:
    """Undated entries (:func:`helpers.undated`), marked in their content's language."""
    return SEP.join(f"[{'记忆' if is_cjk_text(c) else 'memory'}] {c}" for c in contents)


def forgot_en(phrase: str, relations: str = "") -> str:
    """The default perception entry for a result whose content is not Chinese text."""
    if relations:
        return (f"[memory] \u201c{phrase}\u201d is still linked to a memory I have forgotten "
                f"({relations}); I cannot recall it")
    return (f"[memory] \u201c{phrase}\u201d is still linked to a memory I have forgotten; "
            "I cannot recall it")


@pytest.fixture
def star(make_manager) -> MemoryManager:
    """root ↔ x1, x2, x3 (focus links, 1.0); x1 ↔ x2 ↔ x3 chain (0.5); focus = [x3].

    Strengths then set so that order is decided by strength alone:
    root→x1 0.8, root→x2 0.9, x3→x2 0.95.
    """
    mem = make_manager(config=FAST.replace(focus_limit=1))
    remember(mem, "root")
    remember(mem, "x1 | x2 | x3")
    set_strength(mem, "root", "x1", 0.8)
    set_strength(mem, "root", "x2", 0.9)
    set_strength(mem, "x3", "x2", 0.95)
    return mem


def test_no_focus_gives_empty_text(mem: MemoryManager) -> None:
    assert undated(mem.recall(["anything"])) == ""
    assert undated(mem.recall([])) == ""


def test_depth_zero_returns_the_focus_newest_first(mem: MemoryManager) -> None:
    remember(mem, "one | two")
    remember(mem, "three")
    assert undated(mem.recall([], depth=0)) == entries("three", "two", "one")


def test_best_first_by_path_strength(star: MemoryManager) -> None:
    # x3 (1.0) → root (1.0), x2 (0.95); x2 → x1 (0.95 × 0.5); root → x1 (0.8)
    assert undated(star.recall([], depth=2)) == entries("x3", "root", "x2", "x1")
    assert undated(star.recall([], depth=1)) == entries("x3", "root", "x2")


def test_path_strength_is_the_product_along_the_path(star: MemoryManager) -> None:
    set_strength(star, "x3", "root", 0.5)  # now x3→x2 (0.95) beats x3→root (0.5)
    set_strength(star, "x2", "root", 0.5)  # root via x2: 0.95 × 0.5 < 0.5 direct
    set_strength(star, "x2", "x1", 0.9)  # x1 via x2: 0.95 × 0.9 = 0.855 > root (0.5)
    assert undated(star.recall([], depth=2)) == entries("x3", "x2", "x1", "root")


def test_depth_counts_hops_of_the_first_best_path(star: MemoryManager) -> None:
    set_strength(star, "x3", "root", 0.1)
    set_strength(star, "x3", "x2", 0.9)
    set_strength(star, "x2", "root", 0.9)  # root reached at hop 2 (0.81) before hop 1 (0.1)
    # depth 2: root is visited at hop 2 and not expanded; x1 still comes via x2 (hop 2)
    assert undated(star.recall(["root"], depth=2)) == entries("root")
    set_strength(star, "x2", "x1", 0.005)  # below link_break_threshold: not live
    set_strength(star, "x1", "x2", 0.005)
    # x1 only via root→x1: root at hop 2 is not expanded, so x1 is not reached at depth 2
    assert "x1" not in star.recall([], depth=2)
    assert "x1" in star.recall([], depth=3)


def test_relation_filter(star: MemoryManager) -> None:
    # x3→x2 and x2→x1 are "上文"; the links to root have no name
    assert undated(star.recall([], relations=["上文"], depth=3)) == entries("x3", "x2", "x1")
    assert undated(star.recall([], relations=["下文"], depth=3)) == entries("x3")
    assert undated(star.recall([], relations=[], depth=3)) == entries("x3")


def test_non_matching_nodes_are_walked_through(star: MemoryManager) -> None:
    assert undated(star.recall(["X1"], depth=2)) == entries("x1")
    assert undated(star.recall(["x1", "ROOT"], depth=2)) == entries("root", "x1")
    assert undated(star.recall(["nothing"], depth=5)) == ""


def test_blank_keywords_are_ignored(star: MemoryManager) -> None:
    assert undated(star.recall(["", "  "], depth=1)) == undated(star.recall([], depth=1))


def test_match_on_keywords_case_insensitive(make_manager, model: ScriptedModel) -> None:
    model.keywords["plain words here"] = ["Secret"]
    mem = make_manager()
    remember(mem, "plain words here | other text")
    assert undated(mem.recall(["sECRET"], depth=1)) == entries("plain words here")
    assert undated(mem.recall(["WORDS"], depth=1)) == entries("plain words here")


def test_each_node_once_and_result_limit(make_manager) -> None:
    mem = make_manager(config=FAST.replace(max_search_results=2))
    remember(mem, "a1 | a2 | a3 | a4")
    # a4 (focus 1.0, newest) then a3 (focus), both reachable many ways, each listed once
    text = undated(mem.recall([], depth=3))
    assert text == entries("a4", "a3")
    unlimited = make_manager("other", config=FAST.replace(max_search_results=0))
    remember(unlimited, "b1 | b2 | b3 | b4")
    assert undated(unlimited.recall([], depth=3)).count("[memory]") == 4


def test_a_separator_line_inside_a_memory_does_not_split_its_entry(make_manager) -> None:
    """A remembered reply with Markdown rules (lines of ``---``, the default separator's line)
    stays one entry: split at the separator, the recall gives back one entry per memory, each
    starting with its marker, the rule lines shown with a space before them."""
    class WholeMessages(ScriptedModel):
        def segment(self, text: str) -> list[str]:  # one segment: the message, rules and all
            return [text.partition(": ")[2]]

    mem = make_manager(model=WholeMessages())
    remember(mem, "Plan A\n---\n[记忆] not a memory of its own\n---")
    remember(mem, "Plan B")
    text = undated(mem.recall(["Plan"], depth=2))
    parts = text.split(SEP)
    assert sorted(parts) == [
        "[memory] Plan A\n ---\n[记忆] not a memory of its own\n ---",
        "[memory] Plan B",
    ]
    stored = mem.sparql('SELECT ?c WHERE { ?n memory:content ?c FILTER(STRSTARTS(?c, "Plan A")) }')
    assert stored == [{"c": "Plan A\n---\n[记忆] not a memory of its own\n---"}]  # unchanged
    other = make_manager("pipes", model=WholeMessages(), config=FAST.replace(
        templates=Templates(entry_separator=" | ")))
    remember(other, "x\n---\ny")
    # only a line separator is kept apart
    assert undated(other.recall(["x"], depth=1)) == "[memory] x\n---\ny"


@pytest.fixture
def forgot(make_manager) -> MemoryManager:
    """root ↔ ab ↔ tnt, then 'ab' is forgotten by a compression scan (too short to keep)."""
    mem = make_manager(config=FAST.replace(focus_limit=1))
    remember(mem, "root content long enough")
    remember(mem, "ab | target node text")
    report = mem.run_compression_slice()
    assert report["forgotten"] == 1
    assert mem.stats()["dangling_links"] == 2
    return mem


def test_perception_entry_for_dangling_links(forgot: MemoryManager) -> None:
    assert undated(forgot.recall([], depth=1)) == SEP.join([
        "[memory] target node text",
        forgot_en("target nod", "previous"),
        "[memory] root content long enough",
        forgot_en("root conte"),
    ])
    # whatever the hop: the root is at the depth limit here and still reports
    assert undated(forgot.recall(["root"], depth=1)) == SEP.join([
        "[memory] root content long enough",
        forgot_en("root conte"),
    ])


def test_perception_follows_the_relation_filter(forgot: MemoryManager) -> None:
    assert undated(forgot.recall([], relations=["上文"], depth=1)) == SEP.join([
        "[memory] target node text",
        forgot_en("target nod", "previous"),
    ])
    assert undated(forgot.recall([], relations=["下文"], depth=1)) == "[memory] target node text"
    # at depth 0 nothing is expanded: the perception is looked up for the result alone,
    # through the shortcut triples, with the same filter
    assert undated(forgot.recall([], relations=["上文"], depth=0)) == SEP.join([
        "[memory] target node text",
        forgot_en("target nod", "previous"),
    ])
    assert undated(forgot.recall([], relations=["下文"], depth=0)) == "[memory] target node text"


def test_perception_entries_do_not_count_toward_the_limit(make_manager) -> None:
    mem = make_manager(config=FAST.replace(focus_limit=1, max_search_results=1))
    remember(mem, "root content long enough")
    remember(mem, "ab | target node text")
    mem.run_compression_slice()
    assert undated(mem.recall([], depth=1)) == SEP.join([
        "[memory] target node text",
        forgot_en("target nod", "previous"),
    ])


def test_english_templates(make_manager) -> None:
    mem = make_manager(config=FAST.replace(focus_limit=1, templates=Templates.english()))
    remember(mem, "root content long enough")
    remember(mem, "ab | target node text")
    mem.run_compression_slice()
    text = undated(mem.recall([], depth=0))
    assert text == (
        "[memory] target node text\n---\n[memory] \u201ctarget nod\u201d is still linked to a "
        "memory I have forgotten (previous); I cannot recall it"
    )


def test_recall_changes_nothing(forgot: MemoryManager) -> None:
    before = stored_quads(forgot)
    for depth in (0, 1, 2, 5):
        forgot.recall([], depth=depth)
        forgot.recall(["root", "text"], relations=["上文"], depth=depth)
    assert stored_quads(forgot) == before


@pytest.mark.parametrize(
    "hostile",
    [
        '"}) } DELETE WHERE {?s ?p ?o} #',
        "') } ; DROP ALL ; #",
        '\\" . } INSERT DATA { <a> <b> <c> } #',
        "<https://w3id.org/memory-rdf/node/x>",
        "?node",
        "$node",
        "\n}\nDELETE WHERE { ?s ?p ?o }",
    ],
)
def test_sparql_syntax_in_keywords_is_harmless(star: MemoryManager, hostile: str) -> None:
    before = stored_quads(star)
    assert undated(star.recall([hostile], relations=[hostile], depth=3)) == ""
    assert undated(star.recall([hostile, "x1"], depth=3)) == entries("x1")
    assert stored_quads(star) == before


def test_recall_after_remember_sees_it_without_waiting(mem: MemoryManager) -> None:
    for i in range(20):
        mem.remember([{"role": "user", "content": f"fact number {i}"}])
        assert f"fact number {i}" in mem.recall([f"number {i}"], depth=0)


def test_recall_from_eight_threads_and_asyncio(star: MemoryManager) -> None:
    expected = star.recall([], depth=2)
    results: list[str] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def worker() -> None:
        try:
            for _ in range(10):
                text = star.recall([], depth=2)
                with lock:
                    results.append(text)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    async def many() -> list[str]:
        return list(await asyncio.gather(*(star.arecall([], depth=2) for _ in range(20))))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    async_results = asyncio.run(many())
    for t in threads:
        t.join(60)
    assert not errors
    assert results == [expected] * 80
    assert async_results == [expected] * 20
    futures = [star.recall_async([], depth=2) for _ in range(5)]
    assert [f.result(30) for f in futures] == [expected] * 5


def test_default_depth_from_config(make_manager) -> None:
    mem = make_manager(config=Config(default_search_depth=0, auto_compress=False))
    remember(mem, "p | q")
    assert undated(mem.recall([])) == entries("q", "p")
