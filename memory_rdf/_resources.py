"""Files shipped inside the package: the ontology, SHACL shapes, SPARQL queries, demo data,
the graph page (HTML, CSS, JavaScript).

In an installed wheel they live under ``memory_rdf/``; in a source checkout the ontology
sits at the top level (``ontology/``), which the wheel build maps to ``memory_rdf/ontology``.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path


def _package_dir(name: str) -> Traversable:
    packaged = resources.files("memory_rdf") / name
    if packaged.is_dir():
        return packaged
    checkout = Path(__file__).resolve().parent.parent / name
    if checkout.is_dir():
        return checkout
    raise FileNotFoundError(f"memory_rdf resource folder {name!r} is missing from the install")


def ontology_dir() -> Traversable:
    return _package_dir("ontology")


@cache
def ontology_text(filename: str) -> str:
    """Text of ``memory.ttl`` or ``shapes.ttl``."""
    return (ontology_dir() / filename).read_text(encoding="utf-8")


@cache
def query_text(name: str) -> str:
    """Text of ``queries/{name}.rq``."""
    return (_package_dir("queries") / f"{name}.rq").read_text(encoding="utf-8")


@cache
def update_text(name: str) -> str:
    """Text of ``queries/{name}.ru`` (an update template)."""
    return (_package_dir("queries") / f"{name}.ru").read_text(encoding="utf-8")


def update_names() -> list[str]:
    return sorted(
        p.name[: -len(".ru")] for p in _package_dir("queries").iterdir() if p.name.endswith(".ru")
    )


@cache
def query_names() -> list[str]:
    return sorted(
        p.name[: -len(".rq")] for p in _package_dir("queries").iterdir() if p.name.endswith(".rq")
    )


def data_text(filename: str) -> str:
    return (_package_dir("data") / filename).read_text(encoding="utf-8")


@cache
def web_text(filename: str) -> str:
    """Text of ``web/{filename}``: the graph page's HTML template, CSS and JavaScript."""
    return (_package_dir("web") / filename).read_text(encoding="utf-8")
