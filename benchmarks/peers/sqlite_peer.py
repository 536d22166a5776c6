"""SQLite peer (stdlib ``sqlite3``, a file on disk like Oxigraph's store).

* One recursive CTE finds every node within ``depth - 1`` hops of the seeds over live links
  to live nodes (the nodes the walk may expand) and returns their links in the same statement.
* Keywords: an FTS5 table with the trigram tokenizer (case-insensitive substring search,
  SQLite >= 3.34) over content and keywords; needles shorter than three characters cannot use
  a trigram index and are tested with ``instr(lower(…))``. When FTS5 is missing, every needle
  goes that way (reported as a skip of the FTS5 part).
* The best-first order itself is done in Python, as for every other peer.
* ``entry="both"`` (:meth:`SqlitePeer.recall_both`, SPEC §5.5): the keyword seeds are ranked
  in SQL by the library's BM25 (``keyword_entry.rq``: index terms as a set per node, k1 1.2,
  b 0.75, idf from the term table's document frequencies, the same posting budget and
  candidate cut) over a ``terms (term, node)`` table loaded from the store's ``memory:term``
  triples, so that both engines start from the same seeds. FTS5's own ``bm25()`` is not
  that ranking (it counts term frequency, weighs columns, and its trigram tokenizer has no
  words): with it the seeds, and so the texts, would differ. Query terms (tokenizing,
  English word forms, idf) come from the library's text functions.

SQLite's ``lower()`` folds ASCII only, Python's ``str.lower`` all of Unicode: identical here
because the workload's text is ASCII and Chinese (which has no case).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.peers import Peer, Query, Snapshot, best_first, render
from memory_rdf._oxigraph import AgentStore, node_id
from memory_rdf._search import CANDIDATES, scored_terms
from memory_rdf._text import significant_keywords
from memory_rdf._words import bm25_idf, query_terms, with_word_forms

SEP = "\x1f"  # joins a node's keywords in one FTS column; never inside a keyword


def fts5_available() -> bool:
    try:
        con = sqlite3.connect(":memory:")
        con.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='trigram')")
        con.close()
        return True
    except sqlite3.OperationalError:
        return False


class SqlitePeer(Peer):
    name = "sqlite (CTE+FTS5)"

    def load(self, snapshot: Snapshot, store: AgentStore, workdir: Any) -> None:
        self.snap = snapshot
        self.fts = fts5_available()
        self.path = Path(workdir) / "peer.sqlite3"
        self.path.unlink(missing_ok=True)
        con = sqlite3.connect(self.path)
        con.executescript(
            """
            PRAGMA journal_mode = WAL;
            PRAGMA synchronous = NORMAL;
            CREATE TABLE nodes (rowid INTEGER PRIMARY KEY, id TEXT UNIQUE NOT NULL,
                                content TEXT NOT NULL, phrase TEXT NOT NULL,
                                keywords TEXT NOT NULL, scan_key INTEGER NOT NULL);
            CREATE TABLE links (source TEXT NOT NULL, target TEXT NOT NULL,
                                strength REAL NOT NULL, relation TEXT,
                                PRIMARY KEY (source, target)) WITHOUT ROWID;
            CREATE TABLE focus (id TEXT PRIMARY KEY, rank INTEGER NOT NULL);
            """
        )
        con.executemany(
            "INSERT INTO nodes (id, content, phrase, keywords, scan_key) VALUES (?, ?, ?, ?, ?)",
            ((n, r.content, r.phrase, SEP.join(r.keywords), r.scan_key)
             for n, r in snapshot.nodes.items()),
        )
        con.executemany(
            "INSERT INTO links VALUES (?, ?, ?, ?)",
            ((s, t, w, r or None) for s, t, w, r in snapshot.links),
        )
        con.executemany("INSERT INTO focus VALUES (?, ?)",
                        ((n, i) for i, n in enumerate(snapshot.focus)))
        con.execute("CREATE INDEX links_target ON links (target)")
        con.execute("CREATE INDEX nodes_scan ON nodes (scan_key)")
        if self.fts:
            con.execute(
                "CREATE VIRTUAL TABLE nodes_fts USING fts5(content, keywords, "
                "content='nodes', content_rowid='rowid', tokenize='trigram')"
            )
            con.execute("INSERT INTO nodes_fts (nodes_fts) VALUES ('rebuild')")
        con.executescript(
            """
            CREATE TABLE terms (term TEXT NOT NULL, node TEXT NOT NULL,
                                PRIMARY KEY (term, node)) WITHOUT ROWID;
            CREATE TABLE lengths (node TEXT PRIMARY KEY, dl INTEGER NOT NULL) WITHOUT ROWID;
            """
        )
        con.executemany("INSERT OR IGNORE INTO terms VALUES (?, ?)", (
            (t, node_id(n)) for n, t in store.rows("SELECT ?n ?t WHERE { ?n memory:term ?t }")))
        con.executemany("INSERT INTO lengths VALUES (?, ?)", (
            (node_id(n), int(k)) for n, k in store.rows(
                "SELECT ?n ?k WHERE { ?n memory:termCount ?k }")))
        # BM25's collection statistics, as the library's keyword_entry_stats.rq counts them
        # (N: the nodes with a scanCount; avgdl: the sum of termCounts over N).
        ((n_nodes, n_terms),) = store.rows(
            "SELECT ?nodes ?terms WHERE { { SELECT (COUNT(?n) AS ?nodes) WHERE "
            "{ ?n memory:scanCount ?s } } { SELECT (SUM(?c) AS ?terms) WHERE "
            "{ ?x memory:termCount ?c } } }")
        self.stats = (int(n_nodes or 0), int(n_terms or 0))
        con.commit()
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self.con = con

    def disk_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.path.parent.glob(self.path.name + "*"))

    def recall(self, query: Query) -> str:
        return self._walk(query, self.snap.focus, None)

    def recall_both(self, query: Query, max_entry_nodes: int = 10) -> str:
        """``recall(entry="both")``: the focus seeds (1.0), then the keyword seeds."""
        seeds = self.keyword_seeds(query.keywords, max_entry_nodes)
        return self._walk(query, [*self.snap.focus, *(n for n, _ in seeds)],
                          [1.0] * len(self.snap.focus) + [w for _, w in seeds])

    def keyword_seeds(self, keywords: Sequence[str], limit: int) -> list[tuple[str, float]]:
        """SPEC §5.5's keyword entry in SQL: ``(node, score ÷ best score)``, best first."""
        terms = query_terms(significant_keywords(keywords))
        if not terms:
            return []
        terms = with_word_forms(terms)
        df = dict(self.con.execute(
            "SELECT term, COUNT(*) FROM terms WHERE term IN (SELECT value FROM json_each(?)) "
            "GROUP BY term", (json.dumps(terms),)).fetchall())
        scored = scored_terms(terms, df)
        if not scored:
            return []
        nodes, total = self.stats
        avgdl = total / nodes if nodes and total else 1.0
        idf = [[t, bm25_idf(nodes, df[t])] for t in scored]
        rows = self.con.execute(
            """
            WITH q(term, idf) AS (SELECT value ->> 0, value ->> 1 FROM json_each(:q)),
            w(node, weight) AS (
                SELECT t.node, SUM(q.idf) FROM q JOIN terms t ON t.term = q.term
                GROUP BY t.node ORDER BY 2 DESC, 1 DESC LIMIT :candidates)
            SELECT w.node, w.weight * 2.2 / (1 + 1.2 * (0.25 + 0.75 * l.dl / :avgdl))
            FROM w JOIN lengths l ON l.node = w.node
            ORDER BY 2 DESC, 1 DESC LIMIT :limit
            """,
            {"q": json.dumps(idf), "candidates": max(CANDIDATES, 5 * limit), "avgdl": avgdl,
             "limit": limit},
        ).fetchall()
        rows = [(n, float(s)) for n, s in rows if s and s > 0]
        return [(n, s / rows[0][1]) for n, s in rows] if rows else []

    def _walk(self, query: Query, seeds: Sequence[str], strengths: Sequence[float] | None) -> str:
        if not seeds:
            return ""
        con, threshold = self.con, self.snap.threshold
        rel_filter = "" if query.relations is None else \
            "AND l.relation IN (SELECT value FROM json_each(:rels))"
        params: dict[str, Any] = {
            "seeds": json.dumps(seeds), "depth": query.depth, "threshold": threshold,
            "rels": json.dumps(list(query.relations or ())),
        }
        adjacency: dict[str, list[tuple[str, float]]] = {}
        reached: set[str] = set(seeds)
        if query.depth > 0:
            rows = con.execute(
                f"""
                WITH RECURSIVE reach(node, hop) AS (
                    SELECT value, 0 FROM json_each(:seeds)
                    UNION
                    SELECT l.target, r.hop + 1 FROM reach r
                    JOIN links l ON l.source = r.node
                    JOIN nodes n ON n.id = l.target
                    WHERE r.hop + 1 < :depth AND l.strength >= :threshold {rel_filter}
                )
                SELECT l.source, l.target, l.strength FROM links l
                JOIN nodes n ON n.id = l.target
                WHERE l.source IN (SELECT node FROM reach)
                  AND l.strength >= :threshold {rel_filter}
                """,
                params,
            ).fetchall()
            for s, t, w in rows:
                adjacency.setdefault(s, []).append((t, w))
                reached.add(t)
            for targets in adjacency.values():
                targets.sort(key=lambda t: (-t[1], t[0]))
        needles = query.needles
        matches = self._matching(sorted(reached), needles) if needles else None
        results = best_first(
            seeds, lambda n: adjacency.get(n, ()),
            None if matches is None else matches.__contains__, query.depth, query.limit,
            strengths,
        )
        return render(self.snap.templates, results, *self._texts(results, query))

    def _matching(self, candidates: Sequence[str], needles: Sequence[str]) -> set[str]:
        con = self.con
        con.execute("CREATE TEMP TABLE IF NOT EXISTS cand (id TEXT PRIMARY KEY)")
        con.execute("DELETE FROM temp.cand")
        con.executemany("INSERT OR IGNORE INTO temp.cand VALUES (?)", ((c,) for c in candidates))
        out: set[str] = set()
        long = [n for n in needles if len(n) >= 3] if self.fts else []
        short = [n for n in needles if n not in long]
        if long:
            expr = " OR ".join('"' + n.replace('"', '""') + '"' for n in long)
            out.update(r[0] for r in con.execute(
                "SELECT n.id FROM nodes_fts f JOIN nodes n ON n.rowid = f.rowid "
                "WHERE nodes_fts MATCH ? AND n.id IN (SELECT id FROM temp.cand)", (expr,)))
        for needle in short:
            out.update(r[0] for r in con.execute(
                "SELECT n.id FROM temp.cand c JOIN nodes n ON n.id = c.id "
                "WHERE instr(lower(n.content), :n) OR instr(lower(n.keywords), :n)",
                {"n": needle}))
        return out

    def _texts(
        self, results: Sequence[str], query: Query
    ) -> tuple[dict[str, tuple[str, str]], dict[str, list[tuple[float, str]]]]:
        if not results:
            return {}, {}
        ids = json.dumps(list(results))
        texts = {
            n: (c, p) for n, c, p in self.con.execute(
                "SELECT id, content, phrase FROM nodes WHERE id IN (SELECT value FROM "
                "json_each(?))", (ids,))
        }
        rel_filter = "" if query.relations is None else \
            "AND l.relation IN (SELECT value FROM json_each(:rels))"
        dangling: dict[str, list[tuple[float, str]]] = {}
        for s, w, r in self.con.execute(
            f"""SELECT l.source, l.strength, l.relation FROM links l
                LEFT JOIN nodes n ON n.id = l.target
                WHERE l.source IN (SELECT value FROM json_each(:ids)) AND n.id IS NULL
                  AND l.strength >= :threshold {rel_filter}""",
            {"ids": ids, "threshold": self.snap.threshold,
             "rels": json.dumps(list(query.relations or ()))},
        ):
            dangling.setdefault(s, []).append((w, r or ""))
        return texts, dangling

    # -- the other store operations, as SQLite baselines ---------------------------------------

    def importance(self, node: str) -> float:
        row = self.con.execute(
            "SELECT SUM(strength) FROM (SELECT strength FROM links WHERE source = :n "
            "UNION ALL SELECT strength FROM links WHERE target = :n) WHERE strength >= :t",
            {"n": node, "t": self.snap.threshold},
        ).fetchone()
        return float(row[0] or 0.0)

    def next_batch(self, limit: int) -> list[str]:
        return [r[0] for r in self.con.execute(
            "SELECT id FROM nodes WHERE id NOT IN (SELECT id FROM focus) "
            "ORDER BY scan_key LIMIT ?", (limit,))]

    def close(self) -> None:
        con: sqlite3.Connection | None = getattr(self, "con", None)
        if con is not None:
            con.close()
            del self.con
