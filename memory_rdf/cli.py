"""The ``memory-rdf`` command line (SPEC §6).

Commands: ``demo``, ``remember``, ``recall``, ``compress``, ``forget``, ``pin``, ``unpin``,
``tasks --retry`` (these open the agent read-write, through
:class:`~memory_rdf.MemoryManager`) and ``sparql``,
``export``, ``graph``, ``stats``, ``validate``, ``memories``, ``tasks`` (read-only inspection
through :mod:`memory_rdf.inspect`: they never write and work while another process holds the
agent); ``bench`` runs the benchmark suite of a source
checkout (``benchmarks/``, not part of the wheel).

Exit codes: 0 success; 1 an error (one line on stderr, never a traceback), or ``validate``
found violations; 2 a usage error, an invalid agent id or an unknown agent (nothing created);
3 an optional dependency the command needs is not installed (``validate``: pyshacl;
``serve``: mcp).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import importlib
import io
import json
import os
import re
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from memory_rdf import (
    Config,
    Embedder,
    InvalidInputError,
    InvalidTypeError,
    MemoryManager,
    MemoryRDFError,
    Message,
    OllamaEmbedder,
    OpenAIEmbedder,
    QueryTimeoutError,
    SmallModel,
    SparqlEndpoint,
    SparqlError,
    StoreLockedError,
    Templates,
    UnknownAgentError,
    UpdateRefusedError,
    __version__,
    backup,
    coerce_messages,
    inspect,
    model_from_env,
)
from memory_rdf.demo import DEMO_SLICES, progress_bar, run_demo
from memory_rdf.tools import DEFAULT_AGENT

__all__ = ["cli", "main", "run"]

DEBUG_ENV = "MEMORY_RDF_DEBUG"

#: Exit code when a command needs an optional dependency that is not installed.
EXIT_MISSING_DEPENDENCY = 3


class _CliError(Exception):
    """An error the command line reports as one line, with its exit code."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


# ---------------------------------------------------------------------------------------------
# Shared helpers
# ---------------------------------------------------------------------------------------------


def _stdout() -> Console:
    return Console(highlight=False)


def _stderr() -> Console:
    return Console(stderr=True, highlight=False)


def _say(console: Console, text: str) -> None:
    """A plain line: no markup (user data may contain brackets), no hard wrapping."""
    console.print(text, markup=False, soft_wrap=True)


#: Characters never written raw to a terminal: controls (ESC starts an escape sequence) and
#: the bidirectional overrides that reorder what is shown.
_UNPRINTABLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _printable(text: str, *, json_escapes: bool = False) -> str:
    """``text`` with stored control characters shown as escapes (``\\x1b``), not obeyed
    (issue 17: ``memory-rdf stats`` printed a stored terminal escape sequence raw).
    ``json_escapes``: as ``\\u001b``, which keeps a JSON document valid."""
    if json_escapes:
        return _UNPRINTABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return _UNPRINTABLE.sub(lambda m: repr(m.group())[1:-1], text)


def _one_line(text: str) -> str:
    return " ".join(part.strip() for part in str(text).splitlines() if part.strip())


def _agent(agent: str) -> str:
    """Check an agent id before any file is touched (an invalid one is InvalidInputError:
    exit 2, :func:`run`)."""
    inspect.agent_path(agent)
    return agent


def _existing_agent(agent: str, data_dir: Where) -> str:
    """An agent that must already have a store (exit 2, creating nothing, when it has none)."""
    _agent(agent)
    if not inspect.agent_exists(agent, data_dir):
        raise UnknownAgentError(f"unknown agent {agent!r}: no memory store at "
                                f"{_location(agent, data_dir)}")
    return agent


def _location(agent: str, data_dir: Where) -> str:
    """Where the agent's memory is: its directory, or its graph on the endpoint."""
    if isinstance(data_dir, SparqlEndpoint):
        return f"{data_dir.query_url}, graph <https://w3id.org/memory-rdf/agent/{agent}>"
    return str(inspect.agent_path(agent, data_dir))


def _model() -> SmallModel | None:
    """The small model chosen by ``MEMORY_RDF_MODEL`` (``model_from_env``), else the default."""
    return model_from_env()


@contextlib.contextmanager
def _open_manager(
    agent: str, data_dir: Where, config: Config, model: SmallModel | None = None
) -> Iterator[MemoryManager]:
    """The agent opened read-write. On success its queued work finishes before it closes; on
    an error or Ctrl-C it closes at once, and unprocessed remembers stay journalled for the
    next start (SPEC §5.1)."""
    embedder = _EMBEDDER.get()
    if isinstance(data_dir, SparqlEndpoint):
        mem = MemoryManager(agent, endpoint=data_dir, config=config, model=model,
                            embedder=embedder)
    else:
        mem = MemoryManager(agent, data_dir=data_dir, config=config, model=model,
                            embedder=embedder)
    try:
        mem.initialize()
        yield mem
    except BaseException:
        mem.close(timeout=0)
        raise
    mem.close()


def _write_bytes(data: bytes) -> None:
    sys.stdout.flush()
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def _os_reason(exc: OSError) -> str:
    """An operating-system error's reason ("Permission denied"), not Python's "[Errno 13] …"."""
    return exc.strerror or str(exc)


def _write_file(target: Path, data: bytes) -> None:
    """``data`` written to ``target``; an error is one line naming the file and the reason."""
    try:
        target.write_bytes(data)
    except OSError as exc:
        raise _CliError(f"cannot write {target}: {_os_reason(exc)}") from None


def _human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "kB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # pragma: no cover


def _since_until_options(func: Callable[..., Any]) -> Callable[..., Any]:
    func = click.option(
        "--until", metavar="DATE",
        help="Only memories said (else created) before this ISO 8601 date/time (UTC if no zone).",
    )(func)
    return click.option(
        "--since", metavar="DATE",
        help="Only memories said (else created) at or after this ISO 8601 date/time.",
    )(func)


#: Where the agents live: a data directory, or a SPARQL endpoint (``--endpoint``, SPEC §8).
Where = Path | SparqlEndpoint


def _data_dir_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--data-dir``, and ``--endpoint``/``--update-url`` for agents on a SPARQL server: the
    command receives ``data_dir`` as a :class:`Path` or as a :class:`SparqlEndpoint`."""

    @functools.wraps(func)
    def with_where(*args: Any, endpoint: str | None, update_url: str | None,
                   **kwargs: Any) -> Any:
        if endpoint is None:
            if update_url is not None:
                raise _CliError("--update-url needs --endpoint", 2)
            return func(*args, **kwargs)
        ep = SparqlEndpoint(endpoint, update_url=update_url, auth=_endpoint_auth())  # bad: exit 2
        try:
            return func(*args, **{**kwargs, "data_dir": ep})
        finally:
            ep.close()

    for option in (
        click.option(
            "--update-url", metavar="URL", envvar="MEMORY_RDF_UPDATE_URL", show_envvar=True,
            help="The endpoint's SPARQL update service (default: the --endpoint URL).",
        ),
        click.option(
            "--endpoint", metavar="URL", envvar="MEMORY_RDF_ENDPOINT", show_envvar=True,
            help="A SPARQL 1.1 query service holding the agents instead of --data-dir (auth: "
                 "MEMORY_RDF_ENDPOINT_TOKEN, or MEMORY_RDF_ENDPOINT_USER and _PASSWORD).",
        ),
        click.option(
            "--data-dir",
            type=click.Path(file_okay=False, path_type=Path),
            envvar=inspect.DATA_DIR_ENV,
            default=inspect.DEFAULT_DATA_DIR,
            show_default=True,
            show_envvar=True,
            help="Directory holding one store directory per agent.",
        ),
    ):
        with_where = option(with_where)
    return with_where


#: The embedder of the running command (``--embedder``), None: none (SPEC §5.7).
_EMBEDDER: contextvars.ContextVar[Embedder | None] = contextvars.ContextVar(
    "memory_rdf_cli_embedder", default=None)
_EMBEDDER_FORMS = "'openai:MODEL' or 'ollama:MODEL'"


def _embedder_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--embedder BACKEND:MODEL`` and ``--embedder-url URL`` (as ``MEMORY_RDF_MODEL`` and
    ``MEMORY_RDF_MODEL_URL`` name the small model): the agents the command opens get that
    embedder (SPEC §5.7); the key is ``MEMORY_RDF_API_KEY`` (else ``OPENAI_API_KEY``)."""

    @functools.wraps(func)
    def with_embedder(*args: Any, embedder: str | None, embedder_url: str | None,
                      **kwargs: Any) -> Any:
        spec = (embedder or "").strip()
        if not spec:
            if embedder_url:
                raise click.UsageError("--embedder-url needs --embedder")
            return func(*args, **kwargs)
        backend, _, name = spec.partition(":")
        backend, name = backend.strip().lower(), name.strip()
        if backend not in ("openai", "ollama") or not name:
            raise click.UsageError(f"--embedder must be {_EMBEDDER_FORMS}, got {spec!r}")
        made: OpenAIEmbedder | OllamaEmbedder
        try:
            if backend == "ollama":
                made = OllamaEmbedder(name, embedder_url or "http://localhost:11434")
            else:
                key = (os.environ.get("MEMORY_RDF_API_KEY", "").strip()
                       or os.environ.get("OPENAI_API_KEY", "").strip() or None)
                made = OpenAIEmbedder(name, embedder_url or "https://api.openai.com/v1", key)
        except (InvalidInputError, InvalidTypeError) as exc:
            raise click.UsageError(f"--embedder / --embedder-url: {exc}") from None
        token = _EMBEDDER.set(made)
        try:
            return func(*args, **kwargs)
        finally:
            _EMBEDDER.reset(token)
            made.close()

    with_embedder = click.option(
        "--embedder-url", metavar="URL", envvar="MEMORY_RDF_EMBEDDER_URL", show_envvar=True,
        help="The embedding server (default http://localhost:11434 for ollama, "
             "https://api.openai.com/v1 for openai).",
    )(with_embedder)
    return click.option(
        "--embedder", metavar="BACKEND:MODEL", envvar="MEMORY_RDF_EMBEDDER", show_envvar=True,
        help="Recall by meaning too (docs/embeddings.md): an embedding model, "
             f"{_EMBEDDER_FORMS}, e.g. openai:all-minilm with --embedder-url "
             "http://127.0.0.1:8080/v1.",
    )(with_embedder)


