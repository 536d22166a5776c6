"""Where an embedded agent's disk bytes and read-mirror memory go, part by part (issue 38).

On a store of the benchmark suite's workload (``generate(..., decay=120, forgotten=0.05)``):

* **disk**: the store written again through ordinary writes (``Store.extend``, as remember and
  compression write: memtables, flushes, compaction), ``flush()`` + ``optimize()``, reopened
  (the write-ahead log replayed away), measured; then the same without each part of it (the
  ``a memory:Link`` triples, the ``memory:link`` shortcuts, the index terms, ...). Full minus
  without = what the part costs on disk after compaction, its keys in the three indexes of the
  default graph and the strings only it uses. ``compression`` lists the table files' RocksDB
  compression (read from the files' properties): Oxigraph opens RocksDB with
  ``OptimizeLevelStyleCompaction`` (levels 0 and 1 uncompressed) and dynamic level sizes, so a
  column family under 512 MB keeps all its data in its base level, uncompressed; the bulk
  loader's files are LZ4 until their first compaction.
* **mirror**: the RSS an in-memory ``pyoxigraph.Store`` takes for sets of quads (loaded from an
  N-Quads file in a process that holds nothing else): every quad (the mirror before issue 38),
  the read mirror as a build made it until its texts left the store (one quad per link, the
  texts, scan state, focus and pins as quads), the read mirror now (``link_index.derive_both``:
  one quad per link, scan state, focus and pins in the store, the texts and times in its
  Python :class:`~memory_rdf._oxigraph.text_table.TextTable`), and the store part alone; and
  the time the build takes;
* **caches**: the RSS a whole read of the store (the default graph's N-Triples dump, as the
  read mirror's build reads it) leaves in a fresh process while the store stays open: through
  the agent's handle kept open (the build before issue 38: RocksDB's block caches stay full —
  Oxigraph's 32 MB for the index column families, up to 128 MB for the strings') and with the
  handle opened again after the read (what the owner does now, ``_oxigraph/block_caches``);
* **latency** (``--latency N``): what the pieces recall reads cost, N random frontiers of 10 /
  100 / 500 nodes: a walk level on the read mirror (one quad per link) and on the disk store
  (the same rows, checked), the keyword test's texts and the entries' texts from the mirror's
  text table and by matching_texts.rq and node_entries.rq on the disk store.

    python benchmarks/memory_parts.py [--nodes 10000] [--dir /tmp/parts]
        [--skip disk|mirror|caches] [--latency 30]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pyoxigraph as ox  # noqa: E402

from benchmarks._workload import generate  # noqa: E402
from memory_rdf import _vocab as V  # noqa: E402
from memory_rdf._oxigraph import lit  # noqa: E402
from memory_rdf._oxigraph.link_index import derive_both  # noqa: E402
from memory_rdf._oxigraph.render import render  # noqa: E402
from memory_rdf._oxigraph.terms import Term  # noqa: E402
from memory_rdf._oxigraph.text_table import TextTable  # noqa: E402

RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
GRAPHS = "https://w3id.org/memory-rdf/graph/"
LINK_PARTS = ("source", "target", "strength", "relation")


def part(quad: ox.Quad) -> str:
    """The part of the store a quad belongs to: its named graph's name, ``a <class>``, or its
    predicate's local name (``link.strength`` for a link resource's)."""
    graph = quad.graph_name
    if not isinstance(graph, ox.DefaultGraph):
        return "graph " + graph.value.rsplit("/", 1)[-1]
    predicate = quad.predicate.value
    if predicate == RDF_TYPE:
        return "a memory:" + quad.object.value.rsplit("#", 1)[-1]
    name = predicate.rsplit("#", 1)[-1]
    return "link." + name if name in LINK_PARTS else name


#: Parts measured by leaving them out (each row: the parts left out together).
DISK_ROWS: list[tuple[str, ...]] = [
    ("a memory:Link",), ("link",), ("link.source", "link.target"), ("link.strength",),
    ("link.relation",), ("term", "termCount"), ("keyword",), ("content", "phrase"),
    ("createdAt", "scanCount", "scanOrder", "originalLength", "a memory:Node"),
]


def files_bytes(path: Path) -> dict[str, int]:
    out = Counter[str]()
    for name in os.listdir(path):
        try:
            size = os.stat(path / name).st_size
        except FileNotFoundError:  # RocksDB removed it meanwhile
            continue
        out["total"] += size
        out["sst" if name.endswith(".sst") else "wal" if name.endswith(".log") else "other"] += size
    return dict(out)


def sst_compression(path: Path) -> dict[str, int]:
    """Bytes of table files by the compression RocksDB wrote them with, read from a table
    file's properties block (the key ``rocksdb.compression``, delta-encoded after
    ``rocksdb.comp...``: ``ression`` then the value, e.g. ``LZ4``, ``NoCompression``)."""
    out = Counter[str]()
    for name in os.listdir(path):
        if not name.endswith(".sst"):
            continue
        try:
            data = (path / name).read_bytes()
        except FileNotFoundError:
            continue
        found = list(re.finditer(rb"\x07([\x01-\x7f])ression", data[-8192:]))
        kind = "?"
        if found:
            start = found[-1].end()
            value = data[-8192:][start : start + found[-1].group(1)[0]]
            kind = value.decode("ascii", "replace") if value.isalnum() else "?"
        out[kind] += len(data)
    return dict(out)


def written(work: Path, quads: Sequence[ox.Quad]) -> tuple[dict[str, int], dict[str, int]]:
    """Bytes of a store holding ``quads``, written in chunks, flushed, compacted, reopened."""
    path = work / "part"
    shutil.rmtree(path, ignore_errors=True)
    store = ox.Store(str(path))
    for i in range(0, len(quads), 20_000):
        store.extend(quads[i : i + 20_000])
    store.flush()
    store.optimize()
    del store
    gc.collect()
    store = ox.Store(str(path))  # the reopen replays and drops the write-ahead log
    del store
    gc.collect()
    out = files_bytes(path), sst_compression(path)
    shutil.rmtree(path, ignore_errors=True)
    return out


def disk_table(store_dir: Path, work: Path, nodes: int, say: Callable[[str], None]) -> None:
    bulk = files_bytes(store_dir)
    say(f"bulk-loaded store (LZ4 table files): {bulk['total'] / nodes:,.0f} B/node; "
        f"compression {sst_compression(store_dir)}")
    reader = ox.Store.read_only(str(store_dir))
    quads = list(reader)
    del reader
    counts = Counter(part(q) for q in quads)
    full, kinds = written(work, quads)
    say(f"written through ordinary writes, compacted, reopened: {full['total'] / nodes:,.0f} "
        f"B/node (table files {full.get('sst', 0) / nodes:,.0f}, write-ahead log "
        f"{full.get('wal', 0) / nodes:,.0f}); compression {kinds}")
    say("")
    say("| part left out | quads/node | B/node after compaction | B/quad | share |")
    say("|---|---|---|---|---|")
    accounted = 0.0
    for row in DISK_ROWS:
        rest = [q for q in quads if part(q) not in row]
        gone = len(quads) - len(rest)
        if not gone:
            continue
        size, _ = written(work, rest)
        cost = full["total"] - size["total"]
        accounted += cost
        say(f"| {' + '.join(row)} | {gone / nodes:.2f} | {cost / nodes:,.0f} | "
            f"{cost / gone:.0f} | {cost / full['total']:.0%} |")
    say(f"| the rest (strings shared by several parts: link and node IRIs; focus, metadata, "
        f"RocksDB's fixed files) | | {(full['total'] - accounted) / nodes:,.0f} | | "
        f"{(full['total'] - accounted) / full['total']:.0%} |")
    say(f"| all | {len(quads) / nodes:.2f} | {full['total'] / nodes:,.0f} | "
        f"{full['total'] / len(quads):.0f} | 100% |")
    say("")
    say("quads by part: " + ", ".join(f"{k} {v / nodes:.2f}" for k, v in counts.most_common()))


def _load_rss(path: str, texts: str | None = None) -> dict[str, int]:
    """Run in a child process: RSS taken by loading the N-Quads file ``path`` into a store
    and, given, the N-Quads file ``texts`` into a text table beside it."""
    done = subprocess.run([sys.executable, __file__, "--load-rss", path,
                           *(["--texts", texts] if texts else [])], capture_output=True,
                          text=True, check=True, timeout=1800)
    result: dict[str, int] = json.loads(done.stdout)
    return result


def _rss() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


class _Discard:
    def write(self, data: bytes) -> int:
        return len(data)

    def flush(self) -> None:
        pass


def _cache_rss(store_dir: str) -> dict[str, float]:
    """Run in a child process: RssAnon added by a whole dump of a copy of ``store_dir`` while
    the store stays open, the handle kept or opened again after the dump (then ``malloc_trim``
    both ways), and the time the reopen took (ms)."""
    import ctypes

    def anon() -> int:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) * 1024
        return 0

    trim = ctypes.CDLL("libc.so.6").malloc_trim
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="memory-parts-caches-") as work:
        for way in ("kept", "reopened"):
            copy = Path(work) / way / "agent"
            shutil.copytree(store_dir, copy)
            store = ox.Store(str(copy))
            trim(0)
            before = anon()
            store.dump(_Discard(), format=ox.RdfFormat.N_TRIPLES,  # type: ignore[arg-type]
                       from_graph=ox.DefaultGraph())
            if way == "reopened":
                started = time.perf_counter()
                store.flush()
                del store
                gc.collect()
                store = ox.Store(str(copy))
                out["reopen_ms"] = (time.perf_counter() - started) * 1000
            trim(0)
            out[way] = anon() - before
            del store
            gc.collect()
            trim(0)
    return out


def caches_table(store_dir: Path, nodes: int, say: Callable[[str], None]) -> None:
    """RSS a whole read of the store leaves while the store is open (a child process)."""
    done = subprocess.run([sys.executable, __file__, "--cache-rss", str(store_dir)],
                          capture_output=True, text=True, check=True, timeout=1800)
    got = json.loads(done.stdout)
    say("| whole read of the store (default graph dump), store still open | RSS B/node |")
    say("|---|---|")
    say(f"| the handle kept open (the mirror's build before issue 38) | "
        f"{got['kept'] / nodes:,.0f} |")
    say(f"| the handle opened again after the read (the build now; reopen "
        f"{got['reopen_ms']:,.0f} ms) | {got['reopened'] / nodes:,.0f} |")


def mirror_table(store_dir: Path, nodes: int, say: Callable[[str], None],
                 latency: int = 0) -> None:
    """The RSS table; with ``latency`` > 0, then the latency table (that many frontiers a
    size)."""
    reader = ox.Store.read_only(str(store_dir))
    quads = list(reader)
    start = time.perf_counter()
    lean, table = derive_both(reader)  # the read mirror as a build makes it (issue 38)
    built = time.perf_counter() - start
    del reader
    lean_quads = list(lean)
    if not latency:
        del lean, table
    m = V.MEMORY

    def predicate(q: ox.Quad) -> str:
        return q.predicate.value

    def linked(q: ox.Quad) -> bool:
        return not isinstance(q.graph_name, ox.DefaultGraph) and q.graph_name.value.startswith(
            V.MIRROR_LINKS)

    texts = {m + p for p in ("content", "phrase", "keyword", "createdAt", "saidAt")}
    text_quads = [q for q in quads if predicate(q) in texts
                  and isinstance(q.graph_name, ox.DefaultGraph)]
    scan = {m + "scanOrder", m + "originalLength"}
    # (name, the store's quads, the text table's triples or None)
    sets: list[tuple[str, list[ox.Quad], list[ox.Quad] | None]] = [
        ("every quad (the mirror before issue 38, without its link index)", quads, None),
        ("one quad per link, texts, scan state, focus, pins (the mirror until its texts "
         "left the store)", lean_quads + text_quads, None),
        ("**the read mirror now**: one quad per link, scan state, focus, pins + the texts in "
         "its Python table", lean_quads, text_quads),
        ("its store alone: one quad per link, scan state, focus, pins", lean_quads, None),
        ("one quad per link, scanCount, focus, pins", [
            q for q in lean_quads if linked(q) or predicate(q) not in scan], None),
    ]
    say(f"read mirror built from the store in {built:.1f} s (derive(), one thread)")
    say("")
    say("| mirror holding | quads/node | RSS B/node | B/quad |")
    say("|---|---|---|---|")
    for name, chosen, in_table in sets:
        files: list[str] = []
        for written_quads in (chosen, in_table):
            if written_quads is None:
                continue
            with tempfile.NamedTemporaryFile("w", suffix=".nq", delete=False,
                                             encoding="utf-8") as f:
                f.writelines(f"{q} .\n" for q in written_quads)
            files.append(f.name)
        try:
            got = _load_rss(*files)
        finally:
            for file in files:
                os.unlink(file)
        if in_table is not None:
            got["quads"] += len(in_table)
        say(f"| {name} | {got['quads'] / nodes:.1f} | {got['rss'] / nodes:,.0f} | "
            f"{got['rss'] / max(1, got['quads']):.0f} |")
    if latency:
        live = [q.subject for q in quads if predicate(q) == m + "scanCount"]
        del quads, sets, lean_quads, text_quads
        say("")
        latency_table(store_dir, lean, table, live, latency, say)


def latency_table(store_dir: Path, mirror: ox.Store, table: TextTable,
                  live: Sequence[ox.NamedNode], repeat: int,
                  say: Callable[[str], None]) -> None:
    """p50 ms of the pieces recall reads, for random frontiers of 10 / 100 / 500 live nodes:
    a walk level on the read mirror (mirror_outgoing.rq, one quad per link) and on the disk
    store (outgoing_links.rq: the same rows, checked), the keyword test's texts (keyword
    "login") and the entries' texts (20 nodes) from the mirror's text table and by
    matching_texts.rq and node_entries.rq on the disk store (the same rows, counted)."""
    disk = ox.Store.read_only(str(store_dir))
    rnd = random.Random(3)
    say("| frontier | level rows | level, mirror | level, disk | "
        "matching_texts mirror | matching_texts disk | node_entries mirror | node_entries disk |")
    say("|---|---|---|---|---|---|---|---|")
    for size in (10, 100, 500):
        times: dict[str, list[float]] = {}
        counted: dict[str, int] = {}
        rows = level_rows = 0
        for _ in range(repeat):
            frontier = rnd.sample(list(live), min(size, len(live)))
            terms = [Term(str(n)) for n in frontier]
            level = render("mirror_outgoing", sources=terms, threshold=lit(0.01))
            on_disk = render("outgoing_links", sources=terms, threshold=lit(0.01),
                             relations=None)
            texts = render("matching_texts", nodes=terms, keywords=[lit("login")])
            entries = render("node_entries", nodes=terms[:20])
            ids = [n.value[len(V.NODE):] for n in frontier]
            for key, reads in (
                ("texts mirror", lambda ids=ids: table.matching_texts(ids, ["login"], False)),
                ("entries mirror", lambda ids=ids: list(table.entries(ids[:20]))),
            ):
                start = time.perf_counter()
                got_rows = reads()
                times.setdefault(key, []).append((time.perf_counter() - start) * 1000)
                counted[key] = len(got_rows)
            for key, store, query in (
                ("level", mirror, level), ("level disk", disk, on_disk),
                ("texts disk", disk, texts), ("entries disk", disk, entries),
            ):
                start = time.perf_counter()
                got = list(store.query(query, prefixes=V.PREFIXES))  # type: ignore[arg-type]
                times.setdefault(key, []).append((time.perf_counter() - start) * 1000)
                if key == "level":
                    rows += len(got)
                    level_rows = len(got)
                elif key == "level disk" and len(got) != level_rows:
                    raise AssertionError(f"the mirror's level: {level_rows} rows, the disk "
                                         f"store's {len(got)}")
                elif key != "level disk" and len(got) != counted[key.replace("disk",
                                                                            "mirror")]:
                    raise AssertionError(f"{key}: {len(got)} rows, the table's "
                                         f"{counted[key.replace('disk', 'mirror')]}")
        say(f"| {size} | {rows / repeat:,.0f} | " + " | ".join(
            f"{statistics.median(times[k]):.2f}" for k in (
                "level", "level disk", "texts mirror", "texts disk", "entries mirror",
                "entries disk"))
            + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--dir", type=Path, default=None,
                        help="where the store is generated (kept, reused when present)")
    parser.add_argument("--skip", choices=("disk", "mirror", "caches"), action="append",
                        default=[])
    parser.add_argument("--latency", type=int, default=0, metavar="N",
                        help="also time the pieces recall reads, N frontiers a size")
    parser.add_argument("--load-rss", help=argparse.SUPPRESS)
    parser.add_argument("--cache-rss", help=argparse.SUPPRESS)
    parser.add_argument("--texts", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cache_rss:
        print(json.dumps(_cache_rss(args.cache_rss)))
        return
    if args.load_rss:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
        before = _rss()
        store = ox.Store()
        store.load(path=args.load_rss, format=ox.RdfFormat.N_QUADS)
        table = TextTable()
        if args.texts:
            table.add(q.triple for q in ox.parse(path=args.texts, format=ox.RdfFormat.N_QUADS))
        gc.collect()
        ctypes.CDLL("libc.so.6").malloc_trim(0)
        print(json.dumps({"rss": _rss() - before, "quads": len(store)}))
        return
    base = args.dir or Path(tempfile.mkdtemp(prefix="memory-parts-"))
    store_dir = base / f"agent{args.nodes}"
    if not store_dir.exists():
        generate(store_dir, args.nodes, decay=120, forgotten=0.05, progress=False)
    reader = ox.Store.read_only(str(store_dir))
    nodes = sum(1 for _ in reader.quads_for_pattern(
        None, ox.NamedNode(V.MEMORY + "scanCount"), None, ox.DefaultGraph()))
    del reader
    print(f"{nodes:,} live nodes (generated {args.nodes:,}), pyoxigraph {ox.__version__}")
    if "disk" not in args.skip:
        work = base / "work"
        work.mkdir(exist_ok=True)
        disk_table(store_dir, work, nodes, print)
    if "caches" not in args.skip:
        print()
        caches_table(store_dir, nodes, print)
    if "mirror" not in args.skip:
        print()
        mirror_table(store_dir, nodes, print, args.latency)


if __name__ == "__main__":
    main()
