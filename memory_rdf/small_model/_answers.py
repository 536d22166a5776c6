"""Checking what an HTTP model answered (SPEC §4: a call fails when its answer does not parse
or validate against its schema, or is empty or garbled).

Every check raises :class:`~memory_rdf.ModelError` (a transient failure: the manager retries
it) with a message saying what was wrong. The schema sent with the request (``_prompts``) and
these checks agree: what the schema forbids is a failed call, never silently repaired.

- **Hard** (the call fails): not JSON; not the schema (:func:`check_shape`: types, required
  properties, ``minItems``/``maxItems`` — a batch of the wrong length, no keywords or more
  than 5 — and ``maxLength`` — a phrase over 20 characters as sent); blank segments,
  content or phrase; segments or echoed content that do not cover the input (below); a
  compressed text longer than 1.25 × the target (SPEC §5.2 step 6); fewer than 3 distinct
  keywords, unless the text has at most :data:`SHORT_TEXT` non-blank characters (role labels
  excluded), which may have 1 or 2; a relation name that is a sentence rather than a name.
- **Repaired** (cleanups that change no meaning): runs of whitespace in the phrase and
  keywords become one space and the phrase loses surrounding punctuation; duplicate keywords
  (ignoring case) are dropped before they are counted; a relation name loses surrounding
  quotes and brackets, and "none" / "无关" means no name; without a target, the input text
  itself is stored, not the model's echo of it.
- **Advice only** (in the prompt, not checked): the phrase's 10-character lower bound,
  keywords being nouns, relation names of 2–4 characters.

**Coverage.** Segments (together) and the echoed ``content`` of ``process`` must carry the
input: compare the multiset of *tokens* — each Han character, each run of other letters or
digits, case-folded after NFKC, role labels (``user:``) ignored — and require that at most
10% of the input's tokens (at least 1) are missing, and that the answer has at most
1.5 × as many tokens as the input, plus 20. Third-person pronouns and demonstratives are left
out of the input's tokens, because pronoun resolution replaces them with the names they
point to (the names are what the +50% / +20 allowance is for). Token multisets instead of
exact substrings make the rule indifferent to whitespace, punctuation and full-width forms,
and it costs linear time (no jieba, no alignment).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from memory_rdf._exceptions import ModelError
from memory_rdf._text import HAN, normalize, strip_role_prefixes, word_set
from memory_rdf._types import (
    KEYWORDS_MAX,
    KEYWORDS_MIN,
    LENGTH_TOLERANCE,
    PHRASE_MAX,
    Processed,
    clean_keywords,
)

__all__ = [
    "check_processed_item",
    "check_relation",
    "check_segments",
    "check_shape",
    "coverage_problem",
    "parse_json",
]

#: Longest relation name accepted ("part of", "讨论", "responds to" fit; a sentence does not).
RELATION_MAX = 24
#: A text this short (non-blank characters, role labels excluded) may have 1–2 keywords.
SHORT_TEXT = 10

_MISSING_SHARE = 0.10
_EXTRA_FACTOR = 1.5
_EXTRA_TOKENS = 20

_TOKEN_RE = re.compile(rf"[{HAN}]|[^\W_{HAN}]+")
_FENCE_RE = re.compile(r"^```[a-zA-Z]*\s*\n?(.*?)\n?```\s*$", re.DOTALL)
# Words pronoun resolution may replace (Han single characters, English words).
_REFERRING = word_set(
    """
    他 她 它 们 这 那 其 此 该 之
    he she it they him her them his hers its their theirs himself herself itself themselves
    this that these those
    """
)
_NO_RELATION = frozenset(
    {"无", "无关", "没有", "没有关系", "不相关", "无关系", "none", "no", "n/a", "na", "null",
     "unrelated", "no relation", "not related", "-"}
)
_NAME_TRIM = " \t\"'`“”‘’「」『』《》【】()（）[]<>.,;:!?。，、；：！？…"
_PHRASE_TRIM = " \t，、,;；：:。.!?！？…"
_TYPES: dict[str, type | tuple[type, ...]] = {
    "object": dict,
    "array": list,
    "string": str,
    "boolean": bool,
    "integer": int,
    "number": (int, float),
}


# --------------------------------------------------------------------------- parsing, shape


def parse_json(text: Any) -> Any:
    """The JSON value in a model's answer text (a ```json fence around it is tolerated)."""
    if not isinstance(text, str) or not text.strip():
        raise ModelError("the model's answer is empty")
    body = text.strip()
    fenced = _FENCE_RE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested 100,000 deep
        raise ModelError(f"the model's answer is not JSON ({exc}): {_clip(text)}") from None


