"""The checks of :mod:`memory_rdf._integrity` run on a pyoxigraph store: :func:`first_problem`
names what is wrong with a store (a backup before it is restored), or says nothing.
"""

from __future__ import annotations

import pyoxigraph as ox

from memory_rdf import _vocab as V
from memory_rdf._integrity import _JOURNAL, _PREFIXES, _checks, _gate, _shown, task_problem


class _Counts:
    """Aggregate counts, which Oxigraph answers from its indexes ~50 times faster than the
    checks that name a triple (10k nodes: 5 ms against 260 ms): a check whose counts show
    nothing can be wrong is skipped."""

    def __init__(self, store: ox.Store) -> None:
        self._store = store

    def __call__(self, where: str, distinct: bool = False) -> int:
        what = "DISTINCT ?s" if distinct else "*"
        result = self._store.query(_PREFIXES + f"SELECT (COUNT({what}) AS ?n) WHERE {{ {where} }}")
        assert isinstance(result, ox.QuerySolutions)
        (row,) = list(result)
        value = row["n"]
        assert isinstance(value, ox.Literal)
        return int(value.value)

    def subjects_typed(self, cls: str, props: tuple[str, ...]) -> bool:
        """Every subject of ``props`` is of class ``cls``."""
        union = " UNION ".join([f"{{ ?s a memory:{cls} }}"]
                               + [f"{{ ?s memory:{p} ?o }}" for p in props])
        return self(union, distinct=True) == self(f"?s a memory:{cls}")

    def one_each(self, cls: str, prop: str) -> bool:
        """Every ``cls`` has exactly one ``prop`` (its subjects being all of that class)."""
        return self(f"?s memory:{prop} ?o") == self(f"?s memory:{prop} ?o", True) == \
            self(f"?s a memory:{cls}")

    def at_most_one(self, prop: str) -> bool:
        return self(f"?s memory:{prop} ?o") == self(f"?s memory:{prop} ?o", True)


def first_problem(store: ox.Store, max_chars: int) -> str | None:
    """One line naming what is wrong with ``store`` and a triple that shows it, or None when
    it holds only what memory_rdf writes. ``max_chars``: the longest text a literal (content,
    task text, …) may hold (``Config.max_remember_chars``)."""
    counts = _Counts(store)
    for what, query in _checks(max_chars):
        if _gate(what, counts):
            continue
        result = store.query(_PREFIXES + query + " LIMIT 1")
        assert isinstance(result, ox.QuerySolutions)
        for row in result:
            s, p, o = (row[v] for v in ("s", "p", "o"))
            return f"{what}: {_shown(s)} {_shown(p)} {_shown(o)}"
    result = store.query(
        _PREFIXES + f"SELECT ?s ?text WHERE {{ GRAPH {_JOURNAL} {{ ?s memory:taskText ?text }} }}")
    assert isinstance(result, ox.QuerySolutions)
    for row in result:
        text = row["text"]
        assert isinstance(text, ox.Literal)
        problem = task_problem(text.value, max_chars)
        if problem is not None:
            return (f"a journalled remember that remember() would refuse ({problem}): "
                    f"{_shown(row['s'])} <{V.MEMORY}taskText> {_shown(text)}")
    return None
