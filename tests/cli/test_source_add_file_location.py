"""`source add` with a fetch location that is one
existing file (a GeoJSON, a GPKG) must not warn that it "does not exist"; and the
format is taken from that file's extension when --format is not given."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

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


# -- every bad GIS file through `ingest`: one clear line, ledger untouched, bytes kept --


def _parcels(ids: list[str]) -> Any:
    import pyarrow as pa
    import shapely

    squares = [shapely.box(i, 0, i + 1, 1) for i in range(len(ids))]
    return pa.table(
        {
            "PARCEL_ID": ids,
            "ZONE": ["R-1"] * len(ids),
            "geometry": pa.array(shapely.to_wkb(squares), pa.binary()),
        }
    )


def _write(tmp: Path, name: str, table: Any, driver: str) -> Path:
    import pyogrio

    path = tmp / name
    pyogrio.write_arrow(
        table,
        path,
        driver=driver,
        layer="parcels",
        geometry_name="geometry",
        geometry_type="Polygon",
        crs="EPSG:4326",
    )
    return path


def _zip(folder: Path, skip: str = "") -> bytes:
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for part in sorted(folder.iterdir()):
            if not (skip and part.name.endswith(skip)):
                zf.write(part, "parcels/" + part.name)
    return buf.getvalue()


def _bad_files(tmp: Path) -> dict[str, tuple[str, bytes]]:
    """case -> (format, bytes)."""
    shp = tmp / "shp"
    shp.mkdir()
    _write(shp, "parcels.shp", _parcels(["A1", "A2"]), "ESRI Shapefile")
    whole = _zip(shp)
    no_key = _parcels(["A1"]).rename_columns(["PID", "ZONE", "geometry"])
    return {
        "html login page": ("gpkg", b"<!DOCTYPE html><html><body>Sign in</body></html>"),
        "truncated zip": ("shapefile", whole[: len(whole) // 2]),
        "shapefile without .dbf": ("shapefile", _zip(shp, skip=".dbf")),
        "layer without the key": ("gpkg", _write(tmp, "nokey.gpkg", no_key, "GPKG").read_bytes()),
        "duplicate keys": (
            "gpkg",
            _write(tmp, "dup.gpkg", _parcels(["A1", "A1"]), "GPKG").read_bytes(),
        ),
        "random bytes": ("flatgeobuf", bytes(range(256)) * 7),
    }


EXPECTED = {
    "html login page": "HTML",
    "truncated zip": "zip",
    "shapefile without .dbf": ".dbf",
    "layer without the key": "PARCEL_ID",
    "duplicate keys": "duplicate key",
    "random bytes": "parcels",
}


@pytest.mark.parametrize("case", list(EXPECTED))
def test_bad_gis_file_is_refused_with_the_ledger_untouched_and_the_bytes_kept(
    tmp_path: Path, cli: Cli, case: str
) -> None:
    fmt, data = _bad_files(tmp_path)[case]
    path = tmp_path / f"bad.{fmt}"
    path.write_bytes(data)
    cli("source", "add", "parcels", "--key", "PARCEL_ID", "--format", fmt)
    result = cli("ingest", "parcels", str(path), "--published-at", "2026-08-01", expect=None)
    assert result.exit_code != 0
    line = result.stderr.strip()
    assert "\n" not in line and "Traceback" not in line
    assert "parcels" in line and EXPECTED[case].lower() in line.lower(), line
    # the ledger: no version, no applied payload, no watermark
    assert "has ever been recorded" in cli("history", "parcels", "A1", expect=3).stderr
    assert cli.json("watermark", "parcels")["published_at"] is None
    # the bytes: kept in the archive under their sha256
    sha = hashlib.sha256(data).hexdigest()
    assert any(p.read_bytes() == data for p in (cli.ws.archive_root / "objects").rglob(sha))
