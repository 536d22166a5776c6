"""The bundled demo (``memory-rdf demo``): a conversation remembered session by session,
compressed after each one, then recalled from the focus and through the keyword entry.

It runs offline with the built-in heuristic model and writes a report to a rich console.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from memory_rdf._agents import DEFAULT_DATA_DIR, STORE_MARKER, agent_path, validate_agent_id
from memory_rdf._config import Config, Templates
from memory_rdf._exceptions import InvalidInputError
from memory_rdf._journal import refuse_foreign
from memory_rdf._manager import MemoryManager
from memory_rdf._oxigraph import AgentStore
from memory_rdf._remote import SparqlEndpoint, wipe_remote_agent
from memory_rdf._resources import data_text, query_text
from memory_rdf._wrap import wrap_text
from memory_rdf.inspect import stats as inspect_stats

__all__ = ["DEMO_SLICES", "progress_bar", "run_demo"]

#: Compression slices the demo runs after each session: the time that passes between two
#: conversations. Enough that the oldest memories are forgotten and the middle ones shortened
#: by the last session, while the early preference the keyword entry finds still survives.
DEMO_SLICES = 20

# (question, keywords, recall options). At the default depth (2) the focus-only walk reaches
# the last few sessions; the drink preference lies further back (SPEC §5.5).
_DEMO_RECALLS: dict[str, list[tuple[str, list[str], dict[str, Any]]]] = {
    "zh": [
        ("JWT 的 token 有效期是多久？（最近聊过）", ["JWT"], {}),
        ("支付回调超时的 bug 是怎么修的？", ["RabbitMQ"], {}),
        ("要不要给我点咖啡？只从焦点出发（默认深度 2）", ["咖啡"], {"entry": "focus"}),
        ("同一个问题，从关键词入口找旧记忆", ["咖啡"], {"entry": "keywords"}),
        ("项目总预算是多少？（三个月前启动会上说的，早已遗忘）", ["预算"], {"entry": "both"}),
    ],
    "en": [
        ("How long does a login last? (talked about recently)", ["JWT"], {}),
        ("How did we fix the webhook timeouts? (shortened by now)", ["webhook"],
         {"entry": "both"}),
        ("Coffee tonight? From the focus only (default depth 2)", ["coffee"],
         {"entry": "focus"}),
        ("The same question, through the keyword entry", ["coffee"], {"entry": "keywords"}),
        ("What was the budget? (said at the kickoff, long forgotten)", ["budget"],
         {"entry": "both"}),
    ],
}



def _wipe_agent(path: Path, console: Console) -> None:
    """Remove an existing agent directory (the caller checked that no process holds it)."""
    if not path.exists():
        return
    if not (path / STORE_MARKER).is_file():
        if path.is_dir() and not any(path.iterdir()):
            path.rmdir()
            return
        raise InvalidInputError(
            f"{path} exists but is not a memory store; remove it or use another agent id"
        )
    _say(console, f"Agent directory {path} already exists: wiping it first.")
    shutil.rmtree(path)


def _say(console: Console, text: str) -> None:
    """A plain line: no markup (user data may contain brackets), no hard wrapping."""
    console.print(text, markup=False, soft_wrap=True)


def progress_bar(console: Console) -> Progress:
    """The progress bar the demo and the ``memory-rdf`` commands show (description, bar,
    done/total, time elapsed)."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    )


