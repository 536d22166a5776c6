"""How the recall text's entries are read (issue 38): without a budget, every result's text
and perceptions in one go; within one, a chunk of results at a time. Same text either way."""

from __future__ import annotations

from typing import Any

from memory_rdf import Config, MemoryManager

from helpers import remember


def _text_reads(mem: MemoryManager) -> list[str]:
    """The queries that read results' texts (``node_texts``, ``node_entries``) from now on."""
    store = mem.store
    asked: list[str] = []
    real = store.rows

    def rows(query: str) -> Any:
        if query.startswith(("# node_texts", "# node_entries")):
            asked.append(query)
        return real(query)

    store.rows = rows  # type: ignore[method-assign]
    return asked


def test_a_recall_without_a_budget_reads_all_its_results_texts_at_once(make_manager) -> None:
    # read_mirror=False: the texts are read by SPARQL (a serving mirror's text table answers
    # them without a query)
    mem = make_manager(config=Config(auto_compress=False, focus_limit=80, read_mirror=False))
    remember(mem, *(f"invoice {i} for the harbour office" for i in range(45)))
    asked = _text_reads(mem)
    unlimited = mem.recall(["invoice"], depth=2, max_chars=0, entry="focus")
    assert unlimited.count("invoice") == 45
    assert len(asked) == 1
    asked.clear()
    # within a budget that holds them all: a chunk at a time, the same text
    assert mem.recall(["invoice"], depth=2, max_chars=10**6, entry="focus") == unlimited
    assert len(asked) == 2
