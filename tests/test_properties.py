"""Property tests: the real store against the reference model of SPEC §5.1–§5.4.

Random sequences of remember / compression slice / recall run on a fresh real store (the
scripted model, ``auto_compress=False``) and on :class:`reference.Reference`; after every
operation the whole memory network (nodes with content, phrase, keywords, scanCount and
originalLength; links with strength and relation; shortcut triples; the focus, newest first)
and every recall text must agree, and a slice must report as many forgotten and compressed
nodes. Each example gets its own temporary store (not the function-scoped fixtures, which
Hypothesis would share between examples).

The model is the scripted one of ``helpers`` with a random relation table and, for
compression, an ``overshoot`` factor: answers longer than 1.25 × target must be rejected.
"""

from __future__ import annotations

import math
import tempfile
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from memory_rdf import Config, MemoryManager, Processed, Templates

from helpers import ScriptedModel, say
from reference import Reference

NODE = "https://w3id.org/memory-rdf/node/"
WORDS = ["alpha", "BETA", "gamma", "DELTA", "eps", "ZETA", "eta", "THETA", "io", "KAPPA",
         "mu", "NU"]
NEEDLES = [*WORDS, "beta", "Zeta", "ta", "a", "PP", "", " ", "nothing"]
RELATION_NAMES = ["", "涉及", "因果", "上文"]
FILTER_NAMES = ["上文", "下文", "涉及", "因果", ""]

#: The reference keeps no clock: recall entries without their date (SPEC §5.4 v3 dates are
#: tested in test_recall.py).
UNDATED = Templates(memory="[记忆] {content}")

SETTINGS: dict[str, Any] = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
}


# -- the model, as seen through the manager ------------------------------------------------------

def scripted_process(text: str, target: int | None = None,
                     overshoot: float = 1.0) -> tuple[str, str, list[str]]:
    """What ``OvershootModel.process`` answers, normalised as the manager stores it
    (stripped content and phrase, keywords de-duplicated)."""
    content = text if target is None else text[: math.floor(target * overshoot)]
    keywords = list(dict.fromkeys(w for w in content.split() if w.isupper()))
    return content.strip(), content[:10].strip(), keywords


@dataclass
class Scenario:
    config: Config
    salt: int
    relation_names: list[str]
    overshoot: float
    ops: list[tuple[Any, ...]]


@dataclass
class OvershootModel(ScriptedModel):
    """The scripted model, answering a compression with ``overshoot`` × the target length
    (SPEC §5.2 step 6: more than 1.25 × target is a failed call)."""

    overshoot: float = 1.0

    def process(self, text: str, target_length: int | None = None) -> Processed:
        if target_length is not None:
            target_length = math.floor(target_length * self.overshoot)
        return super().process(text, target_length)


def relation_fn(salt: int, names: Sequence[str]) -> Callable[[str, str], str]:
    """A random relation table, drawn per example (``salt``, ``names``); "" = no name."""

    def relation(node_content: str, focus_content: str) -> str:
        h = zlib.crc32(f"{salt}\0{node_content}\0{focus_content}".encode())
        return names[h % len(names)]

    return relation


# -- strategies ----------------------------------------------------------------------------------

contents = st.tuples(
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=9).map(" ".join),
    st.integers(3, 40),
).map(lambda t: t[0][: t[1]].strip()).filter(lambda s: len(s) >= 3)


def make_configs(**fixed: Any) -> st.SearchStrategy[Config]:
    ranges: dict[str, st.SearchStrategy[Any]] = {
        "focus_limit": st.sampled_from([1, 1, 2, 3, 4, 5]),
        "decay_rate": st.sampled_from([0.5, 0.5, 0.9, 0.97]),
        "delete_threshold": st.integers(0, 10),
        "compression_batch_size": st.integers(1, 20),
        "link_break_threshold": st.sampled_from([0.01, 0.3]),
        "max_search_results": st.sampled_from([0, 3, 100]),
        "link_initial_strength": st.sampled_from([0.5, 0.5, 0.2]),
    }
    ranges.update(fixed)
    return st.builds(
        lambda **kw: Config(retry_initial_delay=0.0, retry_max_delay=0.0, max_retries=1,
                            auto_compress=False, templates=UNDATED, **kw),
        **ranges,
    )


recalls = st.tuples(
    st.just("recall"),
    st.lists(st.sampled_from(NEEDLES), max_size=3),
    st.none() | st.lists(st.sampled_from(FILTER_NAMES), max_size=3, unique=True),
    st.integers(0, 4),
)


