"""memory_rdf — long-term associative memory for LLM agents, stored as RDF in embedded Oxigraph.

>>> import tempfile
>>> from memory_rdf import MemoryManager
>>> with MemoryManager("agent_001", data_dir=tempfile.mkdtemp()) as mem:
...     mem.remember([{"role": "user", "content": "下周三发布 v2.0，张伟负责 JWT 登录"}])
...     print(mem.recall(["JWT"]))
[记忆 ...] user: 下周三发布 v2.0，张伟负责 JWT 登录
"""

from memory_rdf import backup, inspect
from memory_rdf._config import Config, Templates
from memory_rdf._embedders import Embedder, OllamaEmbedder, OpenAIEmbedder
from memory_rdf._exceptions import (
    ConfigError,
    InvalidInputError,
    InvalidTypeError,
    MemoryClosedError,
    MemoryRDFError,
    ModelError,
    PermanentModelError,
    QueryLimitError,
    QueryRefusedError,
    QueryTimeoutError,
    QueueFullError,
    SchemaVersionError,
    SparqlError,
    StoreError,
    StoreLockedError,
    StoreUnavailableError,
    UnknownAgentError,
    UpdateRefusedError,
)
from memory_rdf._manager import MemoryManager, MemorySystem
from memory_rdf._remote import SparqlEndpoint
from memory_rdf._types import Message, Processed, SmallModel, coerce_messages
from memory_rdf.small_model import (
    HeuristicModel,
    HTTPModel,
    OllamaModel,
    OpenAIModel,
    model_from_env,
)

__version__ = "0.1.0"

__all__ = [
    "Config",
    "ConfigError",
    "Embedder",
    "HTTPModel",
    "HeuristicModel",
    "InvalidInputError",
    "InvalidTypeError",
    "MemoryClosedError",
    "MemoryManager",
    "MemoryRDFError",
    "MemorySystem",
    "Message",
    "ModelError",
    "OllamaEmbedder",
    "OllamaModel",
    "OpenAIEmbedder",
    "OpenAIModel",
    "PermanentModelError",
    "Processed",
    "QueryLimitError",
    "QueryRefusedError",
    "QueryTimeoutError",
    "QueueFullError",
    "SchemaVersionError",
    "SmallModel",
    "SparqlEndpoint",
    "SparqlError",
    "StoreError",
    "StoreLockedError",
    "StoreUnavailableError",
    "Templates",
    "UnknownAgentError",
    "UpdateRefusedError",
    "__version__",
    "backup",
    "coerce_messages",
    "inspect",
    "model_from_env",
]
