"""The command line of SPEC §5.6 and of loud failures: ``memories``, ``forget [--purge]``,
``tasks [--retry]``, ``recall --since/--until``, and ``remember`` exiting 1 when a remember
failed — run through the installed ``memory-rdf`` entry point as real processes."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_cli import _env, assert_one_line_error, cli

from benchmarks._fake_llm import FakeLLM

DATED = [
    {"role": "user", "content": "I live at 42 Wallaby Way, Sydney", "timestamp": "2024-05-01"},
    {"role": "assistant", "content": "Noted: Wallaby Way", "timestamp": "2024-05-01T10:00:00Z"},
]
LATER = [{"role": "user", "content": "We deploy with PostgreSQL", "timestamp": "2025-02-01"}]


def remember(tmp_path: Path, data: Path, agent: str, messages: list[dict[str, str]],
             **env: str) -> subprocess.CompletedProcess[str]:
    return cli(tmp_path, "remember", agent, "-", data_dir=data,
               stdin=json.dumps(messages, ensure_ascii=False), env=env)


@pytest.fixture
def data(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    assert remember(tmp_path, data, "bot", DATED).returncode == 0
    assert remember(tmp_path, data, "bot", LATER).returncode == 0
    return data


def listed(tmp_path: Path, data: Path, *args: str) -> list[dict[str, object]]:
    result = cli(tmp_path, "memories", "bot", *args, "--json", data_dir=data)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)  # type: ignore[no-any-return]


@pytest.mark.parametrize("command", ["memories", "forget", "tasks"])
def test_help_has_examples(tmp_path: Path, command: str) -> None:
    result = cli(tmp_path, command, "--help")
    assert result.returncode == 0, result.stderr
    assert "Example" in result.stdout and "--data-dir" in result.stdout


def test_memories_lists_filters_and_pages(tmp_path: Path, data: Path) -> None:
    everything = listed(tmp_path, data)
    # the built-in model keeps a short exchange in one node
    assert [m["content"] for m in everything] == [
        "user: We deploy with PostgreSQL",
        "user: I live at 42 Wallaby Way, Sydney\nassistant: Noted: Wallaby Way",
    ]
    assert everything[0]["said_at"] == "2025-02-01T00:00:00+00:00"
    assert [m["said_at"] for m in listed(tmp_path, data, "--until", "2025-01-01")] == [
        "2024-05-01T00:00:00+00:00"
    ]
    assert all("PostgreSQL" in str(m["content"]) for m in listed(tmp_path, data, "postgresql"))
    assert len(listed(tmp_path, data, "--limit", "1", "--offset", "1")) == 1
    plain = cli(tmp_path, "memories", "bot", "--since", "2025-01-01", data_dir=data)
    assert plain.returncode == 0
    (line,) = plain.stdout.splitlines()  # one line per memory when not on a terminal
    assert line.startswith(str(everything[0]["id"])) and "2025-02-01" in line
    bad = cli(tmp_path, "memories", "bot", "--since", "last week", data_dir=data)
    assert_one_line_error(bad, 2)
    assert "since" in bad.stderr


def test_recall_since_until(tmp_path: Path, data: Path) -> None:
    recent = cli(tmp_path, "recall", "bot", "--since", "2025-01-01", data_dir=data)
    assert recent.returncode == 0, recent.stderr
    assert "PostgreSQL" in recent.stdout and "Wallaby" not in recent.stdout
    old = cli(tmp_path, "recall", "bot", "--until", "2025-01-01", "--depth", "3", data_dir=data)
    assert "Wallaby" in old.stdout and "PostgreSQL" not in old.stdout


def test_forget_and_purge(tmp_path: Path, data: Path) -> None:
    address = [str(m["id"]) for m in listed(tmp_path, data, "Wallaby")]
    assert address
    result = cli(tmp_path, "forget", "bot", *address, "0" * 32, "--purge", data_dir=data)
    assert result.returncode == 0, result.stderr
    assert f"forgot {len(address)} memor" in result.stdout and "1 unknown id" in result.stdout
    assert listed(tmp_path, data, "Wallaby") == []
    assert not any(b"Wallaby" in p.read_bytes() for p in data.rglob("*") if p.is_file())
    query = cli(tmp_path, "sparql", "bot", "ASK { ?n memory:link ?gone . "
                "FILTER NOT EXISTS { ?gone a memory:Node } }", "--format", "json", data_dir=data)
    # --purge leaves no trace (SPEC §5.6 v3): the link from PostgreSQL into it went too
    assert json.loads(query.stdout)["boolean"] is False
    bad = cli(tmp_path, "forget", "bot", "not an id!", data_dir=data)
    assert_one_line_error(bad, 2)
    ghost = cli(tmp_path, "forget", "ghost", "0" * 32, data_dir=data)
    assert_one_line_error(ghost, 2)
    assert not (data / "ghost").exists()


def test_forget_refuses_what_cannot_be_an_id_and_takes_any_case(tmp_path: Path,
                                                                data: Path) -> None:
    """A string that is no id (32 hex digits) is a usage error naming it and saying what ids
    look like, and nothing is forgotten, not even the good ids beside it (it was "forgot 0
    memories (1 unknown id(s) ignored)", exit 0); an id in upper case is the same id."""
    ids = [str(m["id"]) for m in listed(tmp_path, data)]
    bad = cli(tmp_path, "forget", "bot", ids[0], "not-an-id", data_dir=data)
    assert_one_line_error(bad, 2)
    assert "'not-an-id' is not a memory id: ids are 32 hex digits" in bad.stderr
    assert [m["id"] for m in listed(tmp_path, data)] == ids
    upper = cli(tmp_path, "forget", "bot", ids[0].upper(), f"node:{ids[0]}", data_dir=data)
    assert upper.returncode == 0, upper.stderr
    assert upper.stdout.strip() == "agent 'bot': forgot 1 memory"  # no "unknown id" either
    assert [m["id"] for m in listed(tmp_path, data)] == ids[1:]


HOLDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from memory_rdf import MemoryManager

    data, stop = sys.argv[1], Path(sys.argv[2])
    with MemoryManager("bot", data_dir=data):
        print("ready", flush=True)
        deadline = time.monotonic() + 60
        while not stop.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    """
)


def test_forget_refuses_an_agent_held_by_another_process(tmp_path: Path, data: Path) -> None:
    ids = [str(m["id"]) for m in listed(tmp_path, data)]
    stop = tmp_path / "stop"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(data), str(stop)], cwd=tmp_path, env=_env(),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, encoding="utf-8",
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "ready", holder.stderr
        held = cli(tmp_path, "forget", "bot", *ids, data_dir=data)
        assert_one_line_error(held, 1)
        assert "held by another process" in held.stderr
        # listing is inspection: it works meanwhile, and nothing was forgotten
        assert len(listed(tmp_path, data)) == len(ids)
    finally:
        stop.touch()
        holder.communicate(timeout=30)
    assert holder.returncode == 0


@pytest.fixture
def server() -> Iterator[FakeLLM]:
    with FakeLLM() as s:
        yield s


def test_a_failed_remember_exits_1_and_tasks_retry_requeues_it(
    tmp_path: Path, server: FakeLLM
) -> None:
    data = tmp_path / "data"
    wrong = {"MEMORY_RDF_MODEL": "ollama:no-such-model", "MEMORY_RDF_MODEL_URL": server.url}
    failed = remember(tmp_path, data, "bot", LATER, **wrong)
    assert failed.returncode == 1, failed  # was 0, with "0 nodes"
    assert "0 nodes now" in failed.stdout
    assert "1 remember(s) failed" in failed.stderr and "memory-rdf tasks bot" in failed.stderr
    assert "no-such-model" in failed.stderr  # the reason, logged when the call failed
    listing = cli(tmp_path, "tasks", "bot", data_dir=data)
    assert listing.returncode == 0, listing.stderr
    (line,) = listing.stdout.splitlines()
    assert line.startswith("failed\t") and "PostgreSQL" in line and "no-such-model" in line
    as_json = json.loads(cli(tmp_path, "tasks", "bot", "--json", data_dir=data).stdout)
    assert [t["status"] for t in as_json] == ["failed"]
    # still the wrong model: it fails again, exit 1
    again = cli(tmp_path, "tasks", "bot", "--retry", data_dir=data, env=wrong)
    assert again.returncode == 1 and "requeued 1" in again.stdout
    right = {"MEMORY_RDF_MODEL": "ollama:fake-model", "MEMORY_RDF_MODEL_URL": server.url}
    fixed = cli(tmp_path, "tasks", "bot", "--retry", data_dir=data, env=right)
    assert fixed.returncode == 0, fixed.stderr
    assert "requeued 1" in fixed.stdout and "0 failed now, 1 node" in fixed.stdout
    assert "1 nodes" not in fixed.stdout
    empty = cli(tmp_path, "tasks", "bot", data_dir=data)
    assert empty.stdout == "" and "no journalled remembers" in empty.stderr
    # nothing failed: one line saying so, not a "Remembering … 0/0" progress bar
    nothing = cli(tmp_path, "tasks", "bot", "--retry", data_dir=data, env=right)
    assert nothing.returncode == 0, nothing.stderr
    assert nothing.stdout == "agent 'bot': nothing to retry (no failed remembers)\n"
    assert nothing.stderr == ""
