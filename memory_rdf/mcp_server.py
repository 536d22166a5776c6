"""The memory tools over the Model Context Protocol: what ``memory-rdf serve`` runs (SPEC §9).

One :class:`~memory_rdf.MemorySystem` serves every agent; each tool call goes to the agent its
``agent_id`` argument names, else to the server's default agent. With ``agents=`` (``memory-rdf
serve --agents``) only the listed agents are served: a call naming another is a tool error and
nothing is opened or created for it, and the tools' ``agent_id`` lists the allowed ids
(``enum``). Without it any client may read, change and create any agent's memory by naming it:
pass it whenever a client (or a model steered by what it reads) is not trusted with them all.
The tools are those of
:mod:`memory_rdf.tools` (one definition for MCP, OpenAI and Anthropic). Needs the official MCP
Python SDK: ``pip install "memory-rdf[mcp]"``.

Transports: stdio (:func:`run_stdio`, for Claude Desktop and other clients that start the
server themselves) and streamable HTTP (:func:`run_http`, :func:`http_app`). HTTP listens on
127.0.0.1 unless told otherwise; any other address needs a bearer token, and with a token every
request must carry ``Authorization: Bearer <token>`` (401 otherwise).
"""

from __future__ import annotations

import contextlib
import functools
import hmac
import ipaddress
import json
import logging
import signal
import socket
import threading
from collections.abc import Awaitable, Callable, Iterable, Iterator, MutableMapping
from typing import TYPE_CHECKING, Any

from memory_rdf import __version__
from memory_rdf._exceptions import InvalidInputError, InvalidTypeError, MemoryRDFError
from memory_rdf.tools import _BY_NAME, _TOOLS, DEFAULT_AGENT, _check_agents, _quoted, call_tool

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server

    from memory_rdf._manager import MemorySystem

__all__ = [
    "BearerAuth",
    "DEFAULT_CALL_TIMEOUT",
    "MCP_MISSING",
    "build_server",
    "check_agents",
    "check_bind",
    "http_app",
    "is_loopback",
    "require_mcp",
    "run_http",
    "run_stdio",
]

logger = logging.getLogger("memory_rdf.mcp_server")

#: What to tell a user whose environment lacks the MCP SDK.
MCP_MISSING = (
    "the MCP server needs the official MCP Python SDK, which is not installed: "
    "pip install \"memory-rdf[mcp]\" (in a clone of the repository: pip install \".[mcp]\")"
)

INSTRUCTIONS = (
    "Long-term memory. Call recall before answering "
    "anything that may depend on earlier conversations; call remember with what is worth "
    "keeping from the conversation (facts, decisions, preferences, plans)."
)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def require_mcp() -> None:
    """Raise :class:`ImportError` with :data:`MCP_MISSING` when the SDK cannot be imported."""
    try:
        import mcp.server.lowlevel  # noqa: F401
    except ImportError as exc:
        raise ImportError(MCP_MISSING) from exc


#: Longest a tool call waits behind the agent's earlier tasks by default (seconds).
DEFAULT_CALL_TIMEOUT = 120.0


