"""lit() spells ints and floats itself (a compression commit writes ~26 a scanned node), and
node_ref() a node IRI of a plain id (a recall names hundreds): the text must be exactly what
pyoxigraph serializes, and read back as the same value."""

from __future__ import annotations

import math
import random

import pyoxigraph as ox
import pytest

from memory_rdf import _vocab as V
from memory_rdf._oxigraph import AgentStore, WriteBatch, lit, node_ref, triple

_DOUBLE = ox.NamedNode(V.XSD + "double")


def _floats() -> list[float]:
    rng = random.Random(16)
    edge = [0.0, -0.0, 1e300, -1e-300, 5e-324, 0.1, 1 / 3, float("inf"), float("-inf")]
    return edge + [rng.uniform(-1e6, 1e6) for _ in range(2000)] + [
        rng.random() ** 9 for _ in range(500)]


def _ints() -> list[int]:
    rng = random.Random(17)
    return [0, -1, 2**63, -(2**80), 10**40] + [rng.randrange(-2**70, 2**70) for _ in range(2000)]


def test_lit_spells_floats_and_ints_as_pyoxigraph_does() -> None:
    for f in _floats():
        assert lit(f) == str(ox.Literal(repr(f), datatype=_DOUBLE))
    for i in _ints():
        assert lit(i) == str(ox.Literal(i))
    # bool is an int subclass: still xsd:boolean
    assert lit(True) == str(ox.Literal(True))
    assert lit(False).endswith(f"<{V.XSD}boolean>")


def test_node_ref_spells_plain_ids_as_pyoxigraph_does_and_checks_the_others() -> None:
    """A plain id (ASCII letters and digits) is spliced as pyoxigraph writes it; any other id
    is checked by pyoxigraph: one that cannot be an IRI is refused, never spliced (issue 38)."""
    import string

    rng = random.Random(18)
    plain = ["0" * 32, "01a22447da0f71cab523657867090f11", "A", "z9"]
    plain += ["".join(rng.choices(string.ascii_letters + string.digits, k=rng.randrange(1, 40)))
              for _ in range(500)]
    for nid in plain:
        assert node_ref(nid) == str(ox.NamedNode(V.NODE + nid)), nid
    # not plain: through pyoxigraph, as before (the same text, or refused)
    for nid in ("a-b", "a_b", "é1", "٣", "ａ1", "a/b", "a%20b"):
        assert node_ref(nid) == str(ox.NamedNode(V.NODE + nid)), nid
    for bad in ("a b", "a>b", "a<b", "a\nb", 'a"b', "a{b", ""):
        try:
            expected = str(ox.NamedNode(V.NODE + bad))
        except ValueError:
            with pytest.raises(ValueError):
                node_ref(bad)
        else:
            assert node_ref(bad) == expected


def test_lit_values_read_back_unchanged() -> None:
    store = AgentStore(None)
    values: list[float | int] = [*(f for f in _floats()[:200] if math.isfinite(f)), *_ints()[:200]]
    batch = WriteBatch()
    ref = node_ref("n")
    batch.insert(triple(ref, V.m(f"v{k}"), lit(v)) for k, v in enumerate(values))
    store.commit(batch)
    got = {p: o for _, p, o in store.quads(V.NODE + "n", None, None, None)}
    for k, v in enumerate(values):
        back = got[V.MEMORY + f"v{k}"]
        assert type(back) is type(v)
        assert back == v
    store.close()
