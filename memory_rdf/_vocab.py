"""IRIs of the memory: vocabulary (SPEC §2), as plain strings and as SPARQL-ready terms.

These are constants of our own vocabulary, never user values, so their ``<...>`` forms
may be spliced into SPARQL text directly.
"""

from __future__ import annotations

MEMORY = "https://w3id.org/memory-rdf/ontology#"
NODE = "https://w3id.org/memory-rdf/node/"
LINK = "https://w3id.org/memory-rdf/link/"
XSD = "http://www.w3.org/2001/XMLSchema#"
RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"

FOCUS_LIST = "https://w3id.org/memory-rdf/focus"
#: Named graphs holding everything that is not the memory network (SPEC §2).
META_GRAPH = "https://w3id.org/memory-rdf/graph/meta"
JOURNAL_GRAPH = "https://w3id.org/memory-rdf/graph/journal"
#: The semantic entry's vectors, one per node, and the model that made them (SPEC §5.7).
VECTOR_GRAPH = "https://w3id.org/memory-rdf/graph/vectors"
META_SUBJECT = "https://w3id.org/memory-rdf/store"
TASK = "https://w3id.org/memory-rdf/task/"

#: Prefixes declared for every query (ours and the user's, SPEC §6).
PREFIXES = {"memory": MEMORY, "node": NODE, "link": LINK, "xsd": XSD}

SCHEMA_VERSION = 1

#: memory:scanOrder = scanCount << SEQ_BITS | creation sequence (the scan-order index, §5.3).
SEQ_BITS = 32


def scan_key(scans: int, seq: int) -> int:
    return (scans << SEQ_BITS) | seq


def m(local: str) -> str:
    """``<memory:local>`` ready to splice into SPARQL."""
    return f"<{MEMORY}{local}>"


A = f"<{RDF_TYPE}>"
NODE_CLASS = m("Node")
LINK_CLASS = m("Link")
FOCUS_CLASS = m("FocusList")
CONTENT = m("content")
PHRASE = m("phrase")
KEYWORD = m("keyword")
CREATED_AT = m("createdAt")
SAID_AT = m("saidAt")
SCAN_COUNT = m("scanCount")
SCAN_ORDER = m("scanOrder")
ORIGINAL_LENGTH = m("originalLength")
TERM = m("term")
TERM_COUNT = m("termCount")
LINK_P = m("link")
SOURCE = m("source")
TARGET = m("target")
STRENGTH = m("strength")
RELATION = m("relation")
MEMBER = m("member")
FOCUS_ORDER = m("focusOrder")
PINNED = m("pinned")
VECTOR = m("vector")
EMBEDDING_MODEL = m("embeddingModel")
EMBEDDING_DIMENSION = m("embeddingDimension")
EMBEDDING_TEXT = m("embeddingText")
FOCUS = f"<{FOCUS_LIST}>"

#: The read mirror's link graphs (``_oxigraph.link_index``): graphs that exist only in the
#: in-memory mirror — never on disk, never in the user's SPARQL (which reads the disk store) —
#: so they are not part of SPEC §2. One quad per link, ``node:a node:b strength``, in
#: ``{MIRROR_LINKS}out[/{relation}]`` when the target is a live node, in
#: ``{MIRROR_LINKS}lost[/{relation}]`` when the link is dangling.
MIRROR_LINKS = "https://w3id.org/memory-rdf/graph/mirror/"
