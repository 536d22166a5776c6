"""Test helpers that read the memory network back from the real store by SPARQL."""

from __future__ import annotations

from datetime import datetime

from memory_rdf import MemoryManager

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
    assert mem._store is not None
    mem._store.commit(batch)
