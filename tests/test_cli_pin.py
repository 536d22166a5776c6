"""The command line of SPEC §5.6 v3: ``pin`` / ``unpin``, and ``forget --matching WORD…``
(list, ask, forget; ``--yes`` for scripts; ``--purge`` leaves no trace) — run through the
installed ``memory-rdf`` entry point as real processes, the question answered on a real
pseudo-terminal."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
from pathlib import Path

import pytest
from test_cli import _env, assert_one_line_error, cli

from helpers import memory_rdf_command

TOM = {"role": "user", "content": "I'm Tom, I live in Leeds", "timestamp": "2024-05-01"}
ECHO = {"role": "assistant", "content": "Noted: shellfish allergy, based in Leeds",
        "timestamp": "2024-05-02"}
OSAKA = {"role": "user", "content": "Next spring we fly to Osaka", "timestamp": "2024-05-03"}


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """Three memories, one per remember (each linked to the focus before it)."""
    data = tmp_path / "data"
    for message in (TOM, ECHO, OSAKA):
        done = cli(tmp_path, "remember", "bot", "-", data_dir=data, stdin=json.dumps([message]))
        assert done.returncode == 0, done.stderr
    return data


def listed(tmp_path: Path, data: Path, *args: str) -> list[dict[str, object]]:
    result = cli(tmp_path, "memories", "bot", *args, "--json", data_dir=data)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def ask(tmp_path: Path, data: Path, query: str) -> bool:
    result = cli(tmp_path, "sparql", "bot", query, "--format", "json", data_dir=data)
    assert result.returncode == 0, result.stderr
    return bool(json.loads(result.stdout)["boolean"])


def on_a_terminal(tmp_path: Path, data: Path, *args: str, answer: str
                  ) -> subprocess.CompletedProcess[str]:
    """``memory-rdf ARGS…`` with a pseudo-terminal as stdin, typed ``answer`` on it."""
    leader, follower = pty.openpty()
    try:
        process = subprocess.Popen(
            [memory_rdf_command(), *args, "--data-dir", str(data)], cwd=tmp_path, env=_env(),
            stdin=follower, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            encoding="utf-8")
        os.close(follower)
        follower = -1
        os.write(leader, answer.encode())
        out, err = process.communicate(timeout=60)
    finally:
        if follower >= 0:
            os.close(follower)
        os.close(leader)
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


# -- pin / unpin ---------------------------------------------------------------------------------


def test_pin_and_unpin(tmp_path: Path, data: Path) -> None:
    (tom,) = [str(m["id"]) for m in listed(tmp_path, data, "Tom")]
    pinned = cli(tmp_path, "pin", "bot", f"node:{tom.upper()}", "0" * 32, data_dir=data)
    assert pinned.returncode == 0, pinned.stderr
    assert pinned.stdout == ("agent 'bot': pinned 1 memory (1 id(s) unknown or already "
                             "pinned, ignored)\n")
    assert [m["pinned"] for m in listed(tmp_path, data, "Leeds")] == [False, True]
    assert ask(tmp_path, data, f"ASK {{ node:{tom} memory:pinned true }}")
    stats = cli(tmp_path, "stats", "bot", "--json", data_dir=data)
    assert json.loads(stats.stdout)["pinned"] == 1
    plain = cli(tmp_path, "memories", "bot", "Tom", data_dir=data)
    (line,) = plain.stdout.splitlines()
    assert line.startswith(tom) and "^\t" in line  # marked pinned
    again = cli(tmp_path, "pin", "bot", tom, data_dir=data)
    assert "pinned 0 memories" in again.stdout
    unpinned = cli(tmp_path, "unpin", "bot", tom, data_dir=data)
    assert unpinned.returncode == 0, unpinned.stderr
    assert unpinned.stdout == "agent 'bot': unpinned 1 memory\n"
    assert not any(m["pinned"] for m in listed(tmp_path, data))


def test_pin_refuses_bad_ids_and_unknown_agents(tmp_path: Path, data: Path) -> None:
    (tom,) = [str(m["id"]) for m in listed(tmp_path, data, "Tom")]
    for command in ("pin", "unpin"):
        bad = cli(tmp_path, command, "bot", tom, "not-an-id", data_dir=data)
        assert_one_line_error(bad, 2)
        assert "'not-an-id' is not a memory id" in bad.stderr
        ghost = cli(tmp_path, command, "ghost", tom, data_dir=data)
        assert_one_line_error(ghost, 2)
        assert not (data / "ghost").exists()
        missing = cli(tmp_path, command, "bot", data_dir=data)
        assert missing.returncode == 2
    assert not any(m["pinned"] for m in listed(tmp_path, data))


# -- forget --matching -------------------------------------------------------------------------


def test_forget_matching_with_yes_and_purge_leaves_no_trace(tmp_path: Path, data: Path) -> None:
    leeds = listed(tmp_path, data, "leeds")
    assert len(leeds) == 2
    done = cli(tmp_path, "forget", "bot", "--matching", "leeds", "--purge", "--yes",
               data_dir=data)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    # the list (id, date, content: one a line), then what was done
    assert lines[:2] == [f"{m['id']}\t{str(m['said_at'])[:10]} 00:00\t{m['content']}"
                         for m in leeds]
    assert lines[2] == "agent 'bot': forgot 2 memories; no trace of them is left in the store"
    assert listed(tmp_path, data, "leeds") == []
    assert [m["content"] for m in listed(tmp_path, data)] == ["user: " + OSAKA["content"]]
    assert not any(b"Leeds" in p.read_bytes() for p in data.rglob("*") if p.is_file())
    assert not ask(tmp_path, data, "ASK { ?n memory:link ?gone . "
                                   "FILTER NOT EXISTS { ?gone a memory:Node } }")
    recalled = cli(tmp_path, "recall", "bot", "Osaka", "--entry", "both", "--depth", "3",
                   data_dir=data)
    assert "Osaka" in recalled.stdout
    assert not re.search("forgot|遗忘", recalled.stdout)


def test_forget_matching_without_purge_keeps_the_dangling_links(tmp_path: Path,
                                                                data: Path) -> None:
    done = cli(tmp_path, "forget", "bot", "--matching", "Tom", "--yes", data_dir=data)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "agent 'bot': forgot 1 memory"
    assert ask(tmp_path, data, "ASK { ?n memory:link ?gone . "
                               "FILTER NOT EXISTS { ?gone a memory:Node } }")


def test_forget_matching_asks_on_a_terminal(tmp_path: Path, data: Path) -> None:
    before = listed(tmp_path, data)
    declined = on_a_terminal(tmp_path, data, "forget", "bot", "--matching", "Leeds",
                             answer="n\n")
    assert declined.returncode == 1, declined
    assert "Forget these 2 memories? [y/N]" in declined.stderr
    assert "nothing forgotten (not confirmed)" in declined.stderr
    assert len(declined.stdout.splitlines()) == 2 and "forgot" not in declined.stdout
    assert listed(tmp_path, data) == before
    enter = on_a_terminal(tmp_path, data, "forget", "bot", "--matching", "Leeds", answer="\n")
    assert enter.returncode == 1 and listed(tmp_path, data) == before  # the default is no
    accepted = on_a_terminal(tmp_path, data, "forget", "bot", "--matching", "Leeds",
                             answer="y\n")
    assert accepted.returncode == 0, accepted
    assert accepted.stdout.splitlines()[-1] == "agent 'bot': forgot 2 memories"
    assert len(listed(tmp_path, data)) == 1


def test_forget_matching_without_a_terminal_needs_yes(tmp_path: Path, data: Path) -> None:
    before = listed(tmp_path, data)
    refused = cli(tmp_path, "forget", "bot", "--matching", "Leeds", data_dir=data, stdin="y\n")
    assert_one_line_error(refused, 2)
    assert "2 memories match 'Leeds'" in refused.stderr and "--yes" in refused.stderr
    assert listed(tmp_path, data) == before


def test_forget_matching_nothing(tmp_path: Path, data: Path) -> None:
    before = listed(tmp_path, data)
    nothing = cli(tmp_path, "forget", "bot", "--matching", "Kyoto", "Nara", data_dir=data)
    assert nothing.returncode == 0, nothing.stderr
    assert nothing.stdout == ""
    assert "no memory matches 'Kyoto Nara'; nothing forgotten" in nothing.stderr
    assert listed(tmp_path, data) == before
    # the words are words: one that looks like an id is still a word
    word = cli(tmp_path, "forget", "bot", "--matching", "not-an-id", "--yes", data_dir=data)
    assert word.returncode == 0 and "no memory matches" in word.stderr
