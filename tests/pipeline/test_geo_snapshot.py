"""`snapshot --format geojson|geoparquet|gpkg` writes a GIS source as it stood
(properties in the source's order, geometry, CRS), streamed a batch at a time; CSV
columns follow the source's field order; bad combinations are refused (exit 2)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pyogrio
import pytest
import shapely

from feedledger.model.errors import ConfigError
from feedledger.pipeline.exports import geo as geo_export
from feedledger.pipeline.exports import order as snapshot_order
from feedledger.pipeline.exports.columns import ColumnTypes, parse, typed_columns
from feedledger.pipeline.exports.geo import projjson, write_geojson
from feedledger.pipeline.exports.order import ordered
from helpers import Cli, write_csv

SRC = "parcels"
CRS = "EPSG:2232"
FIELDS = ["zoning", "parcel", "floors", "area"]  # not alphabetical
POLY = {"type": "Polygon", "coordinates": [[[0, 0], [4, 0], [4, 3], [0, 0]]]}
MULTI = {
    "type": "MultiPolygon",
    "coordinates": [
        [[[10, 10], [11, 10], [11, 11], [10, 10]]],
        [[[20, 20], [21, 20], [21, 21], [20, 20]]],
    ],
}
POINT = {"type": "Point", "coordinates": [5.5, 6.25]}
Feature = tuple[dict[str, Any], dict[str, Any] | None]
DAY1: list[Feature] = [
    ({"zoning": "R-1", "parcel": "A", "floors": 2, "area": 10.5}, POLY),
    ({"zoning": "MU", "parcel": "B", "floors": 1, "area": 3.25}, POINT),
    ({"zoning": None, "parcel": "C", "floors": None, "area": 1.0}, MULTI),
]
DAY2: list[Feature] = [
    ({"zoning": "R-2", "parcel": "A", "floors": 2, "area": 10.5}, POLY),
    DAY1[1],
    ({"zoning": "I", "parcel": "D", "floors": 7, "area": 2.0}, POINT),
]


def feature_collection(features: list[Feature]) -> str:
    crs = {"type": "name", "properties": {"name": "urn:ogc:def:crs:EPSG::2232"}}
    body = [{"type": "Feature", "properties": p, "geometry": g} for p, g in features]
    return json.dumps({"type": "FeatureCollection", "crs": crs, "features": body})


def geo_source(cli: Cli, tmp_path: Path) -> list[str]:
    """A GeoJSON source with two days; the recorded_at of day 1's versions."""
    cli("source", "add", SRC, "--key", "parcel", "--format", "geojson")
    for day, features in (("2026-08-01", DAY1), ("2026-08-02", DAY2)):
        path = tmp_path / f"parcels-{day}.geojson"
        path.write_text(feature_collection(features))
        cli("ingest", SRC, str(path), "--published-at", day)
    return [v["recorded_at"] for v in cli.json("history", SRC, "A")]


def expected(features: list[Feature]) -> dict[str, Any]:
    return {p["parcel"]: (p, shapely.from_geojson(json.dumps(g))) for p, g in features}


def same_features(rows: list[dict[str, Any]], want: dict[str, Any], geom: str) -> None:
    """`rows` (read back, geometry as WKB under `geom`) equal `want` field by field."""
    assert sorted(r["parcel"] for r in rows) == sorted(want)
    for row in rows:
        props, shape = want[row["parcel"]]
        assert {k: row[k] for k in FIELDS} == props
        assert shapely.equals_exact(shapely.from_wkb(row[geom]), shape, tolerance=0)


def error_line(result: Any) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    return str(lines[0])


# -- unit: column types, field order, GeoJSON streaming, CRS ---------------------------


def test_column_types_are_inferred_from_the_json_values() -> None:
    records = [
        parse(t)
        for t in (
            '{"b":true,"f":1.50,"i":1,"m":"x","n":null,"o":{"k":[1]},"w":99999999999999999999}',
            '{"b":false,"f":2,"i":-3,"m":4,"n":null,"o":null}',
        )
    ]
    types = ColumnTypes()
    for record in records:
        types.observe(record)
    assert types.kinds == {
        "b": "bool", "f": "float", "i": "int", "m": "string", "n": "null",
        "o": "string", "w": "string",
    }  # fmt: skip
    columns = ["i", "f", "b", "m", "n", "o", "w"]
    arrays = typed_columns(records, columns, types)
    assert [a.to_pylist() for a in arrays] == [
        [1, -3],
        [1.5, 2.0],
        [True, False],
        ["x", "4"],
        [None, None],
        ['{"k":[1]}', None],
        ["99999999999999999999", None],
    ]
    assert [str(a.type) for a in arrays] == [
        "int64", "double", "bool", "string", "string", "string", "string",
    ]  # fmt: skip


