"""GeoPackage geometry blobs (OGC GeoPackage 1.3, clause 2.1.3 "Geometry Encoding"):
a header -- magic `GP`, version 0, a flags byte, the SRS id, an envelope -- then the
geometry as WKB (ISO WKB for Z/M). Flags: bit 0 the byte order of the header (1:
little-endian), bits 1-3 the envelope's contents (0: none, 1: [minx, maxx, miny,
maxy]), bit 4 "empty geometry", bit 5 "extended type" (never set here).

Blobs are made a batch at a time (`encode`: shapely's WKB and bounds over arrays), and
the header's envelope is read back by the five SQL functions the R-tree index's
triggers call (`register`): GDAL creates those triggers with `ST_IsEmpty`, `ST_MinX`,
`ST_MaxX`, `ST_MinY`, `ST_MaxY`, which SpatiaLite or GDAL's own SQLite functions
provide in QGIS; a plain `sqlite3` connection has none of them, so the writer
registers them (deterministic, reading only the header: every blob written here
carries its envelope).
"""

from __future__ import annotations

import sqlite3
import struct
from collections.abc import Sequence
from typing import Any

import numpy as np
import shapely

_LE_XY = 0x01 | (1 << 1)  # little-endian header, envelope [minx, maxx, miny, maxy]
_LE_EMPTY = 0x01 | (1 << 4)  # little-endian header, empty geometry, no envelope
_ENVELOPE_DOUBLES = (0, 4, 4, 6, 6, 8)  # doubles per envelope indicator (0..4)

# single-part geometry type id (shapely) -> its multi-part one's
_MULTI_OF = {0: 4, 1: 5, 3: 6}


def encode(
    wkbs: Sequence[bytes | None], srs_id: int, multi: bool = False, z: bool = False
) -> tuple[list[bytes | None], tuple[float, float, float, float] | None]:
    """GeoPackage blobs of ISO WKB geometries (None stays None), and the envelope of
    the batch (minx, miny, maxx, maxy; None if no geometry has one). `multi`: the layer
    is of a Multi* type, so a single part is written as a one-part Multi* (the same
    geometry: its canonical form, formats/spatial/geometry.py, is equal). `z`: the layer has Z
    (else a third coordinate is dropped: a 2-D layer holds 2-D geometry, as its
    canonical form is)."""
    out: list[bytes | None] = [None] * len(wkbs)
    present = [i for i, w in enumerate(wkbs) if w is not None]
    if not present:
        return out, None
    shapes = shapely.from_wkb(np.array([wkbs[i] for i in present], dtype=object))
    if multi:
        ids = shapely.get_type_id(shapes)
        for single, _multi in _MULTI_OF.items():
            hit = ids == single
            if hit.any():
                shapes[hit] = [_promote(s, single) for s in shapes[hit]]
    bounds = shapely.bounds(shapes)
    empty = shapely.is_empty(shapes)
    blobs = shapely.to_wkb(shapes, flavor="iso", byte_order=1, output_dimension=3 if z else 2)
    srs = struct.pack("<i", srs_id)
    for j, i in enumerate(present):
        if empty[j]:
            out[i] = b"GP\x00" + bytes([_LE_EMPTY]) + srs + bytes(blobs[j])
        else:
            minx, miny, maxx, maxy = bounds[j].tolist()
            env = struct.pack("<4d", minx, maxx, miny, maxy)
            out[i] = b"GP\x00" + bytes([_LE_XY]) + srs + env + bytes(blobs[j])
    usable = bounds[~empty]
    if usable.size == 0:
        return out, None
    box = (
        float(np.min(usable[:, 0])),
        float(np.min(usable[:, 1])),
        float(np.max(usable[:, 2])),
        float(np.max(usable[:, 3])),
    )
    return out, box


def _promote(shape: Any, single: int) -> Any:
    if single == 0:
        return shapely.multipoints([shape])
    if single == 1:
        return shapely.multilinestrings([shape])
    return shapely.multipolygons([shape])


def wkb_of(blob: bytes | None) -> bytes | None:
    """The WKB of a GeoPackage blob (None stays None)."""
    if blob is None:
        return None
    flags = blob[3]
    return bytes(blob[8 + 8 * _ENVELOPE_DOUBLES[(flags >> 1) & 0x07] :])


_LAST: list[Any] = [None, None]  # the last blob read and its envelope (the triggers ask 5x)


def envelope(blob: Any) -> tuple[float, float, float, float] | None:
    """(minx, maxx, miny, maxy) from the header, or None (empty, or not a blob)."""
    if not isinstance(blob, bytes) or len(blob) < 8 or blob[:2] != b"GP":
        return None
    flags = blob[3]
    if flags == _LE_XY:  # what this module writes: the envelope right after the SRS id
        minx, maxx, miny, maxy = struct.unpack_from("<4d", blob, 8)
        return minx, maxx, miny, maxy
    if blob != _LAST[0]:
        _LAST[0], _LAST[1] = blob, _envelope(blob, flags)
    got: tuple[float, float, float, float] | None = _LAST[1]
    return got


def _envelope(blob: bytes, flags: int) -> tuple[float, float, float, float] | None:
    if flags & (1 << 4):
        return None
    order = "<" if flags & 1 else ">"
    if (flags >> 1) & 0x07:
        got = struct.unpack_from(order + "4d", blob, 8)
        return got[0], got[1], got[2], got[3]
    # no envelope in the header (another writer's blob): from the geometry itself
    shape = shapely.from_wkb(wkb_of(blob))
    if shape is None or shape.is_empty:
        return None
    minx, miny, maxx, maxy = shape.bounds
    return minx, maxx, miny, maxy


def _is_empty(blob: Any) -> int | None:
    if blob is None:
        return None
    return 1 if envelope(blob) is None else 0


def _part(i: int) -> Any:
    def get(blob: Any) -> float | None:
        env = envelope(blob)
        return None if env is None else env[i]

    return get


def register(conn: sqlite3.Connection) -> None:
    """The ST_ functions GDAL's R-tree triggers call, on a plain sqlite3 connection."""
    conn.create_function("ST_IsEmpty", 1, _is_empty, deterministic=True)
    for i, name in enumerate(("ST_MinX", "ST_MaxX", "ST_MinY", "ST_MaxY")):
        conn.create_function(name, 1, _part(i), deterministic=True)
