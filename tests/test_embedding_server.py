"""The benchmarks' embedding server: the OpenAI embeddings protocol on loopback, answered by
all-MiniLM-L6-v2 in numpy (``benchmarks/_minilm.py``).

Skipped unless the ``embed-bench`` extra and the model package are installed (see
``benchmarks/_minilm.py``). The reference components below were computed once with
PyTorch 2.13.0 (CPU) and transformers' ``BertModel`` on the same weights, mean-pooled and
L2-normalized as sentence-transformers does (the numpy pass agreed to cosine ≥ 0.9999999 on
ten texts, one of them past the 256-token truncation).
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("numpy")
pytest.importorskip("tokenizers")
pytest.importorskip("safetensors")

import httpx  # noqa: E402
import numpy as np  # noqa: E402

from benchmarks import _minilm  # noqa: E402

REFERENCE = {  # the first 8 of 384 components, torch 2.13.0 + transformers' BertModel
    "I stayed at a ryokan in Kyoto.":
        [0.00448, 0.020593, 0.043182, 0.046373, 0.03641, -0.009736, 0.010685, -0.030255],
    "我们把支付回调改成了异步队列。":
        [0.012971, 0.079772, 0.02508, 0.003482, 0.077225, 0.031089, 0.122065, 0.02695],
    "John: I'm off to do some taekwondo!":
        [-0.056352, 0.04533, 0.07202, -0.024782, -0.033545, 0.046123, 0.079788, -0.091438],
}


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    from benchmarks.embedding_server import EmbeddingServer

    try:
        model = _minilm.shared()
    except _minilm.ModelNotFound as exc:
        pytest.skip(str(exc))
    with EmbeddingServer(model=model) as s:
        yield s


def post(server: Any, body: Any) -> httpx.Response:
    return httpx.post(f"{server.base_url}/embeddings", json=body, timeout=60)


def test_vectors_match_the_reference_forward_pass(server: Any) -> None:
    texts = list(REFERENCE)
    reply = post(server, {"model": "all-MiniLM-L6-v2", "input": texts})
    assert reply.status_code == 200
    body = reply.json()
    assert body["object"] == "list" and body["model"] == "all-MiniLM-L6-v2"
    assert [d["index"] for d in body["data"]] == [0, 1, 2]
    assert body["usage"]["prompt_tokens"] == body["usage"]["total_tokens"] > 3
    for text, item in zip(texts, body["data"], strict=True):
        vector = np.array(item["embedding"])
        assert vector.shape == (384,)
        assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-5
        np.testing.assert_allclose(vector[:8], REFERENCE[text], atol=2e-5)


def test_paraphrases_are_closer_than_unrelated_sentences(server: Any) -> None:
    texts = ["I stayed at a ryokan in Kyoto.", "We booked a hotel in Japan.",
             "A man is playing a guitar.", "Someone plays a musical instrument.",
             "The quarterly tax report is due on Friday."]
    body = post(server, {"model": "all-MiniLM-L6-v2", "input": texts}).json()
    v = np.array([d["embedding"] for d in body["data"]])
    sim = v @ v.T
    assert sim[0, 1] > sim[0, 2] + 0.2 and sim[0, 1] > sim[0, 4] + 0.2
    assert sim[2, 3] > sim[2, 4] + 0.2 and sim[2, 3] > sim[2, 1] + 0.2


def test_a_single_string_and_base64_encoding(server: Any) -> None:
    text = "I stayed at a ryokan in Kyoto."
    plain = post(server, {"model": "all-MiniLM-L6-v2", "input": text}).json()
    packed = post(server, {"model": "all-MiniLM-L6-v2", "input": [text],
                           "encoding_format": "base64"}).json()
    assert len(plain["data"]) == len(packed["data"]) == 1
    decoded = np.frombuffer(base64.b64decode(packed["data"][0]["embedding"]), dtype="<f4")
    np.testing.assert_allclose(decoded, plain["data"][0]["embedding"], atol=1e-7)


@pytest.mark.parametrize("body, status, param", [
    ({"model": "text-embedding-3-small", "input": "x"}, 404, "model"),
    ({"input": "x"}, 400, "model"),
    ({"model": "all-MiniLM-L6-v2", "input": []}, 400, "input"),
    ({"model": "all-MiniLM-L6-v2", "input": [[101, 102]]}, 400, "input"),
    ({"model": "all-MiniLM-L6-v2", "input": ""}, 400, "input"),
    ({"model": "all-MiniLM-L6-v2", "input": "x", "dimensions": 512}, 400, "dimensions"),
])
def test_bad_requests_get_openai_errors(server: Any, body: dict[str, Any], status: int,
                                        param: str) -> None:
    reply = post(server, body)
    assert reply.status_code == status
    error = reply.json()["error"]
    assert error["param"] == param and error["message"]


def test_the_library_finds_a_paraphrase_through_the_real_model(server: Any,
                                                                tmp_path: Any) -> None:
    """End to end with a real model: "hotel" finds the ryokan memory by meaning only
    (SPEC §5.7), through OpenAIEmbedder on this server; the keyword entry finds nothing."""
    from memory_rdf import Config, MemoryManager, OpenAIEmbedder

    with OpenAIEmbedder(server.model, server.base_url) as embedder, MemoryManager(
            "trip", data_dir=tmp_path, config=Config(auto_compress=False),
            embedder=embedder) as mem:
        for text in ("In Kyoto we stay at a ryokan near Gion, three nights.",
                     "The quarterly tax report is due on Friday.",
                     "My sister plays the cello in an orchestra."):
            mem.remember([{"role": "user", "content": text}])
        assert mem.wait_idle(60)
        assert mem.stats()["vectors_missing"] == 0
        assert "ryokan" not in mem.recall(["hotel"], entry="keywords")
        found = mem.recall(["hotel"], entry="semantic", query="Which hotel do we stay in?")
        assert "ryokan" in found
        assert "tax report" not in found and "cello" not in found
