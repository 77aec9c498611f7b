"""A GeoPackage destination's rows in the layer's terms (sync/kinds/gpkg.py): the
guarded write's Item and the row held for a key, how a document member becomes an
attribute column (its name, type and stored value), the envelope of a batch, and the
old file's rows a rebuild's `finish` merges into the new one.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

from feedledger.sync.kinds import gpkg_binary
from feedledger.sync.kinds.gpkg_file import GUARD_NAMES, quote, tombstones

CHUNK = 500  # keys per IN (...) lookup
MERGE = 5_000  # old rows per merge step


class Item(NamedTuple):
    """One guarded write in the layer's terms: the guard's fields (as a Doc names them,
    so `judge` reads it), the attributes (None: a tombstone) and the geometry blob."""

    key: str
    revision: int
    generation: str
    rank: int
    content_hash: str
    deleted: bool
    doc: str | None
    attrs: dict[str, Any] | None
    blob: bytes | None


class Held(NamedTuple):
    revision: int
    generation: str
    generation_rank: int
    content_hash: str
    deleted: bool
    fid: int | None  # the feature's row (None: a tombstone)
    doc: Any = None  # its attributes, read for an unresolved verdict's evidence


def old_rows(conn: sqlite3.Connection, layer: str) -> Iterator[list[Item]]:
    """The old file's features and tombstones, MERGE at a time, as Items."""
    t, tomb = quote(layer), quote(tombstones(layer))
    geom_row = conn.execute(
        "SELECT column_name FROM gpkg_geometry_columns WHERE lower(table_name) = lower(?)",
        (layer,),
    ).fetchone()
    geom = str(geom_row[0]) if geom_row else None
    skip = {"fid", *GUARD_NAMES, geom}
    attrs = [str(r[1]) for r in conn.execute(f"PRAGMA table_info({t})") if r[1] not in skip]
    cols = ", ".join(quote(c) for c in [*([geom] if geom else []), *attrs])
    after = ""
    while True:
        rows = conn.execute(
            f"SELECT fl_key, fl_revision, fl_generation, fl_generation_rank, fl_content_hash"
            f"{', ' + cols if cols else ''} FROM {t} WHERE fl_key > ? ORDER BY fl_key LIMIT ?",
            (after, MERGE),
        ).fetchall()
        if not rows:
            break
        after = rows[-1][0]
        n = 6 if geom else 5
        yield [
            Item(r[0], int(r[1]), r[2], int(r[3]), r[4], False, None,
                 dict(zip(attrs, r[n:], strict=True)), r[5] if geom else None)
            for r in rows
        ]  # fmt: skip
    after = ""
    while True:
        rows = conn.execute(
            "SELECT fl_key, fl_revision, fl_generation, fl_generation_rank, fl_content_hash "
            f"FROM {tomb} WHERE fl_key > ? ORDER BY fl_key LIMIT ?",
            (after, MERGE),
        ).fetchall()
        if not rows:
            break
        after = rows[-1][0]
        yield [Item(r[0], int(r[1]), r[2], int(r[3]), r[4], True, None, None, None) for r in rows]


def union_box(blobs: Sequence[bytes | None]) -> tuple[float, float, float, float] | None:
    """(minx, miny, maxx, maxy) of the blobs' header envelopes."""
    box: list[float] | None = None
    for blob in blobs:
        env = gpkg_binary.envelope(blob)
        if env is None:
            continue
        minx, maxx, miny, maxy = env
        if box is None:
            box = [minx, miny, maxx, maxy]
        else:
            box = [min(box[0], minx), min(box[1], miny), max(box[2], maxx), max(box[3], maxy)]
    return None if box is None else (box[0], box[1], box[2], box[3])


_RESERVED = ("fid",)


def column(name: str, geom: str | None) -> str:
    """The column of a document member: its name, but for the layer's own columns'
    names (fid, the geometry column, `fl_...`), which get a leading underscore."""
    low = name.lower()
    if low in _RESERVED or (geom is not None and low == geom.lower()) or low.startswith("fl_"):
        return "_" + name
    return name


def sql_type(values: list[Any]) -> str:
    """A GeoPackage column type for a member's values (JSON types; nulls ignored)."""
    seen = {type(v) for v in values if v is not None}
    if seen and seen <= {bool}:
        return "BOOLEAN"
    if seen and seen <= {int}:
        return "INTEGER"
    if seen and seen <= {int, float}:
        return "REAL"
    return "TEXT"


def value(value: Any) -> Any:
    """A member's value as stored: JSON objects and arrays as their JSON text."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return value
