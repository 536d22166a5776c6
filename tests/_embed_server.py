"""A deterministic embedding server on loopback for the semantic entry's tests (SPEC §5.7).

It speaks the OpenAI embeddings protocol (``POST /v1/embeddings``) and Ollama's
(``POST /api/embed``). A text's vector counts the concepts of a small hand-made table whose
words it holds, so "hotel" and "ryokan" are near (both lodging) while sharing no word, as are
"宾馆" and "旅馆", "猫" and "小猫"; a text of no concept points along a dimension of its own.

``Embeddings.mode`` makes it misbehave: "down" (HTTP 503), "count" (one vector too few),
"nan", "dimension" (vectors one longer), "hold" (a request holding ``hold_matching`` is
answered once ``release`` is set). The model
"reversed" gives other vectors of the same dimension (another model).
"""

from __future__ import annotations

import contextlib
import http.server
import json
import math
import threading
import zlib
from collections.abc import Iterator
from typing import Any, ClassVar

from servers import loopback

#: concept → the words that mean it (English by lower-case substring of a word, Han as a
#: substring of the text).
CONCEPTS: dict[str, tuple[str, ...]] = {
    "lodging": ("hotel", "ryokan", "inn", "hostel", "宾馆", "旅馆", "酒店", "住宿"),
    "cat": ("cat", "kitten", "猫"),
    "food": ("sushi", "ramen", "dinner", "lunch", "饭", "面条"),
    "database": ("postgres", "database", "mysql", "数据库"),
    "music": ("guitar", "piano", "concert", "吉他", "钢琴"),
    "weather": ("rain", "snow", "sunny", "下雨", "天气"),
}
#: Dimensions a text's words are hashed into, beside the concepts: texts of no shared concept
#: are near only when they share words, as with a real model.
WORD_DIMENSIONS = 256
DIMENSION = len(CONCEPTS) + WORD_DIMENSIONS
#: A concept weighs this much more than one word.
CONCEPT_WEIGHT = 3.0


def vector(text: str) -> list[float]:
    low = text.lower()
    words = [w.strip(".,!?;:'\"()？。，") for w in low.split()]
    words = [w for w in words if w]
    out = []
    for terms in CONCEPTS.values():
        hit = 0.0
        for term in terms:
            if term.isascii():
                hit += sum(1.0 for w in words if w.startswith(term))
            elif term in text:
                hit += 1.0
        out.append(CONCEPT_WEIGHT * hit)
    hashed = [0.0] * WORD_DIMENSIONS
    for w in words:
        hashed[zlib.crc32(w.encode()) % WORD_DIMENSIONS] += 1.0
    return out + hashed


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


class Embeddings(http.server.BaseHTTPRequestHandler):
    """The handler; subclass per test (``type("E", (Embeddings,), {...})``) to set ``mode``,
    ``models`` (names it serves) and read ``requests`` (texts embedded, per request)."""

    mode: ClassVar[str] = "ok"
    models: ClassVar[tuple[str, ...]] = ("concepts", "reversed")
    release: ClassVar[threading.Event] = threading.Event()
    holding: ClassVar[threading.Event] = threading.Event()
    hold_matching: ClassVar[str] = ""
    requests: ClassVar[list[list[str]]] = []
    lock: ClassVar[threading.Lock] = threading.Lock()

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        cls = type(self)
        if self.path not in ("/v1/embeddings", "/api/embed"):
            return self._send(404, {"error": f"no route {self.path}"})
        texts = body.get("input")
        if isinstance(texts, str):
            texts = [texts]
        with cls.lock:
            cls.requests.append(list(texts))
        if body.get("model") not in cls.models:
            return self._send(404, {"error": {"message": f"model {body.get('model')!r} not found"}})
        if cls.mode == "down":
            return self._send(503, {"error": "loading"})
        if cls.mode == "hold" and any(cls.hold_matching in t for t in texts):
            cls.holding.set()
            cls.release.wait(60)
        vectors = [vector(t) for t in texts]
        if body["model"] == "reversed":
            vectors = [v[::-1] for v in vectors]
        if cls.mode == "count":
            vectors = vectors[:-1]
        elif cls.mode == "nan":
            vectors = [[float("nan")] + v[1:] for v in vectors]
        elif cls.mode == "dimension":
            vectors = [[*v, 0.5] for v in vectors]
        if self.path == "/api/embed":
            return self._send(200, {"model": body["model"], "embeddings": vectors})
        data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
        data.reverse()  # servers may answer out of order: the index says where each goes
        return self._send(200, {"object": "list", "data": data, "model": body["model"]})

    def _send(self, status: int, value: Any) -> None:
        raw = json.dumps(value, allow_nan=True).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def embedding_server(**attrs: Any) -> Iterator[tuple[str, type[Embeddings]]]:
    """A fresh server: ``(base URL, its handler class)`` — set ``handler.mode`` to change how
    it answers while it runs."""
    handler: type[Embeddings] = type(
        "Handler", (Embeddings,), {"requests": [], "lock": threading.Lock(),
                                   "release": threading.Event(), "holding": threading.Event(),
                                   **attrs})
    with loopback(handler) as url:
        yield url, handler
