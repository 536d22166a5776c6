"""MemoryManager (one agent) and MemorySystem (many agents, one scheduler thread) — SPEC §4."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
import uuid
from collections.abc import Generator, Sequence
from concurrent.futures import Future, InvalidStateError
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import fields
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from memory_rdf import _vocab as V
from memory_rdf._agents import default_data_dir, validate_agent_id
from memory_rdf._arguments import (
    RecallArgs,
    check_bool,
    check_config,
    check_embedder,
    check_endpoint,
    check_page,
    check_remember_chars,
    node_ids,
    query_text,
    recall_args,
    resolve_model,
)
from memory_rdf._calls import (
    AwaitCall,
    Backoff,
    CallStats,
    Wait,
    apply_model_timeout,
    backoff_delay,
    log,
    log_failed_attempt,
)
from memory_rdf._compression import Compressor, forget_ops
from memory_rdf._config import Config
from memory_rdf._embedders import Embedder
from memory_rdf._exceptions import (
    InvalidInputError,
    MemoryClosedError,
    MemoryRDFError,
    StoreError,
    StoreLockedError,
)
from memory_rdf._focus import FocusManager
from memory_rdf._integrity import task_problem
from memory_rdf._interrupts import interrupts_held
from memory_rdf._journal import Journal, JournalTask, Metadata
from memory_rdf._links import LinkStore
from memory_rdf._listing import Listing, Window
from memory_rdf._listing import make_window as _window
from memory_rdf._nodes import NodeStore
from memory_rdf._oxigraph import (
    AgentStore,
    MemoryStore,
    WriteBatch,
    disk_refused,
    node_ref,
    triple,
)
from memory_rdf._query_guard import SPARQL_LIMIT, SPARQL_TIMEOUT, check_limit, check_timeout
from memory_rdf._remember import Rememberer, SegmentationFailed
from memory_rdf._remote import (
    EndpointUnavailable,
    RemoteStore,
    SparqlEndpoint,
    may_have_reached,
)
from memory_rdf._scheduler import Agent, Reservation, Scheduler, Task, TaskKind
from memory_rdf._search import Searcher
from memory_rdf._seeding import Seeder
from memory_rdf._text import significant_keywords
from memory_rdf._types import (
    SmallModel,
    coerce_messages,
    messages_to_text,
    said_at,
)
from memory_rdf._vectors import QUERY_WAIT, Vectors

#: The longest journalled remember resumed at open whatever the Config says (issue 33 F8: a
#: 5 MB task planted in a store became 12,861 nodes); a larger max_remember_chars raises it.
OPEN_TASK_CHARS = 1_000_000
T = TypeVar("T")
#: Seconds an automatic compression slice first waits before it looks again whether the read
#: mirror's build has ended; each wait doubles, up to MIRROR_WAIT_MAX (a process of many agents
#: opening at once would otherwise step each waiting slice ten times a second).
MIRROR_WAIT = 0.1
MIRROR_WAIT_MAX = 1.0


class MemorySystem:
    """Many agents served by one scheduler thread.

    Managers made by :meth:`agent`, and managers built with ``MemoryManager(...,
    system=system)``, are closed by :meth:`close`.

    The agents live in ``data_dir`` (one embedded Oxigraph store each), or, with
    ``endpoint=SparqlEndpoint(...)``, in named graphs on a SPARQL 1.1 server (SPEC §8); give
    one or the other. An endpoint agent is held by one process at a time (a lease):
    :meth:`agent` raises :class:`StoreLockedError` naming the holder while another process
    serves it, and :class:`StoreError` when the server cannot be reached.

    >>> import tempfile
    >>> with MemorySystem(data_dir=tempfile.mkdtemp()) as system:
    ...     a = system.agent("agent_a")
    ...     a is system.agent("agent_a")
    True
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str] | None = None,
        model: SmallModel | None = None,
        config: Config | None = None,
        *,
        endpoint: SparqlEndpoint | None = None,
        embedder: Embedder | None = None,
    ) -> None:
        check_config(config)
        self.endpoint = check_endpoint(endpoint, data_dir)
        #: The embedding model of the semantic entry (SPEC §5.7), None: lexical entries only.
        self.embedder = check_embedder(embedder)
        self.data_dir = Path(data_dir) if data_dir is not None else default_data_dir()
        self.config = config or Config()
        self.model = resolve_model(model)
        apply_model_timeout(self.model, self.config.model_timeout)  # SPEC §4
        self._scheduler = Scheduler()
        self._agents: dict[str, MemoryManager] = {}
        self._lock = threading.RLock()  # agent() initializes a manager, which registers
        self._closed = False

    def agent(self, agent_id: str, *, config: Config | None = None) -> MemoryManager:
        """The (initialized) manager of ``agent_id``; the same object for the same id.

        ``config`` (None: the system's) applies when the agent is opened; for an agent
        already open it must be None or equal to the config it was opened with.

        Raises:
            InvalidInputError, InvalidTypeError: ``agent_id`` is not a valid id (SPEC §2), or
                ``config`` differs from the config of the agent already open.
            MemoryClosedError: the system is closed.
            StoreError: the agent's store cannot be opened (``StoreLockedError``: another
                process holds it).
        """
        validate_agent_id(agent_id)
        check_config(config)
        with self._lock:
            if self._closed:
                raise MemoryClosedError("the memory system is closed")
            manager = self._agents.get(agent_id)
            if manager is not None and not manager.closed and config is not None \
                    and config != manager.config:
                changed = [f"{f.name}={getattr(config, f.name)!r}" for f in fields(Config)
                           if getattr(config, f.name) != getattr(manager.config, f.name)]
                raise InvalidInputError(
                    f"agent {agent_id!r} is already open with another config (this one has "
                    f"{', '.join(changed[:3])}{', …' if len(changed) > 3 else ''}); it keeps "
                    "its config while open: call agent() without one, or close the agent "
                    "first to open it with this one"
                )
            if manager is None or manager.closed:
                manager = MemoryManager(
                    agent_id, data_dir=None if self.endpoint else self.data_dir,
                    config=config or self.config, model=self.model, system=self,
                )
                manager.initialize()
                self._agents[agent_id] = manager
            return manager

    def _register(self, manager: MemoryManager) -> None:
        """A manager of this system was initialized: :meth:`close` closes it too."""
        with self._lock:
            if self._closed:
                raise MemoryClosedError("the memory system is closed")
            current = self._agents.get(manager.agent_id)
            if current is None or current.closed:
                self._agents[manager.agent_id] = manager

    def agents(self) -> list[str]:
        """Ids of the open agents of this system."""
        with self._lock:
            return [a for a, m in self._agents.items() if not m.closed]

    def close(self, timeout: float | None = None) -> None:
        """Close every agent of the system (waiting up to ``timeout`` s in all for their queued
        tasks, as :meth:`MemoryManager.close`), then stop the scheduler thread. Idempotent."""
        timeout = check_timeout(timeout, zero=True)
        with self._lock:
            if self._closed:
                return
            self._closed = True
            managers = list(self._agents.values())
        deadline = None if timeout is None else time.monotonic() + timeout
        for manager in managers:  # one deadline for all: not ``timeout`` per agent
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            manager.close(timeout=left)
        self._scheduler.stop()

    def __enter__(self) -> MemorySystem:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class MemoryManager:
    """The long-term memory of one agent.

    >>> import tempfile
    >>> with MemoryManager("demo", data_dir=tempfile.mkdtemp()) as mem:
    ...     mem.remember([{"role": "user", "content": "我们决定用 PostgreSQL 存订单数据"}])
    ...     print(mem.recall(["PostgreSQL"]))
    [记忆 ...] user: 我们决定用 PostgreSQL 存订单数据
    """

    def __init__(
        self,
        agent_id: str,
        data_dir: str | os.PathLike[str] | None = None,
        config: Config | None = None,
        model: SmallModel | None = None,
        *,
        system: MemorySystem | None = None,
        endpoint: SparqlEndpoint | None = None,
        embedder: Embedder | None = None,
    ) -> None:
        self.agent_id = validate_agent_id(agent_id)
        check_config(config)
        self.config = config or (system.config if system else Config())
        check_endpoint(endpoint, data_dir)
        if system is not None and endpoint is not None and system.endpoint is not endpoint:
            raise InvalidInputError("endpoint: give it to the MemorySystem, not to its agents")
        if system is None:
            self._system = MemorySystem(data_dir=data_dir, model=model, config=self.config,
                                        endpoint=endpoint, embedder=embedder)
            self._owns_system = True
        else:
            self._system = system
            self._owns_system = False
        self.model = self._system.model if model is None else resolve_model(model)
        if self.model is not self._system.model:  # the system's model has the system's timeout
            apply_model_timeout(self.model, self.config.model_timeout)
        self.endpoint = self._system.endpoint
        #: The embedding model of the semantic entry (SPEC §5.7): this manager's, else the
        #: system's; None: lexical entries only, exactly as without embeddings.
        self.embedder = check_embedder(embedder) or self._system.embedder
        self._vectors: Vectors | None = None
        base = Path(data_dir) if data_dir is not None else self._system.data_dir
        self.path = base / self.agent_id  # unused for an endpoint agent
        self._store: MemoryStore | None = None
        self._initialized = False
        self.closed = False
        self._lock = threading.RLock()

    # -- lifecycle -----------------------------------------------------------------------------

    def initialize(self) -> MemoryManager:
        """Open or create the store, resume journalled remembers, start processing.

        Returns the manager (idempotent: a second call does nothing).

        Raises:
            MemoryClosedError: the manager (or its system) was closed.
            StoreLockedError: another process (or open handle) holds the agent's store.
            SchemaVersionError: the store was written by an incompatible version.
            StoreError: the store cannot be opened.
        """
        with self._lock:
            if self.closed:
                raise MemoryClosedError(f"memory of agent {self.agent_id!r} is closed")
            if self._initialized:
                return self
            from memory_rdf.small_model import HeuristicModel

            store = self._open_store()
            try:
                cfg = self.config
                self._nodes = NodeStore(store)
                self._links = LinkStore(store, cfg.link_break_threshold)
                self._focus = FocusManager(store, cfg.focus_limit)
                self._journal = Journal(store)
                self._metadata = Metadata(store, self.agent_id)
                self._searcher = Searcher(self._nodes, self._links, cfg.templates, store,
                                          language=cfg.language)
                self._listing = Listing(store, cfg.link_break_threshold)
                fallback = HeuristicModel()
                self._compressor = Compressor(
                    store=store, nodes=self._nodes, links=self._links, focus=self._focus,
                    config=cfg, model=self.model, fallback=fallback,
                    user_waiting=self._system._scheduler.user_work_waiting,
                )
                self._rememberer = Rememberer(
                    store=store, nodes=self._nodes, links=self._links, focus=self._focus,
                    journal=self._journal, metadata=self._metadata, config=cfg, model=self.model,
                    fallback=fallback, make_room=self._compressor.make_room,
                )
                if self.embedder is not None:
                    self._vectors = Vectors(store, self._nodes, self.embedder, self.agent_id)
                    self._compressor.on_change = self._vectors.changed_with
                self._seeder = Seeder(cfg, self._focus, self._nodes, self._searcher,
                                      self._metadata, self._vectors)
                self._system._scheduler.add_agent(
                    Agent(self.agent_id, make_slice=self._make_auto_slice,
                          on_idle=self._on_idle)
                )
            except BaseException:
                store.close()
                raise
            if not self._owns_system:
                try:
                    self._system._register(self)
                except BaseException:
                    self._system._scheduler.remove_agent(self.agent_id, 0)
                    store.close()
                    raise
            self._store = store
            self._initialized = True
            self._resume_journal()
            return self

    def _resume_journal(self) -> None:
        """Queue the journalled remembers not processed yet (SPEC §4)."""
        for task in self._journal.tasks("pending"):
            # A journal written elsewhere (a backup, by hand) may hold what remember()
            # refuses: kept as a failed task, never processed (issue 33 F8).
            # The size limit is this process's or OPEN_TASK_CHARS, whichever is larger: a
            # remember accepted under a larger max_remember_chars (another app's Config) is
            # not refused by a process opening the agent with the default.
            limit = max(self.config.max_remember_chars, OPEN_TASK_CHARS)
            refused = task_problem(task.text, limit)
            if refused is not None:
                self._journal.mark_failed(task, f"refused: {refused}")
                log.warning("memory_rdf: agent %r: a journalled remember is one remember() "
                            "refuses (%s): kept as a failed task", self.agent_id, refused)
                continue
            self._submit_remember(task)

    def close(self, timeout: float | None = None) -> None:
        """Stop. Waits up to ``timeout`` s (None: until done) for queued tasks; remembers not
        processed by then stay journalled and run at the next :meth:`initialize`. Callers still
        waiting on a recall get :class:`~memory_rdf.MemoryClosedError`. Idempotent; raises
        nothing of its own (a ``timeout`` that is not None or a number from 0 to
        :data:`~memory_rdf._query_guard.MAX_TIMEOUT` is refused before anything closes)."""
        timeout = check_timeout(timeout, zero=True)
        with self._lock:
            if self.closed:
                return
            self.closed = True
            if self._initialized:
                assert self._store is not None
                leftovers = self._system._scheduler.remove_agent(
                    self.agent_id, timeout, on_stopping=self._store.stop_waiting)
                for task in leftovers:
                    if task.future is not None and not task.future.done():
                        task.future.set_exception(
                            MemoryClosedError(f"memory of agent {self.agent_id!r} was closed")
                        )
                assert self._store is not None
                self._store.close()
                self._store = None
        if self._owns_system:
            self._system.close(timeout)

    def __enter__(self) -> MemoryManager:
        return self.initialize()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _on_idle(self) -> None:
        """Called by the scheduler when the agent's queue empties."""
        local = self._store.local if self._store is not None else None
        if local is not None:
            local.maybe_optimize_in_background()

    def _open_store(self) -> MemoryStore:
        if self.endpoint is None:
            return AgentStore(self.path, mirror=self.config.read_mirror)
        cfg = self.config
        return RemoteStore(
            self.endpoint, self.agent_id, max_retries=cfg.max_retries,
            retry_initial_delay=cfg.retry_initial_delay, retry_max_delay=cfg.retry_max_delay,
            store_timeout=cfg.store_timeout,
        )

    @property
    def store(self) -> MemoryStore:
        """The agent's open store, through the storage package's interface
        (``memory_rdf._oxigraph.MemoryStore``): the seam for tests and tools that work below
        the manager (plant a link's strength, check a store's kind or its lease holder).
        Not part of SPEC §4's contract: the interface may change with the storage package,
        and a write through it skips the manager's checks and queue. To read an agent, prefer
        :meth:`sparql`, :meth:`stats` and :mod:`memory_rdf.inspect`.

        Raises:
            MemoryClosedError: the manager is closed, or not initialized yet.
        """
        return self._check_open()

    def _check_open(self) -> MemoryStore:
        if self.closed:
            raise MemoryClosedError(f"memory of agent {self.agent_id!r} is closed")
        if not self._initialized or self._store is None:
            raise MemoryClosedError(
                f"memory of agent {self.agent_id!r} is not initialized: call initialize() first"
            )
        return self._store

    # -- remember ------------------------------------------------------------------------------

    def remember(self, messages: Sequence[Any]) -> None:
        """Validate, journal durably, enqueue, return at once (SPEC §4, §5.1).

        ``messages``: a list of :class:`~memory_rdf.Message` or of mappings with ``role``,
        ``content`` (and optionally ``timestamp``). Nothing is stored when this raises.

        A Ctrl-C (KeyboardInterrupt) in the main thread raises before the journal write, with
        nothing stored, or (embedded store) is held back until the remember is queued and
        raised as it returns, the remember accepted (the exception's note says so).

        Raises:
            InvalidTypeError, InvalidInputError: bad messages (named by index and field).
            QueueFullError: the agent already has ``max_queue_size`` tasks waiting.
            MemoryClosedError: the manager is closed, or not initialized yet.
            StoreUnavailableError: a SPARQL endpoint store did not take the journal write
                within ``Config.store_timeout``: the remember was not accepted (SPEC §8 v3).
            StoreError: the journal write failed.
        """
        msgs = coerce_messages(messages)
        store = self._check_open()
        text = messages_to_text(msgs)
        check_remember_chars(text, self.config.max_remember_chars)
        scheduler = self._system._scheduler
        # A queue slot is reserved first (under the scheduler's lock, briefly): no recall can
        # take it while the journal write runs, outside that lock, so a full queue stores
        # nothing, an accepted remember is never refused after it was journalled, and no other
        # agent waits on this one's disk write. The manager's own lock keeps close() out.
        # Ctrl-C is held back from the journal write to the queueing (an embedded store's
        # write is local and short; an endpoint's may retry for minutes): an interrupt raises
        # before the write, and nothing is stored, or once the remember is queued — never with
        # it journalled but not queued.
        with self._lock, interrupts_held(store.local is not None) as held:
            self._check_open()
            slot = scheduler.reserve(self.agent_id, self.config.max_queue_size)
            task_id = uuid.uuid4().hex
            try:
                held.deliver()  # a Ctrl-C so far raises here, with nothing written
                task = self._journal.add(text, said_at(msgs), task_id)
            except EndpointUnavailable as exc:
                if may_have_reached(exc):  # the server may still run the write, late
                    self._withdraw(task_id, slot)
                else:  # every attempt was refused a connection: nothing was sent
                    scheduler.release(slot)
                raise
            except BaseException:
                scheduler.release(slot)
                raise
            self._submit_remember(task, slot)
            held.note = ("memory_rdf: the interrupted remember() was accepted (journalled and "
                         "queued) before this KeyboardInterrupt was raised")

    def _withdraw(self, task_id: str, slot: Reservation) -> None:
        """A journal write the endpoint did not answer within ``store_timeout``: the remember
        was refused (:class:`~memory_rdf.StoreUnavailableError`), yet a server that was only
        slow may still apply the write, before or after this one. Its withdrawal (removal,
        and a mark that keeps it from being written or read after, :meth:`Journal.withdraw`)
        is queued in the remember's place and tried until the server answers (SPEC §8 v3:
        nothing refused is accepted later)."""

        def start() -> Generator[Backoff, None, None]:
            outages = 0
            while True:
                try:
                    self._journal.withdraw(task_id)
                    return
                except EndpointUnavailable:
                    if self.closed:
                        raise
                    outages += 1
                    yield Backoff(max(backoff_delay(self.config, outages), 0.1))

        def on_error(exc: BaseException) -> None:
            log.warning(
                "memory_rdf: agent %r: a refused remember's journal entry could not be "
                "withdrawn (%s); if the endpoint applied its write late, the next "
                "initialize() runs it", self.agent_id, exc)

        self._system._scheduler.submit(
            self.agent_id, Task(TaskKind.REMEMBER, start, on_error=on_error), None,
            reservation=slot,
        )

    def _submit_remember(self, jtask: JournalTask, slot: Reservation | None = None) -> None:
        def start() -> Generator[Wait, None, list[str]]:
            ids = yield from self._remember_through_outages(jtask)
            yield from self._embed(ids)  # after the write: a remember never waits for it
            if self.config.auto_compress:
                self._system._scheduler.request_slice(self.agent_id)
            return ids

        attempts = 0  # failed segmentations of this remember

        def on_error(exc: BaseException) -> float | None:
            """Segmentation failed: back to the tail after a backoff delay, up to max_retries
            times (SPEC §5.1); any other failure, or too many: kept in the journal as failed,
            and said so in the log."""
            nonlocal attempts
            self._rememberer.unanswered.pop(jtask.id, None)  # the task ends in this session
            if isinstance(exc, EndpointUnavailable | StoreLockedError) and self.endpoint:
                # Nothing to mark: the journal entry stays pending on the server. Closing, or
                # after the lease was lost, the next initialize() of the agent, in whichever
                # process, runs it (an accepted remember is never dropped, SPEC §8).
                log.warning(
                    "memory_rdf: agent %r: a remember could not be stored (%s); it stays "
                    "pending in the journal on the endpoint and runs at the agent's next "
                    "initialize()", self.agent_id, exc)
                return None
            total = 1 + self.config.max_retries
            if isinstance(exc, SegmentationFailed):
                attempts += 1
                if attempts <= self.config.max_retries:
                    delay = backoff_delay(self.config, attempts)
                    self._rememberer.stats.retries += 1
                    log_failed_attempt(
                        "segment", str(exc),
                        f"attempt {attempts} of {total}, retrying in {delay:.1f} s; "
                        "recalls wait behind this remember",
                    )
                    return delay
                log_failed_attempt("segment", str(exc), f"attempt {total} of {total}, giving up")
            jtask.attempts = max(attempts, 1)
            try:
                self._journal.mark_failed(jtask, f"{type(exc).__name__}: {exc}")
            except MemoryRDFError as unmarked:
                log.warning(
                    "memory_rdf: agent %r: a remember failed (%s) and could not be marked "
                    "failed (%s); it stays pending in the journal and runs at the next "
                    "initialize()", self.agent_id, exc, unmarked)
                return None
            log.warning(
                "memory_rdf: agent %r: a remember failed and is kept as a failed task (see "
                "stats()['failed_tasks']; requeue it with retry_failed() or "
                "`memory-rdf tasks %s --retry`): %s",
                self.agent_id, self.agent_id, exc,
            )
            return None

        # No room check here: remember() reserved the slot before its journal write; resumed
        # and retried tasks were accepted before.
        self._system._scheduler.submit(
            self.agent_id, Task(TaskKind.REMEMBER, start, on_error=on_error), None,
            reservation=slot,
        )

    def _remember_through_outages(self, jtask: JournalTask) -> Generator[Wait, None,
                                                                          list[str]]:
        """The remember run; a write its SPARQL endpoint did not answer is settled after a
        backoff, in the task's place: the agent's later tasks wait behind it (SPEC §5.3), and
        it is tried until the server is back or the agent closes (SPEC §8: an accepted
        remember is never dropped). Closing, the outage ends the task (``on_error``)."""
        outages = 0
        while True:
            try:
                ids = self._rememberer.settle_unanswered(jtask) if outages else None
                if ids is None:
                    ids = yield from self._rememberer.run(jtask)
                return ids
            except EndpointUnavailable as exc:
                if self.closed:
                    raise
                outages += 1
                delay = max(backoff_delay(self.config, outages), 0.1)
                log.warning(
                    "memory_rdf: agent %r: a remember could not be stored (%s); it stays "
                    "journalled and queued, trying again in %.1f s", self.agent_id, exc, delay)
                yield Backoff(delay)
            except StoreError as exc:
                # The disk refused the write (full): the remember keeps its place and is
                # tried until there is room again, counted in stats()["pending_tasks"] and
                # keeping wait_idle() False meanwhile (issue 33 F6).
                if self.closed or self.endpoint is not None or not disk_refused(exc):
                    raise
                outages += 1
                delay = max(backoff_delay(self.config, outages), 0.1)
                log.warning(
                    "memory_rdf: agent %r: a remember could not be written to disk (%s); it "
                    "stays journalled and queued, trying again in %.1f s",
                    self.agent_id, exc, delay)
                yield Backoff(delay)

    def _embed(self, ids: Sequence[str]) -> Generator[Wait, None, None]:
        """Vectors for ``ids`` and for nodes still without one (SPEC §5.7), made off the
        scheduler thread; a failure (embedder or store) leaves them missing, filled later."""
        if self._vectors is None:
            return
        try:
            yield from self._vectors.embed_nodes(ids)
        except Exception as exc:  # the remember is written: nothing here may fail it
            log.warning("memory_rdf: agent %r: vectors not written (%s: %s); they are made "
                        "later", self.agent_id, type(exc).__name__, exc)

    # -- recall --------------------------------------------------------------------------------

    def recall(
        self,
        keywords: Sequence[str],
        relations: Sequence[str] | None = None,
        depth: int | None = None,
        timeout: float | None = None,
        entry: str = "both",
        *,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        limit: int | None = None,
        max_chars: int | None = None,
        query: str | None = None,
    ) -> str:
        """Recall memories that match ``keywords`` (SPEC §5.4, §5.5, §5.6, §5.7).

        ``entry="both"`` (default) starts from the focus and from the nodes whose index terms
        best match the keywords (BM25 over ``memory:term``; with ``Config(keyword_index=False)``
        the focus alone); ``"focus"`` walks from the focus only (SPEC §5.4's original walk);
        ``"keywords"`` from the keyword entry only. A keyword matches a node by its words
        (English by stem: "budgets" finds "budget"; Chinese as a substring); stop words such as
        "in" or "的" are left out unless every keyword is one. The nodes reached that match are
        ranked by relevance (more of the keywords, rarer ones, ones among the node's own
        keywords, a stronger path; with one keyword or none, the walk's best-first order); of
        two that match alike, the one said later comes first. Each entry is dated (the day its
        content was said) and written in its content's language (``Config.language``). The
        text is at most ``limit`` entries (None: ``Config.max_search_results``; 0 =
        unlimited) within ``max_chars`` characters (None: ``Config.recall_max_chars``; 0 =
        unlimited), the first entry always whole. ``since`` / ``until`` (a ``datetime`` or an
        ISO 8601 string, naive = UTC) keep only results said (``memory:saidAt``) or, without a
        said time, created in ``[since, until)``; nodes outside the range are still walked
        through. Blocks until the agent's earlier tasks ran (per-agent FIFO: also behind a
        remember still waiting on the small model) and returns plain text.

        With an embedder (``MemoryManager(..., embedder=...)``, SPEC §5.7), ``"semantic"``
        starts from the nodes nearest the query's meaning — ``query`` (the caller's question
        as text) when given, else the keywords joined — and ``"both"`` fuses the focus, the
        keyword entry and the semantic entry; a node close enough in meaning matches even
        without a shared word, and its similarity is part of its rank. If the embedder fails,
        the lexical entries answer (logged once).

        Raises:
            TypeError, ValueError: bad arguments (keywords, relations, depth, entry, since,
                until, limit, max_chars, timeout; nothing is queued); more than
                ``RECALL_KEYWORDS_MAX`` (1,000) keywords or ``RECALL_RELATIONS_MAX`` (1,000)
                relations, or more than ``RECALL_CHARS_MAX`` (20,000) characters of them.
            TimeoutError: no result within ``timeout`` seconds (the message says what the
                recall was waiting behind).
            QueueFullError, MemoryClosedError: see :class:`MemoryManager`.
        """
        args = recall_args(self.config, keywords, relations, depth, entry, limit, max_chars)
        text = query_text(keywords, query, args[3], self.embedder)
        window = _window(since, until)
        seconds = check_timeout(timeout, zero=True)
        self._check_open()
        # The query's vector is made here, in the caller's thread (never the scheduler's).
        started = time.monotonic()
        qvec = None
        if text is not None and self._vectors is not None:
            qvec = self._vectors.query_vector(
                text, QUERY_WAIT if seconds is None else min(QUERY_WAIT, seconds))
        if seconds is not None:
            seconds = max(seconds - (time.monotonic() - started), 0.0)
        if seconds is None:
            # An idle agent's recall runs in the calling thread (same order as queued).
            inline: Future[str] = Future()
            if self._system._scheduler.run_inline(self.agent_id, self._recall_task(
                    args, window, inline, qvec)):
                return inline.result()
        return self._result(self._submit_recall(args, window, None, qvec), seconds, "recall")

    def _result(self, future: Future[T], timeout: float | None, what: str) -> T:
        """Wait for a queued task's result; on timeout, cancel it and say what it waited for."""
        try:
            return future.result(timeout)
        except FutureTimeout:
            future.cancel()
            raise TimeoutError(
                f"{what} on agent {self.agent_id!r} timed out{self._waiting_behind()}"
            ) from None

    def _expire(self, future: Future[T], seconds: float, what: str) -> None:
        """Fail ``future`` with ``TimeoutError`` after ``seconds`` unless it is done by then
        (the scheduler drops a task whose future is done before it starts)."""

        def expire() -> None:
            if not future.done():
                with contextlib.suppress(InvalidStateError):
                    future.set_exception(TimeoutError(
                        f"{what} on agent {self.agent_id!r} timed out{self._waiting_behind()}"
                    ))

        timer = threading.Timer(seconds, expire)
        timer.daemon = True
        timer.start()
        future.add_done_callback(lambda _: timer.cancel())

    def _waiting_behind(self) -> str:
        """Why a task of this agent may be waiting: a store that cannot be reached (a SPARQL
        endpoint away), remembers stuck on the small model."""
        store = self._store
        outage = store.outage() if store is not None else None
        if outage is not None:
            return f": {outage}; the agent's work waits for it (SPEC §8)"
        waiting = self._system._scheduler.remembers_waiting(self.agent_id)
        if not waiting:
            return ""
        last = self._rememberer.stats.last_error if self._initialized else ""
        return (
            f" behind {waiting} remember(s) still waiting on the small model"
            + (f" (last error: {last})" if last else "")
        )

    def recall_async(
        self,
        keywords: Sequence[str],
        relations: Sequence[str] | None = None,
        depth: int | None = None,
        timeout: float | None = None,
        entry: str = "both",
        *,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        limit: int | None = None,
        max_chars: int | None = None,
        query: str | None = None,
    ) -> Future[str]:
        """:meth:`recall` without blocking: a future of its text (same arguments; bad ones
        raise at the call). With ``timeout``, the future fails with ``TimeoutError`` when the
        recall has not finished by then (and the recall is dropped if it has not started).
        The query's vector (semantic entry) is made in a model-call thread."""
        args = recall_args(self.config, keywords, relations, depth, entry, limit, max_chars)
        text = query_text(keywords, query, args[3], self.embedder)
        window = _window(since, until)
        seconds = check_timeout(timeout, zero=True)
        self._check_open()
        return self._submit_recall(args, window, seconds, text=text)

    def _submit_recall(
        self, args: RecallArgs,
        window: Window | None, seconds: float | None, qvec: Any = None, *,
        text: str | None = None,
    ) -> Future[str]:
        """Queue a checked recall; with ``seconds`` its future fails with TimeoutError then.
        ``text``: the query whose vector the task makes first (off the scheduler thread)."""
        future: Future[str] = Future()
        if seconds is not None:
            self._expire(future, seconds, "recall")
        self._system._scheduler.submit(
            self.agent_id, self._recall_task(args, window, future, qvec, text=text),
            self.config.max_queue_size
        )
        return future

    def _recall_task(
        self, args: RecallArgs,
        window: Window | None, future: Future[str], qvec: Any = None, *,
        text: str | None = None,
    ) -> Task:
        def start() -> Generator[Wait, None, str]:
            vector = qvec
            if text is not None and self._vectors is not None:
                call = AwaitCall(self._vectors.query_call(text))
                yield call
                vector = call.result()
            return self._recall_now(*args, window=window, qvec=vector)

        return Task(TaskKind.RECALL, start, future=future)

    async def arecall(
        self,
        keywords: Sequence[str],
        relations: Sequence[str] | None = None,
        depth: int | None = None,
        timeout: float | None = None,
        entry: str = "both",
        *,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        limit: int | None = None,
        max_chars: int | None = None,
        query: str | None = None,
    ) -> str:
        """:meth:`recall` for asyncio code (same arguments, same errors; a timeout raises
        :class:`TimeoutError`)."""
        timeout = check_timeout(timeout, zero=True)
        future = self.recall_async(
            keywords, relations, depth, entry=entry, since=since, until=until,
            limit=limit, max_chars=max_chars, query=query,
        )
        return await asyncio.wait_for(asyncio.wrap_future(future), timeout)

    def _recall_now(
        self,
        keywords: list[str],
        relations: list[str] | None,
        depth: int,
        entry: str,
        limit: int,
        max_chars: int | None,
        *,
        window: Window | None = None,
        qvec: Any = None,
    ) -> str:
        """Seed the walk (SPEC §5.4 step 2, §5.5, §5.7: :meth:`Seeder.seeds
        <memory_rdf._seeding.Seeder.seeds>`), run it, rank and cut the results (§5.4 v2)."""
        self._check_open()
        keywords = significant_keywords(keywords)  # SPEC §5.4 v3 rule 4: stop words left out
        start = self._seeder.seeds(keywords, entry, qvec)
        return self._searcher.recall(
            start.seeds, keywords, relations, depth, limit, max_chars, weights=start.weights,
            window=window, similar=start.similar, similarity=start.similarity,
        )

    # -- listing and forgetting on request (SPEC §5.6) -------------------------------------------

    def memories(
        self,
        keywords: Sequence[str] | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        limit: int | None = 100,
        offset: int = 0,
        *,
        timeout: float | None = None,
    ) -> list[dict[str, Any]]:
        """The agent's memories, newest first (SPEC §5.6).

        Each is a dict: ``id``, ``content``, ``phrase``, ``keywords`` (sorted), ``created_at``
        and ``said_at`` (aware UTC ``datetime``; ``said_at`` is None when the messages carried
        no timestamp), ``scan_count``, ``original_length``, ``importance`` (the sum of its
        live links' strengths, SPEC §5.2), ``in_focus`` and ``pinned`` (SPEC §5.6 v3).
        "Newest" is the said time where known, else the creation time. ``keywords`` keeps the
        nodes that match one of them as recall matches (SPEC §5.4 v3 rule 4: an English keyword
        by the stem of a word of the content or of a keyword, a Chinese one as a substring; stop
        words left out unless every keyword is one);
        ``since`` / ``until`` (``datetime`` or ISO 8601 string, naive = UTC) keep those said
        or created in ``[since, until)``; ``limit`` (None = all) and ``offset`` page.
        Runs after the agent's earlier tasks (per-agent FIFO), so it sees earlier remembers.

        >>> import tempfile
        >>> with MemoryManager("doc", data_dir=tempfile.mkdtemp()) as mem:
        ...     mem.remember([{"role": "user", "content": "My cat is called Miso",
        ...                    "timestamp": "2024-05-01T09:30:00Z"}])
        ...     [(m["content"], m["said_at"].isoformat()) for m in mem.memories(["cat"])]
        [('user: My cat is called Miso', '2024-05-01T09:30:00+00:00')]

        Raises:
            TypeError, ValueError: bad arguments (nothing is queued).
            TimeoutError: not done within ``timeout`` seconds.
            QueueFullError, MemoryClosedError: see :class:`MemoryManager`.
        """
        kws = None if keywords is None else recall_args(
            self.config, keywords, None, 0, "focus")[0]
        window = _window(since, until)
        timeout = check_timeout(timeout, zero=True)
        limit, offset = check_page(limit, offset)
        self._check_open()

        def start() -> Generator[Backoff, None, list[dict[str, Any]]]:
            return self._listing.page(kws or None, window, limit, offset)
            yield  # pragma: no cover  (makes this a generator)

        future: Future[list[dict[str, Any]]] = Future()
        self._system._scheduler.submit(
            self.agent_id, Task(TaskKind.MEMORIES, start, future=future), self.config.max_queue_size
        )
        return self._result(future, timeout, "memories")

    def forget(
        self, ids: Sequence[str], purge: bool = False, *, timeout: float | None = None
    ) -> int:
        """Forget the given memories on request; returns how many were forgotten (SPEC §5.6).

        Each node goes exactly as compression forgets it (SPEC §5.2): its triples and the
        links out of it; links *into* it from other nodes stay (unless ``purge``), dangling,
        so the agent still knows it once knew something, but nothing of the text. A forgotten
        node leaves the focus. Unknown ids (never existed, or already forgotten) are ignored
        and not counted; ids are compared in any case (they are hex).
        Queued behind the agent's earlier tasks (per-agent FIFO), so a remember made before
        is there to forget.

        A pinned memory is forgotten too: an explicit request wins over :meth:`pin`.

        ``purge=True`` leaves no trace: the links *into* the forgotten nodes go as well (their
        resources and shortcut triples), so no recall tells of a memory it once had (SPEC
        §5.6 v3); and it erases the bytes: when ``forget`` returns, the forgotten texts
        are in no file of the agent's store directory and in no journalled remember task
        (the store is rewritten into a fresh directory and swapped in; RocksDB keeps deleted
        values in its files and logs until then, and Oxigraph never deletes a string from
        its dictionary). That costs a copy of the whole store: use it for erasure requests,
        not routinely. On a SPARQL endpoint (SPEC §8) the triples and the journal's copies go
        the same way, but what stays in the server's own files is up to the server.

        Raises:
            TypeError, ValueError: ``ids`` is not a list of node id strings (one is not 32
                hex digits, the form of every id this library makes), or ``purge`` not a bool
                (nothing is queued).
            TimeoutError: not done within ``timeout`` seconds.
            QueueFullError, MemoryClosedError: see :class:`MemoryManager`.
        """
        wanted = node_ids(ids)
        check_bool("purge", purge)
        timeout = check_timeout(timeout, zero=True)
        self._check_open()

        accepted_by = self._journal.last_seq  # remembers accepted before this forget

        def start() -> Generator[Backoff, None, int]:
            return self._forget_now(wanted, purge, accepted_by)
            yield  # pragma: no cover  (makes this a generator)

        future: Future[int] = Future()
        self._system._scheduler.submit(
            self.agent_id, Task(TaskKind.FORGET, start, future=future), self.config.max_queue_size
        )
        return self._result(future, timeout, "forget")

    def _forget_now(self, ids: list[str], purge: bool, accepted_by: int | None = None) -> int:
        store = self._check_open()
        found = self._nodes.existing(ids)
        if found:
            batch = WriteBatch()
            for nid in found:
                forget_ops(batch, nid)
                batch.delete([triple(V.FOCUS, V.MEMBER, node_ref(nid))])
            if purge:
                self._links.cut_incoming(batch, list(found))  # no trace (SPEC §5.6 v3)
                self._journal.cut_texts(batch, list(found.values()), accepted_by)
            batch.after_commit(self._compressor.recount)
            if self._vectors is not None:
                vectors = self._vectors
                erased = vectors.forget_with(batch, list(found))  # vectors holding their text
                batch.after_commit(lambda: vectors.forgotten(list(found), erased))
            store.commit(batch)
        if purge and store.local is not None:  # an endpoint's files are the server's
            store.local.rewrite()
        return len(found)

    def pin(self, ids: Sequence[str], *, timeout: float | None = None) -> int:
        """Keep these memories from fading; returns how many became pinned (SPEC §5.6 v3).

        A pinned memory is protected like a focus node: compression never shortens or
        forgets it, the fixed pool (``max_nodes``) never evicts it, links out of it do not
        decay, and every recall starts from it (at path strength 1.0, after the focus).
        ``memories()`` says ``pinned``. An explicit :meth:`forget` still removes it (a
        request to be forgotten wins). Unknown ids and ids already pinned are ignored and
        not counted; ids as :meth:`forget` takes them. Queued behind the agent's earlier
        tasks (per-agent FIFO), so a remember made before is there to pin.

        >>> import tempfile
        >>> with MemoryManager("doc", data_dir=tempfile.mkdtemp()) as mem:
        ...     mem.remember([{"role": "user", "content": "Hi, I'm Priya"}])
        ...     ids = [m["id"] for m in mem.memories(["Priya"])]
        ...     mem.pin(ids), mem.pin(ids), [m["pinned"] for m in mem.memories(["Priya"])]
        (1, 0, [True])

        Raises:
            TypeError, ValueError: ``ids`` is not a list of node id strings (nothing is
                queued).
            TimeoutError: not done within ``timeout`` seconds.
            QueueFullError, MemoryClosedError: see :class:`MemoryManager`.
        """
        return self._set_pinned(ids, True, timeout)

    def unpin(self, ids: Sequence[str], *, timeout: float | None = None) -> int:
        """Let pinned memories fade again; returns how many were pinned (SPEC §5.6 v3).
        From then on they are scanned, decay and may be forgotten like any other memory.
        Arguments, queueing and errors as :meth:`pin`."""
        return self._set_pinned(ids, False, timeout)

    def _set_pinned(self, ids: Sequence[str], pinned: bool, timeout: float | None) -> int:
        wanted = node_ids(ids)
        timeout = check_timeout(timeout, zero=True)
        self._check_open()

        def start() -> Generator[Backoff, None, int]:
            return self._pin_now(wanted, pinned)
            yield  # pragma: no cover  (makes this a generator)

        future: Future[int] = Future()
        self._system._scheduler.submit(
            self.agent_id, Task(TaskKind.PIN, start, future=future), self.config.max_queue_size
        )
        return self._result(future, timeout, "pin" if pinned else "unpin")

    def _pin_now(self, ids: list[str], pinned: bool) -> int:
        store = self._check_open()
        already = set(self._nodes.pinned())
        if pinned:
            changed = [nid for nid in self._nodes.existing(ids) if nid not in already]
        else:
            changed = [nid for nid in ids if nid in already]
        if changed:
            batch = WriteBatch()
            self._nodes.set_pinned(batch, changed, pinned)
            store.commit(batch)
        return len(changed)

    # -- compression ---------------------------------------------------------------------------

    def _make_auto_slice(self) -> Generator[Wait, None, dict[str, Any]]:
        """An automatic compression slice (the scheduler's callback). While the store's read
        mirror is being built it waits first, as a backoff does: other agents' work and this
        agent's user calls go on (user work abandons the wait and queues the slice again), and
        the build has the CPUs and few updates to replay. (A renewal at 100k nodes beside
        continuous compression took ~150 s, with reads on disk and the scans at half speed,
        instead of ~50 s; benchmarks/PROFILE.md, seventh pass.)"""
        store, wait = self._store.local if self._store is not None else None, MIRROR_WAIT
        while store is not None and store.mirror_building:
            yield Backoff(wait)
            wait = min(2 * wait, MIRROR_WAIT_MAX)
        return (yield from self._slice_and_vectors())

    def _slice_and_vectors(self) -> Generator[Wait, None, dict[str, Any]]:
        """A compression slice, then vectors for the nodes it rewrote and for nodes still
        without one (SPEC §5.7)."""
        report = yield from self._compressor.run_slice()
        yield from self._embed(())
        return report

    def run_compression_slice(self, timeout: float | None = None) -> dict[str, Any]:
        """Run one compression slice for this agent now (after its queued tasks) and report it:
        scanned, compressed, forgotten, links_removed, model_calls, preempted, elapsed_ms.

        Raises:
            MemoryClosedError: the manager is closed, or not initialized yet.
            concurrent.futures.TimeoutError: the slice did not finish within ``timeout`` s.
            ModelError: the small model failed on a node and its fallback could not help.
        """
        timeout = check_timeout(timeout, zero=True)
        self._check_open()
        future: Future[dict[str, Any]] = Future()
        self._system._scheduler.submit(
            self.agent_id,
            # Asked for, it runs at once: only automatic slices wait for a mirror's build.
            Task(TaskKind.SLICE, self._slice_and_vectors, future=future, counted=False),
            None,
        )
        return future.result(timeout)

    def fill_vectors(self, timeout: float | None = None) -> int:
        """Make now the vectors still missing (SPEC §5.7: ``stats()["vectors_missing"]``) and
        return how many were written; 0 without an embedder. They are otherwise made a batch
        at a time by the next remember and after each compression slice, so a store that is
        only recalled — built before it had an embedder, opened with another model, or left
        behind while the embedder was down — needs this to be found by meaning. Runs after
        the agent's queued tasks, a batch per task (other agents' work goes on between); stops
        early when the embedder fails (logged once; what is left stays counted).

        Raises:
            MemoryClosedError: the manager is closed, or not initialized yet.
            concurrent.futures.TimeoutError: not done within ``timeout`` s (what was written
                stays).
        """
        timeout = check_timeout(timeout, zero=True)
        self._check_open()
        vectors = self._vectors
        if vectors is None:
            return 0
        deadline = None if timeout is None else time.monotonic() + timeout
        total = 0
        while True:
            future: Future[int] = Future()
            self._system._scheduler.submit(self.agent_id, Task(
                TaskKind.SLICE, lambda: vectors.embed_nodes(()), future=future, counted=False),
                None)
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            written = future.result(left)
            total += written
            if not written or not vectors.missing:
                return total

    # -- waiting, inspection -------------------------------------------------------------------

    def wait_idle(self, timeout: float | None = None) -> bool:
        """True once no task of this agent (compression included) is queued or running;
        False if ``timeout`` s passed first. An automatic compression slice waits while the
        read mirror is being built, so right after a large store opens this can take as long
        as the build.

        Raises:
            MemoryClosedError: the manager is closed, or not initialized yet.
        """
        timeout = check_timeout(timeout, zero=True)
        self._check_open()
        return self._system._scheduler.wait_idle(self.agent_id, timeout)

    def sparql(
        self, query: str, *, timeout: float | None = SPARQL_TIMEOUT,
        limit: int | None = SPARQL_LIMIT,
    ) -> list[dict[str, Any]] | bool | list[tuple[Any, Any, Any]]:
        """Read-only SPARQL over the memory graph (SPEC §6). The §2 prefixes are predeclared.

        SELECT → list of dicts; ASK → bool; CONSTRUCT/DESCRIBE → list of triples. At most
        ``limit`` rows (default 100,000; None: no limit) within ``timeout`` seconds (default
        30; None: no limit). Rows are checked as they come; an aggregate or ORDER BY is
        computed before the first row and cannot be interrupted: past the timeout the call
        returns with :class:`QueryTimeoutError` while the engine finishes it in the
        background (README, "Limits on hostile input"). Runs in the calling thread, not
        the agent's queue.

        Raises:
            SparqlError: the query does not parse.
            UpdateRefusedError: the query is a SPARQL Update.
            QueryRefusedError: ``SERVICE``, ``LOAD`` or a ``file:`` IRI (the query would
                reach outside the store), or a query beyond the size limits.
            QueryTimeoutError: no answer within ``timeout`` (also a ``TimeoutError``).
            QueryLimitError: more than ``limit`` rows.
            InvalidTypeError, InvalidInputError: ``query`` is not a str; a bad ``timeout``
                or ``limit``.
            MemoryClosedError: the manager is closed, or not initialized yet.
        """
        seconds = check_timeout(timeout)
        rows = check_limit(limit)
        return self._check_open().user_query(query, timeout=seconds, limit=rows)

    def stats(self) -> dict[str, Any]:
        """Counts of this agent: ``nodes``, ``links``, ``dangling_links``, ``focus`` (ids,
        newest first), ``pending_tasks``, ``failed_tasks``, the ``model_*`` call counters of
        this process, ``store_path``, ``recall_queue_wait_ms``, ``read_mirror`` (the read
        mirror's state: "on", "loading", "off", "too large" or "failed") and
        ``read_mirror_renewals``, among others.

        Raises:
            MemoryClosedError: the manager is closed, or not initialized yet.
        """
        store = self._check_open()
        local = store.local
        links, dangling = self._links.counts()
        calls = CallStats()
        calls.add(self._rememberer.stats)
        calls.add(self._compressor.stats)
        return {
            "agent_id": self.agent_id,
            "store_path": str(self.path.resolve()) if self.endpoint is None else store.location,
            "nodes": self._nodes.count(),
            "links": links,
            "dangling_links": dangling,
            "focus": self._focus.ids(),
            "pinned": len(self._nodes.pinned()),
            "pending_tasks": self._system._scheduler.pending(self.agent_id),
            "failed_tasks": self._journal.count("failed"),
            "model_calls": calls.calls,
            "model_failures": calls.failures,
            "model_retries": calls.retries,
            "model_last_error": calls.last_error,
            "model_requests": calls.requests,
            "model_prompt_tokens": calls.prompt_tokens,
            "model_completion_tokens": calls.completion_tokens,
            "store_read_only": store.read_only,
            "recall_queue_wait_ms": _wait_summary(
                self._system._scheduler.recall_waits(self.agent_id)),
            "read_mirror": local.mirror_state if local is not None else "off",
            "read_mirror_renewals": local.mirror_renewals if local is not None else 0,
            **(self._vectors.stats() if self._vectors is not None else {}),
        }

    def pending_remembers(self) -> int:
        """Remembers journalled and not yet processed (those resumed at start included).

        Raises :class:`~memory_rdf.MemoryClosedError` when the manager is closed or not
        initialized.
        """
        self._check_open()
        return self._journal.count("pending")

    def failed_tasks(self) -> list[dict[str, Any]]:
        """Remembers whose segmentation kept failing: ``id``, ``text``, ``attempts``, ``error``,
        ``accepted_at``. Raises :class:`~memory_rdf.MemoryClosedError` when closed."""
        self._check_open()
        return [
            {"id": t.id, "text": t.text, "attempts": t.attempts, "error": t.error,
             "accepted_at": t.accepted_at}
            for t in self._journal.tasks("failed")
        ]

    def retry_failed(self) -> int:
        """Queue every failed remember again; returns how many. Raises
        :class:`~memory_rdf.MemoryClosedError` when closed."""
        self._check_open()
        tasks = self._journal.tasks("failed")
        for t in tasks:
            self._journal.requeue(t)
            self._submit_remember(t)
        return len(tasks)

    def discard_failed(self) -> int:
        """Drop every failed remember from the journal; returns how many. Raises
        :class:`~memory_rdf.MemoryClosedError` when closed."""
        self._check_open()
        tasks = self._journal.tasks("failed")
        for t in tasks:
            self._journal.discard(t.id)
        return len(tasks)


def _wait_summary(waits: Sequence[float]) -> dict[str, float | int]:
    """p50 / p95 / max (ms) of recent recall queue waits, and how many there were."""
    if not waits:
        return {"n": 0}
    ordered = sorted(waits)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 3)

    return {"n": len(ordered), "p50": at(0.5), "p95": at(0.95), "max": at(1.0)}
