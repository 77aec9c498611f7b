"""Geo files: `formats.spatial.gis.read_gis` over files pyogrio writes here."""

from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path

import pyarrow as pa
import pyogrio
import pytest
import shapely
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from feedledger.formats.spatial.geometry import canonical_wkb
from feedledger.formats.spatial.gis import GisTable, detect_gis_format, read_gis
from feedledger.model.errors import BadPayloadError

# WGS 84: GeoJSON sequences are always written in it (RFC 7946), so every format gets
# the same coordinates; six decimals survive GeoJSON's printed numbers exactly
CRS = "EPSG:4326"
PARCELS = {
    "P-1": ("R1", "POLYGON ((-73.98 40.75, -73.9797 40.75, -73.9797 40.7502, -73.98 40.75))"),
    "P-2": (
        "C2",
        "POLYGON ((-73.97 40.75, -73.9694 40.75, -73.9694 40.7505, -73.97 40.7505, "
        "-73.97 40.75), (-73.9699 40.7501, -73.9698 40.7501, -73.9698 40.7502, "
        "-73.9699 40.7501))",
    ),
    "P-3": ("R1", "POLYGON ((-73.96 40.75, -73.959 40.75, -73.959512 40.750009, -73.96 40.75))"),
}
DRIVERS = {
    "geojson": ("GeoJSON", "parcels.geojson"),
    "geojsonseq": ("GeoJSONSeq", "parcels.geojsonl"),
    "shapefile": ("ESRI Shapefile", "shp/parcels.shp"),
    "gpkg": ("GPKG", "parcels.gpkg"),
    "filegdb": ("OpenFileGDB", "parcels.gdb"),
    "flatgeobuf": ("FlatGeobuf", "parcels.fgb"),
}
NAMES = {
    "geojson": "parcels.geojson",
    "geojsonseq": "parcels.geojsonl",
    "shapefile": "parcels.shp.zip",
    "gpkg": "parcels.gpkg",
    "filegdb": "parcels.gdb.zip",
    "flatgeobuf": "parcels.fgb",
}


def _table() -> pa.Table:
    keys = list(PARCELS)
    geoms = shapely.from_wkt([PARCELS[k][1] for k in keys])
    return pa.table(
        {
            "parcel_id": keys,
            "zoning": [PARCELS[k][0] for k in keys],
            "geometry": pa.array(shapely.to_wkb(geoms), pa.binary()),
        }
    )


def _zip_dir(folder: Path, *, under: str = "", skip: str = "") -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(folder.iterdir()):
            if skip and path.name.endswith(skip):
                continue
            zf.write(path, under + path.name)
    return buf.getvalue()


def write_gis(tmp: Path, fmt: str, table: pa.Table | None = None, layer: str = "parcels") -> bytes:
    """The bytes of a `fmt` file of `table` (the parcels by default), written by pyogrio."""
    driver, name = DRIVERS[fmt]
    path = tmp / fmt / name
    path.parent.mkdir(parents=True, exist_ok=True)
    pyogrio.write_arrow(
        _table() if table is None else table,
        path,
        driver=driver,
        layer=layer,
        geometry_name="geometry",
        geometry_type="Polygon",
        crs=CRS,
    )
    if fmt == "shapefile":
        return _zip_dir(path.parent, under="parcels/")  # a folder inside the zip
    if fmt == "filegdb":
        return _zip_dir(path, under="parcels.gdb/")
    return path.read_bytes()


def _by_key(result: GisTable) -> dict[str, tuple[str, bytes | None]]:
    t = result.table
    canon = canonical_wkb(t.column("geometry"))
    return {
        k: (z, g)
        for k, z, g in zip(
            t.column("parcel_id").to_pylist(), t.column("zoning").to_pylist(), canon, strict=True
        )
    }


@pytest.mark.parametrize("fmt", list(DRIVERS))
def test_every_format_reads_the_same_parcels(tmp_path: Path, fmt: str) -> None:
    data = write_gis(tmp_path, fmt)
    got = read_gis(data, fmt, source="parcels", payload="p1")
    expected = {k: (z, canonical_wkb([shapely.from_wkt(w)])[0]) for k, (z, w) in PARCELS.items()}
    assert _by_key(got) == expected  # compared by key: FlatGeobuf/FileGDB may reorder
    assert got.table.schema.field("geometry").type == pa.binary()
    assert {"parcel_id", "zoning", "geometry"} <= set(got.table.column_names)
    assert got.crs is not None and "4326" in got.crs
    assert got.geometry_type in ("Polygon", "MultiPolygon")  # FileGDB states MultiPolygon
    assert got.layer == ("geojsonseq" if fmt == "geojsonseq" else "parcels")
    assert detect_gis_format(NAMES[fmt], data) == fmt


