"""Conversions for the SPARQL endpoint store: its answers (N-Triples, N-Quads, JSON
results bindings) as the embedded store gives them.
"""

from __future__ import annotations

from typing import Any

import pyoxigraph as ox

from memory_rdf import _vocab as V
from memory_rdf._oxigraph.errors import _storage_errors
from memory_rdf._oxigraph.terms import _CONVERT, Term, iri_ref, to_python


def parse_ntriples(data: bytes) -> list[tuple[Any, Any, Any]]:
    """(s, p, o) Python values of an N-Triples document (what an endpoint's CONSTRUCT sends)."""
    with _storage_errors("cannot read the endpoint's N-Triples answer"):
        return [
            (to_python(t.subject), to_python(t.predicate), to_python(t.object))
            for t in ox.parse(data, format=ox.RdfFormat.N_TRIPLES)
        ]


def reserialize(data: bytes, fmt: str) -> bytes:
    """N-Quads (or N-Triples) bytes in another RDF format (turtle, trig, ntriples, nquads)."""
    formats = {"turtle": ox.RdfFormat.TURTLE, "trig": ox.RdfFormat.TRIG,
               "ntriples": ox.RdfFormat.N_TRIPLES, "nquads": ox.RdfFormat.N_QUADS}
    with _storage_errors(f"cannot convert the endpoint's answer to {fmt}"):
        quads = list(ox.parse(data, format=ox.RdfFormat.N_QUADS))
        kwargs: dict[str, Any] = {"format": formats[fmt]}
        if fmt in ("turtle", "trig"):
            kwargs["prefixes"] = V.PREFIXES
        if fmt in ("turtle", "ntriples"):
            out = ox.serialize([q.triple for q in quads], **kwargs)
        else:
            out = ox.serialize(quads, **kwargs)
    assert out is not None
    return out


def term_from_json(binding: dict[str, str]) -> Term:
    """A SPARQL JSON results binding (``{"type": "uri", "value": …}``) as a serialized term."""
    kind = binding.get("type")
    value = binding.get("value", "")
    if kind == "uri":
        return iri_ref(value)
    if kind == "bnode":
        return Term(str(ox.BlankNode(value)))
    lang = binding.get("xml:lang")
    if lang:
        return Term(str(ox.Literal(value, language=lang)))
    datatype = binding.get("datatype")
    if datatype:
        return Term(str(ox.Literal(value, datatype=ox.NamedNode(datatype))))
    return Term(str(ox.Literal(value)))


def python_from_json(binding: dict[str, str] | None) -> Any:
    """A SPARQL JSON results binding as :func:`to_python` would give it."""
    if binding is None:
        return None
    kind = binding.get("type")
    value = binding.get("value", "")
    if kind == "uri":
        return value
    if kind == "bnode":
        return f"_:{value}"
    convert = _CONVERT.get(binding.get("datatype", ""))
    if convert is None:
        return value
    try:
        return convert(value)
    except ValueError:
        return value
