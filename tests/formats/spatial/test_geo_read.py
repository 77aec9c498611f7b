"""GIS payloads read into Observations (`formats.readers.read_observations`):
every GIS format gives the same keys, attribute texts and hashes for the same features;
geometry encodings that do not change the shape do not change the hash; bad input is
one clear BadPayloadError."""

from __future__ import annotations

import io
import json
import os
import zipfile
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pyogrio
import pytest
import shapely
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from feedledger import config
from feedledger.formats.observations import Observations
from feedledger.formats.readers import published_from_field, read_observations
from feedledger.formats.spatial.geometry import geometry_hash
from feedledger.formats.spatial.gis import read_gis
from feedledger.formats.typed_columns import typed_hashes, typed_texts
from feedledger.model.errors import BadPayloadError
from feedledger.model.source import SourceConfig

CRS = "EPSG:4326"
PARCELS: dict[str, tuple[str, int, float, str]] = {
    "P-1": (
        "R1",
        3,
        12.5,
        "POLYGON ((-73.98 40.75, -73.9797 40.75, -73.9797 40.7502, -73.98 40.75))",
    ),
    "P-2": (
        "C2",
        -7,
        0.25,
        "POLYGON ((-73.97 40.75, -73.9694 40.75, -73.9694 40.7505, -73.97 40.7505, "
        "-73.97 40.75), (-73.9699 40.7501, -73.9698 40.7501, -73.9698 40.7502, "
        "-73.9699 40.7501))",
    ),
    "P-3": (
        'R"1',
        0,
        1e20,
        "POLYGON ((-73.96 40.75, -73.959 40.75, -73.959512 40.750009, -73.96 40.75))",
    ),
}
DRIVERS = {
    "geojson": ("GeoJSON", "parcels.geojson"),
    "geojsonseq": ("GeoJSONSeq", "parcels.geojsonl"),
    "shapefile": ("ESRI Shapefile", "shp/parcels.shp"),
    "gpkg": ("GPKG", "parcels.gpkg"),
    "filegdb": ("OpenFileGDB", "parcels.gdb"),
    "flatgeobuf": ("FlatGeobuf", "parcels.fgb"),
}
FORMATS = [*DRIVERS, "geoparquet"]


def parcels_table(rows: dict[str, tuple[str, int, float, str]] | None = None) -> pa.Table:
    rows = PARCELS if rows is None else rows
    keys = list(rows)
    geoms = shapely.from_wkt([rows[k][3] for k in keys])
    return pa.table(
        {
            "parcel_id": keys,
            "zoning": [rows[k][0] for k in keys],
            "units": pa.array([rows[k][1] for k in keys], pa.int32()),
            "area": [rows[k][2] for k in keys],
            "geometry": pa.array(shapely.to_wkb(geoms), pa.binary()),
        }
    )


def _zip_dir(folder: Path, under: str, skip: str = "") -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(folder.iterdir()):
            if not (skip and path.name.endswith(skip)):
                zf.write(path, under + path.name)
    return buf.getvalue()


def write_geo(
    tmp: Path,
    fmt: str,
    table: pa.Table | None = None,
    *,
    crs: str = CRS,
    layer: str = "parcels",
    geometry_type: str = "Polygon",
) -> bytes:
    """The bytes of a `fmt` file of `table` (the parcels by default)."""
    table = parcels_table() if table is None else table
    if fmt == "geoparquet":
        return geoparquet_bytes(table, crs={"id": {"authority": "EPSG", "code": 4326}})
    driver, name = DRIVERS[fmt]
    path = tmp / fmt / name
    path.parent.mkdir(parents=True, exist_ok=True)
    pyogrio.write_arrow(
        table,
        path,
        driver=driver,
        layer=layer,
        geometry_name="geometry",
        geometry_type=geometry_type,
        crs=crs,
        append=path.exists(),
    )
    if fmt == "shapefile":
        return _zip_dir(path.parent, "parcels/")
    if fmt == "filegdb":
        return _zip_dir(path, "parcels.gdb/")
    return path.read_bytes()


