"""The SHACL shapes validate the stores that remember and compression build (SPEC §2)."""

from __future__ import annotations

from memory_rdf import MemoryManager
from memory_rdf._inspect import validate

from helpers import FAST, ScriptedModel, remember


def assert_conforms(mem: MemoryManager) -> None:
    conforms, report = validate(mem._store)  # type: ignore[arg-type]
    assert conforms, report


def test_scripted_store_conforms_through_its_life(make_manager, model: ScriptedModel) -> None:
    mem = make_manager(config=FAST.replace(focus_limit=2, decay_rate=0.5))
    assert_conforms(mem)  # empty
    model.default_relation = "涉及"
    remember(mem, "alpha long text | beta long text | ab")
    remember(mem, "gamma long text | delta long text")
    assert_conforms(mem)
    for _ in range(6):
        mem.run_compression_slice()
        assert_conforms(mem)
    st = mem.stats()
    assert st["dangling_links"] > 0  # the shapes accept dangling links


def test_heuristic_store_conforms(tmp_path) -> None:
    with MemoryManager("h", data_dir=tmp_path, config=FAST.replace(focus_limit=3)) as mem:
        mem.remember([
            {"role": "user", "content": "张伟负责后端，我们决定登录用 JWT，token 两小时过期。"},
            {"role": "assistant", "content": "好的。数据库用 PostgreSQL，下周三评审。"},
        ])
        mem.remember([{"role": "user", "content": "The release is on December 15; Li Na owns it."}])
        assert mem.wait_idle(60)
        mem.run_compression_slice()
        assert_conforms(mem)


def test_broken_store_does_not_conform(mem: MemoryManager) -> None:
    remember(mem, "alpha long text | beta long text")
    mem._store.store.update(  # type: ignore[union-attr]
        "INSERT DATA { <https://w3id.org/memory-rdf/link/x--y> a "
        "<https://w3id.org/memory-rdf/ontology#Link> ; "
        "<https://w3id.org/memory-rdf/ontology#source> <https://w3id.org/memory-rdf/node/x> ; "
        "<https://w3id.org/memory-rdf/ontology#target> <https://w3id.org/memory-rdf/node/y> ; "
        '<https://w3id.org/memory-rdf/ontology#strength> '
        '"0.5"^^<http://www.w3.org/2001/XMLSchema#double> }'
    )
    conforms, report = validate(mem._store)  # type: ignore[arg-type]
    assert not conforms and "source" in report
