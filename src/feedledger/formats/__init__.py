"""Payload readers: bytes -> columnar observations (Arrow/Polars): CSV, JSON lines,
JSON, Parquet and the GIS formats (GeoJSON, shapefile, GeoPackage, FileGDB,
FlatGeobuf, GeoParquet), their geometry checks and canonical record hashing.

May import: `feedledger.archive`, `feedledger.sources`, `feedledger.config`,
`feedledger.model` and the leaf utilities (`timing`, `faults`, `ahead`); never its
sibling `feedledger.diff` or a layer above, nor SQL (pyproject's [tool.importlinter]).

The names below are imported on first use (PEP 562 `__getattr__`): a module that needs
only `formats.canonical` or `formats.keys` (a snapshot, a query) does not load every
reader and the GIS libraries (pyogrio, shapely) with them."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from feedledger.formats.canonical import record_hash
    from feedledger.formats.readers import Observations, published_from_field, read_observations

_MODULE_OF = {
    "record_hash": "feedledger.formats.canonical",
    "Observations": "feedledger.formats.readers",
    "published_from_field": "feedledger.formats.readers",
    "read_observations": "feedledger.formats.readers",
}


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = ["Observations", "published_from_field", "read_observations", "record_hash"]
