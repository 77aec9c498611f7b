"""A GeoJSON sequence handed to GDAL as one FeatureCollection (formats/spatial/gis.py): the
one-pass join (one record per line) equals the record-by-record join, and GDAL picks
its driver from the leading records only, with the whole still read and checked."""

from __future__ import annotations

import json

import pytest

from feedledger.formats.spatial import gis
from feedledger.model.errors import BadPayloadError


def _record_by_record(data: bytes) -> bytes:
    separator = b"\x1e" if b"\x1e" in data else b"\n"
    records = [r.strip() for r in data.split(separator)]
    return b'{"type":"FeatureCollection","features":[' + b",".join(r for r in records if r) + b"]}"


def _feature(i: int, pad: str = "") -> bytes:
    feature = {
        "type": "Feature",
        "id": i,
        "geometry": {"type": "Point", "coordinates": [i / 7, 1.5]},
        "properties": {"PID": f"P{i}", "pad": pad},
    }
    return json.dumps(feature).encode()


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\n\n",
        _feature(1) + b"\n" + _feature(2) + b"\n",
        b" " + _feature(1) + b" \n\n " + _feature(2) + b"\r\n",
        _feature(1) + b"\r\n" + _feature(2) + b"\r\n",
        _feature(1) + b"\n \t\r\n" + _feature(2),
        b"\x1e" + _feature(1) + b"\n\x1e" + _feature(2) + b"\n",
        _feature(1) + b"\x0c\n" + _feature(2) + b"\x0b",
    ],
)
def test_one_pass_join_equals_record_by_record(data: bytes) -> None:
    assert json.loads(gis._as_feature_collection(data)) == json.loads(_record_by_record(data))


def test_a_long_sequence_reads_whole() -> None:
    lines = [_feature(i, pad="x" * 200) for i in range(1, 601)]  # ~150 KB > the probe
    data = b"\n".join(lines) + b"\n"
    assert len(data) > 2 * gis._PROBE_BYTES
    assert gis._leading_records(data) == data[: data.index(b"\n", gis._PROBE_BYTES)]
    got = gis.read_gis(data, "geojsonseq", source="s", payload="p")
    assert got.table.num_rows == 600
    assert got.layer == "geojsonseq"
    assert got.table.column("PID").to_pylist()[-1] == "P600"


def test_a_bad_record_past_the_probe_is_refused() -> None:
    lines = [_feature(i, pad="x" * 200) for i in range(1, 601)]
    lines[500] = lines[500][:-5]  # truncated record, far past the leading records
    with pytest.raises(BadPayloadError, match="not a readable geojsonseq file"):
        gis.read_gis(b"\n".join(lines), "geojsonseq", source="s", payload="p")
