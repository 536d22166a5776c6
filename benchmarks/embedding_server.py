"""An embedding server on loopback speaking the OpenAI embeddings protocol, backed by a real
small model (all-MiniLM-L6-v2 in numpy, ``benchmarks/_minilm.py``), for the benchmarks.

    python -m benchmarks.embedding_server --port 8181
    # then: OpenAIEmbedder("all-MiniLM-L6-v2", "http://127.0.0.1:8181/v1")

``POST /v1/embeddings`` with ``{"model": "all-MiniLM-L6-v2", "input": "text" | ["text", …]}``
(optionally ``"encoding_format": "float" | "base64"``) answers ``{"object": "list", "data":
[{"object": "embedding", "embedding": [...], "index": i}, …], "model": …, "usage":
{"prompt_tokens": n, "total_tokens": n}}``; ``GET /v1/models`` lists the one model. Errors
are OpenAI's shape (``{"error": {"message", "type", "param", "code"}}``): 400 for a bad
body, 404 for another model's name. The texts of one request are embedded in batches of like
length. With ``--cache DIR`` (or ``EmbeddingServer(cache_dir=…)``) vectors are kept on disk
by the text's hash, so a benchmark rerun embeds nothing twice; the cache lives in a
gitignored folder (``benchmarks/.work/``), never in the project.

In a benchmark: ``with EmbeddingServer() as server: OpenAIEmbedder(server.model,
server.base_url)``. Needs the ``embed-bench`` extra and the model package (see ``_minilm``).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import _minilm

MODEL_NAMES = {_minilm.NAME.lower(), f"sentence-transformers/{_minilm.NAME}".lower()}
MAX_INPUTS = 2048  # OpenAI's limit of inputs per request


class BadRequest(Exception):
    def __init__(self, status: int, message: str, param: str | None = None,
                 code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.param, self.code = status, param, code


class VectorCache:
    """Vectors by sha256 of the text, in memory, loaded from and saved to one ``.npz`` file."""

    def __init__(self, folder: Path | None) -> None:
        self.file = folder / f"{_minilm.NAME}.npz" if folder is not None else None
        self._vectors: dict[str, np.ndarray] = {}
        self._added = 0
        self._lock = threading.Lock()
        if self.file is not None and self.file.is_file():
            with np.load(self.file) as data:
                keys, vectors = data["keys"], data["vectors"]
            self._vectors = {str(k): v for k, v in zip(keys, vectors, strict=True)}

    @staticmethod
    def key(text: str) -> str:
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def get(self, text: str) -> np.ndarray | None:
        with self._lock:
            return self._vectors.get(self.key(text))

    def put(self, text: str, vector: np.ndarray) -> None:
        with self._lock:
            self._vectors[self.key(text)] = vector
            self._added += 1

    def __len__(self) -> int:
        return len(self._vectors)

    def save(self) -> None:
        with self._lock:
            if self.file is None or not self._added:
                return
            self.file.parent.mkdir(parents=True, exist_ok=True)
            keys = np.array(list(self._vectors), dtype="U64")
            vectors = (np.stack(list(self._vectors.values())) if self._vectors
                       else np.zeros((0, _minilm.DIMENSION), np.float32))
            tmp = self.file.with_suffix(".tmp.npz")
            np.savez(tmp, keys=keys, vectors=vectors)
            tmp.replace(self.file)
            self._added = 0


class EmbeddingServer:
    """The server, in a background thread of this process; ``base_url`` ends in ``/v1``."""

    def __init__(self, port: int = 0, host: str = "127.0.0.1",
                 model: _minilm.MiniLM | None = None, cache_dir: Path | None = None) -> None:
        self.model = _minilm.NAME
        self._minilm = model
        self._cache = VectorCache(cache_dir)
        self.requests = 0  # answered POSTs, for the caller's accounting
        self.texts_embedded = 0  # texts run through the model (cache misses)
        self.model_seconds = 0.0
        self._httpd = ThreadingHTTPServer((host, port), self._handler())
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> EmbeddingServer:
        if self._minilm is None:
            self._minilm = _minilm.shared()  # loaded before the first request, not during it
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        name="embedding-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=30)
            self._thread = None
        self._httpd.server_close()
        self._cache.save()

    def __enter__(self) -> EmbeddingServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ protocol

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """The vectors of ``texts`` (from the cache where it has them)."""
        out = np.empty((len(texts), _minilm.DIMENSION), dtype=np.float32)
        missing: dict[str, list[int]] = {}
        for i, text in enumerate(texts):
            hit = self._cache.get(text)
            if hit is None:
                missing.setdefault(text, []).append(i)
            else:
                out[i] = hit
        if missing:
            assert self._minilm is not None
            t0 = time.perf_counter()
            vectors = self._minilm.embed(list(missing))
            self.model_seconds += time.perf_counter() - t0
            self.texts_embedded += len(missing)
            for (text, rows), vector in zip(missing.items(), vectors, strict=True):
                out[rows] = vector
                self._cache.put(text, vector)
        return out

    def answer(self, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise BadRequest(400, "the body must be a JSON object")
        model = body.get("model")
        if not isinstance(model, str) or not model:
            raise BadRequest(400, "'model' is required", "model")
        if model.lower() not in MODEL_NAMES:
            raise BadRequest(404, f"The model '{model}' does not exist; this server has "
                             f"'{_minilm.NAME}'", "model", "model_not_found")
        raw = body.get("input")
        texts = [raw] if isinstance(raw, str) else raw
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            raise BadRequest(400, "'input' must be a string or a non-empty list of strings "
                             "(token arrays are not supported)", "input")
        if len(texts) > MAX_INPUTS:
            raise BadRequest(400, f"at most {MAX_INPUTS} inputs per request", "input")
        if any(not t for t in texts):
            raise BadRequest(400, "'input' cannot contain an empty string", "input")
        fmt = body.get("encoding_format", "float")
        if fmt not in ("float", "base64"):
            raise BadRequest(400, "'encoding_format' must be 'float' or 'base64'",
                             "encoding_format")
        dimensions = body.get("dimensions")
        if dimensions is not None and dimensions != _minilm.DIMENSION:
            raise BadRequest(400, f"this model's vectors have {_minilm.DIMENSION} dimensions",
                             "dimensions")
        vectors = self.embed(texts)
        assert self._minilm is not None
        tokens = sum(len(self._minilm.tokens(t)) for t in texts)
        data = []
        for i, vector in enumerate(vectors):
            embedding: Any = (base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")
                              if fmt == "base64" else [float(x) for x in vector])
            data.append({"object": "embedding", "embedding": embedding, "index": i})
        self.requests += 1
        return {"object": "list", "data": data, "model": _minilm.NAME,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _error(self, status: int, message: str, param: str | None = None,
                       code: str | None = None) -> None:
                kind = "invalid_request_error" if status < 500 else "server_error"
                self._send(status, {"error": {"message": message, "type": kind,
                                              "param": param, "code": code}})

            def do_GET(self) -> None:  # noqa: N802
                if self.path.rstrip("/") == "/v1/models":
                    self._send(200, {"object": "list", "data": [
                        {"id": _minilm.NAME, "object": "model", "owned_by": "benchmarks"}]})
                else:
                    self._error(404, f"no route {self.path}")

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                if self.path.rstrip("/") != "/v1/embeddings":
                    self._error(404, f"no route {self.path}")
                    return
                try:
                    body = json.loads(raw)
                except ValueError:
                    self._error(400, "the body is not JSON")
                    return
                try:
                    self._send(200, server.answer(body))
                except BadRequest as exc:
                    self._error(exc.status, str(exc), exc.param, exc.code)
                except Exception as exc:  # a bug of ours: say so, keep serving
                    self._error(500, f"{type(exc).__name__}: {exc}")

        return Handler


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8181)
    parser.add_argument("--cache", type=Path, default=None,
                        help="keep vectors on disk in this folder (e.g. benchmarks/.work/emb)")
    args = parser.parse_args(argv)
    server = EmbeddingServer(args.port, cache_dir=args.cache).start()
    print(f"{_minilm.NAME} on {server.base_url} (POST /embeddings); Ctrl-C stops it",
          flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


if __name__ == "__main__":
    main()
