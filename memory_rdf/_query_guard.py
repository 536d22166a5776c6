"""What the user's SPARQL may do before the engine sees it (SPEC §6, issue 17).

pyoxigraph 0.5's ``Store.query`` has no switch to turn ``SERVICE`` off (its Python binding
exposes no service handler), its evaluator answers a ``SERVICE <http://…>`` with real HTTP
requests, and its parser and evaluator recurse once per nesting level and per operator of a
chain: ``FILTER((((…1…))))`` 10,000 deep, or 10,000 ``||`` terms, overflow the thread's stack
(a segfault, no traceback), and long operator chains cost quadratic time before that
(measured: 1,000 ``||`` terms 0.5 s, 3,000 terms 6 s). So the query is tokenized here —
strings, IRIs and comments recognised as the grammar does — and refused, before any
evaluation, when it

* reaches outside the store: the ``SERVICE`` or ``LOAD`` keyword anywhere (any case, any
  spacing, in a subquery), or an IRI with the ``file:`` scheme;
* writes: a SPARQL Update keyword (``INSERT``, ``DELETE``, ``DROP``, ``WITH``, …) anywhere,
  or ``LOAD`` as the query's operation (:class:`UpdateRefusedError`) — also for an endpoint
  whose query URL runs updates (Virtuoso's ``/sparql``); or could be read otherwise by some
  engine: Virtuoso's ``DEFINE`` pragmas, a backslash outside strings and IRIs (Jena decodes
  ``\\u`` escapes before it parses);
* runs code on a server: Virtuoso's ``bif:`` and ``sql:`` functions (prefixed or as IRIs),
  and the ``java:`` function IRIs of Jena (Fuseki), which load the Java class they name;
* does any of these once Jena's ``\\u`` escapes are decoded: Jena decodes them in the whole
  text, comments and strings included, before it parses, so the query is checked as written
  and as Jena reads it;
* is longer than :data:`MAX_QUERY_CHARS` characters, nests brackets deeper than
  :data:`MAX_NESTING`, or has more than :data:`MAX_OPERATORS` operators.

A word inside a string literal or a comment is not a keyword; a comment cannot hide one.
This is the one reader of the user's query before the engine: the endpoint store's own checks
(SPEC §8: no ``FROM``, ``GRAPH``, ``SERVICE``) read its :func:`keywords` too.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Iterable, Iterator

from memory_rdf._exceptions import (
    InvalidInputError,
    InvalidTypeError,
    QueryRefusedError,
    SparqlError,
    UpdateRefusedError,
)

#: Longest query text accepted (characters). Long VALUES lists are linear in the engine.
MAX_QUERY_CHARS = 1_000_000
#: Deepest nesting of ``(``, ``{`` and ``[`` accepted (the engine overflowed at ~3,000 ``{``).
MAX_NESTING = 64
#: Most operators accepted: ``|| && = != < > <= >= + - * / ! | ^ . ; ,`` and the pattern
#: keywords ``UNION OPTIONAL MINUS FILTER BIND`` (each deepens the engine's expression or
#: algebra tree by one level).
MAX_OPERATORS = 1_000

#: A character of a prefixed name's local part, its ``\-``-style escapes (PN_LOCAL_ESC) included.
_LOCAL = r"(?:[\w%:-]|\\[_~.!$&'()*+,;=/?#@%-])"
_TOKEN = re.compile(
    # A comment ends at a line feed or a carriage return (the grammar's EOL), as does a
    # one-line string: "# x\rSERVICE <…>" is a SERVICE call to the engine.
    r'(?P<skip>\s+|#[^\r\n]*)'
    r'|(?P<string>"""(?:[^"\\]|\\.|"(?!""))*(?:"""|\Z)|\'\'\'(?:[^\'\\]|\\.|\'(?!\'\'))*(?:\'\'\'|\Z)'
    r'|"(?:[^"\\\r\n]|\\.)*"?|\'(?:[^\'\\\r\n]|\\.)*\'?)'
    r'|(?P<iri><(?:[^<>"{}|^`\\\s]|\\u[0-9A-Fa-f]{4}|\\U[0-9A-Fa-f]{8})*>)'
    r'|(?P<var>[?$]\w+)'
    r'|(?P<name>(?:[A-Za-z_][\w-]*(?:\.[\w-]+)*)?:' + _LOCAL + r'*(?:\.' + _LOCAL + r'+)*)'
    r'|(?P<word>[A-Za-z_]\w*)'
    r'|(?P<number>[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)'
    r'|(?P<op>\|\||&&|!=|<=|>=|\^\^|.)',
    re.DOTALL,
)
_OPEN = {"(": ")", "{": "}", "[": "]"}
_CLOSE = set(_OPEN.values())
_OPERATORS = {"||", "&&", "=", "!=", "<", ">", "<=", ">=", "+", "-", "*", "/", "!", "|", "^",
              ".", ";", ","}
_PATTERN_WORDS = {"UNION", "OPTIONAL", "MINUS", "FILTER", "BIND"}
_ESCAPES = {"SERVICE", "LOAD"}
#: SPARQL Update's operation keywords: never a word of a query. A query URL that also runs
#: updates (Virtuoso's /sparql) ran "# <x>\nWITH <other agent> DELETE …" (the start-of-query
#: check did not skip that comment): refused wherever they stand.
_UPDATE_WORDS = {"INSERT", "DELETE", "CLEAR", "CREATE", "DROP", "COPY", "MOVE", "ADD", "WITH"}


#: Keywords of a query's prologue, before its operation.
_PROLOGUE = {"PREFIX", "BASE"}


def keywords(query: str) -> Iterator[str]:
    """The query's keywords, upper-cased, in order: its words outside strings, IRIs,
    comments, variables and prefixed names (``?graph`` and ``memory:from`` are none), read as
    :func:`check_user_query` reads them."""
    for text in _readings(query):
        for match in _TOKEN.finditer(text):
            if match.lastgroup == "word":
                yield match.group().upper()


#: Java's Unicode escapes (``\\u`` with one or more ``u``), which Jena decodes in the whole
#: query text, comments and strings included, before its parser sees it.
_JAVA_ESCAPE = re.compile(r"\\u+([0-9A-Fa-f]{4})")


def _readings(query: str) -> list[str]:
    """The query as the engines may read it: as written, and, when it holds ``\\u`` escapes,
    with them decoded as Jena (Fuseki) does everywhere before parsing — ``# \\u000A SERVICE
    <…>`` is a comment here and a SERVICE call there. Checking both readings refuses what
    either engine would run (at worst a query whose escapes decode to a refused word)."""
    if "\\u" not in query:
        return [query]
    decoded = _JAVA_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), query)
    return [query] if decoded == query else [query, decoded]


def undeclared_prefix(query: str, known: Iterable[str]) -> str | None:
    """The first prefix the query uses in a prefixed name (``foo`` of ``foo:bar``) without
    declaring it with PREFIX and that is not among ``known``; None when there is none
    (``_:b`` is a blank node, not a prefix). Prefixes are case-sensitive."""
    declared = set(known)
    after_prefix = False
    for match in _TOKEN.finditer(query):
        kind = match.lastgroup
        if kind == "skip":
            continue
        if kind == "name":
            prefix = match.group().partition(":")[0]
            if after_prefix:
                declared.add(prefix)
            elif prefix != "_" and prefix not in declared:
                return prefix
        after_prefix = kind == "word" and match.group().upper() == "PREFIX"
    return None


def query_form(query: str) -> str | None:
    """The query's operation keyword (``SELECT``, ``ASK``, ``CONSTRUCT``, …): its first
    keyword after the PREFIX and BASE declarations."""
    return next((word for word in keywords(query) if word not in _PROLOGUE), None)


def check_user_query(query: object) -> str:
    """The query back when it may run; :class:`UpdateRefusedError` for SPARQL Update, or
    :class:`QueryRefusedError` (both ``SparqlError``, so ``ValueError``) saying why not (see
    the module docstring); a plain :class:`SparqlError` for an empty query (blank, or only
    comments), as for any other syntax error. The one read-only check of the user's SPARQL:
    ``sparql()``, inspection, the CLI, the tools."""
    if not isinstance(query, str):
        raise InvalidTypeError(f"query must be a str, got {type(query).__name__}")
    if len(query) > MAX_QUERY_CHARS:
        raise QueryRefusedError(
            f"the query is {len(query):,} characters long; at most {MAX_QUERY_CHARS:,} are "
            "accepted"
        )
    try:
        query.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: before, a StoreError blaming the store
        raise InvalidInputError(
            "the query must be valid Unicode text (it holds a lone surrogate)") from None
    if all(match.lastgroup == "skip" for match in _TOKEN.finditer(query)):
        # the engine said "error at 1:1: expected [_]"
        raise SparqlError("invalid SPARQL: the query is empty"
                          + (" (nothing but comments)" if "#" in query else ""))
    for reading in _readings(query):
        _check_reading(reading)
    return query


def _check_reading(query: str) -> None:
    """:func:`check_user_query`'s refusals for one reading of the query (:func:`_readings`)."""
    depth = deepest = operators = 0
    lead = True  # no keyword yet but PREFIX and BASE: the next one is the query's operation
    for match in _TOKEN.finditer(query):
        kind = match.lastgroup
        text = match.group()
        if kind == "skip" or kind == "string" or kind == "var" or kind == "number":
            continue
        if kind == "iri":
            iri = _unescape(text[1:-1]).lower()
            if iri.startswith("file:"):
                raise QueryRefusedError(
                    f"file: IRIs are refused in sparql() ({_clip(text)}): a query reads the "
                    "agent's memory and nothing else"
                )
            if iri.startswith(_SERVER_CODE):
                raise _server_code(text)
            if iri.startswith("java:"):
                raise QueryRefusedError(
                    f"java: IRIs are refused in sparql() ({_clip(text)}): Jena (Fuseki) loads "
                    "the Java class such a function names; a query reads the agent's memory "
                    "and nothing else"
                )
            continue
        if kind == "name":
            if text.partition(":")[0].lower() + ":" in _SERVER_CODE:
                raise _server_code(text)
            continue
        if kind == "word":
            upper = text.upper()
            if upper in _UPDATE_WORDS or (lead and upper == "LOAD"):
                raise UpdateRefusedError(
                    f"SPARQL Update ({upper}) is refused: the memory is read-only here; change "
                    "it with remember() and forget()"
                )
            lead = lead and upper in _PROLOGUE
            if upper in _ESCAPES:
                raise QueryRefusedError(
                    f"{upper} is refused in sparql(): a query reads the agent's memory and "
                    "nothing else (no network, no files)"
                )
            if upper == "DEFINE":  # Virtuoso's pragmas: another dataset, fetching the web
                raise QueryRefusedError(
                    "DEFINE is refused in sparql(): a query reads the agent's memory and "
                    "nothing else"
                )
            if upper in _PATTERN_WORDS:
                operators += 1
        elif text in _OPEN:
            depth += 1
            deepest = max(deepest, depth)
            if deepest > MAX_NESTING:
                raise QueryRefusedError(
                    f"the query nests brackets more than {MAX_NESTING} deep; simplify it"
                )
        elif text in _CLOSE:
            depth -= 1
        elif text == "\\":  # Jena decodes \u escapes everywhere before it parses
            raise QueryRefusedError(
                "a backslash outside strings and IRIs is refused in sparql(): some engines "
                "read \\u escapes there as the characters they stand for"
            )
        elif text in _OPERATORS:
            operators += 1
        if operators > MAX_OPERATORS:
            raise QueryRefusedError(
                f"the query has more than {MAX_OPERATORS:,} operators (|| && = + . ; , UNION "
                "FILTER …); split it, or give long lists as VALUES"
            )


#: Virtuoso's function namespaces: ``bif:exec("SPARQL CLEAR GRAPH <other agent>")`` ran SQL,
#: and ``sql:`` calls stored procedures, as the server's SPARQL account.
_SERVER_CODE = ("bif:", "sql:")


def _server_code(text: str) -> QueryRefusedError:
    return QueryRefusedError(
        f"{_clip(text)} is refused in sparql(): Virtuoso's bif: and sql: functions run SQL "
        "on the server; a query reads the agent's memory and nothing else"
    )


def _unescape(iri: str) -> str:
    """An IRI's text with its ``\\uXXXX`` / ``\\UXXXXXXXX`` escapes decoded (the parser
    decodes them too, so ``<\\u0066ile:…>`` is a ``file:`` IRI)."""
    def decode(match: re.Match[str]) -> str:
        code = int(match.group()[2:], 16)
        return chr(code) if code <= 0x10FFFF else "\ufffd"

    return _UCHAR.sub(decode, iri)


_UCHAR = re.compile(r"\\u[0-9A-Fa-f]{4}|\\U[0-9A-Fa-f]{8}")


def _clip(text: str, size: int = 60) -> str:
    return text if len(text) <= size else text[: size - 1] + "…"


#: ``sparql()``'s default time limit (seconds) and row limit.
SPARQL_TIMEOUT = 30.0
SPARQL_LIMIT = 100_000


#: Longest wait in seconds the platform's locks and sockets take (~292 years on Linux).
MAX_TIMEOUT = threading.TIMEOUT_MAX


def check_timeout(value: object, name: str = "timeout", *, zero: bool = False) -> float | None:
    """A caller's timeout in seconds: None (no limit) or a finite number > 0 (``zero``: >= 0),
    else :class:`InvalidTypeError` / :class:`InvalidInputError` at the call."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidTypeError(f"{name} must be a number of seconds or None, got "
                               f"{type(value).__name__}")
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero):
        raise InvalidInputError(f"{name} must be a finite number of seconds "
                                f"{'>= 0' if zero else '> 0'} (or None), got {value!r}")
    if value > MAX_TIMEOUT:  # a longer wait overflowed the thread's lock (OverflowError)
        raise InvalidInputError(f"{name} must be at most {MAX_TIMEOUT:,.0f} s (None: no "
                                f"limit), got {value!r}")
    return float(value)


def check_seconds(value: object, name: str = "timeout") -> float:
    """A timeout that must be given (a client's request timeout, a lease): as
    :func:`check_timeout`, None refused too."""
    if value is None:
        raise InvalidTypeError(f"{name} must be a number of seconds, got None")
    seconds = check_timeout(value, name)
    assert seconds is not None
    return seconds


def check_limit(value: object, name: str = "limit") -> int | None:
    """A row limit: None (no limit) or an int >= 1."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidTypeError(f"{name} must be an int or None, got {type(value).__name__}")
    if value < 1:
        raise InvalidInputError(f"{name} must be >= 1 (or None: no limit), got {value}")
    return value