def test_detect_bare_zip_and_unknown_names(tmp_path: Path) -> None:
    shp = write_gis(tmp_path, "shapefile")
    gdb = write_gis(tmp_path, "filegdb")
    assert detect_gis_format("parcels.zip", shp) == "shapefile"
    assert detect_gis_format("PARCELS.ZIP", gdb) == "filegdb"
    assert detect_gis_format("parcels.zip", b"PK\x03\x04 truncated") is None
    assert detect_gis_format("parcels.json", b"{}") is None
    assert detect_gis_format("parcels.csv", b"a,b") is None


def test_missing_crs_is_none(tmp_path: Path) -> None:
    path = tmp_path / "nocrs.geojson"
    path.write_text(
        '{"type":"FeatureCollection","features":[{"type":"Feature","properties":{"k":"a"},'
        '"geometry":{"type":"Point","coordinates":[1,2]}}]}'
    )
    got = read_gis(path.read_bytes(), "geojson", source="s", payload="p")
    # GeoJSON without a "crs" member is WGS 84 by RFC 7946; GDAL states it so
    assert got.crs is None or "4326" in got.crs or "CRS84" in got.crs
    assert got.table.column("k").to_pylist() == ["a"]


def _two_layer_gpkg(tmp_path: Path) -> bytes:
    path = tmp_path / "two.gpkg"
    for layer in ("parcels", "zones"):
        pyogrio.write_arrow(
            _table(), path, driver="GPKG", layer=layer, geometry_name="geometry",
            geometry_type="Polygon", crs=CRS, append=path.exists(),
        )  # fmt: skip
    return path.read_bytes()


def test_several_layers_need_a_name(tmp_path: Path) -> None:
    data = _two_layer_gpkg(tmp_path)
    with pytest.raises(BadPayloadError) as err:
        read_gis(data, "gpkg", source="parcels", payload="p1")
    text = str(err.value)
    assert "\n" not in text and "'parcels'" in text and "p1" in text
    assert "2 layers (parcels, zones)" in text and "--layer" in text
    got = read_gis(data, "gpkg", layer="zones", source="parcels", payload="p1")
    assert got.layer == "zones" and got.table.num_rows == 3
    with pytest.raises(BadPayloadError, match=r"no layer 'roads'.*layers: parcels, zones"):
        read_gis(data, "gpkg", layer="roads", source="parcels", payload="p1")


def test_zip_of_two_shapefiles_is_two_layers(tmp_path: Path) -> None:
    folder = tmp_path / "two"
    folder.mkdir()
    for layer in ("parcels", "zones"):
        pyogrio.write_arrow(
            _table(), folder / f"{layer}.shp", driver="ESRI Shapefile", layer=layer,
            geometry_name="geometry", geometry_type="Polygon", crs=CRS,
        )  # fmt: skip
    data = _zip_dir(folder)
    with pytest.raises(BadPayloadError, match=r"2 layers \(parcels, zones\)"):
        read_gis(data, "shapefile", source="parcels", payload="p1")
    got = read_gis(data, "shapefile", layer="zones", source="parcels", payload="p1")
    assert got.layer == "zones" and got.table.num_rows == 3


def test_shapefile_missing_dbf_names_it(tmp_path: Path) -> None:
    write_gis(tmp_path, "shapefile")
    data = _zip_dir(tmp_path / "shapefile" / "shp", skip=".dbf")
    with pytest.raises(BadPayloadError, match=r"parcels\.shp in the zip lacks its \.dbf"):
        read_gis(data, "shapefile", source="parcels", payload="p1")


