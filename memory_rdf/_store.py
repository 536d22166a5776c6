"""Compatibility for code written before storage became a package: the interface of
:mod:`memory_rdf._oxigraph`, re-exported. Import from ``memory_rdf._oxigraph`` instead; this
module goes once no branch in flight imports it."""

from memory_rdf._oxigraph import *  # noqa: F403
from memory_rdf._oxigraph import __all__ as __all__
