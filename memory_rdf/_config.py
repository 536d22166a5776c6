"""Configuration: one frozen dataclass, validated when built (SPEC §3)."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any

from memory_rdf._exceptions import ConfigError
from memory_rdf._query_guard import MAX_TIMEOUT
from memory_rdf._text import LANGUAGES

#: Longest backoff between model attempts accepted in a :class:`Config` (seconds).
MAX_RETRY_DELAY = 3600.0


#: The built-in templates of an entry in Chinese and in English (SPEC §5.4 v3).
_CHINESE = {
    "memory": "[记忆 {date}] {content}",
    "forgotten_named": "[记忆] 「{phrase}」还关联着一段已经遗忘的记忆（{relations}），我想不起来了",
    "forgotten_unnamed": "[记忆] 「{phrase}」还关联着一段已经遗忘的记忆，我想不起来了",
    "relation_separator": "、",
}
_ENGLISH = {
    "memory": "[memory {date}] {content}",
    "forgotten_named": (
        "[memory] \u201c{phrase}\u201d is still linked to a memory I have forgotten "
        "({relations}); I cannot recall it"
    ),
    "forgotten_unnamed": (
        "[memory] \u201c{phrase}\u201d is still linked to a memory I have forgotten; "
        "I cannot recall it"
    ),
    "relation_separator": ", ",
}


@dataclass(frozen=True, kw_only=True)
class Templates:
    """Text templates of recall output (SPEC §5.4 v3).

    Each entry is written in its own language (``Config.language``: by default the language
    of the result's content, Han text Chinese, otherwise English): the plain fields
    (``memory``, ``forgotten_named``, ``forgotten_unnamed``, ``relation_separator``) for
    Chinese, the ``*_en`` fields for English. An ``*_en`` field left None follows its plain
    field: the built-in English text while the plain field is the built-in Chinese one, else
    the plain field itself — so a template set by the user is used in both languages unless
    its ``*_en`` is set too. ``Templates.english()`` / ``Templates.chinese()`` write every
    entry in one language.

    ``memory`` is filled with ``{content}``, ``{date}`` (the day the content was said — its
    said time where known, else its creation time — as YYYY-MM-DD, UTC), ``{said_at}`` (that
    time in full, ISO 8601) and ``{created_at}`` (ISO 8601); the perception entries with
    ``{phrase}`` and ``{relations}`` (names in the entry's language, joined by the separator).

    >>> Templates().memory, Templates().for_language(chinese=False).memory
    ('[记忆 {date}] {content}', '[memory {date}] {content}')
    >>> Templates(memory="[{said_at}] {content}").for_language(chinese=False).memory
    '[{said_at}] {content}'
    """

    memory: str = _CHINESE["memory"]
    forgotten_named: str = _CHINESE["forgotten_named"]
    forgotten_unnamed: str = _CHINESE["forgotten_unnamed"]
    relation_separator: str = _CHINESE["relation_separator"]
    entry_separator: str = "\n---\n"
    memory_en: str | None = None
    forgotten_named_en: str | None = None
    forgotten_unnamed_en: str | None = None
    relation_separator_en: str | None = None
    #: "zh" / "en": every entry in that language (relation names included), whatever
    #: ``Config.language`` says; None: ``Config.language`` decides.
    language: str | None = None

    @classmethod
    def english(cls) -> Templates:
        """Every entry in English, whatever its content's language."""
        return cls(**_ENGLISH, language="en")

    @classmethod
    def chinese(cls) -> Templates:
        """Every entry in Chinese, whatever its content's language."""
        return cls(**_CHINESE, language="zh")

    def for_language(self, chinese: bool) -> EntryTemplates:
        """The templates of an entry written in Chinese (``chinese=True``) or English."""
        if self.language is not None:
            chinese = self.language == "zh"
        if chinese:
            return EntryTemplates(self.memory, self.forgotten_named, self.forgotten_unnamed,
                                  self.relation_separator, True)
        picked: dict[str, str] = {}
        for name in _ENGLISH:
            own = getattr(self, f"{name}_en")
            plain = getattr(self, name)
            picked[name] = (own if own is not None
                            else _ENGLISH[name] if plain == _CHINESE[name] else plain)
        return EntryTemplates(**picked, chinese=False)

    def perception(self, chinese: bool) -> tuple[str, str, str]:
        """``(named, unnamed, separator)`` of the perception entry for a result written in
        Chinese (``chinese=True``) or English."""
        t = self.for_language(chinese)
        return t.forgotten_named, t.forgotten_unnamed, t.relation_separator


@dataclass(frozen=True)
class EntryTemplates:
    """The templates of one language (:meth:`Templates.for_language`)."""

    memory: str
    forgotten_named: str
    forgotten_unnamed: str
    relation_separator: str
    #: whether these are the Chinese side (relation names are shown in Chinese)
    chinese: bool


@dataclass(frozen=True, kw_only=True)
class Config:
    """Parameters of one agent's memory (SPEC §3). Invalid values raise :class:`ConfigError`.

    >>> Config(decay_rate=0.9).decay_rate
    0.9
    >>> Config(decay_rate=1.5)
    Traceback (most recent call last):
    ...
    memory_rdf._exceptions.ConfigError: decay_rate must be in (0, 1], got 1.5
    """

    focus_limit: int = 5
    decay_rate: float = 0.97
    link_initial_strength: float = 0.5
    focus_link_strength: float = 1.0
    delete_threshold: int = 5
    link_break_threshold: float = 0.01
    time_slice_ms: int = 30000
    compression_batch_size: int = 100
    max_nodes: int | None = None
    max_retries: int = 15
    retry_initial_delay: float = 1.0
    retry_max_delay: float = 30.0
    model_timeout: float = 300.0
    #: Longest a call waits for a SPARQL endpoint store that does not answer (SPEC §8 v3).
    store_timeout: float = 30.0
    default_search_depth: int = 2
    max_search_results: int = 100
    max_queue_size: int = 1000
    auto_compress: bool = True
    keyword_index: bool = True
    max_entry_nodes: int = 10
    recall_max_chars: int | None = 2000
    max_remember_chars: int = 100_000
    #: Serve reads from an in-memory copy of the store (embedded stores): True, False, or
    #: None = when it fits a quarter of the memory available at open (~37 kB per node).
    read_mirror: bool | None = None
    templates: Templates = Templates()
    #: The language of what the agent reads (SPEC §3, §5.4 v3): "auto" = each recall entry's
    #: content decides (Han text Chinese, otherwise English); "zh" / "en" force one.
    language: str = "auto"

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "templates":
                if not isinstance(value, Templates):
                    raise ConfigError(f"templates must be a Templates, got {type(value).__name__}")
                _check_templates(value)
                continue
            if f.name == "language":
                if value not in LANGUAGES:
                    raise ConfigError(f"language must be one of {LANGUAGES}, got {value!r}")
                continue
            if f.name in ("auto_compress", "keyword_index"):
                if not isinstance(value, bool):
                    raise ConfigError(f"{f.name} must be a bool, got {value!r}")
                continue
            if f.name == "read_mirror":
                if value is not None and not isinstance(value, bool):
                    raise ConfigError(f"read_mirror must be a bool or None, got {value!r}")
                continue
            if f.name in ("max_nodes", "recall_max_chars") and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ConfigError(f"{f.name} must be a number, got {value!r}")
            if isinstance(value, float) and not math.isfinite(value):
                raise ConfigError(f"{f.name} must be finite, got {value!r}")
        ints = ("focus_limit", "delete_threshold", "time_slice_ms", "compression_batch_size",
                "max_retries", "default_search_depth", "max_search_results", "max_queue_size",
                "max_entry_nodes", "max_remember_chars")
        for name in ints:
            if not isinstance(getattr(self, name), int):
                raise ConfigError(f"{name} must be an int, got {getattr(self, name)!r}")
        for name in ("max_nodes", "recall_max_chars"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, int):
                raise ConfigError(f"{name} must be an int or None, got {value!r}")
        _check(0 < self.decay_rate <= 1, "decay_rate must be in (0, 1]", self.decay_rate)
        _check(self.focus_limit >= 1, "focus_limit must be >= 1", self.focus_limit)
        _check(0 <= self.link_initial_strength <= 1,
               "link_initial_strength must be in [0, 1]", self.link_initial_strength)
        _check(0 <= self.focus_link_strength <= 1,
               "focus_link_strength must be in [0, 1]", self.focus_link_strength)
        _check(self.delete_threshold >= 0, "delete_threshold must be >= 0", self.delete_threshold)
        _check(0 <= self.link_break_threshold <= 1,
               "link_break_threshold must be in [0, 1]", self.link_break_threshold)
        _check(self.time_slice_ms >= 1, "time_slice_ms must be >= 1", self.time_slice_ms)
        _check(self.compression_batch_size >= 1,
               "compression_batch_size must be >= 1", self.compression_batch_size)
        _check(self.max_nodes is None or self.max_nodes >= 1,
               "max_nodes must be None or >= 1", self.max_nodes)
        # Focus nodes are never forgotten (SPEC §5.2), so the fixed pool (§5.3) can only make
        # room among the others: a cap no larger than the focus could never hold.
        _check(self.max_nodes is None or self.max_nodes > self.focus_limit,
               f"max_nodes must be None or > focus_limit ({self.focus_limit}): focus nodes are "
               "never forgotten, so a pool no larger than the focus cannot hold its cap",
               self.max_nodes)
        _check(self.max_retries >= 0, "max_retries must be >= 0", self.max_retries)
        _check(self.retry_initial_delay >= 0,
               "retry_initial_delay must be >= 0", self.retry_initial_delay)
        _check(self.retry_max_delay >= self.retry_initial_delay,
               "retry_max_delay must be >= retry_initial_delay", self.retry_max_delay)
        # A backoff is a wait on the scheduler thread's condition: 1e10 s overflowed it
        # (issue 17). An hour is longer than any outage worth waiting out in-process.
        _check(self.retry_max_delay <= MAX_RETRY_DELAY,
               f"retry_max_delay must be <= {MAX_RETRY_DELAY:g} s", self.retry_max_delay)
        _check(self.model_timeout > 0, "model_timeout must be > 0", self.model_timeout)
        # A longer wait overflowed the platform's sockets and locks (OverflowError per call).
        _check(self.model_timeout <= MAX_TIMEOUT,
               f"model_timeout must be <= {MAX_TIMEOUT:.0f} s", self.model_timeout)
        _check(self.store_timeout > 0, "store_timeout must be > 0", self.store_timeout)
        _check(self.store_timeout <= MAX_TIMEOUT,
               f"store_timeout must be <= {MAX_TIMEOUT:.0f} s", self.store_timeout)
        _check(self.default_search_depth >= 0,
               "default_search_depth must be >= 0", self.default_search_depth)
        _check(self.max_search_results >= 0,
               "max_search_results must be >= 0 (0 = unlimited)", self.max_search_results)
        _check(self.max_queue_size >= 1, "max_queue_size must be >= 1", self.max_queue_size)
        _check(self.max_entry_nodes >= 1, "max_entry_nodes must be >= 1", self.max_entry_nodes)
        _check(self.max_remember_chars >= 1,
               "max_remember_chars must be >= 1", self.max_remember_chars)
        _check(self.recall_max_chars is None or self.recall_max_chars >= 1,
               "recall_max_chars must be None (unlimited) or >= 1", self.recall_max_chars)

    def replace(self, **changes: Any) -> Config:
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)


def _check(ok: bool, message: str, value: object) -> None:
    if not ok:
        raise ConfigError(f"{message}, got {value!r}")


#: The fields each template is filled with (recall formats them with exactly these).
_TEMPLATE_FIELDS = {
    "memory": {"content": "c", "date": "d", "said_at": "s", "created_at": "t"},
    "forgotten_named": {"phrase": "p", "relations": "r"},
    "forgotten_unnamed": {"phrase": "p"},
    "relation_separator": None,
    "entry_separator": None,
    "forgotten_named_en": {"phrase": "p", "relations": "r"},
    "forgotten_unnamed_en": {"phrase": "p"},
    "relation_separator_en": None,
    "memory_en": {"content": "c", "date": "d", "said_at": "s", "created_at": "t"},
}


def _check_templates(templates: Templates) -> None:
    """Each template formats with the fields recall gives it (issue 17: ``memory="{nope}"``
    passed, then every recall raised ``KeyError``)."""
    if templates.language is not None and templates.language not in ("zh", "en"):
        raise ConfigError(
            f"templates.language must be None, 'zh' or 'en', got {templates.language!r}"
        )
    for name, values in _TEMPLATE_FIELDS.items():
        text = getattr(templates, name)
        if text is None and name.endswith("_en"):
            continue
        if not isinstance(text, str):
            raise ConfigError(f"templates.{name} must be a str, got {type(text).__name__}")
        if values is None:
            continue
        try:
            text.format(**values)
        except (KeyError, IndexError, ValueError, AttributeError) as exc:
            fields = ", ".join("{" + f + "}" for f in values)
            raise ConfigError(
                f"templates.{name} {text!r} does not format with {fields}: "
                f"{type(exc).__name__}: {exc}"
            ) from None
