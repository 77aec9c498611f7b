"""A GeoJSON file whose `crs` member names a CRS nobody knows (`EPSG:99999`, a `link`
CRS) is refused naming what it states: GDAL would read it as WGS84 without a word, so
its coordinates -- in range or not -- would be taken for degrees. A known CRS (EPSG:3857)
is honoured, a WGS84 name (urn:ogc:def:crs:OGC:1.3:CRS84) and no `crs` at all read as
WGS84, as before. One line, exit 4, bytes kept, nothing applied. Both backends (`cli`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from helpers import Cli


def _layer(crs: dict[str, Any] | None, x: float = 10.0, y: float = 20.0) -> bytes:
    doc: dict[str, Any] = {"type": "FeatureCollection"}
    if crs is not None:
        doc["crs"] = crs
    doc["features"] = [
        {
            "type": "Feature",
            "properties": {"id": 1},
            "geometry": {"type": "Point", "coordinates": [x, y]},
        }
    ]
    return json.dumps(doc).encode()


def _named(name: str) -> dict[str, Any]:
    return {"type": "name", "properties": {"name": name}}


def _ingest(cli: Cli, tmp_path: Path, data: bytes, expect: int) -> str:
    cli("source", "add", "zoning", "--key", "id", "--format", "geojson")
    path = tmp_path / "layer.geojson"
    path.write_bytes(data)
    result = cli("ingest", "zoning", str(path), "--published-at", "2026-08-01", expect=expect)
    return str(result.stderr if expect else result.stdout)


@pytest.mark.parametrize(
    ("crs", "shown"),
    [
        (_named("EPSG:99999"), "EPSG:99999"),
        (_named("urn:ogc:def:crs:EPSG::99999"), "urn:ogc:def:crs:EPSG::99999"),
        ({"type": "EPSG", "properties": {"code": 99999}}, "EPSG:99999"),
        (
            {"type": "link", "properties": {"href": "http://example.com/crs", "type": "proj4"}},
            '{"type":"link","properties":{"href":"http://example.com/crs","type":"proj4"}}',
        ),
    ],
    ids=["epsg", "urn", "epsg-code", "link"],
)
def test_an_unknown_stated_crs_is_refused_not_read_as_wgs84(
    cli: Cli, tmp_path: Path, crs: dict[str, Any], shown: str
) -> None:
    err = _ingest(cli, tmp_path, _layer(crs), expect=4)
    (line,) = [ln for ln in err.splitlines() if ln.strip()]
    assert line.startswith(
        "error: source 'zoning', payload layer.geojson: the GeoJSON's crs member names "
        f"{shown}, no CRS feedledger knows"
    ), line
    assert "the bytes are kept at" in line
    assert any((cli.ws.archive_root / "rejected" / "zoning").glob("*.json"))
    assert cli.json("runs", "zoning") == []


@pytest.mark.parametrize(
    "crs",
    [None, _named("urn:ogc:def:crs:OGC:1.3:CRS84"), _named("EPSG:4326"), _named("EPSG:3857")],
    ids=["none", "crs84", "epsg4326", "epsg3857"],
)
def test_a_known_or_absent_crs_reads_as_before(
    cli: Cli, tmp_path: Path, crs: dict[str, Any] | None
) -> None:
    assert "added 1" in _ingest(cli, tmp_path, _layer(crs), expect=0)
