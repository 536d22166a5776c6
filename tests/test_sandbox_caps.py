"""Issue 33 F3: the MCP ``sparql`` tool's children (memory_rdf._sandbox) are bounded together:
at most a few run at once, within a memory budget; the others are refused clearly."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from memory_rdf import MemoryManager, QueryLimitError, QueryTimeoutError
from memory_rdf.tools import call_tool

from helpers import FAST, ScriptedModel, remember

#: Minutes of work for the engine over a few triples, at little memory (a streamed COUNT).
HEAVY = ("SELECT (COUNT(*) AS ?n) WHERE { ?a ?p ?b . ?c ?q ?d . ?e ?r ?f . ?g ?s ?h . "
         "?i ?t ?j . ?k ?u ?l . ?m ?v ?n0 }")


def _children() -> int:
    """This process's live sparql children."""
    count = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        ppid = next((line.split()[1] for line in status.splitlines()
                     if line.startswith("PPid:")), "")
        if ppid == str(os.getpid()) and b"memory_rdf._sandbox" in cmdline:
            count += 1
    return count


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
def test_sparql_children_are_bounded_together(tmp_path: Path) -> None:
    from memory_rdf import _sandbox

    cap = _sandbox.max_children()
    assert 1 <= cap <= _sandbox.MAX_CHILDREN
    assert cap * _sandbox._memory_cap() <= max(_sandbox.memory_budget(),
                                               cap * _sandbox.MIN_CHILD_MEMORY)
    with MemoryManager("f3", data_dir=tmp_path, config=FAST, model=ScriptedModel()) as mem:
        remember(mem, "one | two | three | four")
        calls = cap + 4
        outcomes: list[BaseException | str] = []
        lock = threading.Lock()

        def call() -> None:
            try:
                answer: BaseException | str = call_tool(mem, "sparql", {"query": HEAVY},
                                                        timeout=8.0)
            except (QueryLimitError, QueryTimeoutError) as exc:
                answer = exc
            with lock:
                outcomes.append(answer)

        threads = [threading.Thread(target=call) for _ in range(calls)]
        for thread in threads:
            thread.start()
        most = 0
        while any(t.is_alive() for t in threads):
            most = max(most, _children())
            time.sleep(0.05)
        for thread in threads:
            thread.join()
        assert 1 <= most <= cap, most
        assert len(outcomes) == calls
        refused = [o for o in outcomes if isinstance(o, QueryLimitError)
                   and "too many sparql queries running at once" in str(o)]
        assert refused, outcomes  # the rest: refused clearly, not queued for ever
        assert "try again" in str(refused[0])
        assert all(isinstance(o, QueryLimitError | QueryTimeoutError | str) for o in outcomes)
        # and the server goes on: a small query runs once the heavy ones are gone
        assert json.loads(call_tool(mem, "sparql", {"query": "ASK { ?s ?p ?o }"})) is True
