"""Public value types and the small-model protocol (SPEC §4)."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable

from memory_rdf._exceptions import InvalidInputError, InvalidTypeError

ROLES = ("user", "assistant", "system")


@dataclass(frozen=True)
class Message:
    """One chat message. ``role`` is "user", "assistant" or "system"; ``content`` is non-blank:
    it has a visible character (whitespace, controls, zero-width and bidi characters alone
    are refused, :class:`InvalidInputError`).

    ``timestamp`` (optional) says when the message was said: a ``datetime`` or an ISO 8601
    string, naive = UTC. The nodes a remember creates carry the earliest timestamp of its
    messages as ``memory:saidAt`` (SPEC §5.6).
    """

    role: str
    content: str
    timestamp: datetime | str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.role, str):
            raise InvalidTypeError(f"message role must be a str, got {type(self.role).__name__}")
        if self.role not in ROLES:
            raise InvalidInputError(f"message role must be one of {ROLES}, got {self.role!r}")
        if not isinstance(self.content, str):
            raise InvalidTypeError(
                f"message content must be a str, got {type(self.content).__name__}"
            )
        if not self.content.strip():
            raise InvalidInputError("message content must not be blank")
        _check_encodable(self.content, "message content")
        if not has_visible_character(self.content):
            raise InvalidInputError(
                "message content must not be blank: it has no visible character (only "
                "whitespace, control, format or zero-width characters)"
            )
        if self.timestamp is not None:
            parse_time(self.timestamp, "message timestamp")


#: Unicode categories of characters that show nothing: controls (Cc: NUL, BEL, DEL, …),
#: format characters (Cf: zero-width space/joiner, BOM, bidi controls, tags, …) and
#: separators (Zs, Zl, Zp).
_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Zs", "Zl", "Zp"})
#: Default-ignorable characters of other categories, drawn as nothing: the combining grapheme
#: joiner, the Hangul fillers, Mongolian free variation selectors and the variation selectors.
_INVISIBLE = frozenset(
    "\u034f\u115f\u1160\u17b4\u17b5\u180b\u180c\u180d\u180f\u3164\uffa0"
    + "".join(map(chr, range(0xFE00, 0xFE10)))
    + "".join(map(chr, range(0xE0100, 0xE01F0)))
)


def has_visible_character(text: str) -> bool:
    """Whether ``text`` has a character that shows: one that is not whitespace, a control,
    a format character (zero-width, bidi, BOM) or another default-ignorable one.

    >>> has_visible_character("\\u200b\\ufeff \\x00"), has_visible_character("\\u200bok")
    (False, True)
    """
    return any(
        not ch.isspace() and ch not in _INVISIBLE
        and unicodedata.category(ch) not in _INVISIBLE_CATEGORIES
        for ch in text
    )


#: The small-model protocol's limits (one place: the prompts, the answer checks and the
#: built-in model read them). A phrase has at most ``PHRASE_MAX`` characters; a segment gets
#: ``KEYWORDS_MIN``–``KEYWORDS_MAX`` keywords (a very short text may have fewer).
PHRASE_MAX = 20
KEYWORDS_MIN = 3
KEYWORDS_MAX = 5
#: A model's text may be up to this many times as long as what bounds it: the compression
#: target (SPEC §5.2 step 6) and, at remember, the segment it was made from; longer is a
#: failed call.
LENGTH_TOLERANCE = 1.25
#: At remember, ``LENGTH_TOLERANCE`` × the segment's length plus this many characters (a
#: short segment written out a little longer: "5pm" as "5 p.m.").
REMEMBER_SLACK = 20


def clean_keywords(values: Sequence[str]) -> list[str]:
    """Keywords as stored: whitespace collapsed, blanks and duplicates (ignoring case) dropped,
    the first spelling kept, never cut.

    >>> clean_keywords([" JWT ", "jwt", "", "token  有效期"])
    ['JWT', 'token 有效期']
    """
    seen: set[str] = set()
    out: list[str] = []
    for k in values:
        k = " ".join(k.split())
        if k and k.casefold() not in seen:
            seen.add(k.casefold())
            out.append(k)
    return out


@dataclass
class Processed:
    """What the small model makes of one segment."""

    content: str
    phrase: str
    keywords: list[str] = field(default_factory=list)


@runtime_checkable
class SmallModel(Protocol):
    """The three calls memory_rdf needs from a small language model.

    A backend may also offer batched forms, used when present (same results):
    ``process_batch(texts) -> list[Processed]`` and
    ``relation_batch(pairs: list[tuple[node_content, focus_content]]) -> list[str]``.
    """

    def segment(self, text: str) -> list[str]: ...

    def process(self, text: str, target_length: int | None = None) -> Processed: ...

    def relation(self, node_content: str, focus_content: str) -> str: ...


def coerce_messages(messages: object) -> list[Message]:
    """Validate ``remember()``'s argument; raise naming the field, before anything is stored."""
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Sequence):
        raise InvalidTypeError(
            "messages must be a list of Message or of mappings with 'role' and 'content', "
            f"got {type(messages).__name__}"
        )
    if len(messages) == 0:
        raise InvalidInputError("messages must not be empty")
    out: list[Message] = []
    for i, m in enumerate(messages):
        if isinstance(m, Message):
            out.append(m)
        elif isinstance(m, Mapping):
            missing = [k for k in ("role", "content") if k not in m]
            if missing:
                raise InvalidInputError(f"messages[{i}] is missing {', '.join(missing)}")
            try:
                out.append(Message(m["role"], m["content"], m.get("timestamp")))
            except (InvalidInputError, InvalidTypeError) as exc:
                raise type(exc)(f"messages[{i}]: {exc}") from None
        else:
            raise InvalidTypeError(
                f"messages[{i}] must be a Message or a mapping, got {type(m).__name__}"
            )
    return out


