"""A GeoPackage destination's file: creating its layer, checking it, and swapping a
rebuilt file in.

The layer is created by GDAL (pyogrio, an empty Arrow table): the GeoPackage's own
tables (`gpkg_contents`, `gpkg_geometry_columns`, `gpkg_spatial_ref_sys` with the SRS
GDAL knows for the source's CRS), the layer table with its integer `fid` and geometry
column typed from the source's geometry type (with Z when the source's geometries have a
third coordinate; a 2-D layer gets 2-D geometry), and the R-tree spatial index
(`rtree_<layer>_<geom>`) with the triggers that keep it -- exactly what GDAL and QGIS
expect. Then, with sqlite3: a unique index on the key column, the tombstone side table
`<layer>_fl_tombstones` (deleted records: kept there, so the layer QGIS shows holds
only present features) and `fl_meta` (where a rebuild's swap is announced).

One destination per file: a rebuild replaces the whole file.

Journal: SQLite's rollback journal (`delete`, GDAL's default), never WAL: a WAL file
is found by the database's name, so after a swap an old `-wal` would be read as the
new file's. A swap (`swap`) happens only with no transaction open on the old file.
"""

from __future__ import annotations

import os
import sqlite3
import warnings
from dataclasses import dataclass
from pathlib import Path

from feedledger.model.errors import ConfigError, StoreUnavailableError

GUARD_COLUMNS = (
    ("fl_key", "TEXT"),
    ("fl_revision", "INTEGER"),
    ("fl_generation", "TEXT"),
    ("fl_generation_rank", "INTEGER"),
    ("fl_content_hash", "TEXT"),
    ("fl_written_at", "INTEGER"),
)
GUARD_NAMES = tuple(c for c, _t in GUARD_COLUMNS)
META = "gpkgext_feedledger_meta"
REPLACED_BY = "replaced_by"

# the GeoJSON type names -> GDAL's geometry type for pyogrio
_MULTI = {"Point": "MultiPoint", "LineString": "MultiLineString", "Polygon": "MultiPolygon"}


@dataclass(frozen=True)
class Layout:
    """What a new layer is created with: the source's CRS as stated (None: none
    stated) and its geometry type (None: not a GIS source -- an attribute table)."""

    crs: str | None
    geometry_type: str | None


def layer_type(types: set[str]) -> str:
    """The one geometry type of a layer holding `types` (GeoJSON names, `X Z` for 3-D):
    the type itself, the Multi* type of X and Multi-X together (single parts are
    written as one-part Multi*), or `Unknown` (GEOMETRY: any) when mixed or none yet;
    ` Z` when any has a third coordinate."""
    z = " Z" if any(t.endswith(" Z") for t in types) else ""
    names = {t.removesuffix(" Z") for t in types}
    if len(names) == 1:
        return next(iter(names)) + z
    if len(names) == 2:
        for single, multi in _MULTI.items():
            if names == {single, multi}:
                return multi + z
    return "Unknown" + z


