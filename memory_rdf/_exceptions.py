"""The exception tree of memory_rdf.

Every error the library raises on purpose derives from :class:`MemoryRDFError`.
Misuse errors also derive from the builtin a caller would naturally catch::

    MemoryRDFError
    ├── InvalidInputError (ValueError)      bad argument value: blank text, bad agent id, ...
    ├── InvalidTypeError (TypeError)        bad argument type: a str where a list is expected, ...
    ├── ConfigError (ValueError)            a Config field out of range
    ├── QueueFullError                      the agent's queue holds max_queue_size tasks already
    ├── MemoryClosedError (RuntimeError)    the manager or system was closed
    ├── StoreError (OSError)                the Oxigraph store could not be opened or written
    │   ├── StoreLockedError                another process holds the agent's store
    │   ├── StoreUnavailableError           a SPARQL endpoint store did not answer in store_timeout
    │   └── SchemaVersionError              the store was written by an incompatible version
    ├── UnknownAgentError (LookupError)     an inspection command named an agent that has no store
    ├── SparqlError (ValueError)            a query given to sparql() does not parse
    │   ├── UpdateRefusedError              sparql() was given a SPARQL Update
    │   ├── QueryRefusedError               sparql() will not run it: SERVICE/LOAD/file:, too big
    │   ├── QueryTimeoutError (TimeoutError) sparql() ran longer than its timeout
    │   └── QueryLimitError                 sparql() would return more rows than its limit
    └── ModelError                          the small model failed (after retries)
        └── PermanentModelError             a failure waiting cannot heal (HTTP 400/401/403/404)

Foreign errors (pyoxigraph's OSError, httpx's errors) are translated at one boundary
each, with ``raise ... from exc``, so callers never need to catch them.
"""

from __future__ import annotations


class MemoryRDFError(Exception):
    """Root of every error memory_rdf raises on purpose."""


class InvalidInputError(MemoryRDFError, ValueError):
    """An argument has the right type but an unacceptable value."""


class InvalidTypeError(MemoryRDFError, TypeError):
    """An argument has the wrong type."""


class ConfigError(MemoryRDFError, ValueError):
    """A :class:`~memory_rdf.Config` field is out of range."""


class QueueFullError(MemoryRDFError):
    """The agent already has ``max_queue_size`` tasks waiting; nothing was queued."""


class MemoryClosedError(MemoryRDFError, RuntimeError):
    """The manager (or its system) is closed."""


class StoreError(MemoryRDFError, OSError):
    """The agent's Oxigraph store could not be opened, read or written."""


class StoreLockedError(StoreError):
    """Another process (or another open handle) holds the agent's store."""


class StoreUnavailableError(StoreError):
    """A SPARQL endpoint store did not answer (connection refused, no answer, 5xx) within
    ``Config.store_timeout`` (SPEC §8 v3); the message names the endpoint and the last error.
    What the call carried is not known to be stored: a ``remember()`` that raises it was not
    accepted (retry it), while remembers accepted before are still stored once the server is
    back."""


class SchemaVersionError(StoreError):
    """The store was written by a memory_rdf with an incompatible schema version."""


class UnknownAgentError(MemoryRDFError, LookupError):
    """No store exists for the named agent."""


class SparqlError(MemoryRDFError, ValueError):
    """A SPARQL query given to :meth:`MemoryManager.sparql` is invalid."""


class UpdateRefusedError(SparqlError):
    """:meth:`MemoryManager.sparql` is read-only: SPARQL Update is refused."""


class QueryRefusedError(SparqlError):
    """:meth:`MemoryManager.sparql` will not run this query: it reaches outside the store
    (``SERVICE``, ``LOAD``, a ``file:`` IRI) or exceeds the size limits (length, nesting,
    operators; see the README, "Limits")."""


class QueryTimeoutError(SparqlError, TimeoutError):
    """:meth:`MemoryManager.sparql` ran longer than its ``timeout``."""


class QueryLimitError(SparqlError):
    """:meth:`MemoryManager.sparql` would return more rows than its ``limit``."""


class ModelError(MemoryRDFError):
    """The small model failed: raised, timed out, or answered garbage."""


class PermanentModelError(ModelError):
    """A model failure that waiting cannot heal (wrong model name, key or request)."""
