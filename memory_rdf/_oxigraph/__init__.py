"""Storage: the only package of memory_rdf that talks to pyoxigraph, and the interface every
store implements (tests/test_layout.py holds it to that).

Everything above it speaks in node ids, strengths and relation names. Its parts:

* :mod:`.interface` — :class:`MemoryStore`, the operations the rest of the library needs
  (rows, scalar, ask, commit a :class:`WriteBatch`, quads, the user's query, dump, ...): the
  embedded :class:`AgentStore` (:mod:`.agent_store`) and the SPARQL endpoint store of
  ``memory_rdf._remote`` implement it;
* :mod:`.terms` — serialized terms (:func:`node_ref`, :func:`lit`, ...), the only way values
  reach SPARQL text, and terms back to Python (:func:`to_python`);
* :mod:`.render` — the shipped ``.rq`` queries and ``.ru`` updates filled with those terms
  (:func:`render`, the one templating path);
* :mod:`.batch` — :class:`WriteBatch`: each atomic write runs as exactly one ``update()``;
* :mod:`.errors` — every pyoxigraph error translated at one boundary (``_storage_errors``);
* :mod:`.holds`, :mod:`.bounded` — the calls that have a disk store in hand, counted
  (:class:`~.holds.StoreUsers`); queries bounded in time and rows, their rows materialized in
  the thread that runs them (SPEC §7: result iterators must not cross threads);
* :mod:`.mirror`, :mod:`.link_index`, :mod:`.mirror_budget` — the read mirror, its link
  index, the process's memory budget for mirrors;
* :mod:`.owner` — the one thread per open agent that writes its store and changes its
  lifecycle (:class:`~.owner.StoreOwner`); :mod:`.open_files` — process-wide: parking idle
  stores under the open-files limit;
* :mod:`.agent_lock`, :mod:`.directories`, :mod:`.restore` — the agent's writer lock, its
  directory (crash repair of a purge, RocksDB's files), restoring a backup;
* :mod:`.snapshot` — the private copy of an agent's files that a read-only store takes, reads
  and deletes when it is closed or collected (inspection beside a live writer);
* :mod:`.integrity`, :mod:`.conversions`, :mod:`.rdflib_view` — the integrity checks run on a
  store, the endpoint's answers converted, a store as an rdflib graph.

Which thread may touch what, and the order locks are taken in: docs/concurrency.md.
"""

from memory_rdf._oxigraph.agent_store import PARALLEL_COMMIT_BYTES, AgentStore
from memory_rdf._oxigraph.batch import EMBEDDED_GRAPHS, Graphs, WriteBatch, triple
from memory_rdf._oxigraph.bounded import check_row_limit, run_bounded
from memory_rdf._oxigraph.conversions import (
    parse_ntriples,
    python_from_json,
    reserialize,
    term_from_json,
)
from memory_rdf._oxigraph.directories import INFO_LOGS_KEPT
from memory_rdf._oxigraph.errors import disk_refused, is_lock_error, sparql_syntax_error
from memory_rdf._oxigraph.interface import MemoryStore, Row, UserResult
from memory_rdf._oxigraph.mirror_budget import mirror_fits
from memory_rdf._oxigraph.render import Param, render
from memory_rdf._oxigraph.restore import restore_backup
from memory_rdf._oxigraph.terms import (
    Term,
    iri_ref,
    link_ends,
    link_iri,
    link_ref,
    lit,
    node_id,
    node_ref,
    to_python,
)

__all__ = [
    "EMBEDDED_GRAPHS",
    "INFO_LOGS_KEPT",
    "PARALLEL_COMMIT_BYTES",
    "AgentStore",
    "Graphs",
    "MemoryStore",
    "Param",
    "Row",
    "Term",
    "UserResult",
    "WriteBatch",
    "check_row_limit",
    "disk_refused",
    "iri_ref",
    "is_lock_error",
    "link_ends",
    "link_iri",
    "link_ref",
    "lit",
    "mirror_fits",
    "node_id",
    "node_ref",
    "parse_ntriples",
    "python_from_json",
    "render",
    "reserialize",
    "restore_backup",
    "run_bounded",
    "sparql_syntax_error",
    "term_from_json",
    "to_python",
    "triple",
]