@st.composite
def scenarios(
    draw: Any,
    kinds: Sequence[str] = ("remember", "compress", "recall"),
    configs: st.SearchStrategy[Config] | None = None,
    lead: tuple[int, int] = (1, 3),
    segments: tuple[int, int] = (1, 4),
) -> Scenario:
    """A config, a relation table, the model's overshoot and 1–12 operations, the first
    ``lead`` of them remembers (something to compress and recall)."""
    config = draw(make_configs() if configs is None else configs)
    salt = draw(st.integers(0, 1 << 16))
    names = draw(st.lists(st.sampled_from(RELATION_NAMES), min_size=1, max_size=4))
    overshoot = draw(st.sampled_from([1.0, 1.0, 1.2, 1.25, 1.5]))
    used: set[str] = set()
    ops: list[tuple[Any, ...]] = []
    first = draw(st.integers(*lead))
    for i in range(draw(st.integers(first, 12))):
        kind = "remember" if i < first else draw(st.sampled_from(kinds))
        if kind == "remember":
            segs = draw(st.lists(contents.filter(lambda c: c not in used),
                                 min_size=segments[0], max_size=segments[1], unique=True))
            used.update(segs)
            ops.append(("remember", segs))
        elif kind == "compress":
            ops.append(("compress", draw(st.integers(1, 6))))  # slices in a row
        else:
            ops.append(draw(recalls))
    return Scenario(config, salt, names, overshoot, ops)


# -- reading the real store ----------------------------------------------------------------------

def rows(mem: MemoryManager, query: str) -> list[dict[str, Any]]:
    result = mem.sparql(query)
    assert isinstance(result, list)
    return result  # type: ignore[return-value]


def local(iri: str) -> str:
    assert iri.startswith(NODE), iri
    return iri[len(NODE):]


def store_nodes(mem: MemoryManager) -> dict[str, tuple[Any, ...]]:
    nodes = {
        local(r["n"]): (r["c"], r["p"], r["s"], r["o"])
        for r in rows(mem, """SELECT ?n ?c ?p ?s ?o WHERE { ?n a memory:Node ;
              memory:content ?c ; memory:phrase ?p ; memory:scanCount ?s ;
              memory:originalLength ?o }""")
    }
    keywords: dict[str, list[str]] = {n: [] for n in nodes}
    for r in rows(mem, "SELECT ?n ?k WHERE { ?n a memory:Node ; memory:keyword ?k }"):
        keywords[local(r["n"])].append(r["k"])
    return {n: (*v, sorted(keywords[n])) for n, v in nodes.items()}


def store_links(mem: MemoryManager) -> dict[tuple[str, str], tuple[float, str]]:
    out: dict[tuple[str, str], tuple[float, str]] = {}
    for r in rows(mem, """SELECT ?s ?t ?w ?r WHERE { ?l a memory:Link ; memory:source ?s ;
            memory:target ?t ; memory:strength ?w . OPTIONAL { ?l memory:relation ?r } }"""):
        key = (local(r["s"]), local(r["t"]))
        assert key not in out, f"two links for {key}"
        out[key] = (r["w"], r.get("r", ""))
    return out


def check_same(mem: MemoryManager, ref: Reference) -> None:
    nodes = store_nodes(mem)
    expected = {
        nid: (n["content"], n["phrase"], n["scans"], n["original"], sorted(n["keywords"]))
        for nid, n in ref.nodes.items()
    }
    assert nodes == expected
    links = store_links(mem)
    assert set(links) == set(ref.links)
    for key, (strength, relation) in ref.links.items():
        got_strength, got_relation = links[key]
        assert got_relation == relation, key
        assert abs(got_strength - strength) <= 1e-9, (key, got_strength, strength)
    shortcuts = {(local(r["a"]), local(r["b"]))
                 for r in rows(mem, "SELECT ?a ?b WHERE { ?a memory:link ?b }")}
    assert shortcuts == set(ref.links)  # one shortcut triple per link, dangling ones too
    subjects = {local(r["s"]) for r in rows(
        mem, f'SELECT DISTINCT ?s WHERE {{ ?s ?p ?o FILTER(STRSTARTS(STR(?s), "{NODE}")) }}')}
    assert subjects == set(ref.nodes)  # a forgotten node leaves no triple behind
    assert mem.stats()["focus"] == ref.focus_ids()


# -- the runner ----------------------------------------------------------------------------------

