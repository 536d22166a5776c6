"""Small-model backends (SPEC §4).

- :class:`HeuristicModel`: built in, offline, deterministic (the default);
- :class:`OllamaModel`, :class:`OpenAIModel`: models behind HTTP APIs, built on
  :class:`HTTPModel` (one request per call, answers validated against their schema);
- :func:`model_from_env`: the model named by ``MEMORY_RDF_MODEL``.

httpx is imported when the first HTTP model is built, not at import.
"""

from memory_rdf.small_model._env import model_from_env
from memory_rdf.small_model._heuristic import HeuristicModel
from memory_rdf.small_model._http import HTTPModel
from memory_rdf.small_model._ollama import OllamaModel
from memory_rdf.small_model._openai import OpenAIModel

__all__ = ["HTTPModel", "HeuristicModel", "OllamaModel", "OpenAIModel", "model_from_env"]