def check_shape(value: Any, schema: dict[str, Any], path: str = "answer") -> None:
    """Check ``value`` against the subset of JSON Schema the prompts use: ``type``,
    ``properties`` + ``required``, ``items``, ``minItems``/``maxItems``,
    ``minLength``/``maxLength``. Extra properties are ignored (they carry nothing we read)."""
    kind = schema.get("type")
    if kind is not None:
        expected = _TYPES[kind]
        if not isinstance(value, expected) or (kind != "boolean" and isinstance(value, bool)):
            raise ModelError(f"{path} must be a JSON {kind}, got {_json_type(value)}")
    if isinstance(value, dict):
        for name in schema.get("required", ()):
            if name not in value:
                raise ModelError(f"{path} lacks the property {name!r}")
        for name, sub in schema.get("properties", {}).items():
            if name in value:
                check_shape(value[name], sub, f"{path}.{name}")
    elif isinstance(value, str):
        shortest, longest = schema.get("minLength"), schema.get("maxLength")
        if shortest is not None and len(value) < shortest:
            raise ModelError(f"{path} must have at least {shortest} characters, got {len(value)}")
        if longest is not None and len(value) > longest:
            raise ModelError(
                f"{path} must have at most {longest} characters, got {len(value)}: "
                f"{_clip(value)!r}"
            )
    elif isinstance(value, list):
        lo, hi = schema.get("minItems"), schema.get("maxItems")
        if lo is not None and hi is not None and lo == hi and len(value) != lo:
            raise ModelError(f"{path} must have exactly {lo} items, got {len(value)}")
        if lo is not None and len(value) < lo:
            raise ModelError(f"{path} must have at least {lo} items, got {len(value)}")
        if hi is not None and len(value) > hi:
            raise ModelError(f"{path} must have at most {hi} items, got {len(value)}")
        items = schema.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(value):
                check_shape(item, items, f"{path}[{i}]")


# --------------------------------------------------------------------------- content rules


def _tokens(text: str) -> list[str]:
    return _TOKEN_RE.findall(normalize(strip_role_prefixes(text)).casefold())


def coverage_problem(source: str, answer: str) -> str | None:
    """Why ``answer`` does not carry ``source`` (see the module docstring), or None."""
    wanted = Counter(t for t in _tokens(source) if t not in _REFERRING)
    got = Counter(_tokens(answer))
    total = sum(wanted.values())
    if total == 0:
        return None
    missing = sum((wanted - got).values())
    allowed = max(1, int(total * _MISSING_SHARE))
    if missing > allowed:
        lost = ", ".join(sorted(wanted - got, key=lambda t: -wanted[t])[:5])
        return f"{missing} of the input's {total} words are missing (e.g. {lost})"
    size = sum(got.values())
    if size > total * _EXTRA_FACTOR + _EXTRA_TOKENS:
        return f"it has {size} words for an input of {total}"
    return None


def check_segments(value: dict[str, Any], text: str) -> list[str]:
    """The non-blank segments of a ``{"segments": [...]}`` answer, which must cover ``text``."""
    segments = [s.strip() for s in value["segments"] if s.strip()]
    if not segments:
        raise ModelError("the model returned only blank segments")
    problem = coverage_problem(text, "\n".join(segments))
    if problem:
        raise ModelError(f"the segments do not cover the text: {problem}")
    return segments


def check_processed_item(
    item: dict[str, Any], text: str, target_length: int | None = None, where: str = "answer"
) -> Processed:
    """One ``{"content", "phrase", "keywords"}`` answer for ``text``, already shape-checked.

    Without a target the content must echo the text (coverage rule) and the text itself is
    kept, verbatim; with a target it must be non-blank and at most 1.25 × the target long.
    The phrase must be non-blank and at most 20 characters; the distinct keywords 3–5 (1–5
    for a short text).
    """
    content = item["content"].strip()
    if not content:
        raise ModelError(f"{where}: the content is empty")
    if target_length is None:
        problem = coverage_problem(text, content)
        if problem:
            raise ModelError(f"{where}: the content is not the text: {problem}")
        content = text
    elif len(content) > LENGTH_TOLERANCE * max(target_length, 1):
        raise ModelError(
            f"{where}: the compressed text has {len(content)} characters "
            f"for a target of {target_length}"
        )
    phrase = _phrase(item["phrase"])
    if not phrase:
        raise ModelError(f"{where}: the phrase is empty")
    if len(phrase) > PHRASE_MAX:  # the schema's maxLength, for answers not shape-checked
        raise ModelError(f"{where}: the phrase has {len(phrase)} characters, at most "
                         f"{PHRASE_MAX} allowed: {_clip(phrase)!r}")
    keywords = clean_keywords(item["keywords"])
    short = len("".join(strip_role_prefixes(text).split())) <= SHORT_TEXT
    need = 1 if short else KEYWORDS_MIN
    if not need <= len(keywords) <= KEYWORDS_MAX:
        raise ModelError(
            f"{where}: {len(keywords)} distinct keywords, need {need}-{KEYWORDS_MAX}"
        )
    return Processed(content, phrase, keywords)


def check_relation(value: Any, where: str = "answer") -> str:
    """A relation name: trimmed of quotes and punctuation; "" for none."""
    if not isinstance(value, str):
        raise ModelError(f"{where}: the relation must be a string")
    name = " ".join(value.split()).strip(_NAME_TRIM)
    if name.casefold() in _NO_RELATION:
        return ""
    if "\n" in value.strip() or len(name) > RELATION_MAX:
        raise ModelError(f"{where}: {_clip(value)!r} is not a relation name")
    return name


def check_relations(values: Sequence[Any]) -> list[str]:
    return [check_relation(v, f"relations[{i}]") for i, v in enumerate(values)]


# --------------------------------------------------------------------------- repairs


def _phrase(value: str) -> str:
    """Whitespace collapsed, surrounding punctuation dropped; never shortened."""
    return " ".join(value.split()).strip(_PHRASE_TRIM)


def _json_type(value: Any) -> str:
    for name, kind in _TYPES.items():
        if isinstance(value, kind) and not (name != "boolean" and isinstance(value, bool)):
            return name
    return "null" if value is None else type(value).__name__


def _clip(text: Any, limit: int = 120) -> str:
    s = str(text)
    return s if len(s) <= limit else s[:limit] + "…"
