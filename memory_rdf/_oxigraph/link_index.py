"""The read mirror's link index: what a :class:`WriteBatch` may change in it
(:func:`index_changes`), and applying a committed update to the mirror with the index kept in
step (:func:`apply_indexed`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pyoxigraph as ox

from memory_rdf import _vocab as V
from memory_rdf._oxigraph.batch import WriteBatch
from memory_rdf._oxigraph.render import _terms, render
from memory_rdf._oxigraph.terms import Term

#: Shipped update templates that touch nothing the read mirror's link index is derived from
#: (a link's source, target or relation, a node's liveness); any other template that is not
#: handled by :func:`index_changes` makes the mirror derive its whole index again.
_INDEX_NEUTRAL = frozenset({"delete_node_text", "delete_node_texts", "remove_task",
                            "release_lease", "take_lease", "clear_creation_marks",
                            "delete_vectors", "clear_vectors"})
_LINK_PREDICATES = {V.SOURCE: "source", V.TARGET: "target", V.RELATION: "relation"}


def _triples(body: str, predicate: str) -> Iterator[tuple[str, str]]:
    """``(subject, object)`` of the triples of ``body`` (one ``s p o .`` a line, as
    :func:`triple` writes them) whose predicate is ``predicate``, as serialized terms: found
    with ``str.find`` (a regex over a compression batch's ~700 kB took 12 ms). An occurrence
    inside a literal is not a triple's predicate: skipped."""
    needle = f" {predicate} "
    at = body.find(needle)
    while at >= 0:
        subject = body[body.rfind("\n", 0, at) + 1 : at]
        end = body.find("\n", at)
        line_end = len(body) if end < 0 else end
        if subject.startswith("<") and subject.endswith(">") and " " not in subject:
            obj = body[at + len(needle) : line_end].rstrip()
            yield subject, obj[:-1].rstrip() if obj.endswith(".") else obj
        at = body.find(needle, at + len(needle))


@dataclass
class IndexChanges:
    """What a :class:`WriteBatch` may change in the read mirror's link index (serialized
    terms), read off its operations by :func:`index_changes`."""

    #: links whose source, target or relation triples it writes or deletes
    links: set[str] = field(default_factory=set)
    #: of those, what its INSERT DATA gives them: link → {"source"|"target"|"relation": [objects]}
    inserted: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    #: of those, the ones it deletes something of (DELETE DATA, delete_link(s))
    deleted: set[str] = field(default_factory=set)
    #: node → the last thing the batch does to its liveness: "insert" (a memory:scanCount),
    #: "delete" (one of its scanCounts) or "forget" (forget_node(s): all its triples)
    liveness: dict[str, str] = field(default_factory=dict)
    #: nodes forgotten (their triples and the links out of them go)
    forgotten: set[str] = field(default_factory=set)
    #: an update the index cannot follow: derive all of it again
    rebuild: bool = False

    def __bool__(self) -> bool:
        return bool(self.links or self.liveness or self.forgotten or self.rebuild)


def index_changes(batch: WriteBatch) -> IndexChanges:
    """What ``batch`` may change in the read mirror's link index, read off its operations:
    the triples of its ``INSERT DATA`` / ``DELETE DATA`` on the memory network (written one a
    line by :func:`triple`) and the parameters of its update templates."""
    out = IndexChanges()
    for verb, body, params, graph, neutral in batch._ops:
        if verb == "update":
            if body in ("forget_node", "forget_nodes"):
                for node in _terms("nodes", params.get("nodes", params.get("node")), many=True):
                    out.forgotten.add(node)
                    out.liveness[node] = "forget"
            elif body in ("delete_link", "delete_links"):
                links = _terms("links", params.get("links", params.get("link")), many=True)
                out.links.update(links)
                out.deleted.update(links)
            elif body not in _INDEX_NEUTRAL:
                out.rebuild = True
            continue
        if graph is not None or neutral:  # the journal, the store's metadata; no index terms
            continue
        inserting = verb == "INSERT DATA"
        for predicate, role in _LINK_PREDICATES.items():
            for link, obj in _triples(body, predicate):
                out.links.add(link)
                if inserting:
                    out.inserted.setdefault(link, {}).setdefault(role, []).append(obj)
                else:
                    out.deleted.add(link)
        for scanned, _count in _triples(body, V.SCAN_COUNT):
            out.liveness[scanned] = "insert" if inserting else "delete"
    return out


_SCAN_COUNT_NODE = ox.NamedNode(V.MEMORY + "scanCount")
_SOURCE_NODE = ox.NamedNode(V.MEMORY + "source")
_TARGET_NODE = ox.NamedNode(V.MEMORY + "target")
_DEFAULT_GRAPH = ox.DefaultGraph()


def _has(mirror: ox.Store, s: str | None, p: ox.NamedNode | None, o: str | None) -> bool:
    """Whether ``mirror``'s memory network holds a triple of the pattern (terms; None: any)."""
    subject = None if s is None else ox.NamedNode(s[1:-1])
    obj = None if o is None else ox.NamedNode(o[1:-1])
    return next(iter(mirror.quads_for_pattern(subject, p, obj, _DEFAULT_GRAPH)), None) is not None


def build_index(mirror: ox.Store) -> None:
    """Derive the read mirror's link index afresh (``mirror_index_all.ru``)."""
    mirror.update(f"DROP SILENT GRAPH <{V.MIRROR_OUT}> ; DROP SILENT GRAPH <{V.MIRROR_LOST}> ;\n"
                  + render("mirror_index_all.ru"), prefixes=V.PREFIXES)


def _entry(target: str, relation: str | None) -> str | None:
    """The index entry literal of a link to ``target`` (an IRI term) with the ``relation``
    literal (serialized, None: unnamed), spliced from the serialized terms (an IRI holds no
    character a literal escapes); None when the relation is not a literal."""
    iri = target[1:-1]
    tid = iri[len(V.NODE):] if iri.startswith(V.NODE) else iri
    if relation is None:
        return f'"{tid}"'
    if not relation.startswith('"'):
        return None
    return f'"{tid} {relation[1 : relation.rindex(chr(34))]}"'


def _new_link_entries(
    mirror: ox.Store, link: str, changes: IndexChanges,
    alive_after: Callable[[str], bool | None], fresh: set[str],
) -> list[tuple[str, str]] | None:
    """``(graph, triple)`` of the index entries of a link the batch creates whole (source,
    target and relation by INSERT DATA, nothing deleted, the link unknown before), or None
    when it does not (then the entries are derived by ``mirror_index.ru``). A link from or to
    one of the ``fresh`` nodes (created by the batch, no link touching them before) is new
    without asking the store."""
    given = changes.inserted.get(link)
    if (not given or link in changes.deleted or not given.get("source")
            or not given.get("target")):
        return None
    if any(source in changes.forgotten for source in given["source"]):
        return None  # mirror_index.ru's deletion of the forgotten node's entries comes after
    ends = (*given["source"], *given["target"])
    if not any(end in fresh for end in ends) and _has(mirror, link, None, None):
        return None
    relations: list[str | None] = [*given.get("relation", [])] or [None]
    made: list[tuple[str, str]] = []
    for target in given["target"]:
        live = alive_after(target) if target.startswith("<") else None
        if live is None:
            return None
        for relation in relations:
            entry = _entry(target, relation)
            if entry is None:
                return None
            graph = V.MIRROR_OUT if live else V.MIRROR_LOST
            made += [(graph, f"{source} {link} {entry} .") for source in given["source"]]
    return made


def apply_indexed(mirror: ox.Store, text: str, changes: IndexChanges | None) -> None:
    """Apply a committed update to the read mirror and keep its link index in step, in one
    request when the batch tells enough (in the store owner's turn):

    * a link the batch creates whole (its source, target and relation written by INSERT
      DATA, the link unknown before) gets its entry written as data (``INSERT DATA``), in the
      graph of its target's liveness after the batch — what every remember does;
    * the others (a link deleted or changed, the links into a node forgotten or into one
      created while links to it already pointed at it, the links out of a forgotten node)
      are derived again from the store (``mirror_index.ru``). Compression's strength writes
      change nothing: the index holds no strength.

    A node's liveness after the batch is known from its last scanCount write (an insert:
    live; a forget: not); after a bare delete of a scanCount it is read once the update is in.
    """
    if not changes:
        mirror.update(text, prefixes=V.PREFIXES)
        return
    if changes.rebuild:
        mirror.update(text, prefixes=V.PREFIXES)
        build_index(mirror)
        return
    before = {n: _has(mirror, n, _SCAN_COUNT_NODE, None) for n in changes.liveness}
    after: dict[str, bool | None] = {
        n: {"insert": True, "forget": False}.get(op) for n, op in changes.liveness.items()
    }

    def alive_after(node: str) -> bool | None:
        if node not in after:
            after[node] = _has(mirror, node, _SCAN_COUNT_NODE, None)  # the batch leaves it
        return after[node]

    # Nodes the batch creates (not live before, a scanCount written) that no link touched.
    fresh = {n for n, was in before.items() if not was and after[n]
             and not _has(mirror, None, _TARGET_NODE, n)
             and not _has(mirror, None, _SOURCE_NODE, n)}
    entries: dict[str, list[str]] = {V.MIRROR_OUT: [], V.MIRROR_LOST: []}
    general: list[str] = []
    for link in sorted(changes.links):
        made = _new_link_entries(mirror, link, changes, alive_after, fresh)
        if made is None:
            general.append(link)
        else:
            for graph, quad in made:
                entries[graph].append(quad)
    # Nodes whose liveness the batch changes move the entries of the links into them (a
    # fresh node has none but the batch's own, written above).
    changed = [n for n, was in before.items()
               if after[n] is not None and after[n] != was and n not in fresh]
    parts = [text]
    data = "\n".join(f"GRAPH <{g}> {{\n" + "\n".join(q) + "\n}" for g, q in entries.items() if q)
    if data:
        parts.append(f"INSERT DATA {{\n{data}\n}}")
    if general or changed or changes.forgotten:
        parts.append(render(
            "mirror_index.ru", links=[Term(t) for t in general],
            changed=[Term(t) for t in sorted(changed)],
            forgotten=[Term(t) for t in sorted(changes.forgotten)],
        ))
    mirror.update(" ;\n".join(parts), prefixes=V.PREFIXES)
    unsure = [n for n in before if after[n] is None]
    if unsure:  # a scanCount deleted, none written after: is it still a live node?
        moved = [Term(n) for n in unsure if _has(mirror, n, _SCAN_COUNT_NODE, None) != before[n]]
        if moved:
            mirror.update(render("mirror_index.ru", links=[], changed=moved, forgotten=[]),
                          prefixes=V.PREFIXES)