def geoparquet_bytes(table: pa.Table, *, crs: Any = "absent", encoding: str = "WKB") -> bytes:
    column: dict[str, Any] = {"encoding": encoding, "geometry_types": ["Polygon"]}
    if crs != "absent":
        column["crs"] = crs
    geo = {"version": "1.0.0", "primary_column": "geometry", "columns": {"geometry": column}}
    out = io.BytesIO()
    pq.write_table(table.replace_schema_metadata({"geo": json.dumps(geo)}), out)
    return out.getvalue()


def source(fmt: str, key: str = "parcel_id", **options: Any) -> SourceConfig:
    return config.make_source("parcels", key=tuple(key.split(",")), format=fmt, **options)


def read(data: bytes, fmt: str, **options: Any) -> Observations:
    return read_observations(data, source(fmt, **options), label="p1")


def by_key(obs: Observations) -> dict[str, tuple[str, int | None, int]]:
    """key -> (attribute text, geometry hash, content hash), whatever the row order."""
    idx = obs.frame.get_column("idx")
    attrs = obs.attributes(idx).to_list()
    geoms = obs.geometries(idx).get_column("geometry_hash").to_list()
    return {
        k: (a, g, h)
        for k, a, g, h in zip(obs.frame["key"], attrs, geoms, obs.frame["hash"], strict=True)
    }


def features(rows: list[tuple[dict[str, Any], Any]]) -> bytes:
    """A GeoJSON FeatureCollection of (properties, geometry as GeoJSON dict or None)."""
    feats = [{"type": "Feature", "properties": p, "geometry": g} for p, g in rows]
    return json.dumps({"type": "FeatureCollection", "features": feats}).encode()


# -- every format, the same observations -------------------------------------------------


@pytest.fixture(scope="module")
def expected() -> dict[str, tuple[str, int | None, int]]:
    return by_key(read(features_of(parcels_table()), "geojson"))


def features_of(table: pa.Table) -> bytes:
    rows = table.to_pylist()
    return features(
        [
            (
                {k: v for k, v in r.items() if k != "geometry"},
                json.loads(shapely.to_geojson(shapely.from_wkb(r["geometry"]))),
            )
            for r in rows
        ]
    )


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_reads_the_same_observations(
    tmp_path: Path, fmt: str, expected: dict[str, tuple[str, int | None, int]]
) -> None:
    gtype = "MultiPolygon" if fmt == "filegdb" else "Polygon"  # FileGDB: always multi
    obs = read(write_geo(tmp_path, fmt, geometry_type=gtype), fmt)
    assert by_key(obs) == expected  # compared by key: FlatGeobuf/FileGDB may reorder
    assert obs.fields is not None and obs.fields[:4] == ["parcel_id", "zoning", "units", "area"]
    assert obs.crs is not None and "4326" in obs.crs
    assert obs.invalid_geometries == 0
    assert expected['["P-3"]'][0] == ('{"area":1e+20,"parcel_id":"P-3","units":0,"zoning":"R\\"1"}')


def test_filegdb_multipolygon_and_reordered_rows_equal_the_single_polygons(
    tmp_path: Path, expected: dict[str, tuple[str, int | None, int]]
) -> None:
    table = parcels_table()
    multi = shapely.multipolygons([[g] for g in shapely.from_wkb(table["geometry"].to_pylist())])
    table = table.set_column(4, "geometry", pa.array(shapely.to_wkb(multi), pa.binary()))
    reordered = table.take([2, 0, 1])
    obs = read(write_geo(tmp_path, "gpkg", reordered, geometry_type="MultiPolygon"), "gpkg")
    assert by_key(obs) == expected
    assert obs.frame["key"].to_list() == ['["P-3"]', '["P-1"]', '["P-2"]']
    stated = json.loads(obs.geometries(pl.Series([0], dtype=pl.UInt32))["geometry"][0])
    assert stated["type"] == "MultiPolygon"  # kept as stated