def test_field_order_source_first_then_the_rest_in_code_point_order() -> None:
    assert ordered(["a", "b", "id", "old", "z"], ["z", "id", "a"]) == ["z", "id", "a", "b", "old"]
    assert ordered(["b", "a"], []) == ["a", "b"]


def test_geojson_is_written_feature_by_feature_as_the_rows_are_read() -> None:
    consumed = 0

    def rows() -> Iterator[tuple[str, str, str | None]]:
        nonlocal consumed
        for i in range(3):
            consumed += 1
            yield (
                f'["{i}"]',
                f'{{"a":{i}.50,"id":"{i}","z":"x"}}',
                '{"type":"Point","coordinates":[1,2]}',
            )

    class Handle(io.StringIO):
        seen: list[int] = []  # noqa: RUF012

        def write(self, s: str) -> int:
            self.seen.append(consumed)
            return super().write(s)

    handle = Handle()
    assert write_geojson(rows(), handle, ["z", "id", "a"], "EPSG:2232") == 3
    assert handle.seen[:3] == [0, 1, 2]  # the first feature went out before the second row
    doc = json.loads(handle.getvalue())
    assert doc["crs"]["properties"]["name"] == "urn:ogc:def:crs:EPSG::2232"
    assert list(doc["features"][0]["properties"]) == ["z", "id", "a"]
    assert '"a":0.50' in handle.getvalue()  # numbers keep their stated text
    assert '"geometry":{"type":"Point","coordinates":[1,2]}' in handle.getvalue()  # verbatim
    wgs = io.StringIO()
    write_geojson(iter([]), wgs, [], "EPSG:4326")
    assert json.loads(wgs.getvalue()) == {"type": "FeatureCollection", "features": []}


def test_typed_exports_of_synthetic_rows_without_a_crs(tmp_path: Path) -> None:
    rows = [
        ('["a"]', '{"id":"a","n":1,"t":"x"}', '{"type":"Point","coordinates":[1,2,3]}'),
        ('["b"]', '{"id":"b","n":2.5}', None),  # a feature without geometry, a field absent
        ('["c"]', '{"id":"c","n":-4,"t":null}', '{"type":"Point","coordinates":[-1,7,0]}'),
    ]
    found = geo_export.spool(iter(rows), tmp_path / "spool.arrow", batch_rows=2)
    assert (found.rows, found.batches) == (3, 2)
    assert found.geometry_types == {"Point Z"} and found.bbox == [-1.0, 2.0, 1.0, 7.0]
    out = tmp_path / "o.parquet"
    assert geo_export.write_geoparquet(found, out, ["t", "n", "id"], None) == 3
    table = pq.read_table(out)
    assert table.column_names == ["t", "n", "id", "geometry"]
    assert table.column("n").to_pylist() == [1.0, 2.5, -4.0]
    assert table.column("t").to_pylist() == ["x", None, None]
    assert shapely.from_wkb(table.column("geometry")[0].as_py()).has_z
    assert table.column("geometry")[1].as_py() is None
    geo = json.loads(table.schema.metadata[b"geo"])["columns"]["geometry"]
    assert geo["crs"] is None and geo["geometry_types"] == ["Point Z"]
    gpkg = tmp_path / "o.gpkg"
    assert geo_export.write_gpkg(found, gpkg, ["t", "n", "id"], None, "layer") == 3
    info = pyogrio.read_info(gpkg)
    assert info["crs"] is None and info["geometry_type"] == "Point Z" and info["features"] == 3
    assert list(info["fields"]) == ["t", "n", "id"]


def test_a_stored_geometry_that_cannot_become_wkb_is_named(tmp_path: Path) -> None:
    rows = [
        ('["a"]', '{"id":"a"}', "null"),
        ('["b"]', '{"id":"b"}', '{"type":"Point","coordinates":"nowhere"}'),
    ]
    with pytest.raises(ConfigError, match=r'entity \["b"\]: its stored geometry') as info:
        geo_export.spool(iter(rows), tmp_path / "spool.arrow")
    assert "\n" not in str(info.value)


def test_projjson_of_a_stated_crs() -> None:
    found = projjson(CRS)
    assert found is not None and found["id"] == {"authority": "EPSG", "code": 2232}
    assert projjson("not a crs at all") is None


# -- end to end: a GeoJSON source with two days ------------------------------------------


