"""Issue 15, found walking it as a user: `source add` with a fetch location that is one
existing file (a GeoJSON, a GPKG) must not warn that it "does not exist"; and the
format is taken from that file's extension when --format is not given."""

from __future__ import annotations

from pathlib import Path

from helpers import Cli


def test_existing_file_fetch_is_not_warned_and_gives_the_format(tmp_path: Path, cli: Cli) -> None:
    layer = tmp_path / "zoning.geojson"
    layer.write_text('{"type":"FeatureCollection","features":[]}', encoding="utf-8")
    result = cli("source", "add", "zoning", "--key", "PARCEL_ID", "--fetch", str(layer))
    assert "does not exist" not in result.stderr
    assert cli.json("source", "list")[0]["format"] == "geojson"


def test_missing_fetch_location_is_still_warned(tmp_path: Path, cli: Cli) -> None:
    missing = tmp_path / "not-there" / "parcels.csv"
    result = cli("source", "add", "parcels", "--key", "id", "--fetch", str(missing))
    assert "does not exist (yet)" in result.stderr
    assert cli.json("source", "list")[0]["format"] == "csv"
