"""A fake LLM server on loopback that speaks Ollama's and OpenAI's chat protocols.

``POST /api/chat`` (Ollama) and ``POST /v1/chat/completions`` (OpenAI-compatible) are
answered FROM THE JSON SCHEMA IN THE REQUEST (``format`` / ``response_format.json_schema
.schema``) and the JSON input in the last user message:

- ``segments``: the input text cut at its lines;
- ``content``/``phrase``/``keywords``: the text (cut to ``max_characters`` when given), its
  first 16 characters, and 3–4 words of it;
- ``items`` (``minItems`` = n): n of those, one per input text;
- ``relation`` / ``relations`` (``minItems`` = n): "涉及" (n times).

Token counts are reported like a real server's (an estimate: one per Han character, one per
four other non-blank characters, four per message) and recorded with every request, so tests
can compare them with what a model accounted.

It can be told to misbehave for the next ``times`` requests (``-1`` = always), optionally only
for one task (segment, process, process_batch, relation, relation_batch): an HTTP status, a
hang, garbage text, truncated JSON, a wrong shape, or a batch of the wrong length. A model
name it does not know gets the protocol's 404; with ``api_key`` set, OpenAI requests without
that bearer key get 401.

    with FakeLLM() as server:
        model = OllamaModel("fake-model", server.url)
        server.misbehave("status", times=2, status=500)
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeLLM", "Fault", "Recorded", "estimate_tokens", "fake_processed"]

FAKE_MODEL = "fake-model"
RELATION = "涉及"
FAULTS = ("status", "hang", "garbage", "invalid_json", "wrong_shape", "wrong_length")

_HAN = "\u3400-\u4dbf\u4e00-\u9fff"
_ROLE_RE = re.compile(r"^(?:user|assistant|system):[ \t]?", re.MULTILINE)
_WORD_RE = re.compile(rf"[{_HAN}]+|[^\W_{_HAN}][\w.+-]*")
_TASKS = {
    "segments": "segment",
    "content": "process",
    "items": "process_batch",
    "relation": "relation",
    "relations": "relation_batch",
}


@dataclass
class Fault:
    """One scripted misbehaviour (see the module docstring)."""

    kind: str
    times: int = 1
    task: str | None = None
    status: int = 500
    message: str = "internal server error"
    seconds: float = 10.0


@dataclass
class Recorded:
    """One request as the server saw it, with what it answered."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    task: str
    status: int
    fault: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def schema(self) -> dict[str, Any]:
        if self.path.endswith("/api/chat"):
            schema: dict[str, Any] = self.body["format"]
            return schema
        schema = self.body["response_format"]["json_schema"]["schema"]
        return schema


def estimate_tokens(text: str) -> int:
    """A tokenizer-free estimate: one token per Han character, one per 4 other characters."""
    han = len(re.findall(f"[{_HAN}]", text))
    other = len(re.sub(rf"[{_HAN}\s]", "", text))
    return han + (other + 3) // 4


def fake_processed(text: str, max_characters: int | None = None) -> dict[str, Any]:
    """The fake's process answer: text (cut), first 16 characters, 3–4 words."""
    plain = " ".join(_ROLE_RE.sub("", text).split())
    content = text if max_characters is None else text[: max(max_characters, 1)]
    words: list[str] = []
    for w in _WORD_RE.findall(plain):
        if w.lower() in ("user", "assistant", "system"):
            continue
        pieces = [w[i : i + 2] for i in range(0, len(w), 2)] if re.match(f"[{_HAN}]", w) else [w]
        for p in pieces:
            if len(p) > 1 and p not in words:
                words.append(p)
    n = 2
    while len(words) < 3:
        words.append(f"{plain[:4]}{n}")
        n += 1
    return {"content": content, "phrase": plain[:16], "keywords": words[:4]}


def _answer(schema: dict[str, Any], task: str, payload: dict[str, Any]) -> dict[str, Any]:
    props = schema.get("properties", {})
    if task == "segment":
        text = payload["text"]
        return {"segments": [line.strip() for line in text.split("\n") if line.strip()]}
    if task == "process":
        return fake_processed(payload["text"], payload.get("max_characters"))
    if task == "process_batch":
        n = props["items"]["minItems"]
        texts = payload["texts"]
        assert len(texts) == n == props["items"]["maxItems"], (len(texts), props["items"])
        return {"items": [fake_processed(t) for t in texts]}
    if task == "relation":
        return {"relation": RELATION}
    n = props["relations"]["minItems"]
    assert n == props["relations"]["maxItems"] == len(payload["pairs"])
    return {"relations": [RELATION] * n}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeLLM


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out at once: no 40 ms delayed ACK
    timeout = 10  # idle keep-alive connections end
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        self.server.fake._handle(self, raw)

    def send_json(self, status: int, value: Any) -> None:
        data = json.dumps(value, ensure_ascii=False).encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except OSError:  # the client gave up (timeout): nothing to tell it
            self.close_connection = True