def test_snapshot_geo_formats_equal_the_day_as_published(cli: Cli, tmp_path: Path) -> None:
    geo_source(cli, tmp_path)
    day1 = expected(DAY1)
    # geojson (stdout): properties in source order, geometry, CRS
    text = cli("snapshot", SRC, "--valid", "2026-08-01", "--format", "geojson").stdout
    doc = json.loads(text)
    assert [list(f["properties"]) for f in doc["features"]] == [FIELDS] * 3
    info = pyogrio.read_info(text.encode())
    assert info["crs"] == CRS and list(info["fields"]) == FIELDS
    _meta, table = pyogrio.read_arrow(text.encode())
    same_features(table.to_pylist(), day1, _meta["geometry_name"] or "wkb_geometry")
    # geoparquet: typed columns in source order, WKB, geo metadata with the CRS
    out = tmp_path / "day1.parquet"
    cli("snapshot", SRC, "--valid", "2026-08-01", "--format", "geoparquet", "-o", str(out))
    read = pq.read_table(out)
    assert read.column_names == [*FIELDS, "geometry"]
    assert [str(t) for t in read.schema.types] == ["string", "string", "int64", "double", "binary"]
    same_features(read.to_pylist(), day1, "geometry")
    geo = json.loads(read.schema.metadata[b"geo"])
    column = geo["columns"]["geometry"]
    assert geo["version"] == "1.1.0" and geo["primary_column"] == "geometry"
    assert column["encoding"] == "WKB" and column["crs"]["id"]["code"] == 2232
    assert column["geometry_types"] == ["MultiPolygon", "Point", "Polygon"]
    assert column["bbox"] == [0.0, 0.0, 21.0, 21.0]
    # gpkg: one layer named after the source, the CRS, the same features
    gpkg = tmp_path / "day1.gpkg"
    cli("snapshot", SRC, "--valid", "2026-08-01", "--format", "gpkg", "-o", str(gpkg))
    info = pyogrio.read_info(gpkg)
    assert info["layer_name"] == SRC and info["crs"] == CRS and list(info["fields"]) == FIELDS
    meta, table = pyogrio.read_arrow(gpkg)
    same_features(table.to_pylist(), day1, meta["geometry_name"])
    # day 2 (A changed, B unchanged, C deleted, D added); nothing is left beside the outputs
    out2 = tmp_path / "day2.parquet"
    cli("snapshot", SRC, "--valid", "2026-08-02", "--format", "geoparquet", "-o", str(out2))
    same_features(pq.read_table(out2).to_pylist(), expected(DAY2), "geometry")
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_snapshot_known_at_and_the_python_api(cli: Cli, tmp_path: Path) -> None:
    recorded = geo_source(cli, tmp_path)
    # as known when day 1 was recorded, day 2 had not been learnt yet
    out = tmp_path / "known.gpkg"
    args = ["snapshot", SRC, "--valid", "2026-08-02", "--known-at", recorded[0]]
    cli(*args, "--format", "gpkg", "-o", str(out))
    meta, table = pyogrio.read_arrow(out)
    same_features(table.to_pylist(), expected(DAY1), meta["geometry_name"])
    # before anything was known: an empty layer, still with its CRS
    empty = tmp_path / "empty.parquet"
    cli("snapshot", SRC, "--valid", "2026-08-02", "--known-at", "2001-01-01T00:00:00Z",
        "--format", "geoparquet", "-o", str(empty))  # fmt: skip
    assert pq.read_table(empty).num_rows == 0
    import feedledger as fl

    with fl.open(cli.ws.config_path) as led:
        src = led.source(SRC)
        batches = list(src.snapshot_batches(valid=date(2026, 8, 1), batch_rows=2))
        assert [b.num_rows for b in batches] == [2, 1]
        assert batches[0].schema.names == ["key", "attributes", "geometry"]
        stated = shapely.from_geojson(batches[0].column("geometry")[0].as_py())
        assert shapely.equals_exact(stated, shapely.from_geojson(json.dumps(POLY)), tolerance=0)
        frame = src.snapshot(valid=date(2026, 8, 2))
        assert sorted(frame["parcel"].to_list()) == ["A", "B", "D"]
        assert frame.columns == [*FIELDS, "geometry"]


