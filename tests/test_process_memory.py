"""What a process holds beside its stores once recall has run (issue 38): the Chinese word
segmenter is loaded without ``pkg_resources``, and the term index keeps a term of one node
without a set of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

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
