"""benchmarks/memory_parts.py: where an agent's disk bytes and read-mirror memory go (issue 38).

The disk rows rest on one observation about Oxigraph's RocksDB options that these tests keep
checked on the pyoxigraph in use: the bulk loader's table files are LZ4-compressed, and the
same data written through ordinary writes and compacted is not (levels 0 and 1 of
``OptimizeLevelStyleCompaction`` are uncompressed, and a small column family lives in its base
level) — so a compacted store takes about twice the bytes of a freshly bulk-loaded one.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyoxigraph as ox

from benchmarks._workload import generate
from benchmarks.memory_parts import files_bytes, part, sst_compression, written

ROOT = Path(__file__).resolve().parent.parent
M = "https://w3id.org/memory-rdf/ontology#"


def test_every_quad_of_a_generated_store_falls_in_a_named_part(tmp_path: Path) -> None:
    store_dir = tmp_path / "agent"
    generate(store_dir, 60, decay=120, forgotten=0.05, progress=False)
    reader = ox.Store.read_only(str(store_dir))
    parts = {part(q) for q in reader}
    del reader
    assert {"a memory:Link", "a memory:Node", "link", "link.source", "link.target",
            "link.strength", "term", "termCount", "content", "phrase", "keyword"} <= parts
    assert "graph meta" in parts
    node = ox.NamedNode("https://w3id.org/memory-rdf/node/x")
    quad = ox.Quad(node, ox.NamedNode(M + "relation"), ox.Literal("下文"), ox.DefaultGraph())
    assert part(quad) == "link.relation"


def test_bulk_loaded_files_are_lz4_and_compacted_writes_are_not(tmp_path: Path) -> None:
    store_dir = tmp_path / "agent"
    generate(store_dir, 300, progress=False)
    bulk = sst_compression(store_dir)
    assert max(bulk, key=lambda k: bulk[k]) == "LZ4", bulk
    reader = ox.Store.read_only(str(store_dir))
    quads = list(reader)
    del reader
    (tmp_path / "work").mkdir()
    size, kinds = written(tmp_path / "work", quads)
    assert max(kinds, key=lambda k: kinds[k]) == "NoCompression", kinds
    assert size["total"] > 1.3 * files_bytes(store_dir)["total"]
    assert size.get("wal", 0) == 0  # the reopen replayed the write-ahead log away
    assert not (tmp_path / "work" / "part").exists()


def test_the_script_prints_both_tables(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "benchmarks/memory_parts.py", "--nodes", "150", "--dir", str(tmp_path),
         "--latency", "2"],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=True,
    )
    out = done.stdout
    assert "| a memory:Link |" in out and "| all |" in out
    assert "| every quad (the mirror before issue 38, without its link index) |" in out
    assert "the read mirror now" in out and "its Python table" in out
    assert "one quad per link" in out
    assert "| 10 |" in out  # the latency table (--latency)
    assert "| the handle kept open (the mirror's build before issue 38) |" in out
    assert "| the handle opened again after the read (the build now; reopen" in out