def test_properties_match_the_json_reader(tmp_path: Path) -> None:
    props = [
        {"parcel_id": "A\n1", "n": 12, "big": 12345678901234, "x": 1.5, "ok": True, "none": None,
         "day": "2024-01-02", "when": "2024-01-02T03:04:05Z", "obj": {"b": [1, 2], "a": "z"},
         "list": [1, 2], "s": "caf\u00e9 \"q\" \\"},
        {"parcel_id": "B", "n": -3, "big": 1, "x": -0.25, "ok": False, "none": None,
         "day": "x", "when": "y", "obj": {"a": "w"}, "list": [3], "s": ""},
    ]  # fmt: skip
    obs = read(features([(p, None) for p in props]), "geojson")
    as_json = read_observations(json.dumps(props).encode(), source("json"), label="p1")
    idx = pl.Series([0, 1], dtype=pl.UInt32)
    assert obs.attributes(idx).to_list() == as_json.attributes(idx).to_list()
    assert obs.frame["key"].to_list() == as_json.frame["key"].to_list()
    assert obs.fields == list(props[0])
    # the attribute part of the content hash is the JSON reader's hash
    gis = read_gis(features([(p, None) for p in props]), "geojson", source="s", payload="p")
    texts = typed_texts(gis.table.drop(["geometry"]))
    folded = typed_hashes(texts, texts.frame.columns).reinterpret(signed=True)
    assert folded.to_list() == as_json.frame["hash"].to_list()
    # ... and the geometry is folded in after it: a geo record never equals its JSON
    assert obs.frame["hash"].to_list() != as_json.frame["hash"].to_list()


def test_integer_keys_are_their_digits_and_compound_keys(tmp_path: Path) -> None:
    props = [{"book": 7, "page": "0012", "v": 1}, {"book": 7, "page": "13", "v": 2}]
    obs = read(features([(p, None) for p in props]), "geojson", key="book,page")
    as_json = read_observations(
        json.dumps(props).encode(), source("json", key="book,page"), label="p1"
    )
    assert obs.frame["key"].to_list() == ['[7,"0012"]', '[7,"13"]']
    assert obs.frame["key"].to_list() == as_json.frame["key"].to_list()


def test_fields_in_stated_order_for_csv_json_and_parquet() -> None:
    csv = read_observations(b"z,parcel_id,a\n1,k,2\n", source("csv"), label="p")
    assert csv.fields == ["z", "parcel_id", "a"]
    rows = [{"z": 1, "parcel_id": "k"}, {"parcel_id": "l", "b": 2, "z": 3}]
    js = read_observations(json.dumps(rows).encode(), source("json"), label="p")
    assert js.fields == ["z", "parcel_id", "b"]
    out = io.BytesIO()
    pq.write_table(pa.table({"y": [1], "parcel_id": ["k"]}), out)
    assert read_observations(out.getvalue(), source("parquet"), label="p").fields == [
        "y",
        "parcel_id",
    ]


# -- geometry: same shape, same hash ---------------------------------------------------------

GRID = 1e-9
ALL = pl.Series([0], dtype=pl.UInt32)


@st.composite
def rings(draw: st.DrawFn) -> list[tuple[float, float]]:
    """A convex ring (a polygon around a centre) on a 1e-3 grid, not closed."""
    cx = draw(st.integers(-170_000, 170_000)) / 1000
    cy = draw(st.integers(-80_000, 80_000)) / 1000
    n = draw(st.integers(3, 8))
    import math

    return [
        (
            round(cx + 0.01 * math.cos(2 * math.pi * i / n), 3),
            round(cy + 0.01 * math.sin(2 * math.pi * i / n), 3),
        )
        for i in range(n)
    ]


def _polygon(ring: list[tuple[float, float]]) -> dict[str, Any]:
    return {"type": "Polygon", "coordinates": [[list(p) for p in [*ring, ring[0]]]]}


