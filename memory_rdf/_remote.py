"""An agent's memory on a SPARQL 1.1 server (SPEC §8): the endpoint store beside the embedded one.

:class:`SparqlEndpoint` is the connection (httpx keep-alive pool, auth, headers, timeout) that
many agents of a process share; :class:`RemoteStore` is one agent's :class:`MemoryStore` on
it. The agent's memory network is the named graph ``<…/agent/{id}>``, its journal and metadata
``<…/agent/{id}/journal>`` and ``<…/agent/{id}/meta>``. Queries name that dataset with the
protocol's ``default-graph-uri``/``named-graph-uri``; each :class:`WriteBatch` is one Update
POST with GRAPH-wrapped data. Only standard SPARQL 1.1 is sent (the ``*_std.rq`` forms stand
in for ``LATERAL``). Connection errors, timeouts and 5xx answers are retried with backoff
(``max_retries``); 4xx answers are errors saying what to fix. One writer per agent: a lease in
the metadata graph (holder, expiry), renewed by a thread and released on close.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, BinaryIO, TypeVar
from urllib.parse import urlsplit

import tenacity

from memory_rdf import _vocab as V
from memory_rdf._exceptions import (
    InvalidInputError,
    InvalidTypeError,
    MemoryRDFError,
    QueryLimitError,
    QueryTimeoutError,
    SparqlError,
    StoreError,
    StoreLockedError,
    StoreUnavailableError,
)
from memory_rdf._headers import check_header, split_userinfo
from memory_rdf._oxigraph import (
    Graphs,
    MemoryStore,
    Row,
    Term,
    UserResult,
    WriteBatch,
    check_row_limit,
    iri_ref,
    lit,
    parse_ntriples,
    python_from_json,
    render,
    reserialize,
    run_bounded,
    sparql_syntax_error,
    term_from_json,
)
from memory_rdf._query_guard import (
    check_seconds,
    check_user_query,
    constructs,
    keywords,
    query_form,
)

if TYPE_CHECKING:  # httpx is imported when an endpoint is made, not with the package
    import httpx

__all__ = ["EndpointUnavailable", "RemoteStore", "SparqlEndpoint", "agent_graphs",
           "may_have_reached", "open_remote_for_inspection", "remote_agent_exists",
           "remote_agents", "wipe_remote_agent"]

T = TypeVar("T")

log = logging.getLogger("memory_rdf")

AGENT = "https://w3id.org/memory-rdf/agent/"
LEASE = "https://w3id.org/memory-rdf/lease"
_SELECT_JSON = "application/sparql-results+json"
_FORMATS = {
    "json": _SELECT_JSON,
    "csv": "text/csv",
    "tsv": "text/tab-separated-values",
    "xml": "application/sparql-results+xml",
}
_PREFIXES = "".join(f"PREFIX {p}: <{iri}>\n" for p, iri in V.PREFIXES.items())
_PREFIX_LINES = len(V.PREFIXES)
_POSITION = re.compile(r"error at (\d+):(\d+)")


def agent_graphs(agent_id: str) -> Graphs:
    """The graphs of ``agent_id`` on an endpoint (SPEC §8)."""
    return Graphs(
        memory=iri_ref(AGENT + agent_id),
        journal=iri_ref(f"{AGENT}{agent_id}/journal"),
        meta=iri_ref(f"{AGENT}{agent_id}/meta"),
        vectors=iri_ref(f"{AGENT}{agent_id}/vectors"),
    )


#: The endpoint did not answer (connection error, timeout, 5xx) within the retries and
#: ``Config.store_timeout``, or the agent is closing: nothing the request carried is known to be
#: stored, and it may heal by waiting, unlike a 4xx answer. The public
#: :class:`~memory_rdf.StoreUnavailableError` (SPEC §8 v3).
EndpointUnavailable = StoreUnavailableError


def _reached(exc: StoreUnavailableError, reached: bool) -> StoreUnavailableError:
    """``exc``, marked with whether one of its attempts may have reached the server (sent,
    then no answer in time, or a 5xx): the server may then still run the request, late. Only
    a refused or timed-out connection, at every attempt, is known to have sent nothing. Read
    by :func:`may_have_reached`."""
    exc._reached = reached  # type: ignore[attr-defined]
    return exc


def may_have_reached(exc: BaseException) -> bool:
    """Whether the request behind ``exc`` may still be run by the server (True unless it is
    known that no attempt was sent: see :func:`_reached`)."""
    return bool(getattr(exc, "_reached", True))


class _NotApplied(StoreError):
    """The endpoint answered an update as done, and a query does not show it."""


def _older(until: object, written: datetime) -> bool:
    """Whether the lease's expiry read back is older than the one just written (by more than
    a second: an engine may keep whole seconds): the write did not land. Unknown forms: no."""
    if not isinstance(until, datetime) or until.tzinfo is None:
        return False
    return until < written - timedelta(seconds=1)


class _Transient(Exception):
    """A 5xx answer: worth retrying."""

    def __init__(self, response: httpx.Response) -> None:
        super().__init__(f"{response.status_code} {response.reason_phrase}")
        self.response = response


def _check_url(name: str, url: object) -> str:
    if not isinstance(url, str):
        raise InvalidTypeError(f"{name} must be a str URL, got {type(url).__name__}")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise InvalidInputError(
            f"{name} must be an http:// or https:// URL of a SPARQL service, got {url!r} "
            "(e.g. http://localhost:7878/query for `oxigraph serve`)"
        )
    return url


class Retry:
    """Retries with exponential backoff (``max_retries``, ``retry_initial_delay``,
    ``retry_max_delay`` of the agent's Config) on connection errors, timeouts and 5xx, for at
    most ``timeout`` seconds a call (``Config.store_timeout``, SPEC §8 v3): no attempt starts
    or lasts past it. Every retry is logged at WARNING with the URL and the reason.

    :meth:`stop` ends the retrying at once (the agent is closing): the attempt in flight is
    the last, and a wait between attempts is cut short."""

    def __init__(self, max_retries: int, initial: float, maximum: float,
                 timeout: float = 30.0) -> None:
        import httpx

        self.attempts = max_retries + 1
        self.timeout = timeout
        self.stopped = threading.Event()
        self._transient = (httpx.TransportError, _Transient)
        #: Since when (monotonic) and why the server has not answered: set by a failed attempt,
        #: cleared by a call that got an answer (:meth:`outage`).
        self._failing: tuple[float, str] | None = None
        self._wait = tenacity.wait_exponential(multiplier=initial, min=initial, max=maximum)
        #: Per thread: the deadline of the call running (a call made inside an attempt, the
        #: lease's renewal before a write, keeps the outer one's), and the attempts of the
        #: last call, for :meth:`said`.
        self._local = threading.local()

    def _failed(self, exc: BaseException | None) -> None:
        if exc is None:
            return
        since = self._failing[0] if self._failing is not None else time.monotonic()
        self._failing = (since, _reason(exc))

    def outage(self) -> str | None:
        """How long and why the server has not answered, while it does not (else None)."""
        failing = self._failing
        if failing is None:
            return None
        since, why = failing
        return f"no answer for {time.monotonic() - since:.0f} s, last: {why}"

    def _pause(self, seconds: float) -> None:
        self.stopped.wait(seconds)

    def stop(self) -> None:
        self.stopped.set()

    def said(self) -> str:
        """How many attempts the last call of this thread made, and why it stopped, for an
        error message."""
        made = getattr(self._local, "made", self.attempts)
        count = f"{made} attempt{'s' if made != 1 else ''}"
        if self.stopped.is_set():
            return f"{count}, then no more: the agent is closing"
        took = getattr(self._local, "took", 0.0)
        if getattr(self._local, "out_of_time", False):
            return f"{count} in {took:.1f} s (Config.store_timeout={self.timeout:g})"
        return f"{count} in {took:.1f} s (Config.max_retries={self.attempts - 1})"

    def left(self) -> float:
        """Seconds left to the deadline of this thread's call (``timeout`` outside one)."""
        deadline = getattr(self._local, "deadline", None)
        if deadline is None:
            return self.timeout
        return max(deadline - time.monotonic(), 0.0)

    def call(self, fn: Callable[[float], T], url: str) -> T:
        """``fn(seconds)``, retried; ``seconds`` is how long its attempt may last."""
        outer = getattr(self._local, "deadline", None)
        started = time.monotonic()
        deadline = started + self.timeout
        if outer is not None:
            deadline = min(deadline, outer)
        # The last attempt gets at least this long: the wait before it is cut to fit, so a
        # call uses its store_timeout instead of giving up when the next backoff is too long.
        margin = min(1.0, self.timeout / 10)

        def wait(state: tenacity.RetryCallState) -> float:
            return min(self._wait(state), max(deadline - margin - time.monotonic(), 0.0))

        def retrying_soon(state: tenacity.RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome is not None else None
            self._failed(exc)
            log.warning(
                "memory_rdf: the SPARQL endpoint %s did not answer (%s); retrying in %.1f s "
                "(attempt %d of at most %d, for at most %g s: Config.store_timeout)", url,
                _reason(exc), state.upcoming_sleep, state.attempt_number + 1, self.attempts,
                self.timeout)

        retrying = tenacity.Retrying(
            stop=tenacity.stop_any(tenacity.stop_after_attempt(self.attempts),
                                   tenacity.stop_when_event_set(self.stopped),
                                   _StopAt(deadline, margin)),
            wait=wait,
            sleep=self._pause,
            retry=tenacity.retry_if_exception_type(self._transient),
            before_sleep=retrying_soon,
            reraise=True,
        )
        self._local.deadline = deadline
        try:
            result = retrying(lambda: fn(max(deadline - time.monotonic(), _SHORTEST_ATTEMPT)))
        except self._transient as exc:
            self._failed(exc)
            self._local.out_of_time = (
                retrying.statistics.get("attempt_number", 0) < self.attempts)
            raise
        finally:
            self._local.deadline = outer
            self._local.made = retrying.statistics.get("attempt_number", self.attempts)
            self._local.took = time.monotonic() - started
        self._failing = None
        return result


class _StopAt(tenacity.stop.stop_base):
    """No retry once less than ``margin`` seconds are left before ``deadline``
    (``time.monotonic()``)."""

    def __init__(self, deadline: float, margin: float) -> None:
        self.deadline = deadline
        self.margin = margin

    def __call__(self, retry_state: tenacity.RetryCallState) -> bool:
        return self.deadline - time.monotonic() < self.margin


#: The shortest time an attempt is given (seconds), even at the call's deadline.
_SHORTEST_ATTEMPT = 0.05


def _reason(exc: BaseException | None) -> str:
    """An attempt's failure in one short line, for the log and the error."""
    if exc is None:
        return "no answer"
    said = " ".join(str(exc).split())[:200] or "no answer"
    return f"{type(exc).__name__}: {said}"


class SparqlEndpoint:
    """A SPARQL 1.1 server holding agents' memories (SPEC §8), shared by the agents of a
    process: one keep-alive connection pool.

    Args:
        query_url: the SPARQL query service (``http://host:7878/query`` for ``oxigraph serve``).
        update_url: the SPARQL update service; defaults to ``query_url``.
        auth: ``(user, password)`` for HTTP basic auth, or a bearer token ``str``. A
            ``user:password@`` in the URLs is taken as basic auth instead and removed from
            the URLs kept (they appear in error messages and ``stats()``).
        headers: extra HTTP headers sent with every request.
        timeout: seconds allowed per HTTP request.
        lease_seconds: how long an agent's lease lasts without renewal (renewed every third
            of it while the agent is open); a killed process's agents are free after this.

    Raises:
        InvalidTypeError, InvalidInputError: an argument of the wrong type or value.

    Nothing is sent until an agent is opened on it (``MemoryManager(id, endpoint=ep)``).

    >>> ep = SparqlEndpoint("http://localhost:7878/query", update_url="http://localhost:7878/update")
    >>> ep.update_url
    'http://localhost:7878/update'
    >>> ep.close()
    """

    def __init__(
        self,
        query_url: str,
        update_url: str | None = None,
        auth: tuple[str, str] | str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float = 30.0,
        *,
        lease_seconds: float = 30.0,
    ) -> None:
        import httpx

        # Credentials written into a URL (http://user:password@host/…) become basic auth and
        # leave the URL: it is shown in every error, in stats() (an MCP tool's answer) and logs.
        self.query_url, in_query = split_userinfo(_check_url("query_url", query_url))
        self.update_url, in_update = split_userinfo(_check_url(
            "update_url", update_url if update_url is not None else query_url
        ))
        userinfo = {u for u in (in_query, in_update) if u is not None}
        if len(userinfo) > 1:
            raise InvalidInputError("query_url and update_url carry different credentials")
        if userinfo and auth is not None:
            raise InvalidInputError("give the credentials once: in auth= or in the URL, not both")
        if userinfo:
            auth = userinfo.pop()
        send: dict[str, str] = {}
        if headers is not None:
            if not isinstance(headers, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
            ):
                raise InvalidTypeError("headers must be a mapping of str to str")
            send.update(headers)
            for key, text in send.items():
                check_header(key, text)
        basic: httpx.BasicAuth | None = None
        if isinstance(auth, str):
            if not auth:
                raise InvalidInputError("auth: the bearer token is empty")
            send["Authorization"] = check_header(
                "Authorization", f"Bearer {auth}", "auth (the bearer token)")
        elif isinstance(auth, tuple):
            if len(auth) != 2 or not all(isinstance(a, str) for a in auth):
                raise InvalidTypeError("auth must be (user, password) of two str")
            basic = httpx.BasicAuth(auth[0], auth[1])
        elif auth is not None:
            raise InvalidTypeError(
                "auth must be (user, password), a bearer token str or None, got "
                f"{type(auth).__name__}"
            )
        self.timeout = check_seconds(timeout)
        self.lease_seconds = check_seconds(lease_seconds, "lease_seconds")
        self._client = httpx.Client(
            auth=basic, headers=send, timeout=self.timeout,
            limits=httpx.Limits(max_connections=32, max_keepalive_connections=16),
        )
        self.closed = False

    def __repr__(self) -> str:
        return f"SparqlEndpoint({self.query_url!r}, update_url={self.update_url!r})"

    def close(self) -> None:
        """Close the connection pool (close the agents using it first)."""
        self.closed = True
        self._client.close()

    def __enter__(self) -> SparqlEndpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def post(self, kind: str, url: str, data: dict[str, Any], accept: str,
             retry: Retry, cancel: threading.Event | None = None,
             before: Callable[[], None] | None = None) -> httpx.Response:
        """POST a form (``query=…`` or ``update=…`` plus dataset parameters), retrying
        transient failures; a 4xx answer is a :class:`StoreError` saying what to fix.
        ``before`` runs before every attempt (a write's lease check: the retries of one
        write can outlast the lease).

        With ``cancel`` (the user's queries) the answer is read in chunks: reading stops when
        ``cancel`` is set (the caller gave up) or past :data:`MAX_USER_ANSWER_BYTES`
        (:class:`QueryLimitError`), and the connection is closed, which stops the server."""
        import httpx

        if self.closed:
            raise StoreError(f"the SPARQL endpoint connection {self.query_url} is closed")

        reached = False  # whether an attempt may have reached the server (see _reached)

        def once(seconds: float) -> httpx.Response:
            nonlocal reached
            if before is not None:
                before()
            # No attempt lasts past the call's deadline (Config.store_timeout, SPEC §8 v3).
            limit = min(self.timeout, seconds)
            try:
                if cancel is None:
                    response = self._client.post(url, data=data, headers={"Accept": accept},
                                                 timeout=limit)
                else:
                    response = _read_bounded(self._client, url, data, accept, cancel, limit)
            except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout):
                raise  # no connection: nothing was sent
            except BaseException:
                reached = True
                raise
            if response.status_code >= 500:
                reached = True
                raise _Transient(response)
            return response

        try:
            response = retry.call(once, url)
        except _Transient as exc:
            raise _reached(EndpointUnavailable(
                f"the SPARQL endpoint {url} kept failing ({exc}) after {retry.said()}: "
                f"{_body(exc.response)}"
            ), reached) from exc
        except httpx.TimeoutException as exc:
            raise _reached(EndpointUnavailable(
                f"the SPARQL endpoint {url} did not answer, {retry.said()}; last: "
                f"{_reason(exc)} (SparqlEndpoint(timeout={self.timeout:g}) per request)"
            ), reached) from exc
        except httpx.TransportError as exc:
            raise _reached(EndpointUnavailable(
                f"cannot reach the SPARQL endpoint {url} ({retry.said()}): "
                f"{type(exc).__name__}: {exc or 'connection failed'}; is the server running?"
            ), reached) from exc
        if response.status_code >= 400:
            raise StoreError(_what_to_fix(kind, url, response))
        if not 200 <= response.status_code < 300:
            # A redirect (an HTTP→HTTPS move, a login proxy) is not followed: the POST would
            # not be sent again, and taken for success an update was silently dropped.
            target = split_userinfo(response.headers.get("location", "?"))[0]
            raise StoreError(
                f"the SPARQL endpoint {url} answered the {kind} with {response.status_code} "
                f"{response.reason_phrase} (to {target}), not an answer: redirects are not "
                "followed; give the URL of the SPARQL service itself"
            )
        return response


#: Largest answer to a user's query read from an endpoint (bytes). Before the bound, a cross
#: join of a 700-triple graph, answered as a stream, grew the process by ~100 MB/s after
#: its timeout had passed, until memory ran out.
MAX_USER_ANSWER_BYTES = 64 * 2**20


def _read_bounded(client: httpx.Client, url: str, data: dict[str, Any], accept: str,
                  cancel: threading.Event, timeout: float) -> httpx.Response:
    import httpx

    chunks: list[bytes] = []
    size = 0
    with client.stream("POST", url, data=data, headers={"Accept": accept},
                       timeout=timeout) as streamed:
        for chunk in streamed.iter_bytes():
            if cancel.is_set():
                raise QueryTimeoutError("the query's caller stopped waiting for its answer")
            size += len(chunk)
            if size > MAX_USER_ANSWER_BYTES:
                raise QueryLimitError(
                    f"the endpoint's answer is larger than {MAX_USER_ANSWER_BYTES // 2**20} MB; "
                    "add LIMIT to the query, or narrow it"
                )
            chunks.append(chunk)
        kept = [(k, v) for k, v in streamed.headers.multi_items()
                if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")]
        return httpx.Response(streamed.status_code, headers=kept, content=b"".join(chunks),
                              request=streamed.request)


def _boolean(answer: Any) -> bool:
    """An ASK answer in SPARQL JSON; Virtuoso 7 sends ``{"results": {"bindings":
    [{"__ask_retval": {"value": "1"}}]}}`` instead of ``{"boolean": true}``."""
    if "boolean" in answer:
        return bool(answer["boolean"])
    bindings = answer.get("results", {}).get("bindings", [])
    first: dict[str, Any] = next(iter(bindings[0].values()), {}) if bindings else {}
    return first.get("value") in ("1", "true")


def _results(answer: Any) -> tuple[list[str], list[dict[str, Any]]]:
    """The variables and bindings of a SPARQL JSON results document (TypeError when it is
    not one: read inside :meth:`RemoteStore._reading`)."""
    names = answer["head"]["vars"]
    bindings = answer["results"]["bindings"]
    if not isinstance(names, list) or not isinstance(bindings, list) or not all(
        isinstance(b, dict) for b in bindings
    ):
        raise TypeError("head.vars and results.bindings must be a list and a list of objects")
    return names, bindings


def _body(response: httpx.Response) -> str:
    text = response.text.strip().replace("\n", " ")
    return text[:300] + ("…" if len(text) > 300 else "")


def _what_to_fix(kind: str, url: str, response: httpx.Response) -> str:
    status = response.status_code
    head = f"the SPARQL endpoint {url} refused the {kind} ({status} {response.reason_phrase})"
    if status in (401, 403):
        fix = ("check the credentials: SparqlEndpoint(auth=(user, password)) for HTTP basic "
               "auth, auth='token' for a bearer token, and that the account may "
               + ("write" if kind == "update" else "read"))
    elif status == 404:
        fix = ("check the URL: query_url must be the SPARQL query service (e.g. "
               "http://host:7878/query for oxigraph serve) and update_url the update service "
               "(e.g. http://host:7878/update)")
    elif status in (405, 415) and kind == "update":
        fix = ("this URL does not take SPARQL updates: give the update service as update_url "
               "(e.g. http://host:7878/update), and check the server is not read-only")
    elif status in (405, 415):
        fix = "this URL does not take SPARQL queries by POST: check query_url"
    elif status == 400 and kind == "update":
        fix = ("the server did not accept this standard SPARQL 1.1 update; if this URL is the "
               "query service, give the update service as update_url (--update-url), e.g. "
               "http://host:7878/update")
    elif status == 413:
        fix = "the request is larger than the server accepts: raise its request size limit"
    else:
        fix = "the server did not accept this standard SPARQL 1.1 request"
    return f"{head}: {fix}. Server said: {_body(response)}"


# Keywords the user's query may not use on an endpoint (SPEC §8), read by the guard's tokenizer
# (outside strings, IRIs and comments; "?graph" and "memory:from" are names, not keywords).
_SCOPE_KEYWORDS = ("SERVICE", "FROM", "GRAPH")


#: The parse tree's nodes for them (:func:`memory_rdf._query_guard.constructs`).
_SCOPE_CONSTRUCTS = {"ServiceGraphPattern": "SERVICE", "DatasetClause": "FROM",
                     "GraphGraphPattern": "GRAPH"}


def refuse_dataset_escape(query: str) -> None:
    """SERVICE, FROM and GRAPH are refused in an endpoint agent's ``sparql()`` (SPEC §8): as
    keywords (the guard's tokenizer, every reading) and in the SPARQL 1.1 parse tree."""
    found = next((word for word in keywords(query) if word in _SCOPE_KEYWORDS), None)
    if found is None:
        tree = constructs(query)
        found = next((word for name, word in _SCOPE_CONSTRUCTS.items() if name in tree), None)
    if found:
        raise SparqlError(
            f"{found} is refused in sparql() on a SPARQL endpoint: a query sees "
            "the agent's memory graph and nothing else (SPEC §8); write the patterns without "
            "SERVICE, FROM or GRAPH"
        )


class RemoteStore(MemoryStore):
    """One agent's memory on a :class:`SparqlEndpoint` (SPEC §8).

    A writer (``read_only=False``) takes the agent's lease or raises
    :class:`StoreLockedError` naming the holder; ``read_only=True`` (inspection) takes none
    and refuses writes.
    """

    standard_only = True

    def __init__(
        self,
        endpoint: SparqlEndpoint,
        agent_id: str,
        *,
        read_only: bool = False,
        max_retries: int = 3,
        retry_initial_delay: float = 0.5,
        retry_max_delay: float = 10.0,
        store_timeout: float = 30.0,
    ) -> None:
        self.endpoint = endpoint
        self.agent_id = agent_id
        self.read_only = read_only
        self.graphs = agent_graphs(agent_id)
        self._retry = Retry(max_retries, retry_initial_delay, retry_max_delay, store_timeout)
        self._dataset = {
            "default-graph-uri": [AGENT + agent_id],
            "named-graph-uri": [f"{AGENT}{agent_id}/journal", f"{AGENT}{agent_id}/meta",
                                f"{AGENT}{agent_id}/vectors"],
        }
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._lease_lost: str | None = None
        self._lease_lock = threading.Lock()  # one taker at a time: the renewer or a commit
        self._held_until = 0.0  # time.monotonic() until which the lease is ours for sure
        self._expires = datetime.min.replace(tzinfo=UTC)  # the expiry we wrote, our clock
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        self._closed = False
        if not read_only:
            self._take_lease()
            self._renewer = threading.Thread(
                target=self._renew_loop, name=f"memory-rdf-lease-{agent_id}", daemon=True
            )
            self._renewer.start()

    @property
    def location(self) -> str:
        return f"{self.endpoint.query_url} graph <{AGENT}{self.agent_id}>"

    # -- requests ------------------------------------------------------------------------------

    def _query(self, query: str, accept: str,
               dataset: Mapping[str, list[str]] | None = None,
               cancel: threading.Event | None = None) -> httpx.Response:
        if self._closed:
            raise StoreError(f"the memory store {self.location} is closed")
        data: dict[str, Any] = {"query": _PREFIXES + query}
        data.update(self._dataset if dataset is None else dataset)
        return self.endpoint.post("query", self.endpoint.query_url, data, accept, self._retry,
                                  cancel)

    def _json(self, query: str, dataset: Mapping[str, list[str]] | None = None) -> Any:
        response = self._query(query, _SELECT_JSON, dataset)
        try:
            return response.json()
        except (ValueError, RecursionError) as exc:
            raise StoreError(
                f"the SPARQL endpoint {self.endpoint.query_url} did not answer with SPARQL JSON "
                f"results ({response.headers.get('content-type')}): {_body(response)}"
            ) from exc

    @contextlib.contextmanager
    def _reading(self) -> Iterator[None]:
        """Reading an answer: one of the wrong shape (a server that is not a SPARQL service,
        a proxy's page) is a :class:`StoreError`, not a KeyError or TypeError."""
        try:
            yield
        except MemoryRDFError:
            raise
        except (KeyError, TypeError, AttributeError, IndexError, ValueError,
                RecursionError) as exc:
            raise StoreError(
                f"the SPARQL endpoint {self.endpoint.query_url} did not answer with SPARQL "
                f"results ({type(exc).__name__}: {str(exc)[:200]}); is it a SPARQL service?"
            ) from exc

    def rows(self, query: str) -> list[Row]:
        answer = self._json(query)
        with self._reading():
            names, bindings = _results(answer)
            return [tuple(python_from_json(b.get(n)) for n in names) for b in bindings]

    def ask(self, query: str) -> bool:
        answer = self._json(query)
        with self._reading():
            return _boolean(answer)

    def commit(self, batch: WriteBatch) -> None:
        if not batch:
            return
        if self.read_only:
            raise StoreError(f"the memory store {self.location} is open read-only")
        # The lease is checked before every attempt, not once before the first: the retries
        # of one write outlast the lease (16 attempts, ~5 min, against 30 s), and a write sent
        # again once the server was back landed in an agent another process had taken
        # meanwhile, which had run the same journalled remember: stored twice.
        self._update(batch.text(self.graphs), fenced=True)
        batch.run_after_commit()

    def _update(self, text: str, *, fenced: bool = False) -> None:
        if self._closed:
            raise StoreError(f"the memory store {self.location} is closed")
        self.endpoint.post("update", self.endpoint.update_url, {"update": _PREFIXES + text},
                           "*/*", self._retry, before=self._fence if fenced else None)

    def quads(self, subject: str | None, predicate: str | None, obj: Term | None,
              graph: str | None) -> list[tuple[Any, Any, Any]]:
        bound = " ".join(
            f"VALUES ?{var} {{ {term} }}"
            for var, term in (("s", iri_ref(subject) if subject else None),
                              ("p", iri_ref(predicate) if predicate else None), ("o", obj))
            if term is not None
        )
        pattern = f"{bound} ?s ?p ?o ."
        if graph is not None:
            pattern = f"GRAPH {self.graphs.of(graph)} {{ {pattern} }}"
        return [(r[0], r[1], r[2]) for r in self.rows(f"SELECT ?s ?p ?o WHERE {{ {pattern} }}")]

    # -- the user's SPARQL (SPEC §6, §8) -------------------------------------------------------

    def _user(self, query: str, accept: str, cancel: threading.Event) -> httpx.Response:
        check_user_query(query)
        refuse_dataset_escape(query)
        # Defence in depth (issue 33 F2: a SERVICE to the server's own /query read another
        # agent's graph): the text sent, our PREFIX lines included, is read again as a whole —
        # no SERVICE, FROM or GRAPH in it — and always goes with the protocol's dataset, the
        # agent's graph alone (named graphs none: SPARQL 1.1 Protocol §2.1.4).
        refuse_dataset_escape(_PREFIXES + query)
        try:
            return self._query(query, accept, {"default-graph-uri": [AGENT + self.agent_id]},
                               cancel)
        except StoreError as exc:
            if "(400 " not in str(exc):
                raise
            said = str(exc).split("Server said: ")[-1]
            # Line numbers count from the user's first line, not from our PREFIX lines.
            said = _POSITION.sub(
                lambda m: f"error at {max(1, int(m[1]) - _PREFIX_LINES)}:{m[2]}", said
            )
            raise sparql_syntax_error(SyntaxError(said), query) from None

    def user_query(
        self, query: str, *, timeout: float | None = None, limit: int | None = None
    ) -> UserResult:
        def run(cancel: threading.Event) -> UserResult:
            response = self._user(query, f"{_SELECT_JSON}, application/n-triples;q=0.9",
                                  cancel)
            if "n-triples" in response.headers.get("content-type", ""):
                return parse_ntriples(response.content)
            with self._reading():
                answer = response.json()
                if "boolean" in answer or query_form(query) == "ASK":
                    return _boolean(answer)
                names, bindings = _results(answer)
                return [{n: python_from_json(b[n]) for n in names if n in b} for b in bindings]

        result = run_bounded(run, timeout)
        if limit is not None and isinstance(result, list) and len(result) > limit:
            check_row_limit(limit, len(result))
        return result

    def user_query_serialized(
        self, query: str, fmt: str, *, timeout: float | None = None,
        output: BinaryIO | None = None,
    ) -> bytes | None:
        def run(cancel: threading.Event) -> bytes:
            return self._user(query, f"{_FORMATS[fmt]}, application/n-triples;q=0.9",
                              cancel).content

        data = run_bounded(run, timeout)
        if output is None:
            return data
        output.write(data)
        return None

    def dump(self, fmt: str, *, default_graph_only: bool) -> bytes:
        """As the embedded store's: the memory network as the default graph, and for
        nquads/trig the journal and metadata under their embedded graph names, so an export
        loads into an embedded store unchanged (the lease is left out)."""
        if default_graph_only or fmt in ("turtle", "ntriples"):
            data = self._query("CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ?o }",
                               "application/n-triples").content
            return data if fmt in ("ntriples", "nquads") else reserialize(data, fmt)
        answer = self._json(
            "SELECT ?g ?s ?p ?o WHERE { { ?s ?p ?o } UNION { GRAPH ?g { ?s ?p ?o } } "
            f"FILTER(?s != <{LEASE}>) }}"
        )
        names = {
            f"{AGENT}{self.agent_id}/journal": f"<{V.JOURNAL_GRAPH}>",
            f"{AGENT}{self.agent_id}/meta": f"<{V.META_GRAPH}>",
            f"{AGENT}{self.agent_id}/vectors": f"<{V.VECTOR_GRAPH}>",
        }
        lines = []
        with self._reading():
            for b in _results(answer)[1]:
                terms = [term_from_json(b[n]) for n in ("s", "p", "o")]
                if "g" in b:
                    terms.append(Term(names[b["g"]["value"]]))
                lines.append(" ".join(terms) + " .")
        data = ("\n".join(lines) + "\n").encode("utf-8") if lines else b""
        return data if fmt == "nquads" else reserialize(data, fmt)

    # -- the lease (SPEC §8) -------------------------------------------------------------------

    def _lease_update(self, template: str, expires: datetime | None = None) -> None:
        now = datetime.now(UTC)
        self._update(render(
            template, meta=self.graphs.meta, lease=iri_ref(LEASE), holder=lit(self.holder),
            now=lit(now), expires=lit(expires or now),
        ))

    def lease(self) -> tuple[str, datetime] | None:
        """(holder, expiry) of the agent's lease, or None."""
        rows = self.rows(render("lease", meta=self.graphs.meta, lease=iri_ref(LEASE)))
        return (str(rows[0][0]), rows[0][1]) if rows else None

    def _fresh(self) -> bool:
        """Whether the lease is ours for more than a third of its length still, by both
        clocks: a process stopped (SIGSTOP, a paused VM) past its expiry must not write on."""
        margin = self.endpoint.lease_seconds / 3
        return (time.monotonic() < self._held_until - margin
                and datetime.now(UTC) + timedelta(seconds=margin) < self._expires)

    def _fence(self) -> None:
        """Before a write: the lease is ours, renewed now when the renewer fell behind (the
        process was stopped, the server slow); :class:`StoreLockedError` when another
        process took it meanwhile (SPEC §8: one writer per agent)."""
        if self._lease_lost is None and self._fresh():
            return
        # The renewer may hold the lock while the server does not answer: wait for it no
        # longer than this call may last (Config.store_timeout).
        if not self._lease_lock.acquire(timeout=self._retry.left()):
            raise EndpointUnavailable(
                f"the lease of agent {self.agent_id!r} on {self.endpoint.update_url} could not "
                f"be renewed within {self._retry.timeout:g} s (Config.store_timeout): the "
                f"server is not answering ({self._retry.outage() or 'no answer yet'})")
        try:
            if self._lease_lost is None and not self._fresh():
                self._renew()
        finally:
            self._lease_lock.release()
        if self._lease_lost is not None:
            raise StoreLockedError(self._lease_lost)

    def _renew(self) -> None:
        """Take the lease again (under ``_lease_lock``); a refusal marks it lost for good."""
        try:
            self._take_lease()
        except (StoreLockedError, _NotApplied) as exc:
            self._lease_lost = f"the lease was lost: {exc}"

    def _take_lease(self) -> None:
        sent = time.monotonic()
        expires = datetime.now(UTC) + timedelta(seconds=self.endpoint.lease_seconds)
        self._lease_update("take_lease.ru", expires)
        held = self.lease()
        if held is None:  # or another holder let go between our take and our read: again
            self._lease_update("take_lease.ru", expires)
            held = self.lease()
        if held is None or (held[0] == self.holder and _older(held[1], expires)):
            raise _NotApplied(
                f"{self.endpoint.update_url} answered the update that takes agent "
                f"{self.agent_id!r}'s lease as done, but {self.endpoint.query_url} does not show "
                "it: the updates do not reach the dataset the queries read (a proxy or a "
                "read-only service that answers without running them, or two URLs of "
                "different datasets?), and memory written that way would be lost; update_url "
                "and query_url must name the same dataset"
            )
        holder, until = held
        if holder != self.holder:
            raise StoreLockedError(
                f"agent {self.agent_id!r} on {self.endpoint.query_url} is held by {holder} "
                f"(lease until {until}); close it there, or wait for the lease to expire "
                f"(SparqlEndpoint(lease_seconds={self.endpoint.lease_seconds:g}))"
            )
        self._held_until, self._expires = sent + self.endpoint.lease_seconds, expires

    def _renew_loop(self) -> None:
        every = self.endpoint.lease_seconds / 3
        while not self._stop.wait(every):
            try:
                with self._lease_lock:
                    self._renew()
            except StoreError:
                continue  # the server is away; the next renewal (or write) tries again
            if self._lease_lost is not None:
                return

    def outage(self) -> str | None:
        retrying = self._retry.outage()
        if retrying is None:
            return None
        return f"the SPARQL endpoint {self.endpoint.query_url} is not answering ({retrying})"

    def stop_waiting(self) -> None:
        """Closing: no more retries for a server that is away (SPEC §8). What is not stored
        stays journalled for the next initialize; the lease expires if it cannot be released."""
        self._retry.stop()

    def close(self) -> None:
        if self._closed:
            return
        self._retry.stop()
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
            if self._lease_lost is None:
                with contextlib.suppress(StoreError):
                    self._lease_update("release_lease.ru")
        self._closed = True


def remote_agent_exists(endpoint: SparqlEndpoint, agent_id: str) -> bool:
    """True when the agent has store metadata on the endpoint. Writes nothing."""
    store = RemoteStore(endpoint, agent_id, read_only=True)
    try:
        return store.ask(
            f"ASK {{ GRAPH {store.graphs.meta} {{ <{V.META_SUBJECT}> memory:schemaVersion ?v }} }}"
        )
    finally:
        store.close()


def remote_agents(endpoint: SparqlEndpoint) -> list[str]:
    """Ids of the agents with store metadata on the endpoint, sorted. Writes nothing."""
    from memory_rdf._agents import validate_agent_id
    from memory_rdf._exceptions import InvalidInputError, InvalidTypeError

    store = RemoteStore(endpoint, "_", read_only=True)  # "_": any valid id; no lease taken
    try:
        answer = store._json(
            f"SELECT DISTINCT ?g WHERE {{ GRAPH ?g {{ <{V.META_SUBJECT}> "
            "memory:schemaVersion ?v } }",
            dataset={},
        )
        with store._reading():
            _names, bindings = _results(answer)
            graphs = [b["g"]["value"] for b in bindings if "g" in b]
    finally:
        store.close()
    found = set()
    for graph in graphs:
        if isinstance(graph, str) and graph.startswith(AGENT) and graph.endswith("/meta"):
            agent_id = graph[len(AGENT):-len("/meta")]
            try:
                found.add(validate_agent_id(agent_id))
            except (InvalidInputError, InvalidTypeError):
                continue  # not a graph this library wrote
    return sorted(found)


def open_remote_for_inspection(endpoint: SparqlEndpoint, agent_id: str) -> RemoteStore:
    """The agent's graphs read-only (no lease), or :class:`UnknownAgentError`."""
    from memory_rdf._agents import validate_agent_id
    from memory_rdf._exceptions import UnknownAgentError

    validate_agent_id(agent_id)
    if not remote_agent_exists(endpoint, agent_id):
        raise UnknownAgentError(
            f"unknown agent {agent_id!r}: no memory on {endpoint.query_url} "
            f"(graph <{AGENT}{agent_id}/meta> is empty)"
        )
    return RemoteStore(endpoint, agent_id, read_only=True)


def wipe_remote_agent(endpoint: SparqlEndpoint, agent_id: str) -> bool:
    """Remove the agent's memory from the endpoint (taking its lease first, so a process
    serving it raises :class:`StoreLockedError` instead). True when there was something."""
    existed = remote_agent_exists(endpoint, agent_id)
    store = RemoteStore(endpoint, agent_id)
    try:
        store._update(render("wipe_agent.ru", **store.graphs.params(), lease=iri_ref(LEASE)))
    finally:
        store.close()
    return existed
