"""Geometry changes are judged on a canonical form (formats/spatial/geometry.py)."""

from __future__ import annotations

import threading

import numpy as np
import pyarrow as pa
import pytest
import shapely
from hypothesis import given, settings
from hypothesis import strategies as st

from feedledger.formats.spatial.geometry import (
    DEFAULT_GRID,
    canonical_wkb,
    geometry_changed,
    geometry_hash,
    geometry_validity,
    invalid_count,
)
from feedledger.model.errors import BadPayloadError, ConfigError

GRIDS = st.sampled_from([DEFAULT_GRID, 1e-6, 0.01, 1.0])


@st.composite
def convex_rings(draw: st.DrawFn) -> tuple[list[tuple[float, float]], float]:
    """A valid ring (a convex polygon: vertices on a circle, on grid points), its grid."""
    grid = draw(GRIDS)
    n = draw(st.integers(3, 12))
    angles = sorted(draw(st.sets(st.integers(0, 359), min_size=n, max_size=n)))
    radius = draw(st.integers(1_000, 1_000_000))
    cx, cy = draw(st.integers(-(10**6), 10**6)), draw(st.integers(-(10**6), 10**6))
    pts = []
    for a in angles:
        x = cx + round(radius * np.cos(np.radians(a)))
        y = cy + round(radius * np.sin(np.radians(a)))
        pts.append((x * grid, y * grid))
    pts = list(dict.fromkeys(pts))
    if len(pts) < 3 or not shapely.Polygon(pts).is_valid:
        pts = [
            (cx * grid, cy * grid),
            ((cx + 1000) * grid, cy * grid),
            (cx * grid, (cy + 1000) * grid),
        ]
    return pts, grid


def one(geom: shapely.Geometry, grid: float) -> bytes | None:
    return canonical_wkb([geom], grid)[0]


@settings(max_examples=150, deadline=None)
@given(convex_rings(), st.data())
def test_ring_start_orientation_multi_and_subgrid_noise_do_not_change(
    ring: tuple[list[tuple[float, float]], float], data: st.DataObject
) -> None:
    pts, grid = ring
    base = one(shapely.Polygon(pts), grid)
    k = data.draw(st.integers(0, len(pts) - 1))
    rotated = pts[k:] + pts[:k]
    assert one(shapely.Polygon(rotated), grid) == base
    assert one(shapely.Polygon(rotated[::-1]), grid) == base
    assert one(shapely.MultiPolygon([shapely.Polygon(rotated)]), grid) == base
    noise = data.draw(
        st.lists(
            st.tuples(st.floats(-0.4, 0.4), st.floats(-0.4, 0.4)),
            min_size=len(pts),
            max_size=len(pts),
        )
    )
    moved = [(x + dx * grid, y + dy * grid) for (x, y), (dx, dy) in zip(pts, noise, strict=True)]
    assert one(shapely.Polygon(moved), grid) == base
    assert geometry_changed([shapely.Polygon(pts)], [shapely.Polygon(moved)], grid) == [False]


@settings(max_examples=150, deadline=None)
@given(convex_rings(), st.data())
def test_vertex_moved_beyond_the_grid_is_a_change(
    ring: tuple[list[tuple[float, float]], float], data: st.DataObject
) -> None:
    pts, grid = ring
    i = data.draw(st.integers(0, len(pts) - 1))
    steps = data.draw(st.floats(1.6, 50.0))
    direction = data.draw(st.sampled_from([(1, 0), (-1, 0), (0, 1), (0, -1)]))
    moved = list(pts)
    moved[i] = (pts[i][0] + direction[0] * steps * grid, pts[i][1] + direction[1] * steps * grid)
    assert one(shapely.Polygon(moved), grid) != one(shapely.Polygon(pts), grid)
    assert geometry_changed([shapely.Polygon(pts)], [shapely.Polygon(moved)], grid) == [True]


