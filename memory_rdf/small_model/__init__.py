"""Small-model backends (SPEC §4)."""

from memory_rdf.small_model._heuristic import HeuristicModel

__all__ = ["HeuristicModel"]
