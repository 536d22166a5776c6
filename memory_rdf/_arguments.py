"""The public API's argument checks (SPEC §4: bad input raises at the call, naming the field,
and nothing is stored or queued).

:class:`~memory_rdf.MemoryManager` and :class:`~memory_rdf.MemorySystem` call these before
they touch the store or the queue; each returns the argument in the form the manager uses
(a recall's keywords stripped, its defaults from the :class:`~memory_rdf.Config`, node ids in
lower case) or raises :class:`~memory_rdf.InvalidTypeError` (a ``TypeError``) /
:class:`~memory_rdf.InvalidInputError` (a ``ValueError``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence, Set

from memory_rdf import _vocab as V
from memory_rdf._config import Config
from memory_rdf._embedders import Embedder
from memory_rdf._exceptions import InvalidInputError, InvalidTypeError
from memory_rdf._remote import SparqlEndpoint
from memory_rdf._types import SmallModel

#: The entries a recall may start from (SPEC §5.4, §5.5, §5.7).
ENTRIES = ("focus", "keywords", "both", "semantic")
#: Most keywords, and most relations, one recall (or memories()) accepts (issue 17: 10,000
#: keywords crashed the engine; what is accepted costs time linear in the count).
RECALL_KEYWORDS_MAX = 1_000
RECALL_RELATIONS_MAX = 1_000
#: Most characters of all keywords and relations of one recall together.
RECALL_CHARS_MAX = 20_000
#: A node id as this library makes it (``new_node_id``, SPEC §2: a UUID in hex), in any case.
_NODE_ID = re.compile(r"[0-9a-fA-F]{32}")
#: What an id looks like, for the error that refuses a string that cannot be one.
ID_SHAPE = ("ids are 32 hex digits, like 0193f1c2a4b87c2e9d1f3a5b6c7d8e9f (the id field of "
            "memories(), the first column of `memory-rdf memories`)")

#: A recall's checked arguments: keywords, relations, depth, entry, limit, max_chars.
RecallArgs = tuple[list[str], list[str] | None, int, str, int, int | None]


def check_config(config: object) -> Config | None:
    """``config``: None or a :class:`~memory_rdf.Config`."""
    if config is not None and not isinstance(config, Config):
        raise InvalidTypeError(f"config must be a Config, got {type(config).__name__}")
    return config


def check_endpoint(endpoint: object, data_dir: object) -> SparqlEndpoint | None:
    """``endpoint``: None or a :class:`SparqlEndpoint`, never beside a ``data_dir``."""
    if endpoint is None:
        return None
    if not isinstance(endpoint, SparqlEndpoint):
        raise InvalidTypeError(f"endpoint must be a SparqlEndpoint, got {type(endpoint).__name__}")
    if data_dir is not None:
        raise InvalidInputError("give data_dir or endpoint, not both (SPEC §8)")
    return endpoint


def check_embedder(embedder: object) -> Embedder | None:
    """An embedder (SPEC §5.7): an object with ``embed`` and ``name``; numpy must be there."""
    if embedder is None:
        return None
    if not callable(getattr(embedder, "embed", None)) or not hasattr(embedder, "name"):
        raise InvalidTypeError(
            "embedder must implement Embedder (embed(texts), name, dimension), got "
            f"{type(embedder).__name__}")
    from memory_rdf._vectors import numpy

    numpy()  # a clear error now, not at the first remember
    return embedder  # type: ignore[return-value]


def resolve_model(model: SmallModel | None) -> SmallModel:
    """``model``: a :class:`~memory_rdf.SmallModel`; None is the built-in offline model."""
    from memory_rdf.small_model import HeuristicModel

    if model is None:
        return HeuristicModel()
    for name in ("segment", "process", "relation"):
        if not callable(getattr(model, name, None)):
            raise InvalidTypeError(f"model must implement SmallModel: {name}() is missing")
    return model


def check_remember_chars(text: str, max_chars: int) -> None:
    """One remember's text (its messages as the model reads them) within
    ``Config.max_remember_chars``."""
    if len(text) > max_chars:
        raise InvalidInputError(
            f"one remember() may hold {max_chars:,} characters "
            f"(Config.max_remember_chars), got {len(text):,}: remember long texts in parts"
        )


def _str_list(value: object, name: str, most: int, expected: str) -> list[str]:
    """``value`` checked to be a list (any non-string sequence) of at most ``most`` str."""
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise InvalidTypeError(f"{name} must be {expected}, got {type(value).__name__}")
    if len(value) > most:
        raise InvalidInputError(
            f"at most {most:,} {name} are accepted, got {len(value):,}"
        )
    for item in value:
        if not isinstance(item, str):
            raise InvalidTypeError(f"{name} must contain str, got {type(item).__name__}")
    return list(value)


def recall_args(
    config: Config,
    keywords: object,
    relations: object,
    depth: object,
    entry: object,
    limit: object = None,
    max_chars: object = None,
) -> RecallArgs:
    """A recall's arguments checked (SPEC §4), blank keywords left out, the defaults taken
    from ``config``: ``depth`` None is ``default_search_depth``, ``limit`` None
    ``max_search_results``, ``max_chars`` None ``recall_max_chars`` (0: None, unlimited)."""
    kws = [
        k.strip()
        for k in _str_list(keywords, "keywords", RECALL_KEYWORDS_MAX,
                           "a list of str (not a bare str)")
        if k.strip()
    ]
    rels: list[str] | None = None
    if relations is not None:
        rels = _str_list(relations, "relations", RECALL_RELATIONS_MAX, "None or a list of str")
    if depth is None:
        depth = config.default_search_depth
    if isinstance(depth, bool) or not isinstance(depth, int):
        raise InvalidTypeError(f"depth must be an int, got {type(depth).__name__}")
    if depth < 0:
        raise InvalidInputError(f"depth must be >= 0, got {depth}")
    if entry not in ENTRIES:
        raise InvalidInputError(f"entry must be one of {ENTRIES}, got {entry!r}")
    if limit is None:
        limit = config.max_search_results
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise InvalidTypeError(f"limit must be an int or None, got {type(limit).__name__}")
    if limit < 0:
        raise InvalidInputError(f"limit must be >= 0 (0 = unlimited), got {limit}")
    if max_chars is None:
        max_chars = config.recall_max_chars
    elif isinstance(max_chars, bool) or not isinstance(max_chars, int):
        raise InvalidTypeError(
            f"max_chars must be an int or None, got {type(max_chars).__name__}"
        )
    elif max_chars < 0:
        raise InvalidInputError(f"max_chars must be >= 0 (0 = unlimited), got {max_chars}")
    elif max_chars == 0:
        max_chars = None
    chars = sum(len(t) for t in kws) + sum(len(r) for r in rels or [])
    if chars > RECALL_CHARS_MAX:
        raise InvalidInputError(
            f"keywords and relations may hold {RECALL_CHARS_MAX:,} characters together, "
            f"got {chars:,}"
        )
    for text in [*kws, *(rels or [])]:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidInputError("keywords and relations must be valid Unicode") from None
    return kws, rels, depth, str(entry), limit, max_chars


def query_text(
    keywords: object, query: object, entry: str, embedder: Embedder | None
) -> str | None:
    """The text whose vector seeds the semantic entry: ``query``, else the keywords
    joined; None when the recall has no semantic entry (no embedder, or entry "focus" or
    "keywords"). Bad ``query`` raises; "semantic" without an embedder raises."""
    if query is not None:
        if not isinstance(query, str):
            raise InvalidTypeError(f"query must be a str or None, got {type(query).__name__}")
        if len(query) > RECALL_CHARS_MAX:
            raise InvalidInputError(
                f"query may hold {RECALL_CHARS_MAX:,} characters, got {len(query):,}")
        try:
            query.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidInputError("query must be valid Unicode") from None
    if entry == "semantic" and embedder is None:
        raise InvalidInputError(
            "entry='semantic' needs an embedder: MemoryManager(..., embedder="
            "OpenAIEmbedder(...)) (see docs/embeddings.md)")
    if embedder is None or entry not in ("semantic", "both"):
        return None
    text = query.strip() if isinstance(query, str) else ""
    if not text:
        assert isinstance(keywords, Sequence)
        text = " ".join(k.strip() for k in keywords if isinstance(k, str) and k.strip())
    return text or None


def check_page(limit: object, offset: object) -> tuple[int | None, int]:
    """memories()'s ``limit`` (None: all, else >= 1) and ``offset`` (>= 0)."""
    if limit is not None and (
        isinstance(limit, bool) or not isinstance(limit, int)
    ):
        raise InvalidTypeError(f"limit must be an int or None, got {type(limit).__name__}")
    if limit is not None and limit < 1:
        raise InvalidInputError(f"limit must be >= 1 (or None for all), got {limit}")
    if isinstance(offset, bool) or not isinstance(offset, int):
        raise InvalidTypeError(f"offset must be an int, got {type(offset).__name__}")
    if offset < 0:
        raise InvalidInputError(f"offset must be >= 0, got {offset}")
    return limit, offset


