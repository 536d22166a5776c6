"""Test helpers that read the memory network back from the real store: by SPARQL, by
:mod:`memory_rdf.inspect` (a snapshot of every graph, the journal), and the keyword entry
through the search room's own interface; and one that plants a link's strength.

None reaches into the manager's private attributes: what a test needs below the public API
it takes from :attr:`MemoryManager.store <memory_rdf.MemoryManager.store>` (the storage
package's interface) and the library's rooms built over it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from memory_rdf import MemoryManager, inspect

NODE = "https://w3id.org/memory-rdf/node/"


def ids_by_content(mem: MemoryManager) -> dict[str, str]:
    rows = mem.sparql("SELECT ?n ?c WHERE { ?n a memory:Node ; memory:content ?c }")
    assert isinstance(rows, list)
    return {r["c"]: r["n"][len(NODE):] for r in rows}  # type: ignore[index]


def links(mem: MemoryManager) -> dict[tuple[str, str], tuple[float, str | None]]:
    """``(source content, target content) -> (strength, relation)``; dangling targets by id."""
    rows = mem.sparql(
        """SELECT ?s ?t ?w ?r ?tc WHERE {
             ?l a memory:Link ; memory:source ?s ; memory:target ?t ; memory:strength ?w .
             OPTIONAL { ?l memory:relation ?r }
             OPTIONAL { ?t memory:content ?tc } }"""
    )
    names = {v: k for k, v in ids_by_content(mem).items()}
    out: dict[tuple[str, str], tuple[float, str | None]] = {}
    for r in rows:  # type: ignore[union-attr]
        s = names[r["s"][len(NODE):]]  # type: ignore[index]
        t = r.get("tc") or r["t"][len(NODE):]  # type: ignore[union-attr,index]
        out[(s, t)] = (r["w"], r.get("r"))  # type: ignore[index,union-attr]
    return out


def focus(mem: MemoryManager) -> list[str]:
    names = {v: k for k, v in ids_by_content(mem).items()}
    return [names[i] for i in mem.stats()["focus"]]


def created(mem: MemoryManager) -> dict[str, datetime]:
    rows = mem.sparql("SELECT ?c ?t WHERE { ?n memory:content ?c ; memory:createdAt ?t }")
    return {r["c"]: r["t"] for r in rows}  # type: ignore[index,union-attr]


def set_strength(mem: MemoryManager, source: str, target: str, strength: float) -> None:
    """Test setup: overwrite one link's strength in the real store (embedded or endpoint)."""
    from memory_rdf import _vocab as V
    from memory_rdf._oxigraph import WriteBatch, link_ref, lit, triple

    ids = ids_by_content(mem)
    link = link_ref(ids[source], ids[target])
    rows = mem.sparql(f"SELECT ?w WHERE {{ {link} memory:strength ?w }}")
    batch = WriteBatch()
    batch.delete([triple(link, V.STRENGTH, lit(float(r["w"]))) for r in rows])  # type: ignore[index,union-attr]
    batch.insert([triple(link, V.STRENGTH, lit(float(strength)))])
    mem.store.commit(batch)


def where(mem: MemoryManager) -> Any:
    """Where the agent lives, as :mod:`memory_rdf.inspect` takes it: its data directory or
    its SPARQL endpoint."""
    return mem.endpoint if mem.endpoint is not None else mem.path.parent


def stored_quads(mem: MemoryManager) -> set[str]:
    """Every graph of the agent's store (the memory network, journal, metadata, vectors) as
    N-Quads lines, read by :func:`memory_rdf.inspect.export` on a fresh snapshot."""
    return set(inspect.export(mem.agent_id, where(mem), format="nquads").decode().splitlines())


def journalled(mem: MemoryManager) -> list[dict[str, Any]]:
    """The agent's journalled remembers, pending and failed (:func:`memory_rdf.inspect.tasks`)."""
    return inspect.tasks(mem.agent_id, where(mem))


class KeywordEntry:
    """The keyword entry (SPEC §5.5) of a live agent: a :class:`~memory_rdf._search.Searcher`
    over its store, as the manager builds one, with its own caches; :meth:`seeds` takes the
    store's node-creation counter as a recall does."""

    def __init__(self, mem: MemoryManager) -> None:
        from memory_rdf._links import LinkStore
        from memory_rdf._nodes import NodeStore
        from memory_rdf._search import Searcher

        store, cfg = mem.store, mem.config
        self.store, self.agent_id = store, mem.agent_id
        self.searcher = Searcher(NodeStore(store), LinkStore(store, cfg.link_break_threshold),
                                 cfg.templates, store, language=cfg.language)

    @property
    def generation(self) -> int:
        """The store's node-creation counter (``Metadata.node_sequence``)."""
        from memory_rdf._journal import Metadata

        return Metadata(self.store, self.agent_id).node_sequence

    def seeds(self, keywords: Sequence[str], limit: int) -> list[Any]:
        return self.searcher.keyword_seeds(keywords, limit, generation=self.generation)
