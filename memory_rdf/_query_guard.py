"""What the user's SPARQL may do before the engine sees it (SPEC §6, §8; issues 17, 33).

pyoxigraph 0.5's ``Store.query`` has no switch to turn ``SERVICE`` off (its Python binding
exposes no service handler), its evaluator answers a ``SERVICE <http://…>`` with real HTTP
requests, and its parser and evaluator recurse once per nesting level and per operator of a
chain: ``FILTER((((…1…))))`` 10,000 deep, or 10,000 ``||`` terms, overflow the thread's stack
(a segfault, no traceback), and long operator chains cost quadratic time before that
(measured: 1,000 ``||`` terms 0.5 s, 3,000 terms 6 s).

Design: three readers, each of which must let the query pass; any one of them refuses.

1. **Cheap pre-checks** (no parser yet): a str, valid Unicode, not empty, at most ten times
   :data:`MAX_QUERY_CHARS` characters (then at most :data:`MAX_QUERY_CHARS` once step 2's
   bounds, which say more about a long query, have been checked).
2. **A tokenizer of SPARQL's terminals** (:data:`_TOKEN`): strings, IRIs and comments
   recognised as the grammar does — an ``IRIREF`` ends only at ``>`` or at a character the
   grammar excludes (``<>"{}|^`\\`` and everything up to U+0020, *not* at U+00A0 or another
   Unicode space: round 3 of the hostile sweep hid a ``SERVICE`` behind ``<http://x/\\u00a0#>``
   when the IRI ended at any ``\\s``), white space is only the grammar's ``WS`` (space, tab,
   CR, LF), a comment ends at CR or LF. The query is read as written, as Jena (Fuseki) reads
   it with its ``\\u`` escapes decoded everywhere first, and with every Unicode space or
   separator replaced by a plain space; in each reading it is refused when it

   * reaches outside the store: the ``SERVICE`` or ``LOAD`` keyword anywhere (any case, any
     spacing, in a subquery), or an IRI with the ``file:`` scheme;
   * writes: a SPARQL Update keyword (``INSERT``, ``DELETE``, ``DROP``, ``WITH``, …) anywhere,
     or ``LOAD`` as the query's operation (:class:`UpdateRefusedError`) — also for an endpoint
     whose query URL runs updates (Virtuoso's ``/sparql``); or could be read otherwise by some
     engine: Virtuoso's ``DEFINE`` pragmas, a backslash outside strings and IRIs (Jena decodes
     ``\\u`` escapes before it parses);
   * runs code on a server: Virtuoso's ``bif:`` and ``sql:`` functions (prefixed or as IRIs),
     and the ``java:`` function IRIs of Jena (Fuseki), which load the Java class they name;
   * nests brackets deeper than :data:`MAX_NESTING` or has more than :data:`MAX_OPERATORS`
     operators (these bound the parser of step 3 too).

   A word inside a string literal or a comment is not a keyword; a comment cannot hide one.
3. **A real SPARQL 1.1 grammar**: rdflib's parser (``rdflib.plugins.sparql.parser``, a
   maintained pyparsing grammar of the W3C recommendation, already a dependency) parses the
   query, and the parse tree is refused when it holds a ``ServiceGraphPattern`` (SERVICE,
   in any subquery, EXISTS or expression) or a ``DatasetClause`` (FROM / FROM NAMED: a query
   reads the agent's memory and nothing else); the endpoint store also refuses a
   ``GraphGraphPattern`` (SPEC §8) through :func:`constructs`. The parser knows only
   SPARQL 1.1 queries (no update, no ``LOAD``). **It fails closed**: a query it cannot read is
   refused even when Oxigraph could run it (Oxigraph's extensions such as ``LATERAL``, and
   rdflib's own gaps). Such a refusal says where, in Oxigraph's words when Oxigraph finds a
   syntax error in the query as well (read from ``query + "\\n\\x01"``, a text no parser
   accepts, so nothing is ever evaluated for the message), else in rdflib's words.

   Its cost (measured, ``python -m timeit``, 2 shared CPUs): ~2-10 ms for an ordinary query
   (68-126 characters), 0.6 s for 1,000 operators (``?x = 1 || …``), 1.5 s for a 10,000-value VALUES
   list (79,000 characters), linear in length beyond (1,000,000 characters took 42 s):
   hence :data:`MAX_QUERY_CHARS` of 100,000. Its recursion is ~40 Python frames per
   parenthesis, so it runs in a thread of its own with a large stack and a raised recursion
   limit (:func:`_parse`); the tokenizer's bounds come first.

Where the readers disagree, the stricter wins. The fuzz test (``tests/test_query_guard_fuzz.py``)
checks the whole against Oxigraph itself: no query it generates that Oxigraph runs with a
SERVICE (a loopback listener counts the requests) passes this guard. This is the one reader of
the user's query before the engine: the endpoint store's own checks (SPEC §8: no ``FROM``,
``GRAPH``, ``SERVICE``) read its :func:`keywords` and :func:`constructs` too.
"""

