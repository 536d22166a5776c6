"""Ollama backend: ``POST {base_url}/api/chat`` with the answer's JSON schema as ``format``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from memory_rdf._exceptions import ModelError
from memory_rdf.small_model._http import HTTPModel, Reply, token_count
from memory_rdf.small_model._prompts import Prompt

__all__ = ["OllamaModel"]

DEFAULT_OLLAMA_URL = "http://localhost:11434"


class OllamaModel(HTTPModel):
    """A model served by `Ollama <https://ollama.com>`_ (``ollama pull qwen2.5:7b``).

    Each call is one ``/api/chat`` request with ``stream: false``, ``format`` = the JSON
    schema of the answer and ``options.temperature`` 0; tokens are read from
    ``prompt_eval_count`` / ``eval_count``. ``options`` adds Ollama model options to every
    request, e.g. ``{"num_ctx": 8192}`` when remembers are long: Ollama silently drops the
    start of a prompt longer than its context (the answer then fails validation).
    ``timeout`` (seconds per request) defaults to the ``Config.model_timeout`` of the manager
    using the model.

    >>> model = OllamaModel("qwen2.5:7b", timeout=60)
    >>> model
    OllamaModel('qwen2.5:7b', base_url='http://localhost:11434', timeout=60)
    >>> model.close()
    """

    backend: ClassVar[str] = "Ollama"

    def __init__(
        self,
        model: str,
        base_url: str = DEFAULT_OLLAMA_URL,
        *,
        timeout: float | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(model, base_url, timeout=timeout)
        self.options = dict(options or {})

    def _request(self, prompt: Prompt, temperature: float) -> Reply:
        body = {
            "model": self.model,
            "messages": prompt.messages(),
            "stream": False,
            "format": prompt.schema,
            "options": {**self.options, "temperature": temperature},
        }
        data = self._post("/api/chat", body)
        message = data.get("message") if isinstance(data, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, str):
            raise ModelError(f"{self._who()}: the reply has no message.content")
        return Reply(
            content,
            token_count(data.get("prompt_eval_count")),
            token_count(data.get("eval_count")),
        )

    def _not_found(self, url: str, server_says: str) -> str:
        return (
            f"{self._who()} not found at {self.base_url}: run "
            f"`ollama pull {self.model}` or check the model name (server said: {server_says})"
        )
