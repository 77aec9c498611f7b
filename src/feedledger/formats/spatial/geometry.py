"""Canonical geometry: the form on which geometry changes are judged (pure; no I/O).

A feature's geometry is kept as the payload stated it; this module only computes the
form two statements are *compared* on, so that encodings that differ without the
shape changing are not reported as changes. The canonical form of one geometry is:

1. **2-D**: Z and M are dropped (`shapely.force_2d`); a 3-D geometry equals its 2-D
   projection.
2. **snapped to the grid** (the numbers of `shapely.set_precision(..., grid,
   mode="pointwise")`, computed in numpy: `snap_to_grid`): every coordinate is rounded
   to the nearest multiple of `grid`. Pointwise mode
   rounds vertices and nothing else: it never repairs or rebuilds the geometry, so a
   ring whose vertices collapse onto fewer than three distinct grid points (a sliver
   thinner than the grid) is *kept* as that degenerate ring, not dropped. Such a
   geometry is invalid and `geometry_validity` reports it, like any other invalid
   geometry; nothing is repaired silently.
   A coordinate of -0.0 (a tiny negative value rounded to zero) is written as 0.0.
3. **a vertex repeated consecutively counts once** (GEOS's normalize drops such a
   repeat or not depending on where the ring starts); a ring that would collapse
   below a triangle without its repeats is kept as it is.
4. **single-part multi = its part**: a MultiPolygon, MultiLineString or MultiPoint of
   exactly one part becomes that part (File Geodatabase turns every Polygon into a
   MultiPolygon).
5. **normalized** (`shapely.normalize`): rings start at a fixed vertex and run in a
   fixed orientation; holes and the parts of a multi are put in a fixed order. An
   invalid (multi)polygon (judged after steps 1-4), whose orientation GEOS may leave
   depending on where its rings start, is put in order by its coordinates instead
   (`_ordered_invalid`).
6. **encoded** as ISO WKB, little-endian, 2-D, without SRID.

The default grid is 1e-9 of the layer's unit: in degrees that is about 0.1 mm on the
ground, in metres or feet a nanometre or so. It is far below any survey's accuracy,
so a vertex that a publisher actually moved is a change, and for coordinates in
degrees well above the noise of float round trips through the formats (text printed
with 15-17 significant digits, Esri JSON to GeoJSON), which is what otherwise makes
identical shapes compare unequal. For projected layers with coordinates in the
millions (UTM northings, State Plane feet) 1e-9 is within a few float steps of the
coordinate itself, so there it absorbs only lossless round trips; such sources should
set a coarser grid (e.g. 1e-6 of a metre or foot). A vertex on a grid point moved by less than half
the grid gives the same canonical form; moved by more than the grid, a different
one (a coordinate near a rounding boundary can flip with any smaller move: snapping
is rounding, not a tolerance).

A NaN or infinite coordinate (after Z and M are dropped) is refused
(`FeatureGeometryError`, naming the feature): it is no position, and kept it would be
written out as an empty geometry. A huge finite one (up to the largest float) is kept
and compared as it is, beyond the grid's reach.

`None` (no geometry) canonicalises to `None`; an empty geometry of any type
canonicalises to the WKB of `GEOMETRYCOLLECTION EMPTY` (an empty shape is the same
nothing whatever type it is stated as). Geometry that shapely reads but that is
invalid (a self-intersecting bow-tie) is canonicalised like any other; bytes that are
not a geometry at all raise `BadPayloadError`.

All functions work on whole arrays with shapely 2's vectorised functions; only the
conversion of GeoJSON dicts to text loops in Python.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt
import polars as pl
import pyarrow as pa
import shapely

from feedledger.formats.finite import FeatureGeometryError, check_finite
from feedledger.formats.spatial.grid import check_grid, snap_to_grid
from feedledger.model.errors import BadPayloadError
from feedledger.model.hashing import hash_expr

DEFAULT_GRID = 1e-9

GeometryInput: TypeAlias = (
    pa.Array | pa.ChunkedArray | npt.NDArray[Any] | Sequence[Any] | shapely.Geometry
)

_EMPTY_WKB: bytes = shapely.to_wkb(
    shapely.from_wkt("GEOMETRYCOLLECTION EMPTY"), output_dimension=2, byte_order=1
)
_MULTI_TYPES = np.array(
    [
        shapely.GeometryType.MULTIPOINT,
        shapely.GeometryType.MULTILINESTRING,
        shapely.GeometryType.MULTIPOLYGON,
    ]
)


def as_geometries(geoms: GeometryInput) -> npt.NDArray[np.object_]:
    """The input as a 1-D numpy array of shapely geometries (None where missing).

    Accepts a pyarrow binary (WKB) or string (GeoJSON text) array, a numpy array or a
    list of shapely geometries, WKB bytes, GeoJSON dicts, GeoJSON texts or None, or a
    single shapely geometry.
    """
    if isinstance(geoms, shapely.Geometry):
        return np.array([geoms], dtype=object)
    if isinstance(geoms, pa.ChunkedArray):
        geoms = geoms.combine_chunks()
    if isinstance(geoms, pa.Array):
        if pa.types.is_binary(geoms.type) or pa.types.is_large_binary(geoms.type):
            return _from_wkb(np.asarray(geoms.to_numpy(zero_copy_only=False), object))
        if pa.types.is_string(geoms.type) or pa.types.is_large_string(geoms.type):
            return _from_geojson(np.asarray(geoms.to_numpy(zero_copy_only=False), object))
        raise BadPayloadError(
            f"geometry column of type {geoms.type} is neither WKB nor GeoJSON text"
        )
    if isinstance(geoms, np.ndarray):
        arr = geoms.astype(object, copy=False).reshape(-1)
    else:
        arr = np.empty(len(geoms), dtype=object)
        arr[:] = list(geoms)
    if len(arr) == 0:
        return arr
    if bool(np.all(shapely.is_valid_input(arr))):  # geometries or None: no Python loop
        return arr
    kinds = {type(g) for g in arr if g is not None}
    if kinds <= {bytes, bytearray, memoryview}:
        return _from_wkb(arr)
    if kinds <= {dict, str}:
        texts = np.array(
            [g if g is None or isinstance(g, str) else json.dumps(g) for g in arr],
            dtype=object,
        )
        return _from_geojson(texts)
    names = ", ".join(sorted(k.__name__ for k in kinds))
    raise BadPayloadError(
        f"geometries must be all shapely geometries, all WKB or all GeoJSON (got {names})"
    )


def canonical_geometries(
    geoms: GeometryInput, grid: float = DEFAULT_GRID
) -> npt.NDArray[np.object_]:
    """The canonical shapely geometries (steps 1-5 of the module docstring); empty
    geometries are left empty and None stays None."""
    check_grid(grid)
    arr = as_geometries(geoms)
    out = shapely.force_2d(arr)  # (new geometries: the snapping below is in place)
    coords, index = shapely.get_coordinates(out, return_index=True)
    check_finite(coords, index)
    if grid > 0:
        coords = snap_to_grid(coords, grid)
    # -0.0 (a small negative coordinate rounded to zero) has other WKB bytes than 0.0
    coords += 0.0
    out = shapely.set_coordinates(out, coords)
    types = shapely.get_type_id(out)
    single = np.isin(types, _MULTI_TYPES) & (shapely.get_num_geometries(out) == 1)
    if single.any():
        out[single] = shapely.get_geometry(out[single], 0)
    _drop_repeated_points(out, coords, index)
    result: npt.NDArray[np.object_] = shapely.normalize(out)
    # judged on the snapped form: noise below the grid may make a shape invalid as
    # stated (a bow-tie a tenth of the grid wide) without changing its canonical form
    for i in np.flatnonzero(invalid_mask(out)):
        result[i] = _ordered_invalid(out[i])  # from the form before GEOS's normalize
    return result


def _drop_repeated_points(
    geoms: npt.NDArray[np.object_],
    coords: npt.NDArray[np.float64],
    index: npt.NDArray[np.intp],
) -> None:
    """A vertex repeated consecutively counts once (GEOS's normalize itself drops such
    a repeat or not depending on where the ring starts). In place, only for the
    geometries with a repeat (found on the coordinates, vectorised); a ring that would
    collapse below a triangle without them is kept as it is."""
    same = np.all(coords[1:] == coords[:-1], axis=1) & (index[1:] == index[:-1])
    if not same.any():
        return
    rows = np.unique(index[1:][same])
    try:
        geoms[rows] = shapely.remove_repeated_points(geoms[rows], 0.0)
    except shapely.errors.GEOSException:
        for i in rows:
            with contextlib.suppress(shapely.errors.GEOSException):
                geoms[i] = shapely.remove_repeated_points(geoms[i], 0.0)


def invalid_mask(geoms: npt.NDArray[np.object_]) -> npt.NDArray[np.bool_]:
    """Which geometries are invalid (None is not)."""
    result: npt.NDArray[np.bool_] = ~shapely.is_valid(geoms) & ~shapely.is_missing(geoms)
    return result


def _ordered_invalid(geom: shapely.Geometry) -> shapely.Geometry:
    """GEOS orients a ring by its highest vertex, which a self-intersecting ring (or one
    with two highest vertices) can leave depending on where the ring starts and which
    way it runs. So a polygon or multipolygon invalid as stated is put in order here
    instead: each ring from its smallest rotation in either direction, holes and parts
    sorted by their sequences. Per geometry in Python, only for the few invalid ones."""
    if isinstance(geom, shapely.Polygon):
        return _ordered_polygon(geom)[0]
    if isinstance(geom, shapely.MultiPolygon):
        parts = sorted((_ordered_polygon(p) for p in geom.geoms), key=lambda p: p[1])
        return shapely.MultiPolygon([p[0] for p in parts])
    return geom


def _ordered_polygon(polygon: shapely.Polygon) -> tuple[shapely.Polygon, list[list[float]]]:
    shell = _ordered_ring(np.asarray(polygon.exterior.coords))
    holes = sorted(_ordered_ring(np.asarray(r.coords)) for r in polygon.interiors)
    pairs = [np.array(r).reshape(-1, 2) for r in [shell, *holes]]
    closed = [np.concatenate([r, r[:1]]) for r in pairs]
    return shapely.Polygon(closed[0], closed[1:]), [shell, *holes]


def _ordered_ring(coords: npt.NDArray[np.float64]) -> list[float]:
    """The ring's vertices (without the closing one) as a flat list: its smallest
    rotation in either direction (lexicographic on the (x, y) vertices), found in linear
    time (a ring of many equal vertices must not take quadratic time)."""
    points = coords[:-1] if len(coords) > 1 else coords
    best: list[float] = []
    for seq in (points, points[::-1]):
        vertices: list[tuple[float, float]] = [(float(x), float(y)) for x, y in seq]
        start = _least_rotation(vertices)
        rotated = vertices[start:] + vertices[:start]
        candidate = [c for vertex in rotated for c in vertex]
        if not best or candidate < best:
            best = candidate
    return best


def _least_rotation(items: list[tuple[float, float]]) -> int:
    """Where the lexicographically least rotation of `items` starts (Booth's algorithm,
    linear)."""
    doubled = items + items
    failure = [-1] * len(doubled)
    k = 0
    for j in range(1, len(doubled)):
        item = doubled[j]
        i = failure[j - k - 1]
        while i != -1 and item != doubled[k + i + 1]:
            if item < doubled[k + i + 1]:
                k = j - i - 1
            i = failure[i]
        if item != doubled[k + i + 1]:  # here i == -1
            if item < doubled[k]:
                k = j
            failure[j - k] = -1
        else:
            failure[j - k] = i + 1
    return k


def canonical_wkb(geoms: GeometryInput, grid: float = DEFAULT_GRID) -> list[bytes | None]:
    """The canonical WKB of each geometry (module docstring); None for a missing one."""
    result: list[bytes | None] = canonical_wkb_array(geoms, grid).tolist()
    return result


def canonical_wkb_array(
    geoms: GeometryInput, grid: float = DEFAULT_GRID
) -> npt.NDArray[np.object_]:
    """`canonical_wkb` as a numpy object array (bytes or None), without a Python loop."""
    canon = canonical_geometries(geoms, grid)
    empty = shapely.is_empty(canon)
    wkb: npt.NDArray[np.object_] = shapely.to_wkb(
        canon, output_dimension=2, byte_order=1, include_srid=False, flavor="iso"
    )
    wkb[empty] = _EMPTY_WKB
    return wkb


def geometry_hash(geoms: GeometryInput, grid: float = DEFAULT_GRID) -> list[int | None]:
    """XXH3-64 (seed 0) of each canonical WKB as a signed 64-bit integer, the same
    hash and representation as the content hash (`model/hashing.py`); None for None."""
    result: list[int | None] = geometry_hash_series(geoms, grid).to_list()
    return result


def geometry_hash_series(geoms: GeometryInput, grid: float = DEFAULT_GRID) -> pl.Series:
    """`geometry_hash` as an Int64 Series (the columnar path: no Python loop)."""
    wkb = pa.array(canonical_wkb_array(geoms, grid), type=pa.binary())
    series = pl.Series("g", wkb, dtype=pl.Binary)
    return pl.DataFrame([series]).select(hash_expr(pl.col("g"))).to_series().alias("geometry_hash")


def hash_wkb(
    wkb: pa.Array | pa.ChunkedArray, grid: float = DEFAULT_GRID, *, chunk: int = 65_536
) -> tuple[pl.Series, int]:
    """The geometry hash of each WKB geometry (`geometry_hash_series`) and how many are
    invalid as stated: a chunk at a time (the canonical form's copies stay small) on
    two threads (shapely's functions release the GIL). BadPayloadError for bytes that
    are not WKB."""
    check_grid(grid)
    if isinstance(wkb, pa.ChunkedArray):
        wkb = wkb.combine_chunks()

    def one(start: int) -> tuple[pl.Series, int]:
        try:
            geoms = as_geometries(wkb.slice(start, chunk))
            return geometry_hash_series(geoms, grid), int(invalid_mask(geoms).sum())
        except FeatureGeometryError as exc:
            raise BadPayloadError(f"feature {start + exc.row + 1}: {exc.what}") from None

    starts = range(0, len(wkb), chunk)
    if len(starts) <= 1:
        hashes, invalid = one(0)
        return hashes, invalid
    with ThreadPoolExecutor(max_workers=2) as pool:
        parts = list(pool.map(one, starts))
    hashes = pl.concat([p[0] for p in parts], rechunk=True).alias("geometry_hash")
    return hashes, sum(p[1] for p in parts)


def geometry_changed(a: GeometryInput, b: GeometryInput, grid: float = DEFAULT_GRID) -> list[bool]:
    """Elementwise: does geometry `b[i]` differ from `a[i]` in canonical form? None
    against None is no change; None against a geometry (even an empty one) is."""
    left = canonical_wkb(a, grid)
    right = canonical_wkb(b, grid)
    if len(left) != len(right):
        raise ValueError(f"geometry_changed: {len(left)} geometries against {len(right)}")
    return [x != y for x, y in zip(left, right, strict=True)]


def geometry_validity(geoms: GeometryInput) -> list[bool | None]:
    """Whether each geometry *as stated* is valid (`shapely.is_valid`; None for None),
    so callers can count invalid geometries and warn; nothing is repaired."""
    arr = as_geometries(geoms)
    valid = shapely.is_valid(arr)
    result: list[bool | None] = [
        None if g is None else bool(v) for g, v in zip(arr, valid, strict=True)
    ]
    return result


def invalid_count(geoms: GeometryInput) -> int:
    """How many geometries are invalid as stated (None is not counted)."""
    arr = as_geometries(geoms)
    return int(np.count_nonzero(~shapely.is_missing(arr) & ~shapely.is_valid(arr)))


# what GEOS says of a shape it will not build, in the words of the shape's author
_GEOS_PROBLEMS = (
    (
        "do not form a closed linestring",
        "a polygon ring is not closed (its last position must repeat its first)",
    ),
    (
        "Invalid number of points in LinearRing",
        "a polygon ring has fewer than 4 positions (a closed ring needs 3 corners and "
        "its first position again)",
    ),
    (
        "point array must contain 0 or >1 elements",
        "a line has a single position (a line needs at least 2)",
    ),
)


def _from_wkb(values: npt.NDArray[np.object_]) -> npt.NDArray[np.object_]:
    try:
        with np.errstate(invalid="ignore"):  # a NaN ordinate: refused by the caller
            result: npt.NDArray[np.object_] = shapely.from_wkb(values, on_invalid="raise")
    except shapely.errors.GEOSException as exc:
        row, problem = _first_unreadable(values, str(exc))
        raise FeatureGeometryError(row, problem) from None
    return result


def _first_unreadable(values: npt.NDArray[np.object_], message: str) -> tuple[int, str]:
    """Which geometry GEOS refused (one at a time: only on this error path) and why,
    said of the shape rather than by GEOS."""
    row = 0
    for i, value in enumerate(values):
        try:
            with np.errstate(invalid="ignore"):
                shapely.from_wkb(value, on_invalid="raise")
        except shapely.errors.GEOSException as exc:
            row, message = i, str(exc)
            break
    for needle, words in _GEOS_PROBLEMS:
        if needle in message:
            return row, words
    return row, "the geometry is not readable WKB (its bytes are damaged or cut short)"


def _from_geojson(values: npt.NDArray[np.object_]) -> npt.NDArray[np.object_]:
    try:
        result: npt.NDArray[np.object_] = shapely.from_geojson(values, on_invalid="raise")
    except shapely.errors.GEOSException as exc:
        raise BadPayloadError(f"a geometry is not readable GeoJSON: {exc}") from None
    return result
