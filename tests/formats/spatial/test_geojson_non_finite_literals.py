"""GeoJSON coordinates written as `-NaN` (C's printf, some exporters) or as a number too
large for a float (`1e309`) are refused like `NaN` and `Infinity`, naming the feature,
instead of GDAL's "Failed to read GeoJSON data; ... Unrecognized number". One line,
exit 4, bytes kept, nothing applied. Both backends (`cli`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import Cli


def _layer(coordinates: str) -> bytes:
    return (
        '{"type":"FeatureCollection","features":['
        '{"type":"Feature","properties":{"id":"a"},'
        '"geometry":{"type":"Point","coordinates":[0,0]}},'
        '{"type":"Feature","properties":{"id":"b"},'
        f'"geometry":{{"type":"LineString","coordinates":{coordinates}}}}}]}}'
    ).encode()


@pytest.mark.parametrize(
    ("coordinates", "word"),
    [
        ("[[0,0],[-NaN,1.0]]", "NaN"),
        ("[[0,0],[1.0, +NaN ]]", "NaN"),
        ("[[0,0],[1e309,1.0]]", "an infinite number"),
        ("[[0,0],[1.0,-2.5E+400]]", "an infinite number"),
    ],
    ids=["minus-nan", "plus-nan", "1e309", "minus-2.5e400"],
)
def test_a_non_finite_literal_is_refused_naming_the_feature(
    cli: Cli, tmp_path: Path, coordinates: str, word: str
) -> None:
    cli("source", "add", "zoning", "--key", "id", "--format", "geojson")
    path = tmp_path / "layer.geojson"
    path.write_bytes(_layer(coordinates))
    result = cli("ingest", "zoning", str(path), "--published-at", "2026-08-01", expect=4)
    (line,) = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert line.startswith(
        "error: source 'zoning', payload layer.geojson: feature 2: "
        f"a coordinate is {word}, not a position (coordinates must be finite numbers); "
        "the bytes are kept at "
    ), line
    assert any((cli.ws.archive_root / "rejected" / "zoning").glob("*.json"))
    assert cli.json("runs", "zoning") == []