def _one(geometry: dict[str, Any], props: dict[str, Any] | None = None) -> tuple[int, int]:
    obs = read(features([(props or {"parcel_id": "A", "z": "R1"}, geometry)]), "geojson")
    return int(obs.geometries(ALL)["geometry_hash"][0]), int(obs.frame["hash"][0])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ring=rings(),
    shift=st.integers(0, 7),
    reverse=st.booleans(),
    multi=st.booleans(),
    jitter=st.lists(st.floats(-0.3, 0.3), min_size=18, max_size=18),
    repeat=st.integers(-1, 7),
)
def test_rotation_reversal_multi_repeat_and_subgrid_jitter_change_nothing(
    ring: list[tuple[float, float]],
    shift: int,
    reverse: bool,
    multi: bool,
    jitter: list[float],
    repeat: int,
) -> None:
    base = _one(_polygon(ring))
    other = ring[shift % len(ring) :] + ring[: shift % len(ring)]
    if reverse:
        other = other[::-1]
    if repeat >= 0:  # a vertex stated twice in a row: the same shape
        at = repeat % len(other)
        other = other[: at + 1] + other[at:]
    other = [
        (x + jitter[2 * i] * GRID, y + jitter[2 * i + 1] * GRID) for i, (x, y) in enumerate(other)
    ]
    geometry = _polygon(other)
    if multi:
        geometry = {"type": "MultiPolygon", "coordinates": [geometry["coordinates"]]}
    assert _one(geometry) == base


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ring=rings(), vertex=st.integers(0, 7), dx=st.sampled_from([1e-6, -1e-5, 3e-8]))
def test_a_vertex_moved_beyond_the_grid_changes_both_hashes(
    ring: list[tuple[float, float]], vertex: int, dx: float
) -> None:
    base = _one(_polygon(ring))
    moved = list(ring)
    x, y = moved[vertex % len(ring)]
    moved[vertex % len(ring)] = (x + dx, y)
    geometry_h, content_h = _one(_polygon(moved))
    assert geometry_h != base[0] and content_h != base[1]


