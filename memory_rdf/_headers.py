"""HTTP header values the library sends (endpoint auth and headers, model API keys), checked
when the client is built: a credential holding a line break (a key read from a file keeps its
newline) or a non-ASCII character failed every request, and the error quoted it — into logs,
``stats()["model_last_error"]`` and so the MCP ``stats`` tool."""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit, urlunsplit

from memory_rdf._exceptions import InvalidInputError, InvalidTypeError

__all__ = ["check_header", "split_userinfo"]

_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_VALUE = re.compile(r"[\t\x20-\x7e]*")


def check_header(name: object, value: object, what: str | None = None) -> str:
    """``value`` back when it can be sent as the HTTP header ``name``; else
    :class:`InvalidTypeError` / :class:`InvalidInputError` naming ``what`` (default: the
    header), never repeating the value (it may be a secret)."""
    shown = what or f"header {name!r}"
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InvalidInputError(f"{name!r} is not an HTTP header name")
    if not isinstance(value, str):
        raise InvalidTypeError(f"{shown} must be a str, got {type(value).__name__}")
    if not _VALUE.fullmatch(value):
        raise InvalidInputError(
            f"{shown} holds a line break, a control character or a non-ASCII character, so it "
            "cannot be sent in an HTTP header (a key read from a file often keeps its newline)"
        )
    return value


def split_userinfo(url: str) -> tuple[str, tuple[str, str] | None]:
    """``url`` without its ``user:password@`` part, and that (user, password), decoded: the
    URL is shown in error messages, ``repr()``, ``stats()`` and logs, the password never."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    host = parts.netloc.rpartition("@")[2]
    user = unquote(parts.username or "")
    password = unquote(parts.password or "")
    return urlunsplit(parts._replace(netloc=host)), (user, password)