def _endpoint_auth() -> tuple[str, str] | str | None:
    """``--endpoint`` credentials from the environment (never from the command line, where
    other users could read them): a bearer token, or a user and password."""
    token = os.environ.get("MEMORY_RDF_ENDPOINT_TOKEN")
    if token:
        return token
    user = os.environ.get("MEMORY_RDF_ENDPOINT_USER")
    if user:
        return (user, os.environ.get("MEMORY_RDF_ENDPOINT_PASSWORD", ""))
    return None


# ---------------------------------------------------------------------------------------------
# The command group
# ---------------------------------------------------------------------------------------------

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@click.group(context_settings=CONTEXT)
@click.version_option(__version__, prog_name="memory-rdf")
def cli() -> None:
    """Long-term associative memory for LLM agents, stored as RDF (Oxigraph).

    Each agent's memory lives in DATA_DIR/AGENT. Inspection commands (sparql, export, graph,
    stats, validate, memories, tasks without --retry) are read-only and work while another
    process runs the agent.

    \b
    Exit codes: 0 ok; 1 error (or validate found violations);
                2 usage error, invalid agent id or unknown agent;
                3 an optional dependency is missing (validate: pyshacl, serve: mcp).

    \b
    Example:
      memory-rdf demo && memory-rdf recall demo JWT
    """


# -- demo ---------------------------------------------------------------------------------------

@cli.command(short_help="Remember, compress and recall the bundled demo chat.")
@click.option("--agent", default="demo", show_default=True, help="Agent id to (re)create.")
@click.option("--english", is_flag=True, help="Use the English demo conversation.")
@click.option(
    "--slices", default=DEMO_SLICES, show_default=True, type=click.IntRange(0, 1000),
    help="Compression slices after each session (the time between two conversations).",
)
@_data_dir_option
def demo(agent: str, english: bool, slices: int, data_dir: Where) -> None:
    """Remember the bundled demo conversation session by session, compressing after each
    one, then recall from the focus and through the keyword entry, and show stats.

    Wipes the agent first when it exists. The last session of the conversation is held back:
    its questions are what the recalls ask. The messages carry their sessions' dates
    (2026-09-07 to 2026-12-02), so --since/--until of memories and recall work on the demo.
    Runs offline (built-in heuristic model) in a few seconds. Afterwards draw the result:
    memory-rdf graph AGENT -o AGENT.html.

    \b
    Example:
      memory-rdf demo --data-dir /tmp/memory && memory-rdf stats demo --data-dir /tmp/memory
    """
    _agent(agent)
    run_demo(agent, data_dir, english=english, slices=slices, console=_stdout())


# -- remember -----------------------------------------------------------------------------------


def _read_input(source: str) -> str:
    if source == "-":
        return sys.stdin.read()
    return _read_file(Path(source))