def test_attribute_change_changes_the_content_hash_only() -> None:
    square = {"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1], [0, 1], [0, 0]]]}
    a = _one(square, {"parcel_id": "A", "z": "R1"})
    b = _one(square, {"parcel_id": "A", "z": "R2"})
    assert a[0] == b[0] and a[1] != b[1]
    assert a[0] == geometry_hash([shapely.from_geojson(json.dumps(square))])[0]


def test_coarser_grid_from_the_source() -> None:
    def hashes(grid: float, dx: float) -> int:
        # degrees (a GeoJSON without crs is WGS84: feet there would be refused)
        ring = [[100.0 + dx, 20.0], [101.0, 20.0], [101.0, 21.0], [100.0 + dx, 20.0]]
        data = features([({"parcel_id": "A"}, {"type": "Polygon", "coordinates": [ring]})])
        return int(read(data, "geojson", geometry_grid=grid).frame["hash"][0])

    assert hashes(1e-3, 0.0) == hashes(1e-3, 2e-4)
    assert hashes(1e-9, 0.0) != hashes(1e-9, 2e-4)


def test_null_geometry_and_invalid_geometry_are_kept() -> None:
    bowtie = {"type": "Polygon", "coordinates": [[[0, 0], [1, 1], [1, 0], [0, 1], [0, 0]]]}
    obs = read(features([({"parcel_id": "A"}, bowtie), ({"parcel_id": "B"}, None)]), "geojson")
    assert obs.invalid_geometries == 1
    shapes = obs.geometries(pl.Series([0, 1], dtype=pl.UInt32))
    assert shapes["geometry_hash"][1] is None and shapes["geometry"][1] is None
    assert obs.geometries(pl.Series([None, 1], dtype=pl.UInt32))["geometry"].to_list() == [
        None,
        None,
    ]
    assert json.loads(shapes["geometry"][0]) == {
        "type": "Polygon",
        "coordinates": [[[0.0, 0.0], [1.0, 1.0], [1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]],
    }


# -- CRS, layers, published_from, changes ------------------------------------------------------


def test_crs_as_stated(tmp_path: Path) -> None:
    table = parcels_table()
    assert read(write_geo(tmp_path, "gpkg", table, crs="EPSG:2232"), "gpkg").crs == "EPSG:2232"
    assert read(geoparquet_bytes(table), "geoparquet").crs == "OGC:CRS84"
    assert read(geoparquet_bytes(table, crs=None), "geoparquet").crs is None
    epsg = {"id": {"authority": "EPSG", "code": 2232}, "name": "NAD83 / Colorado Central"}
    assert read(geoparquet_bytes(table, crs=epsg), "geoparquet").crs == "EPSG:2232"
    no_id = {"type": "GeographicCRS", "name": "local"}
    assert read(geoparquet_bytes(table, crs=no_id), "geoparquet").crs == json.dumps(
        no_id, separators=(",", ":")
    )


def test_layers_listed_when_several_or_unknown(tmp_path: Path) -> None:
    table = parcels_table()
    write_geo(tmp_path, "gpkg", table, layer="parcels")
    data = write_geo(tmp_path, "gpkg", table, layer="zoning")
    with pytest.raises(
        BadPayloadError, match=r"2 layers \(parcels, zoning\); name one with --layer"
    ):
        read(data, "gpkg")
    with pytest.raises(BadPayloadError, match=r"no layer 'roads'.*layers: parcels, zoning"):
        read(data, "gpkg", layer="roads")
    assert read(data, "gpkg", layer="zoning").height == 3


def test_published_from_field_and_changes_payloads() -> None:
    rows = [
        ({"parcel_id": "A", "pub": "2024-05-01", "_deleted": False}, None),
        ({"parcel_id": "B", "pub": "2024-05-01", "_deleted": True}, None),
    ]
    src = source("geojson", published_from="field:pub", kind="changes")
    obs = read_observations(features(rows), src, label="p1")
    assert published_from_field(obs, src, "p1", lambda text: len(text)) == len("2024-05-01")
    assert obs.frame["deleted"].to_list() == [False, True]
    assert "_deleted" not in obs.attributes(pl.Series([0], dtype=pl.UInt32))[0]


def test_gzipped_geojson_and_zipped_gpkg(tmp_path: Path) -> None:
    import gzip

    data = features_of(parcels_table())
    assert read(gzip.compress(data), "geojson").height == 3
    gpkg = write_geo(tmp_path, "gpkg")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("parcels.gpkg", gpkg)
    assert read(buf.getvalue(), "gpkg").height == 3


# -- bad input ---------------------------------------------------------------------------------


def _bad(data: bytes, fmt: str, match: str, **options: Any) -> BadPayloadError:
    with pytest.raises(BadPayloadError, match=match) as info:
        read(data, fmt, **options)
    err = info.value
    assert err.source == "parcels" and err.payload == "p1"
    assert "\n" not in str(err)
    return err


def test_bad_inputs_are_one_clear_error(tmp_path: Path) -> None:
    html = b"<!DOCTYPE html><html><body><form>Sign in</form></body></html>"
    _bad(html, "geojson", "an HTML page, not a geojson file")
    shp = write_geo(tmp_path, "shapefile")
    _bad(shp[: len(shp) // 2], "shapefile", "not a readable zip")
    no_dbf = _zip_dir(tmp_path / "shapefile" / "shp", "parcels/", skip=".dbf")
    _bad(no_dbf, "shapefile", r"lacks its \.dbf")
    _bad(os.urandom(64) + b"x" * 64, "gpkg", "not a readable gpkg file")
    _bad(b"\x00" * 10, "flatgeobuf", "not a readable flatgeobuf file")
    _bad(b"not parquet", "geoparquet", "not a readable GeoParquet file")


def test_key_problems(tmp_path: Path) -> None:
    data = write_geo(tmp_path, "gpkg")
    err = _bad(data, "gpkg", r"missing key field\(s\) \['apn'\]", key="apn")
    assert "fields present: ['parcel_id', 'zoning', 'units', 'area']" in str(err)
    dup = features([({"parcel_id": "A"}, None), ({"parcel_id": "A"}, None)])
    _bad(dup, "geojson", r'duplicate key \["A"\] at rows 1, 2')
    null = features([({"parcel_id": "A"}, None), ({"parcel_id": None}, None)])
    _bad(null, "geojson", r"row 2: null or empty key \['parcel_id'\]")
    empty = features([({"parcel_id": ""}, None)])
    _bad(empty, "geojson", r"row 1: null or empty key")
    blank = features([({"parcel_id": "A"}, None), ({"parcel_id": " \t"}, None)])
    _bad(blank, "geojson", r"row 2: key \['parcel_id'\] is only whitespace")
    _bad(features([({"parcel_id": "A"}, None)]), "geojson", "missing revision field 'rev'",
         revision="rev")  # fmt: skip


def test_geoparquet_read_as_parquet_and_plain_parquet_as_geoparquet() -> None:
    table = parcels_table()
    _bad(geoparquet_bytes(table), "parquet", "this is GeoParquet: use --format geoparquet")
    plain = io.BytesIO()
    pq.write_table(table, plain)
    _bad(plain.getvalue(), "geoparquet", "no GeoParquet 'geo' metadata.*--format parquet")
    _bad(geoparquet_bytes(table, encoding="polygon"), "geoparquet", "only WKB is read")


@settings(max_examples=40, deadline=None)
@given(
    grid=st.sampled_from([1e-9, 3e-9, 1e-6, 1e-3, 0.3, 0.5, 2.0, 10.0]),
    values=st.lists(
        st.floats(-1e7, 1e7, allow_nan=False) | st.integers(-1000, 1000).map(lambda i: i / 2),
        min_size=2,
        max_size=40,
    ),
)
def test_snapping_in_numpy_equals_geos_pointwise_precision(
    grid: float, values: list[float]
) -> None:
    import numpy as np

    from feedledger.formats.spatial.grid import snap_to_grid

    coords = np.array(values[: len(values) // 2 * 2], dtype=np.float64).reshape(-1, 2)
    coords = np.concatenate([coords, coords * grid])  # halves of the grid too
    line = shapely.linestrings(coords)
    expected = shapely.get_coordinates(shapely.set_precision(line, grid, mode="pointwise"))
    assert np.array_equal(snap_to_grid(coords, grid), expected)


@pytest.mark.parametrize("grid", [1e-9, 1e-6, 0.3, 0.5, 2.0])
def test_snapping_near_halves_and_huge_values_equals_geos(grid: float) -> None:
    import numpy as np

    from feedledger.formats.spatial.grid import snap_to_grid

    halves = (np.arange(-50, 50) + 0.5) * grid
    odd = [0.0, -0.0, 0.49999999999999994, -0.49999999999999994, 2.0**52, 2.0**53 + 2, 1e17]
    values = np.concatenate(
        [halves, np.nextafter(halves, np.inf), np.nextafter(halves, -np.inf), odd]
    )
    coords = np.stack([values, values[::-1]], axis=1)
    line = shapely.linestrings(coords)
    expected = shapely.get_coordinates(shapely.set_precision(line, grid, mode="pointwise"))
    assert np.array_equal(snap_to_grid(coords, grid), expected)


def test_zipped_shapefile_larger_than_the_limit_is_refused_unread(tmp_path: Path) -> None:
    data = write_geo(tmp_path, "shapefile")
    _bad(
        data,
        "shapefile",
        r"more than this source's max_payload_bytes of 1,000",
        max_payload_bytes=1000,
    )


def test_self_intersecting_ring_reversed_or_rotated_is_the_same_shape() -> None:
    # found in the benchmark: GEOS's normalize alone gave this ring two forms
    ring = [
        (-105.191678, 40.759443), (-105.191683, 40.759423), (-105.191672, 40.759421),
        (-105.191609, 40.759443), (-105.191664, 40.759406), (-105.191632, 40.759423),
        (-105.191615, 40.759396), (-105.191502, 40.759355), (-105.191484, 40.759354),
        (-105.191392, 40.759429),
    ]  # fmt: skip
    stated = [ring, ring[::-1], (ring[3:] + ring[:3])[::-1], ring[5:] + ring[:5]]
    polygons = [shapely.Polygon(r) for r in stated]
    assert not any(shapely.is_valid(polygons))
    assert len(set(geometry_hash(polygons))) == 1
    bowtie = [(0, 0), (1, 1), (1, 0), (0, 1)]
    assert len(set(geometry_hash([shapely.Polygon(bowtie), shapely.Polygon(bowtie[::-1])]))) == 1


def test_hash_wkb_in_chunks_on_threads_equals_the_whole() -> None:
    from feedledger.formats.spatial.geometry import hash_wkb

    shapes = shapely.from_wkt([w for *_, w in PARCELS.values()] * 3)
    bowtie = shapely.Polygon([(0, 0), (1, 1), (1, 0), (0, 1)])
    wkb = pa.array([*shapely.to_wkb(shapes), None, shapely.to_wkb(bowtie)], pa.binary())
    hashes, invalid = hash_wkb(wkb, chunk=2)
    assert hashes.to_list() == geometry_hash([*shapes, None, bowtie])
    assert invalid == 1
    broken = pa.array([*shapely.to_wkb(shapes), b"\x01\x03junk"], pa.binary())
    with pytest.raises(BadPayloadError, match="not readable WKB"):
        hash_wkb(broken, chunk=2)


def test_geoparquet_with_bytes_that_are_not_wkb() -> None:
    table = pa.table({"parcel_id": ["A"], "geometry": pa.array([b"junk"], pa.binary())})
    _bad(geoparquet_bytes(table), "geoparquet", "feature 1: the geometry is not readable WKB")


def test_a_layer_without_features_is_an_empty_payload_like_an_empty_json_array() -> None:
    obs = read(b'{"type":"FeatureCollection","features":[]}', "geojson", revision="rev")
    assert obs.height == 0 and obs.fields == []
    assert obs.geometries(pl.Series([], dtype=pl.UInt32)).height == 0


def test_geoparquet_properties_match_the_parquet_reader() -> None:
    import datetime as dt

    props = pa.table(
        {
            "parcel_id": ["A", "B", "C"],
            "x": [1e-05, 12.5, float("nan")],
            "n": pa.array([1, None, -3], pa.int64()),
            "ok": [True, False, None],
            "day": [dt.date(2024, 1, 2), None, dt.date(1999, 12, 31)],
            "at": pa.array(
                [dt.datetime(2024, 1, 2, 3, 4, 5), dt.datetime(2024, 1, 2, 3, 4, 5, 120000), None],
                pa.timestamp("us", tz="UTC"),
            ),
            "raw": [b"\x00\x01", None, b"z"],
            "tags": [["a", "b"], [], None],
        }
    )
    geo = props.append_column("geometry", pa.array([None, None, None], pa.binary()))
    plain = io.BytesIO()
    pq.write_table(props, plain)
    as_parquet = read_observations(plain.getvalue(), source("parquet"), label="p1")
    obs = read(geoparquet_bytes(geo), "geoparquet")
    idx = pl.Series([0, 1, 2], dtype=pl.UInt32)
    assert obs.attributes(idx).to_list() == as_parquet.attributes(idx).to_list()
    assert obs.frame["key"].to_list() == as_parquet.frame["key"].to_list()
    texts = typed_texts(props)
    folded = typed_hashes(texts, props.column_names).reinterpret(signed=True)
    assert folded.to_list() == as_parquet.frame["hash"].to_list()


_CELLS = {
    "s": (pa.string(), st.text(max_size=6)),
    "i": (pa.int64(), st.integers(-(2**63), 2**63 - 1)),
    "f": (pa.float64(), st.floats(allow_nan=False, width=64)),
    "b": (pa.bool_(), st.booleans()),
}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), kinds=st.lists(st.sampled_from(sorted(_CELLS)), min_size=1, max_size=4))
def test_typed_properties_match_the_parquet_reader(data: st.DataObject, kinds: list[str]) -> None:
    rows = data.draw(st.integers(1, 4))
    columns: dict[str, pa.Array] = {
        "parcel_id": pa.array([f'k"{i}\\\n' for i in range(rows)], pa.string())
    }
    for n, kind in enumerate(kinds):
        arrow_type, cells = _CELLS[kind]
        values = data.draw(st.lists(st.none() | cells, min_size=rows, max_size=rows))
        columns[f"{kind}{n}\u00e9\t"] = pa.array(values, arrow_type)
    props = pa.table(columns)
    plain = io.BytesIO()
    pq.write_table(props, plain)
    as_parquet = read_observations(plain.getvalue(), source("parquet"), label="p1")
    geo = props.append_column("geometry", pa.nulls(rows, pa.binary()))
    obs = read(geoparquet_bytes(geo), "geoparquet")
    idx = pl.int_range(rows, dtype=pl.UInt32, eager=True)
    assert obs.attributes(idx).to_list() == as_parquet.attributes(idx).to_list()
    assert obs.frame["key"].to_list() == as_parquet.frame["key"].to_list()
    texts = typed_texts(props)
    folded = typed_hashes(texts, props.column_names).reinterpret(signed=True)
    assert folded.to_list() == as_parquet.frame["hash"].to_list()


def test_geojson_sequences_keep_date_looking_strings_as_stated() -> None:
    feats = [
        {"type": "Feature", "properties": {"parcel_id": k, "at": "2024-01-02T03:04:05Z"},
         "geometry": None}
        for k in ("A", "B")
    ]  # fmt: skip
    lines = b"\n".join(json.dumps(f).encode() for f in feats) + b"\n\n"
    rs = b"".join(b"\x1e" + json.dumps(f, indent=1).encode() + b"\n" for f in feats)
    expected = '{"at":"2024-01-02T03:04:05Z","parcel_id":"A"}'
    for data in (lines, rs):
        for fmt in ("geojsonseq", "geojson"):
            obs = read(data, fmt)
            assert obs.attributes(pl.Series([0], dtype=pl.UInt32))[0] == expected
            assert obs.height == 2


def test_degenerate_ring_of_many_equal_vertices_is_ordered_in_linear_time() -> None:
    # a quadratic ordering would take minutes here: the test would time out
    ring = [(0.0, 0.0), (1.0, 0.0)] * 10_000 + [(1.0, 1.0), (1.0, 0.0), (0.0, 1.0)]
    rotated = ring[7:] + ring[:7]
    shapes = [shapely.Polygon([*r, r[0]]) for r in (ring, rotated, rotated[::-1])]
    assert not any(shapely.is_valid(shapes))
    assert len(set(geometry_hash(shapes))) == 1


def test_a_repeated_vertex_counts_once_wherever_the_ring_starts() -> None:
    square = [(0.0, 0.0), (0.0, 0.0), (1.0, 0.0), (1.0, 1.0), (0.0, 1.0)]
    rings = [square[k:] + square[:k] for k in range(5)]
    shapes = [shapely.Polygon([*r, r[0]]) for r in [*rings, *(r[::-1] for r in rings)]]
    plain = shapely.Polygon([(0, 0), (1, 0), (1, 1), (0, 1)])
    assert set(geometry_hash(shapes)) == set(geometry_hash([plain]))
