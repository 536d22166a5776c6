"""The SHACL shapes validate the stores that remember and compression build (SPEC §2)."""

from __future__ import annotations

from memory_rdf import MemoryManager, inspect
from memory_rdf import _vocab as V
from memory_rdf._oxigraph import WriteBatch, link_ref, lit, node_ref, triple

from _graph import where
from helpers import FAST, ScriptedModel, remember


def assert_conforms(mem: MemoryManager) -> None:
    conforms, report = inspect.validate(mem.agent_id, where(mem))
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
    link = link_ref("x", "y")  # a link between nodes that do not exist, below the manager
    batch = WriteBatch()
    batch.insert([triple(link, V.A, V.m("Link")), triple(link, V.SOURCE, node_ref("x")),
                  triple(link, V.TARGET, node_ref("y")), triple(link, V.STRENGTH, lit(0.5))])
    mem.store.commit(batch)
    conforms, report = inspect.validate(mem.agent_id, where(mem))
    assert not conforms and "source" in report
