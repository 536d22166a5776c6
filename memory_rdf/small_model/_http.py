"""The template of the HTTP small models (SPEC §4): :class:`HTTPModel`.

The base class owns everything backends share — the pooled ``httpx`` client and its timeout,
mapping transport and HTTP errors to :class:`~memory_rdf.ModelError` /
:class:`~memory_rdf.PermanentModelError`, parsing and validating answers (``_answers``),
and usage accounting. A backend implements one private method, :meth:`HTTPModel._request`:
send one prompt, return the answer text and the token counts the server reported.

**Retries.** A call makes exactly one HTTP request; it never retries by itself. Retrying is
the manager's job (``memory_rdf._calls.with_retries``: exponential backoff that never holds
the scheduler thread, bounded by ``Config.max_retries``). So a call either returns a valid
answer or raises:

- :class:`~memory_rdf.ModelError` (transient, retried by the manager): timeout, connection
  error, HTTP 408/409/425/429 and 5xx, a reply that is not the protocol's JSON, an answer
  that does not parse or validate;
- :class:`~memory_rdf.PermanentModelError` (not retried): any other HTTP 4xx — 400 (the
  server's error text is quoted), 401/403 (check the API key), 404 (unknown model or wrong
  URL) — and use after :meth:`HTTPModel.close`.

Models answer at temperature 0, so asking again the same way usually returns the same
invalid answer. The model therefore remembers (for the last 256 distinct requests) how many
invalid answers a request got, and asks again at temperature 0.3, 0.6, then 0.9: the
manager's retries of an invalid answer are real second opinions.

**Timeout.** ``timeout`` bounds each request: connecting, each read, and the whole answer
(checked between received chunks). A model built without ``timeout`` takes the
``Config.model_timeout`` of the memory manager or system it is given to
(:meth:`HTTPModel.use_default_timeout`), and :data:`DEFAULT_TIMEOUT` until then, so one
setting in ``Config`` bounds every request; an explicit ``timeout=`` (or
``MEMORY_RDF_MODEL_TIMEOUT`` through ``model_from_env``) wins over it.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Self, TypeVar

from memory_rdf._calls import CallStats, count_request
from memory_rdf._exceptions import (
    InvalidInputError,
    InvalidTypeError,
    ModelError,
    PermanentModelError,
)
from memory_rdf._headers import check_header, split_userinfo
from memory_rdf._query_guard import check_seconds
from memory_rdf._types import Processed
from memory_rdf.small_model._answers import (
    check_processed_item,
    check_relation,
    check_relations,
    check_segments,
    check_shape,
    parse_json,
)
from memory_rdf.small_model._prompts import (
    Prompt,
    process_batch_prompt,
    process_prompt,
    relation_batch_prompt,
    relation_prompt,
    segment_prompt,
)

if TYPE_CHECKING:  # httpx is imported on first use: `import memory_rdf` stays fast
    import httpx

__all__ = ["DEFAULT_TIMEOUT", "HTTPModel", "Reply"]

T = TypeVar("T")

#: Temperatures of a request's next attempt after 0, 1, 2, 3+ invalid answers to it.
REASK_TEMPERATURES = (0.0, 0.3, 0.6, 0.9)
_REMEMBERED_REQUESTS = 256
#: Largest reply read (bytes); a bigger one is garbage.
MAX_REPLY_BYTES = 16 * 1024 * 1024
_TRANSIENT_4XX = frozenset({408, 409, 425, 429})
#: Seconds per request of a model given no ``timeout`` and not (yet) used by a manager;
#: the same as ``Config().model_timeout``.
DEFAULT_TIMEOUT = 300.0


def _httpx() -> Any:
    import httpx

    return httpx


@dataclass(frozen=True)
class Reply:
    """What a backend's :meth:`HTTPModel._request` got back: the answer text, the tokens
    the server counted (0 when it did not say), and ``problem`` when the reply itself says
    the answer is unusable (cut off at the token limit, a refusal)."""

    content: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    problem: str | None = None


# --------------------------------------------------------------------------- accounting


@dataclass
class _Usage:
    total: CallStats = field(default_factory=CallStats)
    by_task: dict[str, CallStats] = field(default_factory=dict)

    def add(self, task: str, **values: Any) -> None:
        for counts in (self.total, self.by_task.setdefault(task, CallStats())):
            for name, v in values.items():
                setattr(counts, name, getattr(counts, name) + v)


# --------------------------------------------------------------------------- the base


class HTTPModel:
    """A small model behind an HTTP chat API; subclasses implement :meth:`_request`.

    Implements the :class:`~memory_rdf.SmallModel` calls and their batched forms
    ``process_batch(texts)`` and ``relation_batch(pairs)``, one request each. Thread-safe;
    one pooled connection set per model. Close it (or use it as a context manager) when
    done; the memory managers using it do not close it.

    Raises :class:`~memory_rdf.ModelError` for failures worth retrying and
    :class:`~memory_rdf.PermanentModelError` for those that need a fix (see the module
    docstring).
    """

    backend: ClassVar[str] = "HTTP"

    def __init__(
        self,
        model: str,
        base_url: str,
        *,
        timeout: float | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        if not isinstance(model, str):
            raise InvalidTypeError(f"model must be a str, got {type(model).__name__}")
        if not model.strip():
            raise InvalidInputError("model must name a model, got an empty string")
        if not isinstance(base_url, str):
            raise InvalidTypeError(f"base_url must be a str, got {type(base_url).__name__}")
        if not base_url.startswith(("http://", "https://")):
            raise InvalidInputError(f"base_url must start with http:// or https://: {base_url!r}")
        for name, value in (headers or {}).items():
            check_header(name, value)
        # http://user:password@host/…: basic auth, and the password out of every message.
        base_url, userinfo = split_userinfo(base_url)
        if userinfo and any(k.lower() == "authorization" for k in headers or {}):
            raise InvalidInputError(
                "give the credentials once: an API key or a user:password@ in base_url")
        self.model = model.strip()
        self.base_url = base_url.rstrip("/")
        #: Seconds each request may take (see :meth:`use_default_timeout`).
        self.timeout = DEFAULT_TIMEOUT if timeout is None else check_seconds(timeout)
        self.timeout_is_explicit = timeout is not None
        hx = _httpx()
        self._client: httpx.Client = hx.Client(
            auth=hx.BasicAuth(*userinfo) if userinfo else None,
            timeout=hx.Timeout(self.timeout),  # each request passes the timeout of the moment
            headers={"Content-Type": "application/json", **(headers or {})},
            follow_redirects=True,
        )
        self._lock = threading.Lock()
        self._usage = _Usage()
        self._invalid: OrderedDict[str, int] = OrderedDict()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.model!r}, base_url={self.base_url!r}, "
            f"timeout={self.timeout:g})"
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool; later calls raise :class:`PermanentModelError`."""
        self._client.close()

    def use_default_timeout(self, seconds: float) -> float:
        """Bound each request by ``seconds`` unless this model was given its own ``timeout``;
        return the timeout in effect.

        Memory managers and systems call it with ``Config.model_timeout`` when they are given
        the model, so ``Config`` is where a user sets it; an explicit ``timeout=`` (or
        ``MEMORY_RDF_MODEL_TIMEOUT``) wins. A model shared by managers with different
        configs keeps the value applied last.
        """
        value = check_seconds(seconds)
        if not self.timeout_is_explicit:
            self.timeout = value
        return self.timeout

    # -- the SmallModel calls ------------------------------------------------------------------

    def segment(self, text: str) -> list[str]:
        """Cut chat text into segments, pronouns resolved where the model can."""
        if not text.strip():
            return []
        return self._ask(segment_prompt(text), lambda v: check_segments(v, text))

    def process(self, text: str, target_length: int | None = None) -> Processed:
        """Content (the text, or a rewrite of at most ``target_length`` characters), a
        phrase of at most 20 characters and 3–5 keywords."""
        return self._ask(
            process_prompt(text, target_length),
            lambda v: check_processed_item(v, text, target_length),
        )

    def process_batch(self, texts: Sequence[str]) -> list[Processed]:
        """``process(text)`` of every text, in order, in one request."""
        texts = list(texts)
        if not texts:
            return []

        def check(value: dict[str, Any]) -> list[Processed]:
            return [
                check_processed_item(item, text, None, f"items[{i}]")
                for i, (item, text) in enumerate(zip(value["items"], texts, strict=True))
            ]

        return self._ask(process_batch_prompt(texts), check)

    def relation(self, node_content: str, focus_content: str) -> str:
        """A short name for the link from a new node to a focus node; "" when unrelated."""
        return self._ask(
            relation_prompt(node_content, focus_content), lambda v: check_relation(v["relation"])
        )

    def relation_batch(self, pairs: Sequence[tuple[str, str]]) -> list[str]:
        """``relation(node, focus)`` of every pair, in order, in one request."""
        pairs = [(a, b) for a, b in pairs]
        if not pairs:
            return []
        return self._ask(relation_batch_prompt(pairs), lambda v: check_relations(v["relations"]))

    # -- accounting ----------------------------------------------------------------------------

    def usage(self) -> dict[str, Any]:
        """What this model has sent so far: ``requests``, ``failures`` (of which
        ``invalid_answers``), ``prompt_tokens``, ``completion_tokens`` (as the server
        reported them), ``seconds``, and the same per task in ``by_task`` (segment, process,
        process_batch, relation, relation_batch). Failed requests count their tokens too."""
        with self._lock:
            out = self._usage.total.usage()
            out["by_task"] = {k: v.usage() for k, v in sorted(self._usage.by_task.items())}
            return out

    # -- the template --------------------------------------------------------------------------

    def _ask(self, prompt: Prompt, check: Callable[[Any], T]) -> T:
        """One request for ``prompt``; the answer parsed, shape-checked, then ``check``ed."""
        key = hashlib.sha256(
            "\0".join((prompt.task, prompt.system, prompt.user)).encode("utf-8", "replace")
        ).hexdigest()
        with self._lock:
            reasks = self._invalid.get(key, 0)
        temperature = REASK_TEMPERATURES[min(reasks, len(REASK_TEMPERATURES) - 1)]
        start = time.perf_counter()
        reply: Reply | None = None
        invalid = False
        try:
            reply = self._request(prompt, temperature)
            try:
                if reply.problem:
                    raise ModelError(reply.problem)
                value = parse_json(reply.content)
                check_shape(value, prompt.schema)
                result = check(value)
            except (ModelError, ValueError, TypeError, KeyError, IndexError) as exc:
                invalid = True
                raise ModelError(f"{self._who()}: invalid {prompt.task} answer: {exc}") from exc
        except ModelError:
            self._account(prompt.task, start, reply, failed=True, invalid=invalid)
            if invalid:
                self._note_invalid(key)
            raise
        except BaseException:
            self._account(prompt.task, start, reply, failed=True, invalid=False)
            raise
        self._account(prompt.task, start, reply, failed=False, invalid=False)
        if reasks:
            with self._lock:
                self._invalid.pop(key, None)
        return result

    def _request(self, prompt: Prompt, temperature: float) -> Reply:
        """Send ``prompt`` (its messages and the JSON schema of its answer) as one request;
        return the answer text and token counts. Use :meth:`_post` for the HTTP call."""
        raise NotImplementedError

    def _not_found(self, url: str, server_says: str) -> str:
        """The message of a 404: what to fix."""
        return (
            f"{self._who()} or the endpoint {url} not found: check the model "
            f"name and the base URL (server said: {server_says})"
        )

    def _post(self, path: str, body: dict[str, Any]) -> Any:
        """POST ``body`` as JSON to ``base_url + path``; the decoded JSON reply.

        Translates every transport and HTTP failure into ModelError / PermanentModelError.
        """
        httpx = _httpx()
        url = self.base_url + path
        data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        timeout = self.timeout
        deadline = time.monotonic() + timeout
        try:
            with self._client.stream(
                "POST", url, content=data, timeout=httpx.Timeout(timeout)
            ) as response:
                chunks: list[bytes] = []
                size = 0
                for chunk in response.iter_bytes():
                    chunks.append(chunk)
                    size += len(chunk)
                    if size > MAX_REPLY_BYTES:
                        raise ModelError(f"{self._who()}: reply larger than {MAX_REPLY_BYTES} B")
                    if time.monotonic() > deadline:
                        raise httpx.ReadTimeout("the whole answer took too long")
                status = response.status_code
        except httpx.TimeoutException as exc:
            raise ModelError(
                f"{self._who()}: no answer from {url} within {timeout:g} s ({exc})"
            ) from exc
        except httpx.RequestError as exc:  # connection refused or reset, protocol errors, ...
            raise ModelError(f"{self._who()}: cannot reach {url}: {exc}") from exc
        except httpx.InvalidURL as exc:
            raise PermanentModelError(f"{self._who()}: bad URL {url}: {exc}") from exc
        except RuntimeError as exc:  # httpx: "the client has been closed"
            raise PermanentModelError(f"{self._who()}: {exc}") from exc
        raw = b"".join(chunks)
        if not 200 <= status < 300:
            raise self._status_error(status, raw, url)
        try:
            return json.loads(raw)
        except (ValueError, RecursionError) as exc:  # RecursionError: nested too deep
            raise ModelError(
                f"{self._who()}: the reply from {url} is not JSON: {raw[:120]!r}"
            ) from exc

    def _status_error(self, status: int, raw: bytes, url: str) -> ModelError:
        says = _server_message(raw) or f"HTTP {status}"
        if status == 404:
            return PermanentModelError(self._not_found(url, says))
        if status in (401, 403):
            return PermanentModelError(
                f"{self._who()}: {url} refused the credentials (HTTP {status}): check "
                f"MEMORY_RDF_API_KEY / api_key (server said: {says})"
            )
        if 400 <= status < 500 and status not in _TRANSIENT_4XX:
            return PermanentModelError(
                f"{self._who()}: {url} rejected the request (HTTP {status}): {says}"
            )
        return ModelError(f"{self._who()}: {url} answered HTTP {status}: {says}")

    # -- helpers -------------------------------------------------------------------------------

    def _who(self) -> str:
        return f"{self.backend} model {self.model!r}"

    def _account(
        self, task: str, start: float, reply: Reply | None, *, failed: bool, invalid: bool
    ) -> None:
        prompt_tokens = reply.prompt_tokens if reply else 0
        completion_tokens = reply.completion_tokens if reply else 0
        with self._lock:
            self._usage.add(
                task,
                requests=1,
                failures=int(failed),
                invalid_answers=int(invalid),
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                seconds=time.perf_counter() - start,
            )
        count_request(prompt_tokens, completion_tokens)

    def _note_invalid(self, key: str) -> None:
        with self._lock:
            self._invalid[key] = self._invalid.get(key, 0) + 1
            self._invalid.move_to_end(key)
            while len(self._invalid) > _REMEMBERED_REQUESTS:
                self._invalid.popitem(last=False)


def _server_message(raw: bytes) -> str:
    """The error text of a failed reply: Ollama's ``{"error": "..."}``, OpenAI's
    ``{"error": {"message": "..."}}``, else the start of the body."""
    text = raw.decode("utf-8", "replace").strip()
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return text[:300]
    if isinstance(value, dict):
        err = value.get("error", value.get("detail", value.get("message")))
        if isinstance(err, dict):
            err = err.get("message", err)
        if err is not None:
            return str(err)[:300]
    return text[:300]


def token_count(value: Any) -> int:
    """A token count from a reply (0 when absent or not a non-negative integer)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return 0
