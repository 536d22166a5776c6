"""The SPARQL guard against Oxigraph's own parser (issue 33 F1): no query that Oxigraph runs
with a SERVICE passes the guard, whatever Unicode spaces, separators, escapes, comments and
letter case it holds.

The oracle is Oxigraph itself, on an empty in-memory store: every generated query is run
unguarded there with its SERVICE aimed at a loopback listener, and the listener counts the
requests it gets. A query that made a request must have been refused by the guard.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyoxigraph as ox
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_rdf import SparqlError
from memory_rdf._query_guard import check_user_query

from servers import SparqlRecorder, loopback

#: Examples the fuzz test runs (the run count the issue asks for; ~0.02 s each here).
FUZZ_EXAMPLES = 600

#: Characters some reader may take for white space, and the grammar's own.
UNICODE_SPACES = ["\u00a0", "\u1680", *map(chr, range(0x2000, 0x200B)), "\u2028", "\u2029",
                  "\u202f", "\u205f", "\u3000", "\ufeff", "\u0085", "\u000b", "\u000c",
                  "\u200b", "\u180e", "\u2060"]
GRAMMAR_SPACES = [" ", "\t", "\n", "\r", "\r\n"]


@pytest.fixture(scope="module")
def listener() -> Iterator[tuple[str, list[str]]]:
    requests: list[str] = []
    with loopback(type("Handler", (SparqlRecorder,), {"requests": requests})) as base:
        yield base, requests


def _cases(keyword: str) -> st.SearchStrategy[str]:
    """``keyword`` in any letter case."""
    return st.lists(st.booleans(), min_size=len(keyword), max_size=len(keyword)).map(
        lambda upper: "".join(c.upper() if u else c.lower() for c, u in zip(keyword, upper,
                                                                            strict=True)))


_noise = st.text(alphabet=st.sampled_from(
    [*UNICODE_SPACES, "#", "<", ">", '"', "'", "{", "}", "\\", "x", "u", "0", ";", "."]),
    max_size=6)
_space = st.sampled_from(GRAMMAR_SPACES + UNICODE_SPACES)
_comment = st.builds(lambda body, eol: "#" + body + eol, _noise,
                     st.sampled_from(["\n", "\r", "\r\n", "\u2028", "\u0085"]))
#: What stands between two tokens: white space (the grammar's or not), comments.
_gap = st.lists(st.one_of(st.sampled_from(GRAMMAR_SPACES), _comment, _space), min_size=1,
               max_size=3).map("".join)
#: Something before the SERVICE that may fool a reader: an IRI, a string or a comment holding
#: Unicode spaces, "#", quotes or escapes.
_decoy = st.one_of(
    st.builds(lambda a, b: f"BIND(<http://x/{a}#{b}> AS ?z)", _noise, _noise),
    st.builds(lambda a: f"BIND(<http://x/{a}> AS ?z)", _noise),
    st.builds(lambda a, q: f"BIND({q}{a}{q} AS ?z)", _noise, st.sampled_from(['"', "'",
                                                                             '"""', "'''"])),
    st.builds(lambda a: f"BIND(<http://x/\\u00{a}> AS ?z)",
              st.sampled_from(["3E", "3e", "22", "23", "A0", "20", "0A"])),
    _comment,
    st.just("BIND(1 AS ?z)"),
)


def _service_iri(base: str) -> st.SearchStrategy[str]:
    return st.sampled_from([f"<{base}/leak>", f"<{base}/leak?q=secret>",
                            f"<{base}/\\u006Ceak>"])  # an escape Oxigraph decodes in an IRI


def _queries(base: str) -> st.SearchStrategy[str]:
    return st.builds(
        lambda head, g1, decoy, g2, kw, g3, silent, iri, g4, tail: (
            f"{head}{g1}{{{g1}{decoy}{g2}{kw}{g3}{silent}{iri}{g4}{{ ?a ?b ?c }}{g4}}}{tail}"),
        st.sampled_from(["SELECT * WHERE", "select * where", "ASK", "SELECT ?z WHERE",
                         "CONSTRUCT { ?a ?b ?c } WHERE"]),
        _gap, _decoy, _gap, _cases("SERVICE"), _gap,
        st.one_of(st.just(""), _cases("SILENT").map(lambda s: s + " ")), _service_iri(base),
        _gap, st.one_of(st.just(""), _comment, st.just(" LIMIT 1")),
    )


def _oxigraph_calls(query: str, requests: list[str]) -> int:
    """How many requests Oxigraph makes running ``query`` unguarded on an empty store."""
    before = len(requests)
    try:
        result = ox.Store().query(query)
        if not isinstance(result, ox.QueryBoolean):
            list(result)
    except (SyntaxError, OSError, ValueError, RuntimeError):
        pass  # parse errors, and SERVICE failures after the request was made
    return len(requests) - before


