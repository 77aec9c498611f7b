"""Destination kinds behind one seam (`base.DestinationKind`): the SQL tables
(PostgreSQL, SQLite: sync/target.py) and the GeoPackage layer (`gpkg`). `open_target`
is the ONE place a destination's kind picks its class; the routes (sync/live.py,
rebuild.py, reconcile.py, destinations.py) only see the protocol. A new kind (a search
index, a PostGIS table) is a module here, a branch in `open_target`, a `Kind` in
model/destination.py and a parameter of tests/sync/test_destination_kinds.py.

Holds: `base` (the protocol), `gpkg` (the GeoPackage layer's guarded write and read
back), `gpkg_rows` (its rows: members as columns, the old file's rows), `gpkg_swap` (a
rebuild's end: merge, announce, swap), `gpkg_file` (creating, checking, copying and
swapping the file), `gpkg_binary` (the GeoPackage geometry blob and the ST_ functions
its R-tree triggers call); `tantivy_index` (a tantivy full-text index: the guarded
write under its writer lock, the read back), `tantivy_schema` (its schema and
documents), `tantivy_search` (BM25 queries over it); `postgis` (the PostGIS table:
sync/target.py's table with typed columns and geometry), `postgis_schema` (its
columns, types and DDL).
"""

from __future__ import annotations

from feedledger.ledger.store import Store
from feedledger.model.destination import Destination
from feedledger.sync.kinds.base import DestinationKind

__all__ = ["DestinationKind", "open_target"]


def open_target(
    dest: Destination,
    *,
    geo: bool = False,
    store: Store | None = None,
    rebuild: str | None = None,
    key: tuple[str, ...] = (),
    srid: int | None = None,
) -> DestinationKind:
    """The destination `dest`, opened (not yet ensured). `geo`: its source is a GIS
    source (documents carry WKB). `store`: the ledger, from which a kind that must
    describe its layer when it creates it (the GeoPackage: CRS, geometry type) reads
    the source's. `rebuild`: a rebuild of that manifest id is about to write (a kind
    that rebuilds into a new file writes there until `finish`). `key`: the source's key
    fields and `srid`: `--srid` (a PostGIS table's primary key and SRID, when it is
    created)."""
    if dest.kind == "gpkg":
        from feedledger.sync.kinds.gpkg import GeoPackage  # lazy: sqlite3, shapely

        return GeoPackage(dest, geo=geo, store=store, rebuild=rebuild)
    if dest.kind == "tantivy":
        from feedledger.sync.kinds.tantivy_index import TantivyIndex  # lazy: the search extra

        return TantivyIndex(dest)
    if dest.kind == "postgis":
        from feedledger.sync.kinds.postgis import PostGIS  # lazy: SQLAlchemy's engines

        return PostGIS(dest, geo=geo, store=store, key=key, srid=srid)
    from feedledger.sync.target import Target  # lazy: SQLAlchemy's engines

    return Target(dest, geo=geo)
