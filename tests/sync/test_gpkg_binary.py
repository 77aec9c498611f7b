"""GeoPackage geometry blobs (sync/kinds/gpkg_binary.py), checked against GDAL: any
polygon, multipolygon, line or point -- blob written here, read by GDAL from a real
GeoPackage -- comes back with canonical WKB equal; the header's envelope is the
geometry's bounds (what the R-tree triggers index); an empty geometry says so."""

from __future__ import annotations

import sqlite3
import struct
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyogrio
import shapely
from hypothesis import given, settings
from hypothesis import strategies as st

from feedledger.sync.kinds import gpkg_binary
from sync.destination_kinds import canonical

coord = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)


@st.composite
def shapes(draw: Any) -> Any:
    kind = draw(st.sampled_from(["point", "line", "box", "multibox"]))
    x, y = draw(coord), draw(coord)
    w = draw(st.floats(min_value=1e-3, max_value=1e3))
    if kind == "point":
        return shapely.Point(x, y)
    if kind == "line":
        return shapely.LineString([(x, y), (x + w, y - w), (x + 2 * w, y)])
    if kind == "box":
        return shapely.box(x, y, x + w, y + w)
    return shapely.MultiPolygon([shapely.box(x, y, x + w, y + w),
                                 shapely.box(x + 2 * w, y, x + 3 * w, y + w)])  # fmt: skip


@settings(max_examples=25, deadline=None, database=None)
@given(st.lists(shapes(), min_size=1, max_size=6))
def test_blobs_read_back_by_gdal_equal_their_geometry(
    tmp_path_factory: Any, geoms: list[Any]
) -> None:
    path: Path = tmp_path_factory.mktemp("blob") / "g.gpkg"
    table = pa.table({"n": pa.array([], pa.int64()), "geometry": pa.array([], pa.binary())})
    pyogrio.write_arrow(table, str(path), layer="g", driver="GPKG", geometry_name="geometry",
                        geometry_type="Unknown", crs="EPSG:3857")  # fmt: skip
    wkbs = [bytes(shapely.to_wkb(g, flavor="iso")) for g in geoms]
    blobs, box = gpkg_binary.encode(wkbs, 3857)
    with sqlite3.connect(path) as conn:
        gpkg_binary.register(conn)  # the R-tree triggers call the ST_ functions
        conn.executemany("INSERT INTO g (n, geom) VALUES (?, ?)", list(enumerate(blobs)))
        indexed = conn.execute("SELECT count(*) FROM rtree_g_geom").fetchone()[0]
    assert indexed == len(geoms)
    _meta, back = pyogrio.read_arrow(str(path), layer="g")
    got = [shapely.from_wkb(w) for w in back.column("geom").to_pylist()]
    assert [canonical(g) for g in got] == [canonical(g) for g in geoms]
    assert box == tuple(float(b) for b in shapely.total_bounds(geoms))
    for blob, g in zip(blobs, geoms, strict=True):
        assert blob is not None and blob[:2] == b"GP"
        minx, maxx, miny, maxy = struct.unpack_from("<4d", blob, 8)
        assert (minx, miny, maxx, maxy) == tuple(float(b) for b in g.bounds)
        assert gpkg_binary.wkb_of(blob) == bytes(
            shapely.to_wkb(g, flavor="iso", output_dimension=2)
        )


def test_single_parts_in_a_multi_layer_and_empty_and_missing_geometry() -> None:
    square = shapely.box(0, 0, 1, 1)
    empty = shapely.from_wkt("POLYGON EMPTY")
    wkbs = [bytes(shapely.to_wkb(g, flavor="iso")) for g in (square, empty)] + [None]
    blobs, box = gpkg_binary.encode(wkbs, 4326, multi=True)
    assert box == (0.0, 0.0, 1.0, 1.0)
    promoted = shapely.from_wkb(gpkg_binary.wkb_of(blobs[0]))
    assert promoted.geom_type == "MultiPolygon" and canonical(promoted) == canonical(square)
    assert blobs[1] is not None and blobs[1][3] & 0x10  # the empty flag
    assert gpkg_binary.envelope(blobs[1]) is None and blobs[2] is None