def run_demo(
    agent: str = "demo",
    data_dir: str | os.PathLike[str] | SparqlEndpoint | None = None,
    *,
    english: bool = False,
    slices: int = DEMO_SLICES,
    console: Console | None = None,
) -> None:
    """Remember the bundled demo conversation session by session, run ``slices`` compression
    slices after each one, then recall and print stats to ``console`` (stdout by default).

    Wipes the agent first when it exists; the last session is held back (its questions are
    what the recalls ask).

    Raises:
        InvalidInputError: ``agent`` is not a valid id, or its directory holds something
            other than a memory store.
        SchemaVersionError: the directory is an Oxigraph store memory_rdf did not write
            (left untouched).
        StoreLockedError: another process holds the agent.
    """
    out = console if console is not None else Console(highlight=False)
    data = json.loads(data_text("demo_conversation_en.json" if english else
                                "demo_conversation.json"))
    sessions = data["sessions"]
    remembered = sessions[:-1] if len(sessions) > 1 else sessions
    endpoint = data_dir if isinstance(data_dir, SparqlEndpoint) else None
    where: dict[str, Any]
    if endpoint is not None:  # the agent's graphs on a SPARQL server (SPEC §8)
        validate_agent_id(agent)
        out.rule(Text(f"memory_rdf demo — {data.get('title', '')}"))
        if wipe_remote_agent(endpoint, agent):  # StoreLockedError while a process runs it
            _say(out, f"Agent {agent!r} already exists on {endpoint.query_url}: wiped it first.")
        location = f"{endpoint.query_url}, graph <https://w3id.org/memory-rdf/agent/{agent}>"
        where = {"endpoint": endpoint}
    else:
        assert not isinstance(data_dir, SparqlEndpoint)
        path = agent_path(agent, data_dir)
        held = None
        if (path / STORE_MARKER).is_file():
            store = AgentStore(path)  # StoreLockedError when another process runs the agent
            try:
                refuse_foreign(store)  # someone's own Oxigraph store: never wiped
                held = store.keep_agent_lock()  # no other writer until the wipe is done
            finally:
                store.close()
        try:
            out.rule(Text(f"memory_rdf demo — {data.get('title', '')}"))
            _wipe_agent(path, out)
        finally:
            if held is not None:
                held.release()
        location = str(path)
        where = {"data_dir": path.parent}
    config = Config(
        auto_compress=False, templates=Templates.english() if english else Templates()
    )
    started = time.perf_counter()
    timeline = Table(
        title=f"Each session remembered, then {slices} compression slices (time passes)",
        title_justify="left",
    )
    timeline.add_column("session", no_wrap=True)
    for column in ("new", "compressions", "forgotten", "memories"):
        timeline.add_column(column, justify="right")
    made = forgotten = 0
    with MemoryManager(agent, config=config, **where) as mem:
        with progress_bar(out) as progress:
            task = progress.add_task("Remembering", total=len(remembered))
            for session in remembered:
                progress.update(task, description=f"Remembering {session['name']}")
                before = int(mem.stats()["nodes"])
                mem.remember(session["messages"])
                mem.wait_idle()
                new = int(mem.stats()["nodes"]) - before
                compressions = gone = 0
                for _ in range(slices):
                    report = mem.run_compression_slice()
                    compressions += int(report["compressed"])
                    gone += int(report["forgotten"])
                made += new
                forgotten += gone
                timeline.add_row(session["name"], str(new), str(compressions), str(gone),
                                 str(mem.stats()["nodes"]))
                progress.advance(task)
            progress.update(task, description="Remembered")
        out.print(timeline)
        stats = mem.stats()
        rows = mem.sparql(query_text("shortened_count"))
        first = rows[0] if isinstance(rows, list) and rows else None
        shortened = int(first["count"]) if isinstance(first, dict) else 0
        n_messages = sum(len(s["messages"]) for s in remembered)
        _say(
            out,
            f"Remembered {len(remembered)} sessions ({n_messages} messages) as {made} memories "
            f"in {time.perf_counter() - started:.1f} s (store: {location}).",
        )
        _say(
            out,
            f"Compression ({slices * len(remembered)} slices in all): compressed {shortened}, "
            f"forgotten {forgotten}. {stats['nodes']} memories left ({shortened} of them "
            f"shortened); {stats['dangling_links']} link"
            f"{'s' if stats['dangling_links'] != 1 else ''} still lead to forgotten memories.",
        )
        lang = "en" if english else "zh"
        for question, keywords, kwargs in _DEMO_RECALLS[lang]:
            text = mem.recall(keywords, **kwargs)
            out.print()
            args = json.dumps(keywords, ensure_ascii=False)
            extra = "".join(f", {k}={v!r}" for k, v in kwargs.items())
            out.print(Text(f"{question}   recall({args}{extra})", style="bold"))
            body = wrap_text(text or "(nothing recalled)", max(out.width - 4, 8))
            out.print(Panel(Text(body), expand=True))
        stats = mem.stats()
    phrases = inspect_stats(agent, endpoint or where["data_dir"])["focus_phrases"]
    out.print()
    table = Table(title="Agent stats", show_header=False)
    table.add_column("", style="bold")
    table.add_column("")
    table.add_row("nodes", str(stats["nodes"]))
    table.add_row("links", str(stats["links"]))
    table.add_row("dangling links", str(stats["dangling_links"]))
    table.add_row("focus phrases", Text("\n".join(phrases) or "-"))
    table.add_row("model calls", str(stats["model_calls"]))
    out.print(table)
    shown = data_dir is not None and str(data_dir) != DEFAULT_DATA_DIR
    flag = f" --data-dir {shlex.quote(str(data_dir))}" if shown else ""
    if endpoint is not None:
        flag = f" --endpoint {shlex.quote(endpoint.query_url)}"
        if endpoint.update_url != endpoint.query_url:
            flag += f" --update-url {shlex.quote(endpoint.update_url)}"
    keyword = "coffee --english" if english else "咖啡"
    _say(out, f"Next: memory-rdf recall {agent} {keyword} --entry keywords{flag}   |   "
              f"memory-rdf graph {agent} -o {agent}.html{flag}")