def run_scenario(scenario: Scenario) -> None:
    config, ops = scenario.config, scenario.ops
    relation = relation_fn(scenario.salt, scenario.relation_names)
    model = OvershootModel(overshoot=scenario.overshoot)

    def process(text: str, target: int) -> tuple[str, str, list[str]]:
        return scripted_process(text, target, scenario.overshoot)

    ref = Reference(config)
    with tempfile.TemporaryDirectory() as tmp:
        mem = MemoryManager("agent", data_dir=Path(tmp) / "memory_data", config=config,
                            model=model)
        mem.initialize()
        try:
            for op in ops:
                if op[0] == "remember":
                    segs: list[str] = op[1]
                    focus_texts = [ref.nodes[f]["content"] for f in ref.focus_ids()]
                    for seg in segs:  # the relation table the scripted model answers from
                        for f in focus_texts:
                            model.relations[(seg, f)] = relation(seg, f)
                    before = set(ref.nodes)
                    mem.remember(say(" | ".join(segs)))
                    assert mem.wait_idle(timeout=30)
                    new = sorted(
                        (r["t"], local(r["n"]), r["c"])
                        for r in rows(mem, "SELECT ?n ?c ?t WHERE { ?n a memory:Node ; "
                                           "memory:content ?c ; memory:createdAt ?t }")
                        if local(r["n"]) not in before
                    )
                    assert [c for _, _, c in new] == segs
                    ref.remember([scripted_process(s) for s in segs],
                                 [nid for _, nid, _ in new], relation)
                elif op[0] == "compress":
                    for _ in range(op[1]):
                        report = mem.run_compression_slice(timeout=30)
                        expected = ref.compression_slice(process)
                        assert not report["preempted"]
                        assert report["forgotten"] == expected["forgotten"]
                        assert report["compressed"] == expected["compressed"]
                        for name, count in expected.items():
                            if count:
                                event(f"slice {name}")
                        check_same(mem, ref)
                    continue
                else:
                    _, keywords, relations, depth = op
                    # max_chars=0: the reference has no budget. With two keywords or more the
                    # library ranks the walk's results (SPEC §5.4 v2; its order is tested in
                    # test_recall_ranking.py): here the same entries, in any order, unless the
                    # walk was cut at max_search_results (then the ranked top may differ).
                    got = mem.recall(keywords, relations, depth, timeout=30, max_chars=0,
                                     entry="focus")
                    want = ref.recall(keywords, relations, depth)
                    if len([k for k in keywords if k.strip()]) < 2:
                        assert got == want
                    else:
                        sep = mem.config.templates.entry_separator
                        limit = mem.config.max_search_results
                        cut = limit and want.count(sep) + 1 >= limit
                        if not cut:
                            assert sorted(got.split(sep)) == sorted(want.split(sep))
                    event("recall: " + ("forgotten-memory entry" if "forgotten" in got
                                        else "results" if got else "empty"))
                    if ", " in got.partition("forgotten (")[2].partition(")")[0]:
                        event("recall: forgotten-memory entry naming several relations")
                check_same(mem, ref)
        finally:
            mem.close(timeout=10)


@settings(max_examples=25, **SETTINGS)
@given(scenarios(kinds=("remember", "remember", "recall")))
def test_remember_and_recall_match_the_reference(scenario: Scenario) -> None:
    run_scenario(scenario)


@settings(max_examples=25, **SETTINGS)
@given(scenarios(kinds=("remember", "compress", "compress")))
def test_compression_matches_the_reference(scenario: Scenario) -> None:
    run_scenario(scenario)


@settings(max_examples=40, **SETTINGS)
@given(scenarios())
def test_mixed_sequences_match_the_reference(scenario: Scenario) -> None:
    run_scenario(scenario)


@settings(max_examples=20, **SETTINGS)
@given(scenarios(
    kinds=("compress", "recall"),
    configs=make_configs(focus_limit=st.just(1), decay_rate=st.sampled_from([0.5, 0.9]),
                         delete_threshold=st.integers(4, 10), link_break_threshold=st.just(0.01),
                         link_initial_strength=st.just(0.5)),
    lead=(2, 3),
    segments=(3, 4),
))
def test_forgetting_and_perception_match_the_reference(scenario: Scenario) -> None:
    """Chains of 3–4 segments, a focus of one, fast decay: nodes get forgotten while their
    neighbours survive, so recall reports the dangling links."""
    run_scenario(scenario)
