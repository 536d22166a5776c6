"""A long run: 200 remembers, then compression slices until the memory is stable (SPEC §5.2)."""

from __future__ import annotations

import random

import pytest

from memory_rdf import MemoryManager

from helpers import FAST, ScriptedModel

NODE = "https://w3id.org/memory-rdf/node/"


def snapshot(mem: MemoryManager) -> tuple[dict[str, tuple[str, int, int]], dict[tuple, float]]:
    nodes = {
        r["n"]: (r["c"], r["o"], r["s"])  # type: ignore[index]
        for r in mem.sparql(  # type: ignore[union-attr]
            "SELECT ?n ?c ?o ?s WHERE { ?n memory:content ?c ; memory:originalLength ?o ; "
            "memory:scanCount ?s }"
        )
    }
    strengths = {
        (r["s"], r["t"]): r["w"]  # type: ignore[index]
        for r in mem.sparql(  # type: ignore[union-attr]
            "SELECT ?s ?t ?w WHERE { ?l memory:source ?s ; memory:target ?t ; memory:strength ?w }"
        )
    }
    return nodes, strengths


@pytest.mark.slow
def test_two_hundred_remembers_then_slices_until_stable(tmp_path) -> None:
    from test_shapes_on_stores import assert_conforms

    rng = random.Random(3)
    model = ScriptedModel()
    config = FAST.replace(focus_limit=3, decay_rate=0.5, compression_batch_size=100)
    with MemoryManager("long", data_dir=tmp_path, config=config, model=model) as mem:
        for i in range(200):
            n = rng.randint(1, 3)
            mem.remember([{"role": "user", "content": " | ".join(
                f"memory {i}.{j} " + "words " * rng.randint(1, 12) for j in range(n))}])
        assert mem.wait_idle(120)
        peak = mem.stats()["nodes"]
        counts = [peak]
        focus = {NODE + f for f in mem.stats()["focus"]}
        dangling_seen = 0
        for _ in range(400):
            nodes, strengths = snapshot(mem)
            model.compress_calls.clear()
            report = mem.run_compression_slice()
            after_nodes, after_strengths = snapshot(mem)
            # no node with importance >= 1 was shortened: a compression call always asks for
            # fewer characters than the node had at creation (target = original × importance)
            by_content = {c: o for c, o, _ in nodes.values()}
            for content, target in model.compress_calls:
                assert target < by_content[content] and target < len(content)
            # every scan decayed: scanned nodes' scan counts went up by one, no strength rose,
            # and links out of non-focus nodes that survived and touch a scanned node fell
            scanned = {n for n, v in after_nodes.items() if v[2] == nodes[n][2] + 1}
            assert len(scanned) + report["forgotten"] == report["scanned"]
            for key, w in after_strengths.items():
                assert w <= strengths[key]
                if key[0] not in focus and (key[0] in scanned or key[1] in scanned):
                    assert w < strengths[key]
            counts.append(len(after_nodes))
            dangling_seen = max(dangling_seen, mem.stats()["dangling_links"])
            # stable: only links out of focus nodes are left (they never decay), so no later
            # scan can change anything but scan counts
            if all(s in focus for s, _ in after_strengths):
                break
        else:
            pytest.fail("the memory did not settle")
        assert counts[-1] < peak and counts == sorted(counts, reverse=True)
        assert dangling_seen > 0  # forgetting left dangling links along the way
        nodes, strengths = snapshot(mem)
        mem.run_compression_slice()
        after_nodes, after_strengths = snapshot(mem)
        assert after_strengths == strengths
        assert {n: v[:2] for n, v in after_nodes.items()} == {n: v[:2] for n, v in nodes.items()}
        assert_conforms(mem)
