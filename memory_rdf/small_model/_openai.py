"""OpenAI-compatible backend: ``POST {base_url}/chat/completions`` with a strict
``response_format`` JSON schema (OpenAI, vLLM, llama.cpp's server, LM Studio, ...)."""

from __future__ import annotations

from typing import Any, ClassVar

from memory_rdf._exceptions import ModelError
from memory_rdf._headers import check_header
from memory_rdf.small_model._http import HTTPModel, Reply, token_count
from memory_rdf.small_model._prompts import Prompt

__all__ = ["OpenAIModel"]

DEFAULT_OPENAI_URL = "https://api.openai.com/v1"


class OpenAIModel(HTTPModel):
    """A model behind an OpenAI-compatible chat completions API.

    ``base_url`` is the API root, usually ending in ``/v1`` (``http://localhost:8000/v1``
    for vLLM, ``http://localhost:8080/v1`` for llama.cpp, ``http://localhost:1234/v1`` for
    LM Studio). ``api_key`` is sent as ``Authorization: Bearer`` when given. Each call is one
    request with ``temperature`` 0 and ``response_format = {"type": "json_schema",
    "json_schema": {"name", "schema", "strict": true}}``; tokens are read from ``usage``.
    ``strict=False`` sends ``"strict": false``, for servers whose strict mode rejects a
    keyword of the schemas (they use ``minItems``/``maxItems`` and ``maxLength``); answers
    are validated either way. ``timeout`` (seconds per request) defaults to the
    ``Config.model_timeout`` of the manager using the model.

    >>> model = OpenAIModel("qwen2.5-7b-instruct", "http://localhost:8000/v1/")
    >>> model
    OpenAIModel('qwen2.5-7b-instruct', base_url='http://localhost:8000/v1', timeout=300)
    >>> model.close()
    """

    backend: ClassVar[str] = "OpenAI-compatible"

    def __init__(
        self,
        model: str,
        base_url: str = DEFAULT_OPENAI_URL,
        api_key: str | None = None,
        *,
        timeout: float | None = None,
        strict: bool = True,
    ) -> None:
        if api_key is not None:
            check_header("Authorization", api_key, "api_key")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
        super().__init__(model, base_url, timeout=timeout, headers=headers)
        self.strict = bool(strict)

    def _request(self, prompt: Prompt, temperature: float) -> Reply:
        body = {
            "model": self.model,
            "messages": prompt.messages(),
            "temperature": temperature,
            "response_format": {
                "type": "json_schema",
                "json_schema": {
                    "name": prompt.name, "schema": prompt.schema, "strict": self.strict,
                },
            },
        }
        data = self._post("/chat/completions", body)
        usage: Any = data.get("usage") if isinstance(data, dict) else None
        if not isinstance(usage, dict):
            usage = {}
        tokens = (
            token_count(usage.get("prompt_tokens")),
            token_count(usage.get("completion_tokens")),
        )
        choices = data.get("choices") if isinstance(data, dict) else None
        first = choices[0] if isinstance(choices, list) and choices else None
        message = first.get("message") if isinstance(first, dict) else None
        if not isinstance(message, dict):
            raise ModelError(f"{self._who()}: the reply has no choices[0].message")
        content = message.get("content")
        problem = None
        if message.get("refusal"):
            problem = f"the model refused: {message['refusal']}"
        elif first is not None and first.get("finish_reason") == "length":
            problem = "the answer was cut off at the token limit"
        if not isinstance(content, str):
            content = ""
        return Reply(content, *tokens, problem=problem)

    def _not_found(self, url: str, server_says: str) -> str:
        return (
            f"{self._who()} or the endpoint {url} not found: check the "
            f"model name and the base URL (MEMORY_RDF_MODEL_URL / base_url, usually ending "
            f"in /v1) (server said: {server_says})"
        )