def test_holes_in_any_order_and_orientation() -> None:
    shell = [(0, 0), (10, 0), (10, 10), (0, 10)]
    h1 = [(1, 1), (2, 1), (2, 2), (1, 2)]
    h2 = [(5, 5), (6, 5), (6, 6), (5, 6)]
    a = shapely.Polygon(shell, [h1, h2])
    b = shapely.Polygon(shell[2:] + shell[:2], [h2[::-1], h1[1:] + h1[:1]])
    assert canonical_wkb([a]) == canonical_wkb([b])
    c = shapely.Polygon(shell, [h1])
    assert geometry_changed([a], [c]) == [True]


def test_multipolygon_of_several_parts_in_any_order() -> None:
    p = shapely.Polygon([(0, 0), (1, 0), (1, 1)])
    q = shapely.Polygon([(5, 5), (6, 5), (6, 6), (5, 6)])
    a = shapely.MultiPolygon([p, q])
    b = shapely.MultiPolygon([shapely.Polygon(list(q.exterior.coords)[::-1]), p])
    assert canonical_wkb([a]) == canonical_wkb([b])
    assert canonical_wkb([a]) != canonical_wkb([p])


def test_lines_and_points() -> None:
    line = shapely.LineString([(0, 0), (1, 1), (2, 0)])
    assert canonical_wkb([line]) == canonical_wkb([shapely.MultiLineString([line])])
    assert canonical_wkb([line]) == canonical_wkb([shapely.LineString(line.coords[::-1])])
    assert geometry_changed([line], [shapely.LineString([(0, 0), (1, 1.001), (2, 0)])]) == [True]
    pt = shapely.Point(1.5, 2.5)
    assert canonical_wkb([pt]) == canonical_wkb([shapely.MultiPoint([pt])])
    assert canonical_wkb([pt]) == canonical_wkb([shapely.Point(1.5 + 1e-11, 2.5 - 1e-11)])
    mp = shapely.MultiPoint([(0, 0), (1, 1)])
    assert canonical_wkb([mp]) == canonical_wkb([shapely.MultiPoint([(1, 1), (0, 0)])])


@settings(max_examples=100, deadline=None)
@given(convex_rings(), st.floats(-1e4, 1e4, allow_nan=False))
def test_3d_equals_its_2d_projection(
    ring: tuple[list[tuple[float, float]], float], z: float
) -> None:
    pts, grid = ring
    flat = shapely.Polygon(pts)
    raised = shapely.Polygon([(x, y, z + i) for i, (x, y) in enumerate(pts)])
    assert shapely.get_coordinate_dimension(raised) == 3
    assert one(raised, grid) == one(flat, grid)


def test_wkb_is_little_endian_2d_iso() -> None:
    wkb = canonical_wkb([shapely.Point(1, 2, 3)])[0]
    assert wkb is not None
    assert wkb[0] == 1  # little-endian
    assert wkb == shapely.to_wkb(shapely.Point(1, 2), byte_order=1)


def test_bowtie_is_kept_and_reported_invalid() -> None:
    bowtie = shapely.from_wkt("POLYGON ((0 0, 1 1, 1 0, 0 1, 0 0))")
    square = shapely.from_wkt("POLYGON ((0 0, 1 0, 1 1, 0 1, 0 0))")
    wkb = canonical_wkb([bowtie, square])
    assert wkb[0] is not None and wkb[0] != wkb[1]
    # not repaired: the canonical form has the same vertices as stated
    back = shapely.from_wkb(wkb[0])
    assert set(back.exterior.coords) == set(bowtie.exterior.coords)
    assert geometry_validity([bowtie, square, None]) == [False, True, None]
    assert invalid_count([bowtie, square, None]) == 1


def test_ring_collapsing_on_the_grid_is_kept_not_dropped() -> None:
    sliver = shapely.Polygon([(0, 0), (1e-10, 0), (0, 1e-10)])
    wkb = canonical_wkb([sliver])[0]
    assert wkb is not None
    back = shapely.from_wkb(wkb)
    assert back.geom_type == "Polygon" and not back.is_empty
    assert geometry_validity([back]) == [False]


