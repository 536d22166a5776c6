"""Embedders: the optional model behind the semantic entry (SPEC §5.7).

An :class:`Embedder` turns texts into vectors. Two backends speak the protocols users already
run, on the HTTP client of the small models (:class:`~memory_rdf.small_model.HTTPModel`: its
pooled ``httpx`` client, timeout, and error mapping to :class:`~memory_rdf.ModelError` /
:class:`~memory_rdf.PermanentModelError`):

- :class:`OpenAIEmbedder`: ``POST {base_url}/embeddings`` (OpenAI, vLLM, llama.cpp's server,
  LM Studio, text-embeddings-inference, ...);
- :class:`OllamaEmbedder`: ``POST {base_url}/api/embed``.

**Retries.** A failure worth retrying (timeout, connection error, HTTP 408/409/425/429 and
5xx, an answer that is not the protocol's) is tried again ``retries`` times (default 2) with a
short exponential backoff (tenacity), inside :meth:`embed`: the memory managers call it in the
scheduler's model-call threads, never on the scheduler thread, and give up quickly — a
memory that gets no vector is kept without one and embedded later (``stats()
["vectors_missing"]``), a recall whose query gets none answers from the lexical entries.

**Answers are checked**: one vector per text, in order, all of one dimension (the
``dimension`` given, else the first answer's), every number finite. Anything else is a
:class:`~memory_rdf.ModelError` that says what was wrong.

httpx and tenacity are imported when the first embedder is built, not at import.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from typing import Any, ClassVar, Protocol, Self, runtime_checkable

from memory_rdf._exceptions import (
    InvalidInputError,
    InvalidTypeError,
    ModelError,
    PermanentModelError,
)
from memory_rdf._headers import check_header
from memory_rdf._query_guard import check_seconds
from memory_rdf.small_model._http import HTTPModel

__all__ = ["DEFAULT_EMBED_TIMEOUT", "Embedder", "HTTPEmbedder", "OllamaEmbedder",
           "OpenAIEmbedder", "check_vectors"]

#: Seconds per embedding request unless ``timeout=`` says otherwise: an embedding takes
#: milliseconds; a server that has not answered in this long is treated as down for now.
DEFAULT_EMBED_TIMEOUT = 30.0
#: Most texts sent in one request (servers cap their batch: OpenAI 2,048 inputs).
BATCH = 64
#: Seconds an embedder is left alone after a failure (:attr:`HTTPEmbedder.cool_down`).
COOL_DOWN = 30.0
#: Retries of a failed request inside :meth:`HTTPEmbedder.embed`, and their first delay (s).
RETRIES = 2
RETRY_DELAY = 0.25


@runtime_checkable
class Embedder(Protocol):
    """What the semantic entry needs from an embedding model (SPEC §5.7).

    ``embed(texts)`` returns one vector (a list of floats) per text, in order, all of one
    length; ``name`` identifies the model, so that vectors of two models are never mixed in
    one store; ``dimension`` is the length of its vectors (None until known).
    An in-process embedder is called in the scheduler's model-call threads like the HTTP
    ones: it must be thread-safe.
    """

    name: str

    @property
    def dimension(self) -> int | None: ...

    def embed(self, texts: list[str]) -> list[list[float]]: ...


def check_vectors(value: object, count: int, dimension: int | None, who: str) -> list[list[float]]:
    """``value`` as ``count`` vectors of one dimension (``dimension`` when given), every
    number finite; else :class:`ModelError` saying what is wrong."""
    if not isinstance(value, list):
        raise ModelError(f"{who}: the answer is not a list of vectors")
    if len(value) != count:
        raise ModelError(f"{who}: {len(value)} vectors for {count} texts")
    out: list[list[float]] = []
    for i, vector in enumerate(value):
        if not isinstance(vector, list) or not vector:
            raise ModelError(f"{who}: vector {i} is not a non-empty list of numbers")
        want = dimension if dimension is not None else (len(out[0]) if out else None)
        if want is not None and len(vector) != want:
            raise ModelError(
                f"{who}: vector {i} has {len(vector)} dimensions, expected {want}")
        floats = []
        for x in vector:
            if isinstance(x, bool) or not isinstance(x, int | float):
                raise ModelError(f"{who}: vector {i} holds {type(x).__name__}, not a number")
            f = float(x)
            if not math.isfinite(f):
                raise ModelError(f"{who}: vector {i} holds {x!r}, not a finite number")
            floats.append(f)
        if not any(floats):
            raise ModelError(f"{who}: vector {i} is all zeros (it has no direction)")
        out.append(floats)
    return out


class _Client(HTTPModel):
    """The small models' HTTP template, used for its client and error mapping only."""

    backend: ClassVar[str] = "embedding"