@dataclass
class FakeLLM:
    """The server. ``start()``/``stop()``, or use it as a context manager."""

    models: Iterable[str] = (FAKE_MODEL,)
    api_key: str | None = None
    faults: list[Fault] = field(default_factory=list)
    recorded: list[Recorded] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.models = frozenset(self.models)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> FakeLLM:
        server = _Server(("127.0.0.1", 0), _Handler)
        server.fake = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True,
            name="fake-llm",
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> FakeLLM:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """The Ollama base URL (``/api/chat`` below it)."""
        assert self._server is not None, "start() the server first"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def openai_url(self) -> str:
        """The OpenAI-compatible base URL (``/chat/completions`` below it)."""
        return self.url + "/v1"

    # -- scripting and inspection --------------------------------------------------------------

    def misbehave(self, kind: str, times: int = 1, task: str | None = None, **kw: Any) -> None:
        if kind not in FAULTS:
            raise ValueError(f"unknown fault {kind!r}; one of {FAULTS}")
        with self._lock:
            self.faults.append(Fault(kind, times, task, **kw))

    def behave(self) -> None:
        with self._lock:
            self.faults.clear()

    def requests(self, task: str | None = None) -> list[Recorded]:
        with self._lock:
            return [r for r in self.recorded if task is None or r.task == task]

    def count(self, task: str | None = None) -> int:
        return len(self.requests(task))

    def reset(self) -> None:
        with self._lock:
            self.recorded.clear()
            self.faults.clear()

    def tokens(self) -> tuple[int, int]:
        """(prompt, completion) tokens reported in all answers so far."""
        with self._lock:
            return (
                sum(r.prompt_tokens for r in self.recorded),
                sum(r.completion_tokens for r in self.recorded),
            )

    # -- serving -------------------------------------------------------------------------------

    def _take_fault(self, task: str) -> Fault | None:
        with self._lock:
            for f in self.faults:
                if f.times != 0 and (f.task is None or f.task == task):
                    if f.times > 0:
                        f.times -= 1
                    return f
        return None

    def _handle(self, handler: _Handler, raw: bytes) -> None:
        path = handler.path.rstrip("/")
        ollama = path == "/api/chat"
        headers = {k.lower(): v for k, v in handler.headers.items()}
        try:
            body = json.loads(raw)
            schema = body["format"] if ollama else body["response_format"]["json_schema"]["schema"]
            task = _TASKS[next(iter(schema["properties"]))]
            payload = json.loads(body["messages"][-1]["content"])
        except (ValueError, KeyError, TypeError, StopIteration):
            body, schema, task, payload = {}, {}, "?", {}
        rec = Recorded(path, headers, body, task, 200)
        with self._lock:
            self.recorded.append(rec)

        def error(status: int, message: str) -> None:
            rec.status = status
            handler.send_json(status, {"error": message if ollama else {"message": message}})

        if not ollama and path != "/v1/chat/completions":
            error(404, f"no route {path}")
            return
        if task == "?":
            error(400, "bad request: no JSON body with a schema and a JSON user message")
            return
        if not ollama and self.api_key and headers.get("authorization") != f"Bearer {self.api_key}":
            error(401, "Incorrect API key provided")
            return
        model = body.get("model")
        if model not in self.models:
            error(404, f"model '{model}' not found" if ollama else
                  f"The model `{model}` does not exist or you do not have access to it.")
            return
        fault = self._take_fault(task)
        rec.fault = fault.kind if fault else None
        if fault is not None and fault.kind == "status":
            error(fault.status, fault.message)
            return
        if fault is not None and fault.kind == "hang":
            self._stopping.wait(fault.seconds)
        answer = _answer(schema, task, payload)
        if fault is not None and fault.kind == "wrong_length":
            key = "items" if "items" in answer else "relations" if "relations" in answer else None
            if key is None:
                answer = {"unexpected": True}
            else:
                answer[key] = answer[key][:-1] if len(answer[key]) > 1 else answer[key] * 2
        content = json.dumps(answer, ensure_ascii=False)
        if fault is not None and fault.kind == "garbage":
            content = "Sure! Here is what you asked for: the memory is about a project."
        elif fault is not None and fault.kind == "invalid_json":
            content = content[: len(content) // 2]
        elif fault is not None and fault.kind == "wrong_shape":
            content = json.dumps({"answer": "unexpected"})
        rec.prompt_tokens = sum(estimate_tokens(m["content"]) + 4 for m in body["messages"])
        rec.completion_tokens = estimate_tokens(content)
        if ollama:
            handler.send_json(200, {
                "model": model,
                "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "message": {"role": "assistant", "content": content},
                "done": True,
                "done_reason": "stop",
                "prompt_eval_count": rec.prompt_tokens,
                "eval_count": rec.completion_tokens,
            })
        else:
            handler.send_json(200, {
                "id": f"chatcmpl-{len(self.recorded)}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [{
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }],
                "usage": {
                    "prompt_tokens": rec.prompt_tokens,
                    "completion_tokens": rec.completion_tokens,
                    "total_tokens": rec.prompt_tokens + rec.completion_tokens,
                },
            })
