"""An agent's store as an :class:`rdflib.Graph`, through oxrdflib (the store's default graph:
``memory_rdf.inspect.open_rdflib_graph``)."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import rdflib

    from memory_rdf._oxigraph.agent_store import AgentStore


def rdflib_graph(store: AgentStore) -> rdflib.Graph:
    """``store``'s default graph as an rdflib graph over its pyoxigraph store (oxrdflib's
    ``OxigraphStore``; ``identifier=DATASET_DEFAULT_GRAPH_ID``, else rdflib names the graph
    with a fresh blank node, which oxrdflib maps to an empty named graph).

    The graph owns ``store``: it is closed when the graph is garbage-collected (or at exit),
    which deletes a read-only store's private copy."""
    import rdflib  # imported here: rdflib takes a while to import
    from oxrdflib import OxigraphStore

    graph = rdflib.Graph(
        OxigraphStore(store=store.store), identifier=rdflib.graph.DATASET_DEFAULT_GRAPH_ID
    )
    weakref.finalize(graph, store.close)
    return graph