def _read_file(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise _CliError(f"{path}: not UTF-8 text ({exc.reason})") from None
    except OSError as exc:
        raise _CliError(f"cannot read {path}: {_os_reason(exc)}") from None


def _parse_batches(text: str, source: str) -> list[list[Message]]:
    """The remembers of an input: a list of messages is one remember; an object with
    ``messages`` is one; an object with ``sessions`` (each with ``messages``) is one per
    session."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested too deep
        raise _CliError(f"{source}: not valid JSON ({exc})") from None
    if isinstance(data, dict) and isinstance(data.get("sessions"), list):
        raw = [s.get("messages") if isinstance(s, dict) else s for s in data["sessions"]]
        where = [f"sessions[{i}].messages" for i in range(len(raw))]
    elif isinstance(data, dict) and "messages" in data:
        raw, where = [data["messages"]], ["messages"]
    else:
        raw, where = [data], ["input"]
    if not raw:
        raise _CliError(f"{source}: no sessions to remember")
    batches = []
    for value, name in zip(raw, where, strict=True):
        if isinstance(value, dict | str) or not isinstance(value, list):
            raise _CliError(
                f"{source}: {name} must be a JSON list of {{\"role\", \"content\"}} messages"
            )
        try:
            batches.append(coerce_messages(value))
        except (InvalidInputError, InvalidTypeError) as exc:
            raise _CliError(f"{source}: {name}: {exc}") from None
    return batches


@cli.command(short_help="Remember messages from a JSON file or stdin.")
@click.argument("agent")
@click.argument("file", metavar="FILE|-")
@_data_dir_option
@_embedder_option
def remember(agent: str, file: str, data_dir: Where) -> int:
    """Remember messages from a JSON file (or - for stdin); creates the agent if new.

    FILE holds a JSON list of {"role": "user"|"assistant"|"system", "content": "..."}
    messages (one remember), or {"sessions": [{"messages": [...]}, ...]} (one remember per
    session); a message may carry a "timestamp" (ISO 8601), kept as the memory's said time.
    Waits until everything is processed, then prints the node count. Every failed small-model
    call is logged on stderr as it happens; when a remember failed for good (kept in the
    journal, see `memory-rdf tasks`), the exit code is 1.

    \b
    Example:
      echo '[{"role": "user", "content": "我们用 PostgreSQL"}]' | memory-rdf remember bot -
    """
    _agent(agent)
    batches = _parse_batches(_read_input(file), "stdin" if file == "-" else file)
    err = _stderr()
    with _open_manager(agent, data_dir, Config(), _model()) as mem:
        failed_before = mem.stats()["failed_tasks"]
        for batch in batches:
            mem.remember(batch)
        _wait_for_remembers(mem, len(batches), err)
        stats = mem.stats()
    nodes = int(stats["nodes"])
    click.echo(f"agent {agent!r}: {nodes} node{'' if nodes == 1 else 's'} now "
               f"({_location(agent, data_dir)})")
    return _report_failures(agent, stats, failed_before, err)


def _wait_for_remembers(mem: MemoryManager, submitted: int, err: Console) -> None:
    """Wait until the agent is idle, showing progress on a terminal. Progress = journalled
    remembers landed (a cheap query on the journal graph; tasks resumed from an earlier run
    count too); wait_idle also waits for compression."""
    total = max(mem.pending_remembers(), submitted)
    with progress_bar(err) as progress:
        task = progress.add_task("Remembering", total=total)
        while not mem.wait_idle(timeout=0.2):
            pending = mem.pending_remembers()
            progress.update(task, completed=max(total - pending, 0))
        progress.update(task, completed=total)


def _report_failures(agent: str, stats: dict[str, Any], failed_before: int, err: Console) -> int:
    """Exit code 1, with a line saying why, when remembers failed during this command."""
    failed = int(stats["failed_tasks"]) - failed_before
    if failed <= 0:
        return 0
    last = stats.get("model_last_error") or ""
    _say(err, _one_line(
        f"error: {failed} remember(s) failed and are kept in the journal"
        + (f" (last model error: {last})" if last else "")
        + f"; list them with `memory-rdf tasks {agent}`, requeue with --retry"
    ))
    return 1


# -- recall -------------------------------------------------------------------------------------


@cli.command(short_help="Print what the agent recalls (plain text).")
@click.argument("agent")
@click.argument("keywords", nargs=-1, metavar="[KEYWORD]...")
@click.option("--relation", "-r", "relations", multiple=True,
              help="Follow only links with this relation name (repeatable).")
@click.option("--depth", "-d", type=click.IntRange(min=0), default=None,
              help="Hops from the entry nodes (default: the config's default_search_depth).")
@click.option("--entry", type=click.Choice(["focus", "keywords", "both", "semantic"]),
              default="both", show_default=True,
              help="Where the walk starts (SPEC §5.5, §5.7): the focus and the keyword entry "
                   "(both; and the semantic entry with --embedder), the focus only, the "
                   "keyword entry only, or the semantic entry only (needs --embedder).")
@click.option("--query", metavar="TEXT", default=None,
              help="With --embedder: the question whose meaning the semantic entry looks "
                   "for (default: the keywords joined).")
@click.option("--limit", type=click.IntRange(min=0), default=None,
              help="Most entries (default: the config's max_search_results, 100; 0 = unlimited).")
@click.option("--max-chars", type=click.IntRange(min=0), default=None,
              help="Longest text in characters (default: the config's recall_max_chars, 2000; "
                   "0 = unlimited). The first entry is always printed whole.")
@click.option("--english", is_flag=True,
              help="Every entry in English ([memory 2024-05-01] …); by default each entry is "
                   "in its content's language.")
@_since_until_options
@_data_dir_option
@_embedder_option
def recall(agent: str, keywords: tuple[str, ...], relations: tuple[str, ...],
           depth: int | None, entry: str, query: str | None, limit: int | None,
           max_chars: int | None, english: bool, since: str | None, until: str | None,
           data_dir: Where) -> None:
    """Print what the agent recalls for KEYWORDs (plain text, for pipes).

    No keyword matches every reached node. The most relevant memories come first (more of
    the keywords, rarer ones, a stronger path). Read-only: works while another process holds
    the agent (remembers it has not processed yet are not recalled).

    \b
    Example:
      memory-rdf recall demo RabbitMQ 回调 --depth 3 --entry both --max-chars 500
      memory-rdf recall demo 咖啡 --entry keywords --english
      memory-rdf recall demo --since 2026-11-01 --until 2026-12-01
      memory-rdf recall trip --entry semantic --query "Which hotel?" --embedder ollama:all-minilm
    """
    _existing_agent(agent, data_dir)
    config = Config(auto_compress=False,
                    templates=Templates.english() if english else Templates())
    try:
        text = inspect.recall(agent, list(keywords), data_dir,
                              relations=list(relations) or None, depth=depth, entry=entry,
                              limit=limit, max_chars=max_chars, since=since, until=until,
                              config=config, query=query, embedder=_EMBEDDER.get())
    except (InvalidInputError, InvalidTypeError) as exc:
        raise click.UsageError(str(exc)) from None
    if text:
        click.echo(_printable(text))  # memory text is what a chat said: never obey its ESC
    else:
        click.echo("(nothing recalled)", err=True)


# -- memories, forget, tasks (SPEC §5.6) ---------------------------------------------------------


def _json_default(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else str(value)


def _when(memory: dict[str, Any]) -> str:
    moment = memory["said_at"] or memory["created_at"]
    return moment.strftime("%Y-%m-%d %H:%M") if isinstance(moment, datetime) else str(moment)


@cli.command(short_help="List the agent's memories, newest first.")
@click.argument("agent")
@click.argument("keywords", nargs=-1, metavar="[KEYWORD]...")
@_since_until_options
@click.option("--limit", "-n", type=click.IntRange(min=1), default=100, show_default=True,
              help="Most memories to list.")
@click.option("--offset", type=click.IntRange(min=0), default=0, show_default=True,
              help="Skip this many (for paging).")
@click.option("--json", "as_json", is_flag=True,
              help="A JSON list of the memories() dicts (dates in ISO 8601).")
@_data_dir_option
def memories(agent: str, keywords: tuple[str, ...], since: str | None, until: str | None,
             limit: int, offset: int, as_json: bool, data_dir: Where) -> None:
    """List the agent's memories, newest first (said time where known, else creation time):
    id, date, importance (* = in the focus, ^ = pinned) and content; piped, one tab-separated
    line per memory. KEYWORDs keep the memories that contain one (as recall matches).
    Read-only: works while another process holds the agent.

    \b
    Example:
      memory-rdf memories demo JWT --since 2026-12-01 --json
      memory-rdf forget demo $(memory-rdf memories demo 香山 --json | jq -r '.[].id')
    """
    _agent(agent)
    try:
        listed = inspect.memories(agent, data_dir, keywords=list(keywords), since=since,
                                  until=until, limit=limit, offset=offset)
    except (InvalidInputError, InvalidTypeError) as exc:
        raise click.UsageError(str(exc)) from None
    if as_json:
        click.echo(_printable(json.dumps(listed, ensure_ascii=False, indent=2,
                                         default=_json_default), json_escapes=True))
        return
    if not listed:
        click.echo("(no memories)", err=True)
        return
    out = _stdout()
    if not out.is_terminal:  # one line per memory for pipes: id, when, importance, content
        for m in listed:
            mark = ("*" if m["in_focus"] else "") + ("^" if m.get("pinned") else "")
            content = _printable(_one_line(m["content"]))
            click.echo(f"{m['id']}\t{_when(m)}\t{m['importance']:.2f}{mark}\t{content}")
        return
    table = Table(title=f"Memories of {agent} (* in focus, ^ pinned)", show_lines=False)
    table.add_column("id", no_wrap=True)
    table.add_column("when", no_wrap=True)
    table.add_column("importance", justify="right")
    table.add_column("content", overflow="fold")
    for m in listed:
        mark = (" *" if m["in_focus"] else "") + (" ^" if m.get("pinned") else "")
        table.add_row(m["id"], _when(m), f"{m['importance']:.2f}{mark}",
                      Text(_printable(m["content"])))
    out.print(table)


@cli.command(short_help="Forget memories by id or by word (--purge: leave no trace).")
@click.argument("agent")
@click.argument("ids", nargs=-1, required=True, metavar="ID... | --matching WORD...")
@click.option("--matching", is_flag=True,
              help="The arguments are words: forget every memory `memories AGENT WORD...` "
                   "lists, after showing them and asking.")
@click.option("--purge", is_flag=True,
              help="Leave no trace: also remove the links into the forgotten memories and "
                   "erase their text from every file of the store (rewrites the store).")
@click.option("--yes", "-y", is_flag=True,
              help="With --matching: do not ask (for scripts).")
@_data_dir_option
@_embedder_option
def forget(agent: str, ids: tuple[str, ...], matching: bool, purge: bool, yes: bool,
           data_dir: Where) -> None:
    """Forget the memories with these ids (from `memory-rdf memories`), as compression
    forgets: the text goes, links into it stay (the agent knows it once knew something).
    Unknown ids are ignored; an ID is 32 hex digits (any case), and anything else is a usage
    error (exit 2) that forgets nothing. With --purge nothing is left: the links into them go
    too, and their text is in no file of the store directory afterwards. Pinned memories are
    forgotten too. Writes: fails (exit 1) while another process holds the agent.

    With --matching every argument is a word (as for `memories`): the memories that contain
    one are listed (id, date, content) and, once confirmed, forgotten — the echoes of a fact
    in one step. --yes skips the question; without a terminal to ask on, --yes is required
    (exit 2). No match forgets nothing (exit 0); answering no forgets nothing (exit 1).

    \b
    Example:
      memory-rdf forget demo $(memory-rdf memories demo 初雪 | cut -f1) --purge
      memory-rdf forget demo --matching 香山 红叶 --purge --yes
    """
    _existing_agent(agent, data_dir)
    with _open_manager(agent, data_dir, Config(auto_compress=False), _model()) as mem:
        try:
            if matching:
                wanted = _confirmed_matches(mem, agent, ids, yes)
                if wanted is None:
                    return
                count = mem.forget(wanted, purge=purge)
                unknown = 0
            else:
                count = mem.forget(list(ids), purge=purge)
                unknown = len({_id_key(i) for i in ids}) - count
        except (InvalidInputError, InvalidTypeError) as exc:
            raise click.UsageError(str(exc)) from None
    note = f" ({unknown} unknown id(s) ignored)" if unknown > 0 else ""
    erased = "; no trace of them is left in the store" if purge else ""
    click.echo(f"agent {agent!r}: forgot {count} memor{'y' if count == 1 else 'ies'}{note}"
               f"{erased}")


def _confirmed_matches(mem: MemoryManager, agent: str, words: tuple[str, ...],
                       yes: bool) -> list[str] | None:
    """The ids of the memories ``memories(words)`` lists, once shown and confirmed; None
    when there are none or the answer is no (then the command has said so)."""
    listed = mem.memories(list(words), limit=None)
    shown = " ".join(words)
    if not listed:
        click.echo(f"agent {agent!r}: no memory matches {shown!r}; nothing forgotten", err=True)
        return None
    for m in listed:
        click.echo(f"{m['id']}\t{_when(m)}\t{_printable(_one_line(m['content']))}")
    count = len(listed)
    if not yes:
        if not (sys.stdin is not None and sys.stdin.isatty()):
            raise click.UsageError(
                f"{count} memor{'y matches' if count == 1 else 'ies match'} {shown!r}: pass "
                "--yes to forget them without a terminal to confirm on")
        if not click.confirm(f"Forget these {count} memor{'y' if count == 1 else 'ies'}?",
                             default=False, err=True):
            raise _CliError("nothing forgotten (not confirmed)")
    return [str(m["id"]) for m in listed]


@cli.command(short_help="Pin memories: never shortened, forgotten or evicted.")
@click.argument("agent")
@click.argument("ids", nargs=-1, required=True, metavar="ID...")
@_data_dir_option
@_embedder_option
def pin(agent: str, ids: tuple[str, ...], data_dir: Where) -> None:
    """Pin the memories with these ids (from `memory-rdf memories`, as `forget` takes them):
    compression never shortens or forgets them, the fixed pool never evicts them, and every
    recall starts from them. `forget` still removes them. Unknown ids and ids already pinned
    are ignored. Writes: fails (exit 1) while another process holds the agent.

    \b
    Example:
      memory-rdf pin demo $(memory-rdf memories demo 咖啡 | cut -f1)
    """
    _set_pinned(agent, ids, True, data_dir)


@cli.command(short_help="Unpin memories: they fade again like any other.")
@click.argument("agent")
@click.argument("ids", nargs=-1, required=True, metavar="ID...")
@_data_dir_option
@_embedder_option
def unpin(agent: str, ids: tuple[str, ...], data_dir: Where) -> None:
    """Unpin the memories with these ids: from now on they decay, are shortened and
    forgotten like any other. Ids that are unknown or not pinned are ignored. Writes: fails
    (exit 1) while another process holds the agent.

    \b
    Example:
      memory-rdf unpin demo $(memory-rdf memories demo 咖啡 | cut -f1)
    """
    _set_pinned(agent, ids, False, data_dir)


def _set_pinned(agent: str, ids: tuple[str, ...], pinned: bool, data_dir: Where) -> None:
    _existing_agent(agent, data_dir)
    with _open_manager(agent, data_dir, Config(auto_compress=False), _model()) as mem:
        try:
            count = mem.pin(list(ids)) if pinned else mem.unpin(list(ids))
        except (InvalidInputError, InvalidTypeError) as exc:
            raise click.UsageError(str(exc)) from None
    verb = "pinned" if pinned else "unpinned"
    skipped = len({_id_key(i) for i in ids}) - count
    why = "already pinned" if pinned else "not pinned"
    note = f" ({skipped} id(s) unknown or {why}, ignored)" if skipped > 0 else ""
    click.echo(f"agent {agent!r}: {verb} {count} memor{'y' if count == 1 else 'ies'}{note}")


def _id_key(given: str) -> str:
    """A memory id as forget compares it: without its node: prefix or namespace, lower case."""
    nid = given.strip()
    for prefix in (inspect.PREFIXES["node"], "node:"):
        nid = nid.removeprefix(prefix)
    return nid.lower()


@cli.command(short_help="List journalled remembers; --retry requeues the failed ones.")
@click.argument("agent")
@click.option("--retry", is_flag=True,
              help="Requeue every failed remember and wait for them (opens the agent).")
@click.option("--json", "as_json", is_flag=True, help="The tasks as a JSON list.")
@_data_dir_option
@_embedder_option
def tasks(agent: str, retry: bool, as_json: bool, data_dir: Where) -> int:
    """List the agent's journalled remembers: pending (accepted, not processed yet) and
    failed (their small-model calls kept failing; kept, never dropped). Read-only without
    --retry. With --retry, every failed remember is queued again and processed now; the exit
    code is 1 when any fails again.

    \b
    Example:
      memory-rdf tasks demo
      MEMORY_RDF_MODEL=ollama:qwen2.5:3b memory-rdf tasks demo --retry
    """
    if retry:
        _existing_agent(agent, data_dir)
        err = _stderr()
        with _open_manager(agent, data_dir, Config(), _model()) as mem:
            requeued = mem.retry_failed()
            if requeued or mem.pending_remembers():  # resumed pending ones are processed too
                _wait_for_remembers(mem, requeued, err)
            stats = mem.stats()
        if not requeued:
            click.echo(f"agent {agent!r}: nothing to retry (no failed remembers)")
            return 0
        nodes = int(stats["nodes"])
        click.echo(f"agent {agent!r}: requeued {requeued} failed remember(s); "
                   f"{stats['failed_tasks']} failed now, {nodes} node{'' if nodes == 1 else 's'}")
        return _report_failures(agent, stats, 0, err)
    _agent(agent)
    listed = inspect.tasks(agent, data_dir)
    if as_json:
        click.echo(_printable(json.dumps(listed, ensure_ascii=False, indent=2,
                                         default=_json_default), json_escapes=True))
        return 0
    if not listed:
        click.echo("(no journalled remembers)", err=True)
        return 0
    out = _stdout()
    table = Table(title=f"Journalled remembers of {agent}")
    for name in ("status", "accepted", "attempts", "text", "error"):
        table.add_column(name, overflow="fold")
    for t in listed:
        at = t["accepted_at"]
        when = at.strftime("%Y-%m-%d %H:%M") if at else ""
        if not out.is_terminal:
            click.echo("\t".join([t["status"], when, str(t["attempts"]),
                                  _printable(_one_line(t["text"])),
                                  _printable(_one_line(t["error"]))]))
        table.add_row(t["status"], when, str(t["attempts"]), Text(_printable(t["text"])),
                      Text(_printable(t["error"])))
    if out.is_terminal:
        out.print(table)
    return 0


# -- compress -----------------------------------------------------------------------------------


@cli.command(short_help="Run compression slices now.")
@click.argument("agent")
@click.option("--slices", "-n", default=10, show_default=True, type=click.IntRange(min=1),
              help="Compression slices to run.")
@_data_dir_option
@_embedder_option
def compress(agent: str, slices: int, data_dir: Where) -> None:
    """Run compression slices now (decay, shorten, forget) and print their totals; stops
    early at a slice that finds nothing to scan (every node left is a focus node).

    \b
    Example:
      memory-rdf compress demo --slices 20
    """
    _existing_agent(agent, data_dir)
    keys = ("scanned", "compressed", "forgotten", "links_removed", "model_calls")
    totals = dict.fromkeys(keys, 0)
    elapsed = 0.0
    ran, stopped = 0, ""
    with _open_manager(agent, data_dir, Config(auto_compress=False), _model()) as mem:
        before = mem.stats()["nodes"]
        with progress_bar(_stderr()) as progress:
            task = progress.add_task("Compressing", total=slices)
            for _ in range(slices):
                report = mem.run_compression_slice()
                ran += 1
                for k in keys:
                    totals[k] += int(report.get(k, 0))
                elapsed += float(report.get("elapsed_ms", 0.0))
                progress.advance(task)
                if not report.get("scanned") and not report.get("preempted"):
                    stopped = " (stopped: nothing to scan, every node left is a focus node)"
                    break  # the next slices would find nothing either
        after = mem.stats()["nodes"]
    click.echo(
        f"{ran} slices{stopped}: scanned {totals['scanned']}, compressed {totals['compressed']}, "
        f"forgotten {totals['forgotten']}, links removed {totals['links_removed']}, "
        f"model calls {totals['model_calls']}, {elapsed:.0f} ms; nodes {before} → {after}"
    )


# -- sparql -------------------------------------------------------------------------------------

_RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
_SHORT = [("rdf:type", _RDF_TYPE)] + [(f"{p}:", iri) for p, iri in inspect.PREFIXES.items()]


def _short_iri(iri: str) -> str:
    for short, full in _SHORT:
        if iri == full and not short.endswith(":"):
            return short
        if short.endswith(":") and iri.startswith(full):
            return short + iri[len(full):]
    return f"<{iri}>"


def _cell(term: dict[str, Any] | None) -> str:
    """A W3C SPARQL JSON results term as table text."""
    if term is None:
        return ""
    kind, value = term.get("type"), term.get("value", "")
    if kind == "uri":
        return _short_iri(str(value))
    if kind == "bnode":
        return f"_:{value}"
    if kind == "triple" and isinstance(value, dict):
        parts = (_cell(value.get(k)) for k in ("subject", "predicate", "object"))
        return "<< " + " ".join(parts) + " >>"
    if "xml:lang" in term:
        return f"{value}@{term['xml:lang']}"
    return str(value)


def _cell_of(value: Any) -> str:
    """A Python value of :func:`memory_rdf.inspect.sparql`'s triples as table text."""
    if isinstance(value, str) and "://" in value and " " not in value:
        return _short_iri(value)
    return str(value)


def _read_query(query: str) -> str:
    if query in ("-", "@-"):
        return sys.stdin.read()
    if query.startswith("@"):
        return _read_file(Path(query[1:]))
    return query


@cli.command(short_help="Run a read-only SPARQL query.")
@click.argument("agent")
@click.argument("query", metavar="QUERY|@FILE.rq")
@click.option("--format", "-f", "fmt",
              type=click.Choice(["table", "json", "xml", "csv", "tsv"]),
              default="table", show_default=True,
              help="table for people; json/xml/csv/tsv: W3C SPARQL results formats.")
@click.option("--timeout", type=click.FloatRange(min=0, max=threading.TIMEOUT_MAX),
              default=60.0, show_default=True,
              help="Seconds the query may run (0: no limit), the copy of the agent's files it "
                   "reads not counted. Ctrl-C stops it too.")
@_data_dir_option
def sparql(agent: str, query: str, fmt: str, timeout: float, data_dir: Where) -> None:
    """Run a read-only SPARQL query over the agent's memory graph.

    The memory:, node:, link: and xsd: prefixes are predeclared. @FILE reads the query from
    a file, - or @- from stdin. The json/xml/csv/tsv formats are written as the rows come;
    with them, CONSTRUCT/DESCRIBE results are printed as N-Triples. SPARQL Update, SERVICE,
    LOAD and file: IRIs are refused. The query runs beside the command, which stops it (and
    exits) after --timeout seconds or at Ctrl-C, even inside an aggregate the engine cannot
    interrupt.

    \b
    Example:
      memory-rdf sparql demo 'SELECT ?p WHERE { ?n memory:phrase ?p }' --format csv
    """
    text = _read_query(query)
    _agent(agent)
    try:
        # The clock runs in the store's query (inspect.sparql's timeout), not around it: the
        # private copy of the agent's files taken first is not the query's time.
        _interruptible(lambda: _sparql(agent, text, fmt, data_dir, timeout or None))
    except QueryTimeoutError:
        raise _CliError(f"the query ran longer than --timeout {timeout:g} s; narrow it "
                        "(LIMIT, more specific patterns) or give a larger --timeout") from None
    except UpdateRefusedError:
        raise _CliError("SPARQL Update (INSERT/DELETE/LOAD/CLEAR/…) is refused: "
                        "sparql is read-only") from None
    except SparqlError as exc:
        raise _CliError(str(exc)) from None


#: Largest result the table format renders (its JSON results document, in bytes).
TABLE_MAX_BYTES = 32 * 2**20


def _interruptible(run: Callable[[], None]) -> None:
    """``run()`` in a worker thread while this (main) thread waits for it or Ctrl-C. The
    engine computes aggregates without returning to Python, so a signal cannot reach it in
    its own thread; at Ctrl-C this process exits at once (exit 130), which stops it. (A
    timed-out query raises QueryTimeoutError in ``run()``, its engine left to the exit.)"""
    box: list[BaseException | None] = []

    def target() -> None:
        try:
            run()
        except BaseException as exc:  # handed to the main thread
            box.append(exc)
        else:
            box.append(None)

    worker = threading.Thread(target=target, name="memory-rdf-sparql", daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(0.1)
    except KeyboardInterrupt:
        _hard_exit("interrupted", 130)
    if box and box[0] is not None:
        raise box[0]


def _hard_exit(message: str, code: int) -> None:
    """Leave without waiting for the query thread: a daemon thread, which the interpreter
    does not wait for at exit (measured: the process ends at once, mid-COUNT)."""
    raise _CliError(message, code)


class _Tail:
    """stdout for a streamed result: written through, and ended with a newline."""

    def __init__(self) -> None:
        self.last = b"\n"

    def write(self, data: bytes) -> int:
        if data:
            sys.stdout.buffer.write(data)
            self.last = data[-1:]
        return len(data)

    def flush(self) -> None:
        sys.stdout.buffer.flush()


class _Capped:
    """A buffer that refuses to grow past TABLE_MAX_BYTES."""

    def __init__(self) -> None:
        self.data = bytearray()

    def write(self, data: bytes) -> int:
        self.data += data
        if len(self.data) > TABLE_MAX_BYTES:
            raise _CliError(
                f"the result is larger than {TABLE_MAX_BYTES // 2**20} MB, too large for a "
                "table: add LIMIT, or use --format csv/tsv/json (written as the rows come)"
            )
        return len(data)

    def flush(self) -> None:
        pass


class _TripleRows:
    """An N-Triples parser's sink (rdflib's): each triple as a table row, in order."""

    def __init__(self) -> None:
        self.rows: list[list[str]] = []

    def triple(self, *terms: Any) -> None:
        self.rows.append([_term_cell(t) for t in terms])


def _term_cell(term: Any) -> str:
    """An rdflib term as table text, as :func:`_cell` shows a SELECT's."""
    from rdflib import BNode, Literal, URIRef

    if isinstance(term, URIRef):
        return _short_iri(str(term))
    if isinstance(term, BNode):
        return f"_:{term}"
    if isinstance(term, Literal) and term.language:
        return f"{term}@{term.language}"
    return str(term)


def _triples(raw: bytes) -> list[list[str]] | None:
    """The table rows of a CONSTRUCT / DESCRIBE answer given as N-Triples (rdflib's parser:
    cli.py keeps to public names, and the engine stays in the storage package), in order;
    None when the parser cannot read them."""
    import rdflib
    from rdflib.plugins.parsers.ntriples import ParseError, W3CNTriplesParser

    sink = _TripleRows()
    normalize = rdflib.NORMALIZE_LITERALS
    rdflib.NORMALIZE_LITERALS = False  # a cell shows the literal as stored, as a SELECT's does
    try:
        parser = W3CNTriplesParser(sink=sink)  # type: ignore[arg-type]  # any .triple() sink
        parser.parse(io.BytesIO(raw), bnode_context={})
    except ParseError:
        return None
    finally:
        rdflib.NORMALIZE_LITERALS = normalize
    return sink.rows


def _sparql(agent: str, text: str, fmt: str, data_dir: Where, timeout: float | None) -> None:
    """The query's rows printed in ``fmt``; QueryTimeoutError past ``timeout`` seconds of
    the query (None: no limit)."""
    if fmt != "table":
        sys.stdout.flush()
        tail = _Tail()
        inspect.sparql(agent, text, data_dir, format=fmt, timeout=timeout,
                       output=tail)  # type: ignore[arg-type]
        if tail.last != b"\n":
            tail.write(b"\n")
        tail.flush()
        return
    buffer = _Capped()
    inspect.sparql(agent, text, data_dir, format="json", timeout=timeout,
                   output=buffer)  # type: ignore[arg-type]
    raw = bytes(buffer.data)
    out = _stdout()
    if not raw.lstrip().startswith(b"{"):  # CONSTRUCT / DESCRIBE: N-Triples, read here
        columns = ["subject", "predicate", "object"]
        parsed = _triples(raw)
        rows = parsed if parsed is not None else [  # rdflib could not read them: run again
            [_cell_of(v) for v in triple]
            for triple in inspect.sparql(agent, text, data_dir, timeout=timeout, limit=100_000)]
    else:  # SELECT / ASK: a JSON results document
        result = json.loads(raw)
        if "boolean" in result:
            click.echo("true" if result["boolean"] else "false")
            return
        columns = list(result.get("head", {}).get("vars", []))
        bindings = result.get("results", {}).get("bindings", [])
        rows = [[_cell(b.get(c)) for c in columns] for b in bindings]
    table = Table(caption=f"{len(rows)} row{'s' if len(rows) != 1 else ''}")
    for c in columns:
        table.add_column(c, overflow="fold")
    for row in rows:
        table.add_row(*(Text(_printable(v)) for v in row))
    out.print(table)


# -- export -------------------------------------------------------------------------------------


_EXPORT_SUFFIXES = {".ttl": "turtle", ".turtle": "turtle", ".nt": "ntriples",
                    ".nq": "nquads", ".trig": "trig"}


def _format_for(output: str | Path | None, fmt: str | None, suffixes: dict[str, str],
                default: str) -> str:
    """The format to write: --format, else the suffix of -o, else ``default``. A suffix that
    names another format than --format, or an unknown suffix without --format, is refused
    (a file named demo.nt must hold N-Triples)."""
    suffix = Path(output).suffix.lower() if output not in (None, "-") else ""
    known = ", ".join(f"{k} ({v})" for k, v in suffixes.items())
    by_suffix = suffixes.get(suffix)
    if fmt is not None:
        if suffix and suffix in suffixes and by_suffix != fmt:
            raise _CliError(f"{output} names {by_suffix} by its suffix but --format is {fmt}: "
                           "change one of them", 2)
        return fmt
    if by_suffix is not None:
        return by_suffix
    if suffix:
        raise _CliError(f"cannot tell the format of {output} from its suffix {suffix!r}: use "
                       f"one of {known}, or give --format", 2)
    return default


@cli.command(short_help="Export the store as RDF.")
@click.argument("agent")
@click.option("--format", "-f", "fmt",
              type=click.Choice(["turtle", "ntriples", "nquads", "trig"]), default=None,
              help="turtle/ntriples: the memory graph; nquads/trig: also journal and metadata. "
                   "Default: from FILE's suffix (.ttl .nt .nq .trig), else turtle.")
@click.option("--output", "-o", default=None, metavar="FILE|-",
              help="Write to FILE instead of stdout (- is stdout too).")
@_data_dir_option
def export(agent: str, fmt: str | None, output: str | None, data_dir: Where) -> None:
    """Export the agent's store as RDF.

    Turtle and N-Triples hold the memory network (the default graph); N-Quads and TriG add the
    named graphs (task journal, store metadata): a complete backup, which 'memory-rdf import'
    restores as a new agent. Without --format the suffix of FILE decides; a suffix naming
    another format than --format is refused.

    \b
    Example:
      memory-rdf export demo -o demo-backup.nq      # N-Quads, from the suffix
    """
    _agent(agent)
    chosen = _format_for(output, fmt, _EXPORT_SUFFIXES, "turtle")
    data = inspect.export(agent, data_dir, format=chosen)
    if output in (None, "-"):
        _write_bytes(data)
        return
    target = Path(output)
    _write_file(target, data)
    _say(_stderr(), f"wrote {_human_bytes(len(data))} ({chosen}) to {target}")


@cli.command(name="import", short_help="Restore a backup as a new agent.")
@click.argument("agent")
@click.argument("backup_file", metavar="FILE",
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--format", "-f", "fmt", type=click.Choice(list(backup.BACKUP_FORMATS)),
              default=None, help="Default: from FILE's suffix (.nq .trig).")
@_data_dir_option
def import_(agent: str, backup_file: Path, fmt: str | None, data_dir: Where) -> None:
    """Make the new agent AGENT from a backup FILE written by 'memory-rdf export … -o FILE.nq'
    (N-Quads or TriG: the memory network, the journal and the store's metadata). The backup
    may come from another agent id or machine. An agent that already has a store is refused
    (exit 2); an error leaves no agent behind.

    \b
    Example:
      memory-rdf export demo -o demo-backup.nq && memory-rdf import demo-copy demo-backup.nq
    """
    _agent(agent)
    err = _stderr()
    if err.is_terminal:
        with Progress(TextColumn("Restoring"), BarColumn(), DownloadColumn(),
                      TimeElapsedColumn(), console=err) as bar:
            task = bar.add_task("Restoring", total=None)
            result = backup.restore(
                agent, backup_file, data_dir, format=fmt,
                progress=lambda done, size: bar.update(task, completed=done, total=size))
    else:
        result = backup.restore(agent, backup_file, data_dir, format=fmt)
    nodes = result["nodes"]
    _say(_stderr(), f"restored agent {agent!r} from {backup_file}: {nodes} "
                    f"{'memory' if nodes == 1 else 'memories'}, "
                    f"{result['pending_tasks']} remembers still to process, "
                    f"{result['failed_tasks']} failed (see memory-rdf tasks)")


# -- graph --------------------------------------------------------------------------------------

_GRAPH_SUFFIXES = {".html": "html", ".htm": "html", ".dot": "dot", ".gv": "dot", ".svg": "svg"}


@cli.command(short_help="Draw the network around the focus (HTML, DOT, SVG).")
@click.argument("agent")
@click.option("--output", "-o", default=None, metavar="FILE|-",
              help="Where to write the picture (- for stdout). Default: AGENT-graph.FORMAT.")
@click.option("--depth", "-d", type=click.IntRange(min=0), default=inspect.GRAPH_DEPTH,
              show_default=True, help="Hops from the focus nodes.")
@click.option("--format", "-f", "fmt", type=click.Choice(inspect.GRAPH_FORMATS), default=None,
              help="html: one self-contained page; dot: Graphviz; svg: needs Graphviz's dot. "
                   "Default: from FILE's suffix (.html .dot .gv .svg; others are refused), "
                   "else html.")
@click.option("--limit", type=click.IntRange(min=1), default=inspect.GRAPH_LIMIT,
              show_default=True, help="Most memories drawn (the most strongly linked first).")
@_data_dir_option
def graph(agent: str, output: str | None, depth: int, fmt: str | None, limit: int,
          data_dir: Where) -> None:
    """Draw the memory network within --depth hops of the agent's focus (read-only).

    Focus nodes are amber, in the middle; other memories sit on rings by hop distance, sized
    by importance (the sum of their link strengths); lines are as thick as the links are
    strong; a dashed line to a faded "forgotten" placeholder is a link whose target was
    forgotten. The HTML page needs no network: open it in any browser, hover a memory to read
    it.

    \b
    Example:
      memory-rdf graph demo -o demo.html --depth 2
      memory-rdf graph demo -o demo.svg          # needs Graphviz
    """
    _agent(agent)
    fmt = _format_for(output, fmt, _GRAPH_SUFFIXES, "html")
    if fmt == "svg" and not inspect.graphviz_available():
        raise _CliError("--format svg needs Graphviz's dot program (apt-get install graphviz, "
                       "brew install graphviz, …); --format html needs nothing")
    picture = inspect.graph(agent, data_dir, format=fmt, depth=depth, limit=limit)
    data = picture.data
    if output == "-":
        _write_bytes(data)
        return
    target = Path(output) if output is not None else Path(f"{agent}-graph.{fmt}")
    _write_file(target, data)
    dangling = picture.dangling
    _say(_stderr(), f"wrote {target} ({fmt}, {_human_bytes(len(data))}): {picture.nodes} of "
                    f"{picture.total_nodes} memories, {picture.connections} connections, "
                    f"{dangling} link{'s' if dangling != 1 else ''} to forgotten memories")


# -- stats --------------------------------------------------------------------------------------


def _importance_text(summary: dict[str, Any]) -> Text:
    """min/median/max, the fading count and a small bar histogram of node importance."""
    if summary.get("min") is None:
        return Text("-")
    text = Text(
        f"min {summary['min']:.2f} · median {summary['median']:.2f} · "
        f"max {summary['max']:.2f}\n"
    )
    text.append(f"{summary['fading']} fading (below 1: compression shortens them)",
                style="dim")
    buckets = summary["histogram"]
    top = max((b["nodes"] for b in buckets), default=0) or 1
    width = max(len(b["range"]) for b in buckets)
    for bucket in buckets:
        bar = "█" * round(20 * bucket["nodes"] / top) or ("▏" if bucket["nodes"] else "")
        text.append(f"\n{bucket['range']:>{width}} ")
        text.append(bar, style="cyan")
        text.append(f" {bucket['nodes']}")
    return text


@cli.command(short_help="List the agents that have a memory store.")
@click.option("--json", "as_json", is_flag=True, help="Print the ids as a JSON list.")
@_data_dir_option
def agents(as_json: bool, data_dir: Where) -> None:
    """List the ids of the agents with a memory in the data directory (or on the endpoint),
    one per line, sorted (read-only; creates nothing).

    \b
    Example:
      memory-rdf agents
      for a in $(memory-rdf agents); do memory-rdf stats "$a" --json; done
    """
    found = inspect.agents(data_dir)
    if as_json:
        click.echo(_printable(json.dumps(found, ensure_ascii=False), json_escapes=True))
        return
    if not found:
        where = data_dir.query_url if isinstance(data_dir, SparqlEndpoint) else data_dir
        _say(_stderr(), f"(no agents in {_printable(str(where))})")
        return
    for agent in found:
        click.echo(agent)


@cli.command(short_help="Show counts, focus, importance and store size.")
@click.argument("agent")
@click.option("--json", "as_json", is_flag=True, help="Print the stats dict as JSON.")
@_data_dir_option
def stats(agent: str, as_json: bool, data_dir: Where) -> None:
    """Show the agent's node, link and focus counts, how important its memories are (min,
    median, max and a histogram of node importance), pending and failed remembers, and where
    its store is and how big (read-only).

    \b
    Example:
      memory-rdf stats demo --json
    """
    _agent(agent)
    result = inspect.stats(agent, data_dir)
    if as_json:
        click.echo(_printable(json.dumps(result, ensure_ascii=False, indent=2, default=str),
                              json_escapes=True))
        return
    table = Table(title=f"Agent {agent}", show_header=False)
    table.add_column("", style="bold")
    table.add_column("", overflow="fold")
    table.add_row("nodes", str(result["nodes"]))
    table.add_row("links", str(result["links"]))
    table.add_row("dangling links", str(result["dangling_links"]))
    table.add_row("focus phrases",
                  Text("\n".join(_printable(p) for p in result["focus_phrases"]) or "-"))
    table.add_row("importance", _importance_text(result["importance"]))
    table.add_row("pending tasks", str(result["pending_tasks"]))
    table.add_row("failed tasks", str(result["failed_tasks"]))
    table.add_row("store path", Text(_printable(str(result["store_path"]))))
    table.add_row("on disk", "n/a (on the SPARQL endpoint)" if isinstance(data_dir, SparqlEndpoint)
                  else _human_bytes(int(result["store_bytes"])))
    _stdout().print(table)


# -- validate -----------------------------------------------------------------------------------


@cli.command(short_help="Check the store against the SHACL shapes.")
@click.argument("agent")
@_data_dir_option
def validate(agent: str, data_dir: Where) -> None:
    """Check the memory graph against the SHACL shapes; exit 1 with the report if it violates
    them. Needs pyshacl (pip install "memory-rdf[shacl]", or ".[shacl]" in a clone): exit 3
    without it, so a script can tell "not checked" from "damaged".

    \b
    Example:
      memory-rdf validate demo || echo "store is damaged (1) or not checked (3)"
    """
    _agent(agent)
    try:
        import pyshacl  # noqa: F401
    except ImportError:
        raise _CliError("validate needs pyshacl, which is not installed: "
                       "pip install \"memory-rdf[shacl]\" (in a clone of the repository: "
                       "pip install \".[shacl]\")", EXIT_MISSING_DEPENDENCY) from None
    conforms, report = inspect.validate(agent, data_dir)
    if conforms:
        click.echo(f"agent {agent!r} conforms to the memory_rdf SHACL shapes")
        return
    click.echo(report.rstrip())
    raise _CliError(f"agent {agent!r} does not conform to the memory_rdf SHACL shapes", 1)


# -- serve --------------------------------------------------------------------------------------


@cli.command(short_help="Serve the memory to MCP clients (stdio or HTTP).")
@click.option("--agent", default=DEFAULT_AGENT, show_default=True,
              help="The agent a tool call uses when it names none (its agent_id argument); "
                   "with --agents, the first listed unless given.")
@click.option("--agents", "agents", multiple=True, metavar="ID[,ID...]",
              envvar="MEMORY_RDF_AGENTS", show_envvar=True,
              help="Serve only these agents (comma-separated; may be repeated): a call naming "
                   "another is a tool error and opens or creates nothing. Without it, any "
                   "client can read, change and create any agent by naming it.")
@click.option("--transport", type=click.Choice(["stdio", "http"]), default="stdio",
              show_default=True,
              help="stdio: the client starts this command (Claude Desktop, IDEs); http: "
                   "streamable HTTP at http://HOST:PORT/mcp.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="HTTP: address to listen on. Anything but loopback needs --token.")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True,
              help="HTTP: port to listen on (0: a free one, printed on stderr).")
@click.option("--token", envvar="MEMORY_RDF_TOKEN", show_envvar=True, default=None,
              help="HTTP: every request must carry 'Authorization: Bearer TOKEN' (401 "
                   "otherwise). Prefer the environment variable: arguments show in ps.")
@click.option("--timeout", "call_timeout",
              type=click.FloatRange(min=0, max=threading.TIMEOUT_MAX), default=120.0,
              show_default=True,
              help="Longest a recall, memories or forget call waits behind the agent's "
                   "earlier work (e.g. a remember waiting for the model) before it answers a "
                   "tool error saying so; 0 = no limit.")
@click.option("--english", is_flag=True,
              help="Every recall entry in English ([memory …]); by default each entry is in "
                   "its content's language.")
@_data_dir_option
@_embedder_option
@click.pass_context
def serve(ctx: click.Context, agent: str, agents: tuple[str, ...], transport: str, host: str,
          port: int, token: str | None, call_timeout: float, english: bool,
          data_dir: Where) -> None:
    """Serve the agents' memory over the Model Context Protocol (needs the mcp extra:
    pip install "memory-rdf[mcp]", or ".[mcp]" in a clone).

    Tools: remember, recall, memories, forget, pin, stats, sparql, each with an optional agent_id
    argument (default --agent). One process serves every agent in DATA_DIR, unless --agents
    (or MEMORY_RDF_AGENTS) lists the only ones a client may name. An agent, the default one
    too, is opened (or created) when a call first uses it; one held by another process
    answers a tool error. HTTP listens on 127.0.0.1 unless --host says otherwise,
    which needs --token. Stops on Ctrl-C / SIGTERM (HTTP) or when the client closes stdin
    (stdio); remembers not yet processed stay journalled for the next start.

    \b
    Examples:
      memory-rdf serve --data-dir ~/.memory-rdf                  # stdio, for Claude Desktop
      memory-rdf serve --agents me,work                          # only agents me and work
      memory-rdf serve --transport http --port 8765              # http://127.0.0.1:8765/mcp
      export MEMORY_RDF_TOKEN=$(openssl rand -hex 16)            # the clients' bearer token
      memory-rdf serve --transport http --host 0.0.0.0           # reachable from the network
    """
    from memory_rdf import MemorySystem, mcp_server

    _agent(agent)
    allowed = _served_agents(ctx, agents)
    if allowed is not None:
        agent = allowed[0] if _defaulted(ctx, "agent") else agent
        try:  # the ids, and --agent among them, as the server checks them
            allowed = mcp_server.check_agents(allowed, agent)
        except (InvalidInputError, InvalidTypeError) as exc:
            raise click.UsageError(f"{exc} (--agents, --agent)", ctx) from None
    if transport == "stdio":
        given = [f"--{name}" for name in ("host", "port", "token")
                 if ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE]
        if given:
            raise click.UsageError(f"{', '.join(given)} only apply to --transport http", ctx)
    try:
        mcp_server.require_mcp()
        if transport == "http":
            mcp_server.check_bind(host, token)
    except ImportError as exc:
        raise _CliError(str(exc), EXIT_MISSING_DEPENDENCY) from None
    config = Config(templates=Templates.english() if english else Templates())
    err = _stderr()
    _raise_open_files_limit()
    embedder = _EMBEDDER.get()
    system = (MemorySystem(endpoint=data_dir, model=_model(), config=config, embedder=embedder)
              if isinstance(data_dir, SparqlEndpoint)
              else MemorySystem(data_dir=data_dir, model=_model(), config=config,
                                embedder=embedder))
    try:  # an agent, the default one too, is opened (or made) when a call first names it
        served = ("any agent a client names" if allowed is None
                  else f"only agents {', '.join(repr(a) for a in allowed)}")
        where = f"{served}; {agent!r} by default; data dir {data_dir}"
        if transport == "stdio":
            _say(err, f"memory-rdf serve: MCP over stdio ({where})")
            mcp_server.run_stdio(system, default_agent=agent,
                                 call_timeout=call_timeout or None, agents=allowed)
        else:
            def listening(url: str) -> None:
                auth = "bearer token required" if token else "no token: this machine only"
                _say(err, f"memory-rdf serve: MCP over streamable HTTP at {url} ({where}; "
                          f"{auth})")

            mcp_server.run_http(system, host=host, port=port, token=token, default_agent=agent,
                                on_listening=listening, call_timeout=call_timeout or None,
                                agents=allowed)
    finally:
        system.close(timeout=10)


def _defaulted(ctx: click.Context, name: str) -> bool:
    return ctx.get_parameter_source(name) == click.core.ParameterSource.DEFAULT


def _served_agents(ctx: click.Context, given: tuple[str, ...]) -> tuple[str, ...] | None:
    """``--agents`` as ids in their order (None: not given); :func:`mcp_server.check_agents`
    checks them, before any file is touched. Each value is split at commas; the environment
    variable's also at whitespace (click's splitting of a repeatable option)."""
    if _defaulted(ctx, "agents") or not given:
        return None
    ids = tuple(part.strip() for value in given for part in value.split(","))
    if not all(ids):
        raise click.UsageError(f"--agents has an empty agent id: {','.join(given)!r}", ctx)
    return ids


def _raise_open_files_limit() -> None:
    """The server opens an agent's store (~18 files each, more as it grows) for every agent id
    a client names and keeps it open: with a soft limit of 256 (macOS's default for apps that
    start MCP servers) the 14th agent failed with "Too many open files". Raise the soft limit
    to the hard one (at most 65,536; macOS refuses more than OPEN_MAX, 10,240)."""
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    ceiling = 10_240 if sys.platform == "darwin" else 65_536
    wanted = ceiling if hard == resource.RLIM_INFINITY else min(hard, ceiling)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


# -- bench --------------------------------------------------------------------------------------


def _benchmarks_checkout() -> Path | None:
    """The source checkout holding ``benchmarks/suite.py``: the current directory or one of its
    parents, else the checkout this package was installed from (an editable install)."""
    here = Path.cwd().resolve()
    package_parent = Path(__file__).resolve().parent.parent
    for candidate in (here, *here.parents, package_parent):
        if (candidate / "benchmarks" / "suite.py").is_file():
            return candidate
    return None


@cli.command(
    short_help="Run the benchmark suite (from a source checkout).",
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True,
                      "help_option_names": []},
    add_help_option=False,
)
@click.argument("suite_args", nargs=-1, type=click.UNPROCESSED)
def bench(suite_args: tuple[str, ...]) -> int:
    """Measure recall, remember, compression, disk and memory at 10k-1M nodes against a Python
    dict, NetworkX, rdflib, SQLite and LevelGraph in one run; every argument goes to the suite
    ('memory-rdf bench --help' lists them). The benchmarks are not part of the wheel: run
    this inside a clone of the memory_rdf repository.

    \b
    Examples:
      memory-rdf bench --quick            # 10k nodes, about two minutes
      memory-rdf bench --full             # 100k and 1M nodes where disk allows
    """
    root = _benchmarks_checkout()
    if root is None and {"-h", "--help"} & set(suite_args):
        # Outside a checkout the suite's own --help cannot run: say what the command is.
        click.echo(click.get_current_context().get_help())
        click.echo("\nThe suite's own options are listed by 'memory-rdf bench --help' inside a "
                   "clone of the memory_rdf repository (its benchmarks/ directory).")
        return 0
    if root is None:
        raise _CliError(
            "memory-rdf bench runs the benchmarks/ directory of a source checkout, which the "
            "installed package does not include: clone the memory_rdf repository and run "
            "'memory-rdf bench' (or 'python -m benchmarks') inside it", 2)
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    try:
        suite = importlib.import_module("benchmarks.suite")
    except ImportError as exc:
        raise _CliError(f"cannot load the benchmarks in {root}: {exc} "
                       "(install what they need with: pip install \".[bench]\")") from exc
    try:
        return int(suite.main(list(suite_args), prog="memory-rdf bench"))
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 2)


