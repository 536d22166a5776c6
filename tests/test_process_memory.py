"""What a process holds beside its stores once recall has run (issue 38): the Chinese word
segmenter is loaded without ``pkg_resources``, and the term index keeps a term of one node
without a set of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent

_SEGMENTER = """
import json, sys
if sys.argv[1] == "with":
    import pkg_resources  # what jieba imports itself when it can
from memory_rdf._text import jieba_module, tokenize
jieba = jieba_module()
print(json.dumps({
    "pkg_resources": "pkg_resources" in sys.modules,
    "words": len(jieba.dt.FREQ), "total": jieba.dt.total,
    "cut": jieba.lcut("我们决定用数据库存订单数据，登录失败时重试"),
    "terms": tokenize("用户登录数据库失败，清华大学的车牌号"),
}))
"""


def _segmenter(tmp: Path, mode: str) -> dict[str, object]:
    # TMPDIR: jieba's dictionary cache lives there; an empty one makes it read dict.txt
    # itself, through the file jieba opens without pkg_resources.
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp)}
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", _SEGMENTER, mode], env=env,
                          capture_output=True, text=True, timeout=300, cwd=tmp, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_jieba_is_loaded_without_pkg_resources_and_cuts_the_same_words(tmp_path: Path) -> None:
    # Before: jieba's import brought pkg_resources (a scan of every installed distribution,
    # ~10 MB of RSS and ~0.2 s) into every process that recalled or remembered Chinese.
    without = _segmenter(tmp_path, "without")  # no cache yet: dict.txt read and cached
    assert (tmp_path / "jieba.cache").is_file()
    again = _segmenter(tmp_path, "without")  # the cache this time
    other = tmp_path / "other"
    other.mkdir()
    reference = _segmenter(other, "with")
    assert without["pkg_resources"] is False and again["pkg_resources"] is False
    assert reference["pkg_resources"] is True
    for got in (without, again):
        assert {k: v for k, v in got.items() if k != "pkg_resources"} == {
            k: v for k, v in reference.items() if k != "pkg_resources"}
    assert reference["words"] > 300_000 and "登录" in reference["cut"]
    assert "数据库" in reference["terms"]


_FREED = """
import ctypes, json
from pathlib import Path
def rss():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
libc = ctypes.CDLL("libc.so.6")
import memory_rdf
from memory_rdf._text import tokenize
# a heap with room in its middle given back to the system, as the read mirror's build and
# the reopen of the disk handle leave it
blocks = [b"x" * 100_000 for _ in range(1500)]
top = b"y" * 100_000
del blocks
libc.malloc_trim(0)
tokenize("用户登录数据库失败")  # loads jieba's dictionary
before = rss()
libc.malloc_trim(0)
print(json.dumps({"trimmed": before - rss()}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_loading_jieba_leaves_no_freed_memory_resident(tmp_path: Path) -> None:
    # Before: unmarshalling jieba's dictionary left ~15-18 MB of freed buffers and dict
    # tables resident (the suite's fresh process after 30 recalls: 215 MB, 198 after a trim).
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", _FREED], env=env,
                          capture_output=True, text=True, timeout=300, cwd=tmp_path, check=True)
    trimmed = json.loads(done.stdout.strip().splitlines()[-1])["trimmed"]
    assert trimmed < 4 * 2**20, f"{trimmed / 2**20:.1f} MB freed but resident"


def test_another_thread_may_import_pkg_resources_meanwhile() -> None:
    # The refusal is for the thread importing jieba only (a sys.meta_path finder).
    import threading

    from memory_rdf._text import _NoPkgResources

    refuse = _NoPkgResources()
    seen: list[object] = []
    thread = threading.Thread(target=lambda: seen.append(refuse.find_spec("pkg_resources")))
    thread.start()
    thread.join()
    assert seen == [None]
    try:
        refuse.find_spec("pkg_resources")
    except ModuleNotFoundError as exc:
        assert exc.name == "pkg_resources"
    else:  # pragma: no cover - the assertion below fails
        raise AssertionError("the importing thread was not refused pkg_resources")
    assert refuse.find_spec("json") is None


def _index(mem: object) -> Any:
    from memory_rdf._oxigraph import AgentStore
    from memory_rdf._oxigraph import term_index as ti

    store = mem.store  # type: ignore[attr-defined]
    assert isinstance(store, AgentStore)
    index = ti.read_index(store, lambda ix: ix)
    assert index is not None
    return index


def test_a_term_of_one_node_takes_no_set_in_the_term_index(make_manager) -> None:
    # Before: every term held a set of its nodes, ~216 bytes even for one node — most terms
    # (each node's rare words): ~2 MB of the index's ~10 MB at 10k nodes of the suite's store.
    from helpers import remember

    mem = make_manager()
    words = ["zanzibar", "quokka", "fjord", "marzipan", "xylophone", "kumquat"]
    for word in words:
        remember(mem, f"the {word} note about kafka")
    index = _index(mem)
    single = {t: n for t, n in index.postings.items() if not isinstance(n, set)}
    assert {"zanzibar", "quokka", "fjord"} <= set(single)
    assert all(isinstance(n, str) and n.startswith("http") for n in single.values())
    assert all(len(n) >= 2 for n in index.postings.values() if isinstance(n, set))
    assert index.df("kafka") == len(words) and index.df("quokka") == 1 and index.df("nope") == 0
    # answers through the index: the rare word finds its node, the shared one every node
    assert "quokka" in mem.recall(["quokka"], depth=0, entry="keywords")
    found = mem.recall(["kafka"], depth=0, entry="keywords", max_chars=0)
    assert all(word in found for word in words)
    # the index follows a forget: a term of two nodes back to one, and to none
    from _graph import ids_by_content

    ids = ids_by_content(mem)
    remember(mem, "another quokka sighting")
    index = _index(mem)
    assert isinstance(index.postings["quokka"], set) and index.df("quokka") == 2
    assert mem.forget([ids["the quokka note about kafka"]]) == 1
    index = _index(mem)
    assert isinstance(index.postings["quokka"], str) and index.df("quokka") == 1
    assert "sighting" in mem.recall(["quokka"], depth=0, entry="keywords")
    assert "note about kafka" not in mem.recall(["quokka"], depth=0, entry="keywords")


def test_one_node_postings_rank_as_sets_did() -> None:
    from memory_rdf._oxigraph.term_index import TermIndex

    index = TermIndex(0)
    for node, terms in {"n:a": ["x", "y"], "n:b": ["x"], "n:c": ["z"]}.items():
        for term in terms:
            index.add(node, term)
            index.add(node, term)  # twice: no change
        index.lengths[node] = len(terms)
    assert index.postings == {"x": {"n:a", "n:b"}, "y": "n:a", "z": "n:c"}
    assert index.terms_of == {"n:a": ("x", "y"), "n:b": ("x",), "n:c": ("z",)}
    entries = [("y", 2.0), ("x", 0.5), ("z", 1.0)]
    assert index.ranked(entries, 1.5, 10, 10, 10) == [
        ("n:a", pytest.approx(2.5 * 2.2 / (1 + 1.2 * (0.25 + 0.75 * 2 / 1.5)))),
        ("n:c", pytest.approx(1.0 * 2.2 / (1 + 1.2 * (0.25 + 0.75 * 1 / 1.5)))),
        ("n:b", pytest.approx(0.5 * 2.2 / (1 + 1.2 * (0.25 + 0.75 * 1 / 1.5)))),
    ]
    assert index.ranked([("y", 1.0)], 1.5, 0, 10, 10) is None  # more postings than allowed
    index.remove("n:b", "x")
    index.remove("n:c", "x")  # not one of its nodes: no change
    assert index.postings == {"x": "n:a", "y": "n:a", "z": "n:c"}
    index.drop("n:a")
    assert index.postings == {"z": "n:c"} and index.df("x") == 0
    assert index.terms_of == {"n:c": ("z",)}