def test_snapshot_is_written_a_batch_at_a_time(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli("source", "add", SRC, "--key", "parcel", "--format", "geojson")
    n = 2_500
    features: list[Feature] = [
        ({"zoning": f"Z{i % 7}", "parcel": f"P{i:05d}", "floors": i % 5, "area": i / 4},
         {"type": "Point", "coordinates": [i % 100, i // 100]})
        for i in range(n)
    ]  # fmt: skip
    path = tmp_path / "many.geojson"
    path.write_text(feature_collection(features))
    cli("ingest", SRC, str(path), "--published-at", "2026-08-01")
    monkeypatch.setattr(geo_export, "BATCH_ROWS", 1_000)
    out = tmp_path / "many.parquet"
    cli("snapshot", SRC, "--valid", "2026-08-01", "--format", "geoparquet", "-o", str(out))
    parquet = pq.ParquetFile(out)
    assert parquet.metadata.num_rows == n and parquet.metadata.num_row_groups == 3
    first = parquet.read_row_group(0).to_pylist()[0]
    assert first["parcel"] == "P00000" and shapely.from_wkb(first["geometry"]).x == 0.0
    gpkg = tmp_path / "many.gpkg"
    cli("snapshot", SRC, "--valid", "2026-08-01", "--format", "gpkg", "-o", str(gpkg))
    assert pyogrio.read_info(gpkg)["features"] == n
    text = cli("snapshot", SRC, "--valid", "2026-08-01", "--format", "geojson").stdout
    assert text.count('"type":"Feature"') == n


def test_fields_of_older_versions_follow_in_code_point_order(cli: Cli, tmp_path: Path) -> None:
    cli("source", "add", SRC, "--key", "parcel", "--format", "geojson", "--kind", "changes")
    days = {
        "2026-08-01": [({"zoning": "R-1", "parcel": "A", "area": 1.5, "beta": "b"}, POINT)],
        "2026-08-02": [({"parcel": "B", "zoning": "MU", "extra": 7}, POLY)],
    }
    for day, features in days.items():
        path = tmp_path / f"c-{day}.geojson"
        path.write_text(feature_collection(features))
        cli("ingest", SRC, str(path), "--published-at", day)
    out = tmp_path / "union.parquet"
    cli("snapshot", SRC, "--valid", "2026-08-02", "--format", "geoparquet", "-o", str(out))
    table = pq.read_table(out)
    # the payload in force names parcel, zoning, extra; area and beta only older versions
    assert table.column_names == ["parcel", "zoning", "extra", "area", "beta", "geometry"]
    assert table.to_pydict()["extra"] == [None, 7] and table.to_pydict()["beta"] == ["b", None]
    doc = json.loads(cli("snapshot", SRC, "--valid", "2026-08-02", "--format", "geojson").stdout)
    assert [list(f["properties"]) for f in doc["features"]] == [
        ["parcel", "zoning", "area", "beta"],
        ["parcel", "zoning", "extra"],
    ]


# -- column order of a CSV source; refusals ---------------------------------------------


def test_snapshot_csv_keeps_the_payload_column_order(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unread(data: bytes, fmt: str) -> list[str]:
        raise AssertionError("the order is recorded (payloads.fields): no archive read")

    monkeypatch.setattr(snapshot_order, "payload_fields", unread)
    cli("source", "add", "ord", "--key", "id")
    header = ["zeta", "id", "mid", "alpha"]
    path = write_csv(tmp_path / "o.csv", header, [["z", "1", "m", "a"], ["y", "2", "n", "b"]])
    cli("ingest", "ord", str(path), "--published-at", "2026-08-01")
    rows = list(csv.reader(io.StringIO(cli("snapshot", "ord", "--valid", "2026-08-01").stdout)))
    assert rows == [header, ["z", "1", "m", "a"], ["y", "2", "n", "b"]]
    lines = cli("snapshot", "ord", "--valid", "2026-08-01", "--format", "jsonl").stdout
    assert lines.splitlines()[0] == '{"alpha":"a","id":"1","mid":"m","zeta":"z"}'  # stored


def test_snapshot_bad_combinations_are_refused(cli: Cli, tmp_path: Path) -> None:
    cli("source", "add", "plain", "--key", "id")
    path = write_csv(tmp_path / "p.csv", ["id", "v"], [["1", "x"]])
    cli("ingest", "plain", str(path), "--published-at", "2026-08-01")
    target = tmp_path / "out.geojson"
    for fmt in ("geojson", "geoparquet", "gpkg"):
        result = cli(
            "snapshot", "plain", "--valid", "2026-08-01", "--format", fmt, "-o", str(target),
            expect=2,
        )  # fmt: skip
        assert "GIS" in error_line(result) and fmt in error_line(result)
    assert not target.exists() and list(tmp_path.glob(".out*")) == []
    geo_source(cli, tmp_path)
    for fmt in ("gpkg", "geoparquet"):
        result = cli("snapshot", SRC, "--valid", "2026-08-01", "--format", fmt, expect=2)
        assert "stdout" in error_line(result) and result.stdout == ""
    result = cli("snapshot", SRC, "--valid", "2026-08-01", "--format", "shp", expect=2)
    assert "--format" in error_line(result)