def build_server(
    system: MemorySystem, *, default_agent: str = DEFAULT_AGENT,
    call_timeout: float | None = DEFAULT_CALL_TIMEOUT,
    agents: Iterable[str] | None = None,
) -> Server[Any]:
    """An MCP server (the SDK's low-level ``Server``) whose tools run on ``system``.

    A call whose arguments or whose memory operation fail answers a tool error
    (``isError``) with the message; the server keeps serving. ``call_timeout`` bounds how
    long recall, memories and forget wait behind the agent's earlier tasks (None: no limit):
    a model that is down then shows as a tool error saying what the call waited for.
    ``agents`` (None: every agent) are the only agent ids a call may use; ``default_agent``
    must be one of them (see :func:`memory_rdf.tools.call_tool`).

    Raises:
        ImportError: the MCP SDK is not installed (:data:`MCP_MISSING`).
        InvalidInputError: ``agents`` is empty, holds an invalid id, or lacks
            ``default_agent``.
        InvalidTypeError: ``agents`` is not a list (or other iterable) of str.
    """
    allowed = check_agents(agents, default_agent)
    require_mcp()
    import anyio.to_thread
    import mcp_types as types
    from mcp.server.lowlevel import Server

    tools = [
        types.Tool(
            name=t.name,
            description=t.description,
            input_schema=t.schema(True, allowed, default_agent),
            annotations=types.ToolAnnotations(
                read_only_hint=t.read_only, destructive_hint=t.destructive,
                open_world_hint=False,
            ),
        )
        for t in _TOOLS
    ]

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        run = functools.partial(call_tool, system, params.name, params.arguments,
                                default_agent=default_agent, timeout=call_timeout,
                                agents=allowed)
        try:
            text = await anyio.to_thread.run_sync(run)
        except (MemoryRDFError, ValueError, TypeError, TimeoutError) as exc:
            return _error_result(types, str(exc) or type(exc).__name__)
        except Exception as exc:  # a tool never takes the server down
            logger.exception("tool %s failed", params.name)
            return _error_result(types, f"internal error: {type(exc).__name__}: {exc}")
        return types.CallToolResult(content=[types.TextContent(text=text)])

    def input_schema(name: str) -> dict[str, Any] | None:
        tool = _BY_NAME.get(name)
        return tool.schema(True, allowed, default_agent) if tool else None

    return Server(
        "memory-rdf",
        version=__version__,
        title="memory_rdf long-term memory",
        instructions=INSTRUCTIONS,
        get_tool_input_schema=input_schema,
        on_list_tools=list_tools,
        on_call_tool=call,
    )


def check_agents(agents: Iterable[str] | None, default_agent: str = DEFAULT_AGENT
                 ) -> tuple[str, ...] | None:
    """An allow-list of agents checked before anything is opened: each a valid agent id
    (SPEC §2), at least one, ``default_agent`` among them. Returns them as a tuple without
    duplicates, in their order (None stays None: every agent is served).

    Raises:
        InvalidInputError: an invalid id, no id, or ``default_agent`` not listed.
        InvalidTypeError: ``agents`` is not a list (or other iterable) of str.

    >>> check_agents(["alice", "bob", "alice"], "bob")
    ('alice', 'bob')
    """
    allowed = _check_agents(agents)
    if allowed is not None and default_agent not in allowed:
        raise InvalidInputError(
            f"the default agent {default_agent!r} is not among the served agents "
            f"{_quoted(allowed)}; list it too, or make one of them the default")
    return allowed


def _error_result(types: Any, message: str) -> Any:
    return types.CallToolResult(content=[types.TextContent(text=f"error: {message}")],
                                is_error=True)


def run_stdio(
    system: MemorySystem, *, default_agent: str = DEFAULT_AGENT,
    call_timeout: float | None = DEFAULT_CALL_TIMEOUT,
    agents: Iterable[str] | None = None,
) -> None:
    """Serve MCP over this process's stdin/stdout until the client closes stdin.

    Raises:
        ImportError: the MCP SDK is not installed.
        InvalidInputError, InvalidTypeError: see :func:`check_agents`.
    """
    server = build_server(system, default_agent=default_agent, call_timeout=call_timeout,
                          agents=agents)
    import anyio
    from mcp.server.stdio import stdio_server

    async def main() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(main)


# -- HTTP ---------------------------------------------------------------------------------------


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """Refuse to listen beyond this machine without a token (SPEC §9), and refuse a token that
    cannot travel in an HTTP header.

    Raises:
        InvalidInputError: ``host`` is not a loopback address and ``token`` is None or empty;
            or the token holds whitespace or non-ASCII characters.
    """
    if token is not None:
        if not isinstance(token, str):
            raise InvalidTypeError(f"token must be a str, got {type(token).__name__}")
        if not token or not token.isascii() or not token.isprintable() or " " in token:
            raise InvalidInputError(
                "the token must be non-empty printable ASCII without spaces")
    if not token and not is_loopback(host):
        raise InvalidInputError(
            f"refusing to listen on {host}: only loopback addresses (127.0.0.1, ::1, localhost) "
            "are served without a token; pass --token (or set MEMORY_RDF_TOKEN) so every "
            "request must carry 'Authorization: Bearer <token>'")


