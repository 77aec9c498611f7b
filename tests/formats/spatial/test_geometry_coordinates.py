"""A geometry is kept as stated or refused, never emptied or silently changed: a NaN or
infinite coordinate is refused with one line naming the feature (the bytes kept under
rejected/); a huge finite coordinate (up to the largest float) is kept and a move of
it is a change; no numpy/shapely warning escapes (these tests turn warnings into
errors)."""

from __future__ import annotations

import json
import math
import struct
import warnings
from pathlib import Path

import pyarrow as pa
import pytest
import shapely
from hypothesis import given, settings
from hypothesis import strategies as st

from feedledger.formats.spatial.geometry import DEFAULT_GRID, hash_wkb
from feedledger.model.errors import BadPayloadError
from helpers import Cli

_NO_WARNING = pytest.mark.filterwarnings("error")

_ANY_FLOAT = st.floats(allow_nan=True, allow_infinity=True)
_FINITE = st.floats(allow_nan=False, allow_infinity=False)


def _point_wkb(x: float, y: float) -> bytes:
    """A 2-D point's ISO WKB, little-endian, exactly these numbers (NaN included)."""
    return struct.pack("<BIdd", 1, 1, x, y)


def _line_wkb(points: list[tuple[float, float]]) -> bytes:
    body = b"".join(struct.pack("<dd", x, y) for x, y in points)
    return struct.pack("<BII", 1, 2, len(points)) + body


def _hash(wkb: bytes) -> int:
    hashes, _ = hash_wkb(pa.array([wkb], type=pa.binary()), DEFAULT_GRID)
    value = hashes.to_list()[0]
    assert isinstance(value, int)
    return value


def _moved(a: float, b: float) -> bool:
    """`b` is `a` moved by more than two grid steps (a smaller move may round onto the
    same grid point: snapping is rounding, by design)."""
    return abs(b - a) > 2 * DEFAULT_GRID


@_NO_WARNING
@settings(max_examples=300, deadline=None)
@given(x=_ANY_FLOAT, y=_ANY_FLOAT, x2=_ANY_FLOAT, y2=_ANY_FLOAT)
def test_a_moved_vertex_is_a_change_and_a_non_finite_one_is_refused(
    x: float, y: float, x2: float, y2: float
) -> None:
    for wkb in (_point_wkb(x, y), _line_wkb([(0.0, 0.0), (x, y)])):
        if math.isnan(x) and math.isnan(y) and wkb[1] == 1:
            # (NaN, NaN) is how WKB writes POINT EMPTY: an empty point as stated
            assert _hash(wkb) == _hash(shapely.to_wkb(shapely.from_wkt("POINT EMPTY")))
            continue
        if not (math.isfinite(x) and math.isfinite(y)):
            with pytest.raises(BadPayloadError, match=r"^feature 1: a coordinate is "):
                _hash(wkb)
            continue
        before = _hash(wkb)
        if math.isfinite(x2) and math.isfinite(y2) and (_moved(x, x2) or _moved(y, y2)):
            after = _line_wkb([(0.0, 0.0), (x2, y2)]) if wkb[1:5] == b"\x02\0\0\0" else None
            moved = after if after is not None else _point_wkb(x2, y2)
            assert _hash(moved) != before, (x, y, x2, y2)


@_NO_WARNING
@settings(max_examples=100, deadline=None)
@given(x=st.floats(min_value=1e299, max_value=1.7976931348623157e308), y=_FINITE)
def test_huge_coordinates_are_kept_and_their_moves_seen(x: float, y: float) -> None:
    nxt = math.nextafter(x, math.inf if x < 1e308 else 0.0)
    assert _hash(_point_wkb(x, y)) != _hash(_point_wkb(nxt, y))


@_NO_WARNING
def test_the_row_of_a_refused_coordinate_counts_every_chunk() -> None:
    wkbs = [_point_wkb(float(i), 0.0) for i in range(10)] + [_point_wkb(math.nan, 1.0)]
    with pytest.raises(BadPayloadError, match=r"^feature 11: a coordinate is NaN"):
        hash_wkb(pa.array(wkbs, type=pa.binary()), DEFAULT_GRID, chunk=4)