@pytest.mark.parametrize("fmt", ["shapefile", "filegdb"])
def test_truncated_zip(tmp_path: Path, fmt: str) -> None:
    data = write_gis(tmp_path, fmt)
    with pytest.raises(BadPayloadError, match=r"truncated or corrupt") as err:
        read_gis(data[: len(data) // 2], fmt, source="parcels", payload="p1")
    assert "\n" not in str(err.value) and "source 'parcels', payload p1" in str(err.value)


HTML = b"<!DOCTYPE html><html><head><title>Sign in</title></head><body>Login</body></html>"


@pytest.mark.parametrize("fmt", list(DRIVERS))
@pytest.mark.parametrize("data", [HTML, os.urandom(0) + bytes(range(256)) * 4, b""])
def test_bad_bytes_are_one_line_errors(fmt: str, data: bytes) -> None:
    with pytest.raises(BadPayloadError) as err:
        read_gis(data, fmt, source="parcels", payload="p1")
    text = str(err.value)
    assert "\n" not in text and text.startswith("source 'parcels', payload p1: ")


def test_html_page_is_named(tmp_path: Path) -> None:
    with pytest.raises(BadPayloadError, match=r"an HTML page, not a geojson file"):
        read_gis(b"\n  " + HTML, "geojson", source="parcels", payload="p1")


@pytest.mark.parametrize("fmt", ["geojson", "shapefile", "gpkg", "filegdb", "flatgeobuf"])
def test_projected_crs_is_kept_as_stated(tmp_path: Path, fmt: str) -> None:
    table = _table()
    moved = shapely.transform(
        shapely.from_wkb(table.column("geometry").to_pylist()), lambda c: c * 1000 + 500000
    )
    table = table.set_column(2, "geometry", pa.array(shapely.to_wkb(moved), pa.binary()))
    driver, name = DRIVERS[fmt]
    path = tmp_path / fmt / name
    path.parent.mkdir(parents=True)
    pyogrio.write_arrow(
        table, path, driver=driver, layer="parcels", geometry_name="geometry",
        geometry_type="Polygon", crs="EPSG:26918",
    )  # fmt: skip
    data = (
        path.read_bytes()
        if fmt not in ("shapefile", "filegdb")
        else _zip_dir(path.parent if fmt == "shapefile" else path)
    )
    got = read_gis(data, fmt, source="parcels", payload="p1")
    assert got.crs is not None and "26918" in got.crs  # not reprojected
    # FileGDB stores coordinates on its own XY resolution (1e-4 m by default): a projected
    # layer is compared on a metric grid, as formats.spatial.geometry advises for such layers
    got_geoms = canonical_wkb(got.table.column("geometry"), grid=1e-3)
    assert sorted(got_geoms) == sorted(canonical_wkb(moved, grid=1e-3))


def test_wrong_format_is_refused(tmp_path: Path) -> None:
    data = write_gis(tmp_path, "flatgeobuf")
    with pytest.raises(BadPayloadError, match=r"not a gpkg file \(GDAL reads it as FlatGeobuf\)"):
        read_gis(data, "gpkg", source="parcels", payload="p1")
    with pytest.raises(BadPayloadError, match=r"unknown GIS format 'kml'"):
        read_gis(data, "kml", source="parcels", payload="p1")


@settings(
    max_examples=60, deadline=10_000, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    fmt=st.sampled_from(list(DRIVERS)),
    data=st.one_of(
        st.binary(max_size=512),
        st.binary(max_size=256).map(lambda b: b"PK\x03\x04" + b),
        st.binary(max_size=256).map(lambda b: b'{"type":"FeatureCollection",' + b),
    ),
)
def test_random_bytes_parse_or_bad_payload(fmt: str, data: bytes) -> None:
    try:
        got = read_gis(data, fmt, source="s", payload="p")
    except BadPayloadError as exc:
        assert "\n" not in str(exc)
    else:
        assert isinstance(got.table, pa.Table)


def test_property_named_geometry_is_refused(tmp_path: Path) -> None:
    data = (
        b'{"type":"FeatureCollection","features":[{"type":"Feature",'
        b'"properties":{"k":"a","geometry":"x"},"geometry":{"type":"Point","coordinates":[1,2]}}]}'
    )
    with pytest.raises(BadPayloadError, match=r"property named 'geometry'") as refused:
        read_gis(data, "geojson", source="parcels", payload="p1")
    # in the user's words: not GDAL's internal name for GeoJSON's unnamed geometry
    assert "wkb_geometry" not in str(refused.value)
    assert "beside the features' geometry" in str(refused.value)