class BearerAuth:
    """ASGI middleware: every HTTP request must carry ``Authorization: Bearer <token>``;
    anything else is answered 401 before it reaches the MCP app."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._token = token.encode("ascii")

    def _authorized(self, scope: Scope) -> bool:
        values = [v for k, v in scope.get("headers", []) if k.lower() == b"authorization"]
        if len(values) != 1:
            return False
        scheme, _, credentials = bytes(values[0]).strip().partition(b" ")
        return scheme.lower() == b"bearer" and hmac.compare_digest(credentials.strip(),
                                                                   self._token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan" or self._authorized(scope):
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":  # e.g. a websocket: close it
            await send({"type": "websocket.close", "code": 1008})
            return
        body = json.dumps({"error": "unauthorized",
                           "error_description": "missing or wrong bearer token"}).encode()
        await send({
            "type": "http.response.start",
            "status": 401,
            "headers": [(b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode()),
                        (b"www-authenticate", b'Bearer realm="memory-rdf"')],
        })
        await send({"type": "http.response.body", "body": body})


def http_app(
    system: MemorySystem,
    *,
    default_agent: str = DEFAULT_AGENT,
    token: str | None = None,
    host: str = "127.0.0.1",
    path: str = "/mcp",
    call_timeout: float | None = DEFAULT_CALL_TIMEOUT,
    agents: Iterable[str] | None = None,
) -> ASGIApp:
    """The streamable-HTTP ASGI app (endpoint ``path``), behind :class:`BearerAuth` when a
    token is given. ``host`` is where it will listen: on a loopback host the SDK also refuses
    requests whose ``Host``/``Origin`` is not local (DNS-rebinding protection).

    Raises:
        ImportError: the MCP SDK is not installed.
        InvalidInputError: see :func:`check_bind` and :func:`check_agents`.
        InvalidTypeError: see :func:`check_agents`.
    """
    check_bind(host, token)
    server = build_server(system, default_agent=default_agent, call_timeout=call_timeout,
                          agents=agents)
    app: ASGIApp = server.streamable_http_app(streamable_http_path=path, host=host)
    return BearerAuth(app, token) if token else app


def run_http(
    system: MemorySystem,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    default_agent: str = DEFAULT_AGENT,
    on_listening: Callable[[str], None] | None = None,
    call_timeout: float | None = DEFAULT_CALL_TIMEOUT,
    agents: Iterable[str] | None = None,
) -> None:
    """Serve streamable HTTP at ``http://host:port/mcp`` until SIGINT/SIGTERM.

    ``port=0`` picks a free port; ``on_listening`` receives the URL once the socket is bound.

    Raises:
        ImportError: the MCP SDK is not installed.
        InvalidInputError: see :func:`check_bind` and :func:`check_agents`.
        InvalidTypeError: see :func:`check_agents`.
        OSError: the address cannot be bound (in use, not local, …); its ``strerror``
            names ``host:port`` and the reason.
    """
    app = http_app(system, default_agent=default_agent, token=token, host=host,
                   call_timeout=call_timeout, agents=agents)
    import uvicorn

    sock = _bind(host, port)
    bound_port = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{bound_port}/mcp"
    config = uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False)
    server = uvicorn.Server(config)
    if on_listening is not None:
        on_listening(url)
    with _stop_on_signals():
        try:
            server.run(sockets=[sock])
        except _Stopped:
            pass
        finally:
            sock.close()


class _Stopped(Exception):
    """SIGINT/SIGTERM arrived: uvicorn shut down gracefully and re-raised the signal."""


@contextlib.contextmanager
def _stop_on_signals() -> Iterator[None]:
    """uvicorn shuts down gracefully on SIGINT/SIGTERM, then raises the signal again; without
    this the default SIGTERM action would kill the process before the memory is closed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: object) -> None:
        raise _Stopped

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host``:``port``; an :class:`OSError` naming both when there is
    none (the port in use, an address not of this machine, a name that does not resolve)."""
    where = f"[{host.strip('[]')}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    except OSError as exc:
        raise OSError(exc.errno, f"cannot listen on {where}: {exc.strerror or exc}") from exc
    last: OSError | None = None
    for family, kind, proto, _, address in infos:
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.listen(128)
            sock.set_inheritable(True)
            return sock
        except OSError as exc:
            sock.close()
            last = exc
    if last is None:
        raise OSError(f"cannot listen on {where}: the name resolves to no address")
    raise OSError(last.errno, f"cannot listen on {where}: {last.strerror or last}") from last