# ---------------------------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------------------------


def _error(message: str) -> None:
    with contextlib.suppress(OSError):  # stderr gone: nothing left to tell
        click.echo(f"error: {_one_line(message)}", err=True)


def run(argv: Sequence[str] | None = None) -> int:
    """Run the command line and return its exit code (errors printed as one line)."""
    try:
        rv = cli.main(args=list(argv) if argv is not None else None, prog_name="memory-rdf",
                      standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:
        click.echo(exc.ctx.get_help() if exc.ctx else "")
        return 0
    except click.UsageError as exc:
        hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
        _error(f"{exc.format_message()}{hint}")
        return 2
    except click.ClickException as exc:
        _error(exc.format_message())
        return exc.exit_code
    except click.Abort:
        _error("interrupted")
        return 130
    except _CliError as exc:
        _error(str(exc))
        return exc.exit_code
    except UnknownAgentError as exc:
        _error(str(exc))
        return 2
    except BrokenPipeError:
        # The reader went away (``memory-rdf export … | head``): silence the final flush.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except StoreLockedError as exc:
        _error(str(exc))
        return 1
    except (InvalidInputError, InvalidTypeError) as exc:
        # Input refused, at the call or where only the store could tell (an agent id that
        # reaches another agent's directory, found when the store opens): a usage error, as
        # the help says.
        _error(str(exc))
        return 2
    except MemoryRDFError as exc:
        _error(str(exc) or type(exc).__name__)
        return 1
    except OSError as exc:  # the reason, not Python's "[Errno 98] …"
        said = _os_reason(exc)
        _error((f"{said} ({exc.filename})" if exc.filename else said) or type(exc).__name__)
        return 1
    except KeyboardInterrupt:
        _error("interrupted")
        return 130
    except Exception as exc:
        if os.environ.get(DEBUG_ENV):
            raise
        _error(f"internal error: {type(exc).__name__}: {exc} (set {DEBUG_ENV}=1 for details)")
        return 1
    return rv if isinstance(rv, int) else 0


def main() -> None:
    """Console-script entry point (``memory-rdf``)."""
    sys.exit(run())


if __name__ == "__main__":
    main()
