"""A GIS source's Delta table: attributes as typed columns in the source's field order
(string, int64 with nulls, float64), the geometry as ISO WKB with a GeoParquet-style
note (the column's metadata `geo` in the Delta schema: encoding, CRS as PROJJSON); read back by
delta-rs and polars. SQLite and PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest
import shapely

from helpers import Cli

deltalake = pytest.importorskip("deltalake")

SRC = "parcels"
POLY = {"type": "Polygon", "coordinates": [[[0, 0], [4, 0], [4, 3], [0, 0]]]}
POINT = {"type": "Point", "coordinates": [5.5, 6.25]}
DAY1 = [
    ({"zoning": "R-1", "parcel": "A", "floors": 2, "area": 10.5, "ok": True}, POLY),
    ({"zoning": None, "parcel": "B", "floors": None, "area": 3, "ok": False}, POINT),
]
DAY2 = [
    ({"zoning": "R-2", "parcel": "A", "floors": 3, "area": 10.5, "ok": True}, POLY),
    DAY1[1],
]


def collection(features: list[tuple[dict[str, object], dict[str, object]]]) -> str:
    crs = {"type": "name", "properties": {"name": "urn:ogc:def:crs:EPSG::2232"}}
    body = [{"type": "Feature", "properties": p, "geometry": g} for p, g in features]
    return json.dumps({"type": "FeatureCollection", "crs": crs, "features": body})


def test_typed_columns_and_wkb_geometry(cli: Cli, tmp_path: Path) -> None:
    cli("source", "add", SRC, "--key", "parcel", "--format", "geojson")
    uri = str(tmp_path / "lake")
    for day, features in (("2025-08-01", DAY1), ("2025-08-02", DAY2)):
        path = tmp_path / f"parcels-{day}.geojson"
        path.write_text(collection(features))
        cli("ingest", SRC, str(path), "--published-at", day)
        cli.json("export", "delta", SRC, "--to", uri)
    dt = deltalake.DeltaTable(uri)
    table = dt.to_pyarrow_table()
    names = table.schema.names
    assert names[:9] == ["source", "valid_year", "key", "zoning", "parcel", "floors", "area",
                         "ok", "geometry"]  # fmt: skip
    types = {f.name: f.type for f in table.schema}
    assert types["floors"] == pa.int64() and types["area"] == pa.float64()
    assert types["ok"] == pa.bool_() and types["zoning"] in (pa.string(), pa.large_string())
    assert types["geometry"] in (pa.binary(), pa.large_binary())
    rows = sorted(table.to_pylist(), key=lambda r: (r["key"], r["valid_from"]))
    assert [(r["key"], r["floors"], r["area"], r["zoning"]) for r in rows] == [
        ("A", 2, 10.5, "R-1"),
        ("A", 3, 10.5, "R-2"),
        ("B", None, 3.0, None),
    ]
    assert rows[0]["valid_to"] == rows[1]["valid_from"]  # closed by the merge
    shapes = [shapely.from_wkb(r["geometry"]) for r in rows]
    assert shapes[0].equals(shapely.from_geojson(json.dumps(POLY)))
    assert shapes[2].equals(shapely.from_geojson(json.dumps(POINT)))
    schema = json.loads(dt.schema().to_json())
    [geometry] = [f for f in schema["fields"] if f["name"] == "geometry"]
    note = json.loads(geometry["metadata"]["geo"])
    assert note["primary_column"] == "geometry"
    assert note["columns"]["geometry"]["encoding"] == "WKB"
    assert note["columns"]["geometry"]["crs"]["id"]["code"] == 2232
    assert pl.read_delta(uri).height == 3
