"""A NaN coordinate in a binary GIS file (FlatGeobuf, shapefile) is refused like one in
GeoJSON or a GeoPackage, never stored as an empty geometry: GDAL's Arrow reading of
these formats turns a point with one NaN ordinate into an empty point, so the reader
looks at the geometries as stored when a NaN shows. The bytes are kept, nothing is
applied, no warning is printed, and a file without NaN reads as before."""

from __future__ import annotations

import io
import json
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest
import shapely

from helpers import Cli

_NAN = float("nan")


def _write(path: Path, wkts: list[str], driver: str, kind: str) -> None:
    import pyogrio.raw

    with np.errstate(invalid="ignore"):  # shapely warns of the NaN we mean to write
        wkb = np.array([shapely.to_wkb(shapely.from_wkt(w)) for w in wkts], dtype=object)
    ids = np.arange(1, len(wkts) + 1, dtype=np.int64)
    pyogrio.raw.write(
        str(path), wkb, [ids], ["id"], geometry_type=kind, crs="EPSG:4326", driver=driver
    )


def _flatgeobuf(tmp_path: Path, wkts: list[str], kind: str) -> bytes:
    path = tmp_path / "layer.fgb"
    _write(path, wkts, "FlatGeobuf", kind)
    return path.read_bytes()


def _shapefile_with_nan_x(tmp_path: Path) -> bytes:
    """A zipped point shapefile whose one point is (NaN, 20): GDAL refuses to write
    one, other software does, so the x of a (10, 20) point is patched in the .shp."""
    folder = tmp_path / "shp"
    folder.mkdir()
    _write(folder / "layer.shp", ["POINT (10 20)"], "ESRI Shapefile", "Point")
    shp = bytearray((folder / "layer.shp").read_bytes())
    # 100-byte header, 8-byte record header, 4-byte shape type, then x
    assert struct.unpack("<d", shp[112:120]) == (10.0,)
    shp[112:120] = struct.pack("<d", _NAN)
    (folder / "layer.shp").write_bytes(bytes(shp))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for part in sorted(folder.iterdir()):
            archive.write(part, part.name)
    return out.getvalue()


def _refused(cli: Cli, tmp_path: Path, fmt: str, name: str, data: bytes) -> None:
    """Refused in one line, exit 4, bytes kept, nothing applied; run as a real process
    under Python's default warning filters, so a warning printed on the way shows."""
    cli("source", "add", "zoning", "--key", "id", "--format", fmt)
    path = tmp_path / name
    path.write_bytes(data)
    result = cli.proc("ingest", "zoning", str(path), "--published-at", "2026-08-01")
    err = result.stderr.strip()
    assert result.returncode == 4, err
    assert len(err.splitlines()) == 1, err
    assert "feature 1: a coordinate is NaN, not a position" in err, err
    assert "the bytes are kept at" in err, err
    assert any((cli.ws.archive_root / "rejected" / "zoning").glob("*.json"))
    assert json.loads(cli("runs", "zoning", "--json").stdout) == []  # nothing applied


@pytest.mark.parametrize(
    ("geometry", "kind"),
    [
        ("POINT (NaN 20)", "Point"),
        ("MULTIPOINT ((NaN 1), (2 2))", "MultiPoint"),
        ("LINESTRING (0 0, NaN 1)", "LineString"),
    ],
    ids=["point", "multipoint", "line"],
)
def test_a_flatgeobuf_nan_coordinate_is_refused_not_emptied(
    cli: Cli, tmp_path: Path, geometry: str, kind: str
) -> None:
    data = _flatgeobuf(tmp_path, [geometry], kind)
    _refused(cli, tmp_path, "flatgeobuf", "nan.fgb", data)


def test_a_geopackage_nan_line_is_refused_without_a_warning(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "layer.gpkg"
    _write(path, ["LINESTRING (0 0, NaN 1)"], "GPKG", "LineString")
    _refused(cli, tmp_path, "gpkg", "nan.gpkg", path.read_bytes())


def test_a_shapefile_nan_coordinate_is_refused_not_emptied(cli: Cli, tmp_path: Path) -> None:
    _refused(cli, tmp_path, "shapefile", "nan.zip", _shapefile_with_nan_x(tmp_path))


def test_a_finite_flatgeobuf_reads_as_before(cli: Cli, tmp_path: Path) -> None:
    cli("source", "add", "zoning", "--key", "id", "--format", "flatgeobuf")
    path = tmp_path / "ok.fgb"
    path.write_bytes(_flatgeobuf(tmp_path, ["POINT (1 2)", "POINT (3 4)"], "Point"))
    cli("ingest", "zoning", str(path), "--published-at", "2026-08-01")
    versions = cli.json("history", "zoning", "2")
    assert [v["geometry"] for v in versions] == [{"type": "Point", "coordinates": [3.0, 4.0]}]