def node_ids(ids: object) -> list[str]:
    """forget()'s ``ids`` (and pin()'s): a list (or tuple, set) of node id strings (or their
    ``node:`` IRIs), in lower case (ids are hex: ``0193F1C2…`` is ``0193f1c2…``),
    de-duplicated in order. A string that cannot be an id this library makes is bad input,
    not an unknown id."""
    if isinstance(ids, str | bytes) or not isinstance(ids, Sequence | Set):
        raise InvalidTypeError(
            f"ids must be a list of node id strings (not a bare str), got {type(ids).__name__}"
        )
    out: list[str] = []
    for i in ids:
        if not isinstance(i, str):
            raise InvalidTypeError(f"ids must contain str, got {type(i).__name__}")
        nid = i.strip()
        for prefix in (V.NODE, "node:"):
            if nid.startswith(prefix):
                nid = nid[len(prefix):]
        if not _NODE_ID.fullmatch(nid):
            raise InvalidInputError(f"{i!r} is not a memory id: {ID_SHAPE}")
        out.append(nid.lower())
    return list(dict.fromkeys(out))


def check_bool(name: str, value: object) -> bool:
    """A flag that must be a bool (``purge``)."""
    if not isinstance(value, bool):
        raise InvalidTypeError(f"{name} must be a bool, got {type(value).__name__}")
    return value