class HTTPEmbedder:
    """An embedding model behind an HTTP API; subclasses implement :meth:`_request`.

    Thread-safe. Close it (or use it as a context manager) when done; the memory managers
    using it do not close it. Raises :class:`~memory_rdf.ModelError` for failures worth
    retrying (after its own ``retries``) and :class:`~memory_rdf.PermanentModelError` for
    those that need a fix (HTTP 400/401/403/404: wrong model name, key or URL).
    """

    backend: ClassVar[str] = "HTTP"

    def __init__(
        self,
        model: str,
        base_url: str,
        *,
        timeout: float | None = None,
        headers: dict[str, str] | None = None,
        dimension: int | None = None,
        retries: int = RETRIES,
        cool_down: float = COOL_DOWN,
    ) -> None:
        if dimension is not None and (
            isinstance(dimension, bool) or not isinstance(dimension, int) or dimension < 1
        ):
            raise InvalidInputError(f"dimension must be an int >= 1 or None, got {dimension!r}")
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise InvalidInputError(f"retries must be an int >= 0, got {retries!r}")
        self._http = _Client(
            model, base_url,
            timeout=DEFAULT_EMBED_TIMEOUT if timeout is None else timeout, headers=headers,
        )
        self._http.backend = f"{self.backend} embedding"  # type: ignore[misc]
        self.model = self._http.model
        self.base_url = self._http.base_url
        self.timeout = self._http.timeout
        self.retries = retries
        #: Seconds the memory managers leave this embedder alone after it failed: meanwhile
        #: remembers do not wait for it and recalls answer from the lexical entries.
        self.cool_down = check_seconds(cool_down)
        #: Identifies the model in the store (SPEC §5.7): vectors of another name are redone.
        self.name = self.model
        self._dimension = dimension
        self._lock = threading.Lock()
        self.requests = 0
        self.failures = 0

    @property
    def dimension(self) -> int | None:
        """The length of this model's vectors: as given, else learnt from the first answer."""
        return self._dimension

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model!r}, base_url={self.base_url!r})"

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool; later calls raise :class:`PermanentModelError`."""
        self._http.close()

    def embed(self, texts: list[str]) -> list[list[float]]:
        """One vector per text, in order (requests of at most :data:`BATCH` texts).

        Raises:
            InvalidTypeError: ``texts`` is not a list of str.
            ModelError: the server failed or answered garbage (after ``retries``).
            PermanentModelError: HTTP 400/401/403/404, or the embedder is closed.
        """
        if isinstance(texts, str) or not isinstance(texts, Sequence):
            raise InvalidTypeError(f"texts must be a list of str, got {type(texts).__name__}")
        texts = list(texts)
        for t in texts:
            if not isinstance(t, str):
                raise InvalidTypeError(f"texts must contain str, got {type(t).__name__}")
        out: list[list[float]] = []
        for start in range(0, len(texts), BATCH):
            part = [t if t.strip() else " " for t in texts[start:start + BATCH]]
            out += self._with_retries(part)
        return out

    def _with_retries(self, texts: list[str]) -> list[list[float]]:
        from tenacity import (
            Retrying,
            retry_if_exception,
            stop_after_attempt,
            wait_exponential,
        )

        retrying = Retrying(
            stop=stop_after_attempt(1 + self.retries),
            wait=wait_exponential(multiplier=RETRY_DELAY, max=4 * RETRY_DELAY),
            retry=retry_if_exception(
                lambda e: isinstance(e, ModelError) and not isinstance(e, PermanentModelError)),
            reraise=True,
        )
        for attempt in retrying:
            with attempt:
                return self._once(texts)
        raise AssertionError("unreachable")  # pragma: no cover

    def _once(self, texts: list[str]) -> list[list[float]]:
        with self._lock:
            self.requests += 1
        try:
            value = self._request(texts)
            vectors = check_vectors(value, len(texts), self._dimension, self._http._who())
        except BaseException:
            with self._lock:
                self.failures += 1
            raise
        with self._lock:
            if self._dimension is None:
                self._dimension = len(vectors[0]) if vectors else None
        return vectors

    def _request(self, texts: list[str]) -> Any:
        """Send ``texts`` as one request; return the vectors as the server gave them (a
        list of lists, checked by the caller). Use ``self._http._post`` for the call."""
        raise NotImplementedError

    def usage(self) -> dict[str, int]:
        """Requests sent so far and how many of them failed."""
        with self._lock:
            return {"requests": self.requests, "failures": self.failures}


class OpenAIEmbedder(HTTPEmbedder):
    """An embedding model behind an OpenAI-compatible API: ``POST {base_url}/embeddings``
    with ``{"model", "input": [texts], "encoding_format": "float"}``; the vectors are read
    from ``data[i].embedding`` in ``data[i].index`` order.

    ``base_url`` is the API root, usually ending in ``/v1`` (``http://localhost:8080/v1``
    for llama.cpp's ``llama-server --embedding``, ``http://localhost:8000/v1`` for vLLM).
    ``api_key`` is sent as ``Authorization: Bearer``. ``timeout``: seconds per request
    (default 30). ``dimension``: the length of the vectors, when known (else learnt).
    ``retries``: failed requests tried again (short backoff); ``cool_down``: seconds the
    memory managers leave the embedder alone after it failed (default 30).

    >>> emb = OpenAIEmbedder("all-minilm", "http://localhost:8080/v1/")
    >>> emb, emb.name
    (OpenAIEmbedder('all-minilm', base_url='http://localhost:8080/v1'), 'all-minilm')
    >>> emb.close()
    """

    backend: ClassVar[str] = "OpenAI-compatible"

    def __init__(
        self,
        model: str,
        base_url: str,
        api_key: str | None = None,
        *,
        timeout: float | None = None,
        dimension: int | None = None,
        retries: int = RETRIES,
        cool_down: float = COOL_DOWN,
    ) -> None:
        if api_key is not None:
            check_header("Authorization", api_key, "api_key")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
        super().__init__(model, base_url, timeout=timeout, headers=headers,
                         dimension=dimension, retries=retries, cool_down=cool_down)

    def _request(self, texts: list[str]) -> Any:
        data = self._http._post(
            "/embeddings", {"model": self.model, "input": texts, "encoding_format": "float"})
        items = data.get("data") if isinstance(data, dict) else None
        if not isinstance(items, list):
            raise ModelError(f"{self._http._who()}: the reply has no data list")
        indexed = []
        for pos, item in enumerate(items):
            if not isinstance(item, dict) or "embedding" not in item:
                raise ModelError(f"{self._http._who()}: data[{pos}] has no embedding")
            index = item.get("index", pos)
            if isinstance(index, bool) or not isinstance(index, int):
                raise ModelError(f"{self._http._who()}: data[{pos}].index is not an int")
            indexed.append((index, item["embedding"]))
        indexed.sort(key=lambda p: p[0])
        if [i for i, _ in indexed] != list(range(len(indexed))):
            raise ModelError(f"{self._http._who()}: the data indexes are not 0 … n-1")
        return [v for _, v in indexed]


class OllamaEmbedder(HTTPEmbedder):
    """An embedding model served by `Ollama <https://ollama.com>`_ (``ollama pull
    all-minilm``): ``POST {base_url}/api/embed`` with ``{"model", "input": [texts]}``; the
    vectors are read from ``embeddings``. ``timeout``: seconds per request (default 30).

    >>> emb = OllamaEmbedder("all-minilm")
    >>> emb
    OllamaEmbedder('all-minilm', base_url='http://localhost:11434')
    >>> emb.close()
    """

    backend: ClassVar[str] = "Ollama"

    def __init__(
        self,
        model: str,
        base_url: str = "http://localhost:11434",
        *,
        timeout: float | None = None,
        dimension: int | None = None,
        retries: int = RETRIES,
        cool_down: float = COOL_DOWN,
    ) -> None:
        super().__init__(model, base_url, timeout=timeout, dimension=dimension, retries=retries,
                         cool_down=cool_down)

    def _request(self, texts: list[str]) -> Any:
        data = self._http._post("/api/embed", {"model": self.model, "input": texts})
        vectors = data.get("embeddings") if isinstance(data, dict) else None
        if not isinstance(vectors, list):
            raise ModelError(f"{self._http._who()}: the reply has no embeddings list")
        return vectors