def test_no_query_that_oxigraph_runs_with_a_service_passes_the_guard(
    listener: tuple[str, list[str]],
) -> None:
    base, requests = listener
    counts = {"examples": 0, "service": 0, "passed": 0}
    escaped: list[str] = []

    @settings(max_examples=FUZZ_EXAMPLES, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(_queries(base))
    def fuzz(query: str) -> None:
        counts["examples"] += 1
        try:
            check_user_query(query)
            passed = True
        except SparqlError:
            passed = False
        counts["passed"] += passed
        calls = _oxigraph_calls(query, requests)
        counts["service"] += calls > 0
        if passed and calls:
            escaped.append(query)
        assert not (passed and calls), f"passed the guard, and Oxigraph ran its SERVICE: {query!r}"

    fuzz()
    assert escaped == []
    # The generator is worth its run: many of its queries do reach the network unguarded.
    assert counts["examples"] >= FUZZ_EXAMPLES // 2, counts
    assert counts["service"] >= counts["examples"] // 50, counts


@pytest.mark.parametrize("space", UNICODE_SPACES)
def test_a_unicode_space_in_an_iri_hides_no_service(space: str,
                                                    listener: tuple[str, list[str]]) -> None:
    base, requests = listener
    query = (f"SELECT * WHERE {{ BIND(<http://x/{space}#> AS ?z) SERVICE <{base}/leak> "
             "{ ?a ?b ?c } }")
    if space in "\x0b\x0c":  # no IRI character (<= U+0020): a syntax error for Oxigraph too
        with pytest.raises(SparqlError, match="invalid SPARQL"):
            check_user_query(query)
        assert _oxigraph_calls(query, requests) == 0
        return
    with pytest.raises(SparqlError, match="SERVICE is refused"):
        check_user_query(query)
    if space != "\x85":  # Oxigraph's IRI parser refuses U+0085 (NEL)
        assert _oxigraph_calls(query, requests) == 1  # unguarded, Oxigraph makes the request


@pytest.mark.parametrize(("query", "said"), [
    # the parse tree: a SERVICE however it is reached, a dataset clause
    ("SELECT (EXISTS { SERVICE <http://127.0.0.1:1/> { } } AS ?e) { }", "SERVICE is refused"),
    ("SELECT * FROM <urn:x> WHERE { ?s ?p ?o }", "FROM is refused"),
    ("SELECT * FROM NAMED <urn:x> WHERE { ?s ?p ?o }", "FROM is refused"),
    # fail closed: what the SPARQL 1.1 parser cannot read is refused, Oxigraph's LATERAL too
    ("SELECT * WHERE { ?s ?p ?o LATERAL { SELECT * { ?s ?p ?o } LIMIT 1 } }",
     r"^invalid SPARQL at line 1, column \d+: .*standard SPARQL 1\.1"),
    # a syntax error is still said in Oxigraph's words, at its place
    ("SELECT * WHERE { ?s ?p ?o } ORDER", r"^invalid SPARQL at line 1, column \d+: expected"),
])
def test_the_parse_tree_refuses(query: str, said: str) -> None:
    with pytest.raises(SparqlError, match=said):
        check_user_query(query)


def test_ordinary_queries_pass_the_parser() -> None:
    for query in [
        "SELECT ?n ?c WHERE { ?n a memory:Node ; memory:content ?c } ORDER BY ?c LIMIT 10",
        'SELECT ?service WHERE { ?service memory:content ?c FILTER(CONTAINS(?c, "SERVICE")) }',
        "ASK { GRAPH ?g { ?s ?p ?o } }",  # GRAPH: refused only on an endpoint (SPEC §8)
        "PREFIX x: <http://x/> SELECT (COUNT(*) AS ?n) WHERE { ?s x:p+ ?o } GROUP BY ?s",
        "SELECT * WHERE { BIND(<http://x/\u00a0y> AS ?z) }",  # U+00A0 inside an IRI: fine
        'ASK { FILTER("\\u4F60" = "你") }',
        "SELECT * WHERE { FILTER(" + "(" * 60 + "1" + ")" * 60 + ") }",  # deep for pyparsing
        "SELECT * WHERE { VALUES ?x { " + " ".join(f'"v{i}"' for i in range(3000)) + " } }",
    ]:
        assert check_user_query(query) == query


def test_long_queries_are_refused_before_the_parser() -> None:
    from memory_rdf._query_guard import MAX_QUERY_CHARS

    query = "SELECT * WHERE { VALUES ?x { " + '"x" ' * (MAX_QUERY_CHARS // 4) + "} }"
    with pytest.raises(SparqlError, match="at most 100,000 are accepted"):
        check_user_query(query)