def test_none_and_empty() -> None:
    empties = shapely.from_wkt(["POINT EMPTY", "POLYGON EMPTY", "MULTIPOLYGON EMPTY"])
    wkb = canonical_wkb([None, *empties])
    assert wkb[0] is None
    assert (
        wkb[1]
        == wkb[2]
        == wkb[3]
        == shapely.to_wkb(shapely.from_wkt("GEOMETRYCOLLECTION EMPTY"), byte_order=1)
    )
    assert geometry_changed([None, None], [None, empties[0]]) == [False, True]
    assert geometry_hash([None])[0] is None
    assert canonical_wkb([]) == []


def test_inputs_geojson_wkb_arrow_numpy() -> None:
    sq = shapely.Polygon([(0, 0), (1, 0), (1, 1), (0, 1)])
    expected = canonical_wkb([sq, None])
    gj = {"type": "MultiPolygon", "coordinates": [[[[0, 1], [1, 1], [1, 0], [0, 0], [0, 1]]]]}
    assert canonical_wkb([gj, None]) == expected
    wkb = shapely.to_wkb(sq, byte_order=0)
    assert canonical_wkb([wkb, None]) == expected
    assert canonical_wkb(pa.array([wkb, None], pa.binary())) == expected
    assert canonical_wkb(pa.chunked_array([[wkb], [None]], pa.large_binary())) == expected
    assert canonical_wkb(pa.array([shapely.to_geojson(sq), None])) == expected
    assert canonical_wkb(np.array([sq, None], dtype=object)) == expected
    assert canonical_wkb(sq) == expected[:1]


def test_hash_is_xxh3_of_the_canonical_wkb() -> None:
    xxhash = pytest.importorskip("xxhash")
    sq = shapely.Polygon([(0, 0), (1, 0), (1, 1), (0, 1)])
    wkb = canonical_wkb([sq])[0]
    assert wkb is not None
    unsigned = xxhash.xxh3_64_intdigest(wkb)
    signed = unsigned - 2**64 if unsigned >= 2**63 else unsigned
    assert geometry_hash([sq, shapely.MultiPolygon([sq])]) == [signed, signed]


def test_unreadable_geometry_and_bad_grid_are_errors() -> None:
    with pytest.raises(BadPayloadError, match="not readable WKB"):
        canonical_wkb([b"\x01\x03garbage"])
    with pytest.raises(BadPayloadError, match="got int"):
        canonical_wkb([1, 2])
    for grid in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ConfigError, match="geometry grid"):
            canonical_wkb([shapely.Point(0, 0)], grid)
    # grid 0: no snapping at all
    a, b = shapely.Point(0, 0), shapely.Point(1e-12, 0)
    assert geometry_changed([a], [b], 0.0) == [True]
    assert geometry_changed([a], [b]) == [False]


def test_100k_polygons_canonicalise_without_hanging() -> None:
    """Linear in size (vectorised): a generous hang detector, no timing assert."""
    n = 100_000
    rng = np.random.default_rng(7)
    x = rng.uniform(-180, 180, n)
    y = rng.uniform(-80, 80, n)
    boxes = shapely.box(x, y, x + 0.01, y + 0.01)
    multi = shapely.multipolygons(boxes[:, None])  # as File Geodatabase states them
    result: list[list[bytes | None]] = []
    worker = threading.Thread(target=lambda: result.append(canonical_wkb(multi)))
    worker.start()
    worker.join(timeout=300)
    assert not worker.is_alive(), "canonical_wkb of 100k polygons did not finish in 300 s"
    assert len(result[0]) == n
    assert result[0][:100] == canonical_wkb(boxes[:100])


def test_negative_zero_after_snapping_is_zero() -> None:
    assert canonical_wkb([shapely.Point(0, -2.5e-10)]) == canonical_wkb([shapely.Point(0, 0)])
    assert canonical_wkb([shapely.Point(-0.0, 0)], 0.0) == canonical_wkb([shapely.Point(0, 0)], 0.0)