from __future__ import annotations

import functools
import math
import re
import sys
import threading
from collections.abc import Iterable, Iterator
from typing import Any

from memory_rdf._exceptions import (
    InvalidInputError,
    InvalidTypeError,
    QueryRefusedError,
    SparqlError,
    UpdateRefusedError,
)

#: Longest query text accepted (characters). Long VALUES lists are linear in the engine, and
#: in the guard's parser: ~1.5 s for 80,000 characters (1,000,000 took 42 s, holding the GIL).
MAX_QUERY_CHARS = 100_000
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
    # White space is the grammar's WS only: U+00A0 and the other Unicode spaces are none.
    r'(?P<skip>[ \t\r\n]+|#[^\r\n]*)'
    r'|(?P<string>"""(?:[^"\\]|\\.|"(?!""))*(?:"""|\Z)|\'\'\'(?:[^\'\\]|\\.|\'(?!\'\'))*(?:\'\'\'|\Z)'
    r'|"(?:[^"\\\r\n]|\\.)*"?|\'(?:[^\'\\\r\n]|\\.)*\'?)'
    # IRIREF excludes <>"{}|^`\ and the characters up to U+0020, nothing else: an IRI holding
    # U+00A0 (or U+2028, U+3000, …) goes on (issue 33: the rest of it was read as a comment).
    r'|(?P<iri><(?:[^<>"{}|^`\\\x00-\x20]|\\u[0-9A-Fa-f]{4}|\\U[0-9A-Fa-f]{8})*>)'
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
    <…>`` is a comment here and a SERVICE call there; and when it holds a Unicode space or
    separator other than the grammar's white space, with each made a plain space (an engine
    that takes them for white space reads ``SERVICE`` where this tokenizer reads an IRI).
    Checking every reading refuses what any engine would run (at worst a query whose escapes
    decode to a refused word, or an IRI holding U+00A0 followed by one)."""
    readings = [query]
    if "\\u" in query:
        decoded = _JAVA_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), query)
        if decoded != query:
            readings.append(decoded)
    for text in list(readings):
        spaced = _spaced(text)
        if spaced != text:
            readings.append(spaced)
    return readings


#: What some reader may take for white space beyond the grammar's space, tab, CR and LF:
#: Python's (``str.isspace``: VT, FF, U+001C-U+001F, U+0085), Unicode's separators (Z*:
#: U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000), and the invisible
#: U+180E, U+200B-U+200D, U+2060 and U+FEFF.
_SPACE = re.compile("[\x0b\x0c\x1c-\x1f\x85\xa0\u1680\u2000-\u200d\u2028\u2029\u202f"
                    "\u205f\u3000\u180e\u2060\ufeff]")


def _spaced(query: str) -> str:
    return _SPACE.sub(" ", query)


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


def check_user_query(query: object, *, parse: bool = True) -> str:
    """The query back when it may run; :class:`UpdateRefusedError` for SPARQL Update, or
    :class:`QueryRefusedError` (both ``SparqlError``, so ``ValueError``) saying why not (see
    the module docstring); a plain :class:`SparqlError` for an empty query (blank, or only
    comments), as for any other syntax error, and for a query the SPARQL 1.1 parser cannot
    read. The one read-only check of the user's SPARQL: ``sparql()``, inspection, the CLI,
    the tools.

    ``parse=False`` skips step 3 (the parser, up to seconds of CPU for a long query): only
    for a caller that hands the query to a process that checks it in full before its engine
    sees it (the ``sparql`` tool's child, :mod:`memory_rdf._sandbox`)."""
    if not isinstance(query, str):
        raise InvalidTypeError(f"query must be a str, got {type(query).__name__}")
    if len(query) > 10 * MAX_QUERY_CHARS:  # not even tokenized
        raise _too_long(query)
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
    if len(query) > MAX_QUERY_CHARS:  # after the tokenizer's bounds, which say more
        raise _too_long(query)
    if parse:
        found = constructs(query)
        if "ServiceGraphPattern" in found:
            raise _refused_escape("SERVICE")
        if "DatasetClause" in found:
            raise QueryRefusedError(
                "FROM is refused in sparql(): a query reads the agent's memory (its default "
                "graph) and nothing else; write the patterns without FROM or FROM NAMED"
            )
    return query


def _too_long(query: str) -> QueryRefusedError:
    return QueryRefusedError(
        f"the query is {len(query):,} characters long; at most {MAX_QUERY_CHARS:,} are accepted"
    )


def _refused_escape(word: str) -> QueryRefusedError:
    return QueryRefusedError(
        f"{word} is refused in sparql(): a query reads the agent's memory and nothing else "
        "(no network, no files)"
    )


#: Deepest Python recursion the parser may use: ~40 frames a parenthesis, MAX_NESTING of them.
_PARSE_RECURSION = 12_000
#: Stack of the parser's thread (bytes; virtual memory, touched only as deep as it goes).
_PARSE_STACK = 256 * 2**20
_PARSE_LOCK = threading.Lock()


@functools.lru_cache(maxsize=32)
def constructs(query: str) -> frozenset[str]:
    """The names of the parse tree's nodes (rdflib's ``CompValue`` names: ``SelectQuery``,
    ``ServiceGraphPattern``, ``GraphGraphPattern``, ``DatasetClause``, …) of ``query`` read
    by the SPARQL 1.1 grammar; :class:`SparqlError` when the grammar cannot read it (fail
    closed: see the module docstring). Call it after :func:`check_user_query`'s tokenizer
    (its bounds keep the parser's time and depth in check)."""
    tree, error = _parse(query)
    if error is not None:
        raise _unreadable(query, error)
    from pyparsing import ParseResults
    from rdflib.plugins.sparql.parserutils import CompValue

    names: set[str] = set()
    todo: list[Any] = [tree]
    while todo:  # no recursion: the tree is as deep as the query
        node = todo.pop()
        if isinstance(node, CompValue):
            names.add(node.name)
            todo.extend(node.values())
        elif isinstance(node, list | tuple | ParseResults):
            todo.extend(node)
    return frozenset(names)


def _parse(query: str) -> tuple[Any, BaseException | None]:
    """rdflib's parse of ``query`` (its tree, or the exception it raised), in a thread with a
    stack of :data:`_PARSE_STACK` bytes and the recursion limit raised to
    :data:`_PARSE_RECURSION` meanwhile (pyparsing recurses ~40 frames per parenthesis: 25
    nested parentheses overflowed the default 1,000)."""
    from rdflib.plugins.sparql.parser import parseQuery

    outcome: list[Any] = [None, None]

    def run() -> None:
        try:
            outcome[0] = parseQuery(query)
        except Exception as exc:  # ParseException, RecursionError, ValueError (a bad \\U)
            outcome[1] = exc

    with _PARSE_LOCK:
        limit = sys.getrecursionlimit()
        size = threading.stack_size()
        try:
            sys.setrecursionlimit(max(limit, _PARSE_RECURSION))
            threading.stack_size(_PARSE_STACK)
            try:
                thread = threading.Thread(target=run, name="memory-rdf-sparql-parse",
                                          daemon=True)
            finally:
                threading.stack_size(size)
            thread.start()
            thread.join()
        finally:
            sys.setrecursionlimit(limit)
    return outcome[0], outcome[1]


def _unreadable(query: str, error: BaseException) -> SparqlError:
    """The refusal of a query the SPARQL 1.1 parser cannot read: Oxigraph's syntax error when
    Oxigraph finds one in the query too (as ``sparql()`` said before), else the parser's."""
    if isinstance(error, RecursionError):
        return QueryRefusedError("the query nests too deeply for the SPARQL parser; simplify "
                                 "it")
    from memory_rdf._oxigraph.errors import oxigraph_syntax_error, sparql_syntax_error

    lines = query.count("\n") + 1
    # never parses: no parser takes \x01 after the end of a query, or in a comment
    exc = oxigraph_syntax_error(query + "\n\x01")
    if exc is not None:
        found = re.search(r"error at (\d+):(\d+)", str(exc))
        if found is None or int(found[1]) <= lines:
            return sparql_syntax_error(exc, query)
    where = ""
    line = getattr(error, "lineno", None)
    column = getattr(error, "col", None)
    if isinstance(line, int) and isinstance(column, int):
        where = f" at line {line}, column {column}"
    said = " ".join(str(getattr(error, "msg", None) or error).split())
    said = said[:1].lower() + said[1:]
    found = getattr(error, "found", None)
    if isinstance(found, str) and found:
        said += f", found {_clip(found, 30)}"
    return SparqlError(
        f"invalid SPARQL{where}: {_clip(said, 120)} (sparql() takes standard SPARQL 1.1 "
        "queries, as its guard's parser reads them)"
    )


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
                raise _refused_escape(upper)
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
