"""The GeoPackage destination through the public library: `Ledger.add_destination(...,
gpkg=, layer=)` declares it, a rebuild and reconcile run through `Destination`, and
GDAL reads the layer it wrote."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyogrio
import pytest

import feedledger as fl


def test_a_geopackage_destination_through_the_api(cli: Any, tmp_path: Path) -> None:
    cli("source", "add", "zoning", "--key", "parcel_id", "--format", "geojson")
    feats = [
        {"type": "Feature", "properties": {"parcel_id": f"P{i}", "zone": "R1"},
         "geometry": {"type": "Point", "coordinates": [i, i]}}
        for i in range(3)
    ]  # fmt: skip
    day = tmp_path / "zoning_2026-08-01.geojson"
    day.write_text(json.dumps({"type": "FeatureCollection", "features": feats}))
    cli("ingest", "zoning", str(day), "--published-at", "2026-08-01")
    path = tmp_path / "zoning.gpkg"
    with fl.open(cli.ws.config_path) as led:
        dest = led.add_destination("g", source="zoning", gpkg=path, layer="parcels")
        assert dest.declared.kind == "gpkg" and dest.declared.table == "parcels"
        assert dest.declared.to_json()["url"] == str(path.resolve())
        with pytest.raises(fl.ConfigError, match="--layer"):
            led.add_destination("h", source="zoning", gpkg=tmp_path / "other.gpkg")
        led.create_manifest("all", source="zoning")
        report = led.destination("g").rebuild("all")
        assert report.to_json()["outcomes"]["accepted"] == 3
        assert led.destination("g").reconcile("all").complete is True
    info = pyogrio.read_info(str(path), layer="parcels")
    assert info["geometry_type"] == "Point" and info["features"] == 3
