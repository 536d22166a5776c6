"""Rendering the shipped ``.rq`` queries and ``.ru`` updates with serialized terms
(:func:`render`, the one templating path of the library).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from memory_rdf._oxigraph.terms import Term
from memory_rdf._resources import query_text, update_text

_TOKEN = re.compile(
    r"(?P<marker>^[ \t]*# @(?P<kind>values|in|contains) (?P<var>\w+) (?P<name>\w+)[ \t]*$)"
    r"|(?P<with>^[ \t]*# @with (?P<wname>\w+)[ \t]*$)"
    r"|(?P<named>^[ \t]*# @named (?P<nname>\w+)[ \t]*$)"
    r"|(?P<limit>(?P<lkw>LIMIT|OFFSET) \d+[ \t]*# @(?:limit|offset) (?P<lname>\w+)[ \t]*$)"
    r"|(?P<comment>(?<![<\w])#[^\n]*)"
    r"|\$(?P<param>[A-Za-z_]\w*)",
    re.MULTILINE,
)
_UNION = re.compile(
    r"^[ \t]*# @union (?P<names>\w+(?: \w+)*)[ \t]*\n(?P<block>.*?)^[ \t]*# @end[ \t]*$",
    re.MULTILINE | re.DOTALL,
)

Param = Term | Sequence[Term] | int | None

#: Longest ``||`` chain ``# @contains`` renders; longer lists become a linear ``VALUES`` test
#: (a chain is ~2x faster for a few terms, but its parse and plan grow quadratically).
CONTAINS_CHAIN_MAX = 16


_PREFIX_LINE = re.compile(r"^PREFIX[ \t]+\w*:[ \t]*<[^>\s]*>[ \t]*\n", re.MULTILINE)


def render(name_or_text: str, **params: Param) -> str:
    """Fill a query's (or update's) parameters: the one templating path of the library.

    Parameter syntax inside the ``.rq``/``.ru`` files (which stay valid SPARQL on their own, so
    a user can run them unchanged):

    * ``$name`` — replaced by one term (an unbound variable when the file is run as-is);
    * ``# @values var name`` — replaced by ``VALUES ?var { t1 t2 … }``;
    * ``# @in var name`` — replaced by ``FILTER(?var IN (t1, t2, …))``; dropped when ``None``;
    * ``# @contains var name`` — ``FILTER(CONTAINS(?var, t1) || …)``; dropped when ``None``
      (beyond :data:`CONTAINS_CHAIN_MAX` terms, the same test over a ``VALUES`` list);
    * ``# @named name`` — ``FROM NAMED <g1> FROM NAMED <g2> …`` (between the SELECT clause
      and WHERE): the query's ``GRAPH ?g`` reads those graphs only; dropped when ``None``
      (every named graph); an empty list is refused (it would read every graph too);
    * ``# @with name`` — ``WITH <graph>`` before an update operation; dropped when ``None``
      (the embedded store's memory network is its default graph, SPEC §2 and §8);
    * ``LIMIT 10  # @limit name`` / ``OFFSET 0  # @offset name`` — the number set to the
      ``int`` given as ``name``; dropped when ``None`` (no limit);
    * ``# @union a b`` … ``# @end`` — the block between repeated once per element of the
      sequences ``a``, ``b`` (equal lengths), ``$a``/``$b`` meaning that element, the copies
      joined with ``UNION`` (the standard-SPARQL form of a ``LATERAL`` join, SPEC §8).

    Every term must be a :class:`Term` (or a sequence of them): raw strings are refused. The
    text is scanned once, so nothing spliced in is ever read again as a parameter; other
    comments are left as they are. A name ending in ``.ru`` (or a text with an update) is an
    update template from ``queries/``.
    """
    shipped = "\n" not in name_or_text
    text = _template(name_or_text) if shipped else name_or_text
    if "# @union" in text:
        text, params = _expand_unions(text, params)
        shipped = False
    pieces = _cached_pieces(text) if shipped else _scan_pieces(text)

    def replace(match: re.Match[str]) -> str:
        if match.group("param") is not None:
            name = match.group("param")
            if name not in params:
                raise KeyError(f"query parameter ${name} is not given")
            (term,) = _terms(name, params[name], many=False)
            return term
        if match.group("with") is not None:
            graph = params.get(match.group("wname"))
            return "" if graph is None else f"WITH {_terms('with', graph, many=False)[0]}"
        if match.group("named") is not None:
            graphs = params.get(match.group("nname"))
            if graphs is None:
                return ""
            terms = _terms("named", graphs, many=True)
            if not terms:
                raise ValueError("an empty FROM NAMED list would read every graph")
            return " ".join(f"FROM NAMED {t}" for t in terms)
        if match.group("limit") is not None:
            value = params.get(match.group("lname"))
            if value is None:
                return ""
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise TypeError(f"{match.group('lname')!r} must be an int >= 0, got {value!r}")
            # Engines read LIMIT/OFFSET as 64-bit (Oxigraph refused 2**64 as a syntax error);
            # beyond 2**63 - 1 no store has rows to skip or to stop at.
            return f"{match.group('lkw')} {min(value, 2**63 - 1)}"
        kind, var, name = match.group("kind", "var", "name")
        value = params.get(name)
        if value is None:
            if kind == "values":
                raise KeyError(f"query parameter {name!r} is required")
            return ""
        terms = _terms(name, value, many=True)
        if kind == "values":
            return f"VALUES ?{var} {{ {' '.join(terms)} }}"
        if kind == "in":
            return f"FILTER(?{var} IN ({', '.join(terms)}))"
        if len(terms) <= CONTAINS_CHAIN_MAX:
            return "FILTER(" + " || ".join(f"CONTAINS(?{var}, {t})" for t in terms) + ")"
        # A long || chain costs the engine quadratic time to parse and plan, and overflowed
        # its stack at 10,000 terms (issue 17); a VALUES list is linear.
        return (f"FILTER EXISTS {{ VALUES ?{var}__needle {{ {' '.join(terms)} }} "
                f"FILTER(CONTAINS(?{var}, ?{var}__needle)) }}")

    out: list[str] = []
    for literal, match in pieces:
        out.append(literal)
        if match is not None:
            out.append(replace(match))
    return "".join(out)


@lru_cache(maxsize=256)
def _template(name: str) -> str:
    """A shipped query (``name``) or update (``name.ru``) as :func:`render` fills it."""
    text = update_text(name[:-3]) if name.endswith(".ru") else query_text(name)
    # The files declare their prefixes so that they run on their own; the stores supply the
    # same ones (V.PREFIXES), and a PREFIX after ";" in a batched update does not parse in
    # Oxigraph: drop the declarations.
    return _PREFIX_LINE.sub("", text)


Pieces = tuple[tuple[str, "re.Match[str] | None"], ...]


def _scan_pieces(text: str) -> Pieces:
    """``text`` cut at its parameters: ``(text before, the parameter's match)`` pairs, the
    last with None; comments stay in the text as they are. A shipped template's are kept
    (:data:`_cached_pieces`): the scan was ~20 µs of every query a recall runs."""
    pieces: list[tuple[str, re.Match[str] | None]] = []
    at = 0
    for match in _TOKEN.finditer(text):
        if match.group("comment") is None:
            pieces.append((text[at : match.start()], match))
            at = match.end()
    pieces.append((text[at:], None))
    return tuple(pieces)


_cached_pieces = lru_cache(maxsize=512)(_scan_pieces)


def _expand_unions(text: str, params: dict[str, Param]) -> tuple[str, dict[str, Param]]:
    """Unroll ``# @union`` blocks (on the template, before any term is spliced)."""
    params = dict(params)
    counter = 0

    def expand(match: re.Match[str]) -> str:
        nonlocal counter
        names = match.group("names").split()
        columns = [_terms(n, params.get(n), many=True) if params.get(n) is not None else []
                   for n in names]
        if len({len(c) for c in columns}) != 1:
            raise ValueError(f"@union parameters {names} must have equal lengths")
        copies: list[str] = []
        for row in zip(*columns, strict=True):
            block = match.group("block")
            for n, term in zip(names, row, strict=True):
                counter += 1
                alias = f"{n}__{counter}"
                params[alias] = term
                block = re.sub(rf"\${n}\b", f"${alias}", block)
            copies.append("{\n" + block + "}")
        if not copies:
            return "FILTER(false)\n"
        return "\nUNION\n".join(copies) + "\n"

    return _UNION.sub(expand, text), params


def _terms(name: str, value: object, *, many: bool) -> list[Term]:
    values: list[object] = (
        list(value) if many and isinstance(value, list | tuple) else [value]
    )
    for v in values:
        if not isinstance(v, Term):
            raise TypeError(
                f"query parameter {name!r} must be serialized with memory_rdf._oxigraph")
    return values  # type: ignore[return-value]