def parse_time(value: object, what: str) -> datetime:
    """A ``datetime`` or ISO 8601 string as an aware UTC ``datetime`` (naive = UTC).

    Raises :class:`InvalidTypeError` for other types and :class:`InvalidInputError` for a
    string that is not ISO 8601, naming ``what``.
    """
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError:
            raise InvalidInputError(
                f"{what} must be an ISO 8601 date or date-time (e.g. 2024-05-01T09:30:00Z), "
                f"got {value!r}"
            ) from None
    else:
        raise InvalidTypeError(
            f"{what} must be a datetime or an ISO 8601 str, got {type(value).__name__}"
        )
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    try:
        return moment.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00+01:00 is in year 0 in UTC, 9999-12-31T23:00-02:00
        raise InvalidInputError(  # in year 10000: neither is a datetime
            f"{what} {value!r} is outside the years 1-9999 once converted to UTC"
        ) from None


def as_utc(moment: datetime) -> datetime:
    """``moment`` in UTC; a naive one is taken as UTC (as :func:`parse_time` takes it)."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def said_at(messages: Sequence[Message]) -> datetime | None:
    """The earliest timestamp of ``messages`` (UTC), or None when none carries one."""
    times = [parse_time(m.timestamp, "message timestamp") for m in messages
             if m.timestamp is not None]
    return min(times) if times else None


def messages_to_text(messages: Sequence[Message]) -> str:
    """The text given to the model: one ``"{role}: {content}"`` line per message (SPEC §4).

    A content's own line breaks must not start a line that reads as another message: every
    kind of line break (``\\r``, ``\\u2028``, … which a model may read as one) becomes
    ``\\n``, and a continuation line that starts like a role label (``system: …``) is indented
    by two spaces, so that no segmenter or model takes it for a message of that role
    (issue 17). Nothing else of the text changes."""
    return "\n".join(f"{m.role}: {_neutralize(m.content)}" for m in messages)


#: Every line break ``str.splitlines`` knows (a model may read any of them as one).
_LINE_BREAK = re.compile(r"\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
#: The start of a line that reads as a role label: ``system:``, ``assistant :``, ``tool:``, …
_ROLE_LABEL = re.compile(r"[ \t]*[A-Za-z][\w-]{0,31}[ \t]*:")


def _neutralize(content: str) -> str:
    lines = _LINE_BREAK.split(content)
    if len(lines) == 1:
        return content
    return "\n".join(
        [lines[0]] + ["  " + line if _ROLE_LABEL.match(line) else line for line in lines[1:]]
    )


def _check_encodable(text: str, what: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInputError(f"{what} is not valid Unicode text ({exc.reason})") from None


def clip_phrase(phrase: str) -> str:
    """``phrase`` within ``PHRASE_MAX`` characters: whitespace collapsed, then cut at the last
    space that keeps at least half of it, else at ``PHRASE_MAX``."""
    text = " ".join(phrase.split())
    if len(text) <= PHRASE_MAX:
        return text
    cut = text[: PHRASE_MAX + 1].rfind(" ")
    return (text[:cut] if cut >= PHRASE_MAX // 2 else text[:PHRASE_MAX]).rstrip()


def check_processed(value: Any) -> Processed:
    """Validate what a model returned from ``process`` (raises ``ValueError`` on garbage: a
    failed call). A phrase over ``PHRASE_MAX`` characters is cut to it (at a space when
    there is one): the phrase is a label, and a model that writes long ones would otherwise
    fail every call. The content's length is checked by the caller, who knows its bound."""
    if not isinstance(value, Processed):
        raise ValueError(f"process() must return Processed, got {type(value).__name__}")
    if not isinstance(value.content, str) or not value.content.strip():
        raise ValueError("process() returned empty content")
    if not isinstance(value.phrase, str):
        raise ValueError("process() returned a non-str phrase")
    if len(value.phrase.strip()) > PHRASE_MAX:
        value = Processed(value.content, clip_phrase(value.phrase), value.keywords)
    if not isinstance(value.keywords, list) or not all(isinstance(k, str) for k in value.keywords):
        raise ValueError("process() returned keywords that are not a list of str")
    _check_encodable(value.content, "model content")
    _check_encodable(value.phrase, "model phrase")
    for k in value.keywords:
        _check_encodable(k, "model keyword")
    return value