def _layer(coordinates: str, crs: str | None = None) -> bytes:
    # NaN / Infinity are not JSON, but Python's json writes them and GDAL reads them;
    # crs: a stated CRS (a layer without one is read as degrees, range-checked)
    stated = f'"crs":{{"type":"name","properties":{{"name":"{crs}"}}}},' if crs else ""
    return (
        '{"type":"FeatureCollection",' + stated + '"features":['
        '{"type":"Feature","properties":{"id":"a"},'
        '"geometry":{"type":"Point","coordinates":[0,0]}},'
        '{"type":"Feature","properties":{"id":"b"},'
        f'"geometry":{{"type":"Point","coordinates":{coordinates}}}}}]}}'
    ).encode()


def _ingest(cli: Cli, tmp_path: Path, name: str, data: bytes, day: str, expect: int = 0) -> str:
    path = tmp_path / name
    path.write_bytes(data)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # numpy's overflow, shapely's NaN
        result = cli("ingest", "zoning", str(path), "--published-at", day, expect=expect)
    assert "Warning" not in result.stderr, result.stderr
    return str(result.stderr if expect else result.stdout)


@pytest.mark.parametrize(
    ("coordinates", "word"),
    [("[NaN, 1.0]", "NaN"), ("[1.0, NaN]", "NaN"), ("[-Infinity, 1.0]", "an infinite number")],
)
def test_a_non_finite_coordinate_is_refused_never_emptied(
    cli: Cli, tmp_path: Path, coordinates: str, word: str
) -> None:
    cli("source", "add", "zoning", "--key", "id", "--format", "geojson")
    err = _ingest(cli, tmp_path, "nan.geojson", _layer(coordinates), "2026-08-01", expect=4)
    (line,) = [ln for ln in err.splitlines() if ln.strip()]
    assert line.startswith(
        "error: source 'zoning', payload nan.geojson: feature 2: "
        f"a coordinate is {word}, not a position (coordinates must be finite numbers); "
        "the bytes are kept at "
    ), line
    assert any((cli.ws.archive_root / "rejected" / "zoning").glob("*.json"))
    assert json.loads(cli("runs", "zoning", "--json").stdout) == []  # nothing applied


def test_a_huge_coordinate_moved_is_a_change(cli: Cli, tmp_path: Path) -> None:
    # a projected layer: in one read as geographic (no crs: WGS84) 2e299 is refused as
    # outside -180..180 (test_portal_hostile_answers)
    cli("source", "add", "zoning", "--key", "id", "--format", "geojson")
    # a projected layer (metres): a layer read as degrees refuses these as out of range
    metres = "EPSG:3857"
    _ingest(cli, tmp_path, "d1.geojson", _layer("[2e299, 1.0]", metres), "2026-08-01")
    out = _ingest(cli, tmp_path, "d2.geojson", _layer("[3e299, 1.0]", metres), "2026-08-02")
    assert "changed 1" in out, out
    (latest, *_) = sorted(
        cli.json("history", "zoning", "b"), key=lambda v: v["valid_from"], reverse=True
    )
    assert latest["geometry"] == {"type": "Point", "coordinates": [3e299, 1.0]}
    assert shapely.from_geojson(json.dumps(latest["geometry"])).x == 3e299


def test_a_nan_property_beside_a_finite_geometry_is_not_refused(cli: Cli, tmp_path: Path) -> None:
    cli("source", "add", "zoning", "--key", "id", "--format", "geojson")
    data = (
        b'{"type":"FeatureCollection","features":[{"type":"Feature",'
        b'"properties":{"id":"a","area":NaN},"geometry":{"type":"Point","coordinates":[1,2]}}]}'
    )
    assert "added 1" in _ingest(cli, tmp_path, "p.geojson", data, "2026-08-01")
