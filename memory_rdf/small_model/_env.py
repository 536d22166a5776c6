"""Choosing the small model from environment variables (read only when called)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from memory_rdf._exceptions import ConfigError
from memory_rdf._types import SmallModel

__all__ = ["model_from_env"]

MODEL_VAR = "MEMORY_RDF_MODEL"
URL_VAR = "MEMORY_RDF_MODEL_URL"
KEY_VAR = "MEMORY_RDF_API_KEY"
OPENAI_KEY_VAR = "OPENAI_API_KEY"
TIMEOUT_VAR = "MEMORY_RDF_MODEL_TIMEOUT"

_FORMS = "'heuristic', 'ollama:<model>' or 'openai:<model>'"


def model_from_env(environ: Mapping[str, str] | None = None) -> SmallModel:
    """The small model the environment asks for (``os.environ`` unless ``environ`` is given).

    - ``MEMORY_RDF_MODEL``: ``heuristic`` (the default, also when unset or empty),
      ``ollama:<model>`` (e.g. ``ollama:qwen2.5:7b``) or ``openai:<model>``;
    - ``MEMORY_RDF_MODEL_URL``: the server (default ``http://localhost:11434`` for Ollama,
      ``https://api.openai.com/v1`` for OpenAI-compatible servers);
    - ``MEMORY_RDF_API_KEY``, else ``OPENAI_API_KEY``: the bearer key (OpenAI-compatible);
    - ``MEMORY_RDF_MODEL_TIMEOUT``: seconds per request; when unset the model takes the
      ``Config.model_timeout`` of the manager using it (default 300).

    Raises :class:`~memory_rdf.ConfigError` (a ``ValueError``) naming the variable at fault.

    >>> model_from_env({"MEMORY_RDF_MODEL": "heuristic"})
    HeuristicModel(max_segment_chars=400, merge_chars=100)
    >>> with model_from_env({"MEMORY_RDF_MODEL": "ollama:qwen2.5:7b"}) as model:
    ...     print(model.model, model.base_url)
    qwen2.5:7b http://localhost:11434
    """
    env = os.environ if environ is None else environ
    spec = env.get(MODEL_VAR, "").strip()
    backend, sep, name = spec.partition(":")
    backend = backend.strip().lower()
    name = name.strip()
    if not spec or (backend == "heuristic" and not sep):
        from memory_rdf.small_model._heuristic import HeuristicModel

        return HeuristicModel()
    if backend not in ("ollama", "openai"):
        raise ConfigError(f"{MODEL_VAR} must be {_FORMS}, got {spec!r}")
    if not name:
        raise ConfigError(f"{MODEL_VAR} must name the model after '{backend}:', got {spec!r}")
    url = env.get(URL_VAR, "").strip()
    if url and not url.startswith(("http://", "https://")):
        raise ConfigError(f"{URL_VAR} must be an http:// or https:// URL, got {url!r}")
    timeout = _timeout(env.get(TIMEOUT_VAR, "").strip())
    if backend == "ollama":
        from memory_rdf.small_model._ollama import DEFAULT_OLLAMA_URL, OllamaModel

        return OllamaModel(name, url or DEFAULT_OLLAMA_URL, timeout=timeout)
    from memory_rdf.small_model._openai import DEFAULT_OPENAI_URL, OpenAIModel

    key = env.get(KEY_VAR, "").strip() or env.get(OPENAI_KEY_VAR, "").strip() or None
    return OpenAIModel(name, url or DEFAULT_OPENAI_URL, key, timeout=timeout)


def _timeout(value: str) -> float | None:
    """The variable's seconds; None when unset (the manager's ``Config.model_timeout``)."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        raise ConfigError(f"{TIMEOUT_VAR} must be a number of seconds, got {value!r}") from None
    if not seconds > 0 or seconds == float("inf"):
        raise ConfigError(f"{TIMEOUT_VAR} must be a positive number of seconds, got {value!r}")
    return seconds