def tombstones(layer: str) -> str:
    return f"gpkgext_feedledger_{layer}_tombstones"


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def connect(path: Path) -> sqlite3.Connection:
    """A connection to the file, autocommit (transactions are begun explicitly),
    durable commits, shared with the rebuild's writer thread (one lock around it)."""
    conn = sqlite3.connect(str(path), timeout=60, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA foreign_keys=OFF")
    return conn


def create(path: Path, layer: str, layout: Layout) -> None:
    """Create `layer` in the GeoPackage at `path` (the file too, if absent) with GDAL,
    then its key index, tombstone table and meta table."""
    import pyarrow as pa  # lazy: only when a layer is made
    import pyogrio  # lazy: GDAL, only when a layer is made

    path.parent.mkdir(parents=True, exist_ok=True)
    cols = {
        name: pa.array([], pa.int64() if kind == "INTEGER" else pa.string())
        for name, kind in GUARD_COLUMNS
    }
    geo = layout.geometry_type is not None
    if geo:
        cols["geometry"] = pa.array([], pa.binary())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", UserWarning)
        try:
            pyogrio.write_arrow(
                pa.table(cols),
                str(path),
                layer=layer,
                driver="GPKG",
                geometry_name="geometry" if geo else None,
                geometry_type=layout.geometry_type if geo else None,
                crs=layout.crs if geo else None,
                encoding="UTF-8",
            )
        except (RuntimeError, ValueError, OSError) as exc:
            raise StoreUnavailableError(
                f"cannot create GeoPackage layer {layer} in {path}: {_one_line(exc)}"
            ) from None
    conn = connect(path)
    try:
        conn.execute("BEGIN IMMEDIATE")
        t = quote(layer)
        conn.execute(f"CREATE UNIQUE INDEX {quote(layer + '_fl_key')} ON {t} (fl_key)")
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {quote(tombstones(layer))} (fl_key TEXT PRIMARY KEY, "
            "fl_revision INTEGER NOT NULL, fl_generation TEXT NOT NULL, "
            "fl_generation_rank INTEGER NOT NULL, fl_content_hash TEXT NOT NULL, "
            "fl_written_at INTEGER)"
        )
        conn.execute(f"CREATE TABLE IF NOT EXISTS {META} (k TEXT PRIMARY KEY, v TEXT)")
        conn.execute("COMMIT")
    finally:
        conn.close()
    fsync(path)


def check_header(path: Path) -> None:
    """Refuse a file that is not an SQLite database (so not a GeoPackage)."""
    try:
        with path.open("rb") as handle:
            head = handle.read(16)
    except OSError as exc:
        raise StoreUnavailableError(f"cannot read GeoPackage {path}: {exc.strerror}") from None
    if head and head != b"SQLite format 3\x00":
        raise ConfigError(
            f"{path} is not a GeoPackage (not an SQLite database)",
            hint="give a new file name, or a GeoPackage file",
        )


def check(conn: sqlite3.Connection, path: Path, layer: str, geo: bool) -> str | None:
    """Whether `layer` exists in the open GeoPackage, checked: its geometry column's
    name (None for an attribute table); refuses a layer feedledger did not make, or a
    file that is not a GeoPackage. Returns '' when the layer is absent."""
    try:
        found = conn.execute(
            "SELECT data_type FROM gpkg_contents WHERE lower(table_name) = lower(?)", (layer,)
        ).fetchone()
    except sqlite3.DatabaseError as exc:
        raise ConfigError(
            f"{path} is not a GeoPackage ({_one_line(exc)})",
            hint="give a new file name, or a GeoPackage file",
        ) from None
    if found is None:
        return ""
    have = {r[1] for r in conn.execute(f"PRAGMA table_info({quote(layer)})")}
    missing = [c for c in GUARD_NAMES if c not in have]
    tomb = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (tombstones(layer),)
    ).fetchone()
    if missing or tomb is None:
        raise ConfigError(
            f"GeoPackage layer {layer} in {path} was not made by feedledger (no "
            f"{', '.join(missing) or tombstones(layer)})",
            hint="choose another --layer, or another --gpkg file",
        )
    geom = conn.execute(
        "SELECT column_name FROM gpkg_geometry_columns WHERE lower(table_name) = lower(?)",
        (layer,),
    ).fetchone()
    if geo and geom is None:
        raise ConfigError(
            f"GeoPackage layer {layer} in {path} is an attribute table, but its source is a "
            "GIS source",
            hint="choose another --layer",
        )
    return str(geom[0]) if geom is not None else None


def replaced_by(conn: sqlite3.Connection) -> str | None:
    """The new file a rebuild announced in this (old) file, or None."""
    try:
        row = conn.execute(f"SELECT v FROM {META} WHERE k = ?", (REPLACED_BY,)).fetchone()
    except sqlite3.OperationalError:  # no meta table: a file made before it
        return None
    return None if row is None else str(row[0])


def mark_replaced(conn: sqlite3.Connection, new: Path) -> None:
    """Announce in the old file (its write transaction open) that `new` replaces it."""
    conn.execute(f"CREATE TABLE IF NOT EXISTS {META} (k TEXT PRIMARY KEY, v TEXT)")
    conn.execute(
        f"INSERT INTO {META} (k, v) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET v = excluded.v",
        (REPLACED_BY, str(new)),
    )


def swap(new: Path, path: Path) -> bool:
    """Put the complete, closed file `new` in place of `path`, atomically: fsync the
    file, rename it over the old one, fsync the folder. False if `new` is gone (another
    process swapped it in first)."""
    try:
        fsync(new)
        os.replace(new, path)
    except FileNotFoundError:
        return False
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return True


def copy(path: Path, new: Path) -> None:
    """A consistent, compacted copy of the GeoPackage at `path` as `new` (`VACUUM
    INTO` a part file, then renamed: a kill leaves no half copy under `new`'s name),
    without the old file's swap announcement."""
    part = new.with_name(new.name + ".part")
    part.unlink(missing_ok=True)
    conn = connect(path)
    try:
        conn.execute("VACUUM INTO ?", (str(part),))
    finally:
        conn.close()
    conn = connect(part)
    try:
        conn.execute("BEGIN IMMEDIATE")
        if replaced_by(conn) is not None:
            clear_mark(conn)
        conn.execute("COMMIT")
    finally:
        conn.close()
    fsync(part)
    os.replace(part, new)


def clear_stale(path: Path, mark: str) -> None:
    """Clear the announcement `mark` from the file at `path` if its new file is gone
    (a rebuild abandoned after announcing, whose file was removed)."""
    conn = connect(path)
    try:
        conn.execute("BEGIN IMMEDIATE")
        if replaced_by(conn) == mark and not Path(mark).exists():
            clear_mark(conn)
        conn.execute("COMMIT")
    finally:
        conn.close()


def clear_mark(conn: sqlite3.Connection) -> None:
    """The new file carries no announcement of its own replacement."""
    conn.execute(f"DELETE FROM {META} WHERE k = ?", (REPLACED_BY,))


def fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def rebuild_path(path: Path, manifest_id: str) -> Path:
    """Where a rebuild of manifest `manifest_id` writes its new file, beside the old."""
    return path.with_name(f".{path.name}.rebuild-{manifest_id[:16]}.gpkg")


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
