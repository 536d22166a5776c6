"""Terms: the serialized RDF terms (:class:`Term`) that are the only way values reach
SPARQL text (:func:`node_ref`, :func:`lit`, ...), and pyoxigraph's terms back to Python
(:func:`to_python`).
"""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from typing import Any

import pyoxigraph as ox

from memory_rdf import _vocab as V


class Term(str):
    """A term serialized by pyoxigraph (escaped N-Triples syntax): safe to splice into SPARQL.

    Only the storage package makes them (the constructors here, first of all);
    :func:`~memory_rdf._oxigraph.render.render` refuses anything else.
    """

    __slots__ = ()


_NODE_PREFIX_LEN = len(V.NODE)


_NODE_OPEN = f"<{V.NODE}"


def node_ref(node: str) -> Term:
    """The serialized IRI of node ``node`` (``<…/node/{id}>``). An id of ASCII letters and
    digits only (every id the library makes: 32 hex digits) is spliced as it is, which is
    exactly what pyoxigraph writes for it (tests/test_store_terms.py compares the two): ~0.1
    against ~0.5 µs, and a recall at 10k nodes names hundreds of nodes in its queries
    (issue 38). Any other id goes through ``ox.NamedNode``, which checks it."""
    if node.isascii() and node.isalnum():
        return Term(_NODE_OPEN + node + ">")
    return Term(str(ox.NamedNode(V.NODE + node)))


def link_iri(source: str, target: str) -> str:
    """The IRI of the link from ``source`` to ``target``: derived from the pair (SPEC §2)."""
    return f"{V.LINK}{source}--{target}"


def link_ends(iri: str) -> tuple[str, str] | None:
    """``(source, target)`` of a link IRI ``link:{source}--{target}`` (SPEC §2; the inverse of
    :func:`link_iri`), or None when the IRI is not of that form (read its ends from the store)."""
    if not iri.startswith(V.LINK):
        return None
    source, sep, target = iri[len(V.LINK):].partition("--")
    if not sep or not source or not target or "--" in target:
        return None
    return source, target


def link_ref(source: str, target: str) -> Term:
    return Term(str(ox.NamedNode(link_iri(source, target))))


def iri_ref(iri: str) -> Term:
    return Term(str(ox.NamedNode(iri)))


def node_id(iri: str) -> str:
    """The id of a ``node:`` IRI (inverse of :func:`node_ref` on the IRI's value)."""
    return iri[_NODE_PREFIX_LEN:] if iri.startswith(V.NODE) else iri


_XSD_DATETIME = ox.NamedNode(V.XSD + "dateTime")
_XSD_DOUBLE = ox.NamedNode(V.XSD + "double")
_DOUBLE_SUFFIX = f'"^^<{V.XSD}double>'
_INTEGER_SUFFIX = f'"^^<{V.XSD}integer>'


def lit(value: str | int | float | bool | datetime) -> Term:
    """A literal: str → xsd:string, int → xsd:integer, float → xsd:double,
    datetime → xsd:dateTime.

    A float or an int (not a bool, not a subclass) is spelled here, exactly as pyoxigraph serializes
    it (``repr()``/``str()`` hold only digits, ``.``, ``e``, ``+``, ``-``: nothing to escape;
    tests/test_store_terms.py compares the two): ~0.15 against ~0.7 µs through
    ``ox.Literal``, and a compression commit writes ~26 of them per scanned node."""
    kind = type(value)
    if kind is float:
        # repr() round-trips exactly; pyoxigraph would print e.g. "0.5" for 0.5 anyway.
        return Term(f'"{value!r}{_DOUBLE_SUFFIX}')
    if kind is int:
        return Term(f'"{value}{_INTEGER_SUFFIX}')
    if isinstance(value, datetime):
        return Term(str(ox.Literal(value.isoformat(), datatype=_XSD_DATETIME)))
    if isinstance(value, float):
        return Term(str(ox.Literal(repr(value), datatype=_XSD_DOUBLE)))
    return Term(str(ox.Literal(value)))


# ---------------------------------------------------------------------------------------------
# Terms back to Python
# ---------------------------------------------------------------------------------------------


def _parse_datetime(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _parse_bool(text: str) -> bool:
    return text in ("true", "1")


_CONVERT: dict[str, Any] = {
    V.XSD + "integer": int,
    V.XSD + "int": int,
    V.XSD + "long": int,
    V.XSD + "nonNegativeInteger": int,
    V.XSD + "double": float,
    V.XSD + "float": float,
    V.XSD + "decimal": float,
    V.XSD + "boolean": _parse_bool,
    V.XSD + "dateTime": _parse_datetime,
}


def to_python(term: object) -> Any:
    """IRIs as ``str``, literals as the Python value of their datatype, blank nodes as ``_:id``."""
    if term is None:
        return None
    if isinstance(term, ox.NamedNode):
        return term.value
    if isinstance(term, ox.Literal):
        convert = _CONVERT.get(term.datatype.value)
        if convert is None:
            return term.value
        try:
            return convert(term.value)
        except ValueError:
            return term.value
    if isinstance(term, ox.BlankNode):
        return f"_:{term.value}"
    if isinstance(term, ox.Triple):
        return (to_python(term.subject), to_python(term.predicate), to_python(term.object))
    return str(term)


@lru_cache(maxsize=1)
def pyoxigraph_version() -> str:
    from importlib.metadata import version

    return version("pyoxigraph")
