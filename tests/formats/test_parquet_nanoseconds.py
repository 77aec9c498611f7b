"""Parquet written by pandas or Spark (nanosecond timestamps, their default) is read
exactly: the nanoseconds are kept in the attribute's text, for attributes and keys, in
Parquet and in GeoParquet alike; a value of microsecond precision reads the same at
either resolution (no change when a publisher's writer switches). A column that cannot
be read is named in one line that names no library."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import shapely

from feedledger import config
from feedledger.formats.readers import read_observations
from feedledger.model.errors import BadPayloadError
from helpers import Cli

NS = 1_700_000_000_123_456_789  # 2023-11-14T22:13:20.123456789Z


def _table(unit: str, *, sub_us: int = 789) -> pa.Table:
    base = NS - 789 + sub_us
    return pa.table(
        {
            "at": pa.array([base, base + 86_400 * 10**9]).cast(pa.timestamp(unit)),
            "id": pa.array(["a", "b"]),
            "local": pa.array([base, -1500 if sub_us else -2000], pa.int64()).cast(
                pa.timestamp(unit, tz="America/Denver")
            )
            if unit == "ns"
            else pa.array([(base) // 1000, -2], pa.timestamp("us", tz="America/Denver")),
            "clock": pa.array([3_723_000_000_000 + sub_us, None], pa.time64("ns")).cast(
                pa.time64(unit)
            ),
            "took": pa.array([86_400 * 10**9 + sub_us, 5_000], pa.int64()).cast(pa.duration(unit)),
            "day": pa.array([19_000, 0], pa.date32()),
        }
    )


def _parquet(table: pa.Table) -> bytes:
    out = io.BytesIO()
    pq.write_table(table, out)
    return out.getvalue()


def _attributes(data: bytes, key: str, fmt: str = "parquet") -> dict[str, Any]:
    src = config.make_source("feed", key=(key,), format=fmt)
    obs = read_observations(data, src, label="p1")
    idx = obs.frame.get_column("idx")
    texts = obs.attributes(idx).to_list()
    return {k: json.loads(t) for k, t in zip(obs.frame["key"], texts, strict=True)}


def test_nanosecond_columns_are_read_exactly() -> None:
    attrs = _attributes(_parquet(_table("ns")), "id")
    assert attrs['["a"]'] == {
        "at": "2023-11-14T22:13:20.123456789",
        "clock": "01:02:03.000000789",
        "day": "2022-01-08",
        "id": "a",
        "local": "2023-11-14T15:13:20.123456789-07:00",
        "took": "1 day, 0:00:00.000000789",
    }
    assert attrs['["b"]']["local"] == "1969-12-31T16:59:59.999998500-07:00"
    assert attrs['["b"]']["took"] == "0:00:00.000005"


def test_a_nanosecond_key_keeps_its_nanoseconds() -> None:
    attrs = _attributes(_parquet(_table("ns")), "at")
    assert sorted(attrs) == [
        '["2023-11-14T22:13:20.123456789"]',
        '["2023-11-15T22:13:20.123456789"]',
    ]


def test_geoparquet_properties_read_nanoseconds_alike() -> None:
    table = _table("ns").append_column(
        "geometry", pa.array(shapely.to_wkb(shapely.points([[0, 0], [1, 1]])).tolist())
    )
    geo = {
        "version": "1.0.0",
        "primary_column": "geometry",
        "columns": {"geometry": {"encoding": "WKB", "geometry_types": ["Point"]}},
    }
    data = _parquet(table.replace_schema_metadata({"geo": json.dumps(geo)}))
    assert _attributes(data, "id", "geoparquet") == _attributes(_parquet(_table("ns")), "id")


def _hashes(data: bytes) -> list[int]:
    src = config.make_source("feed", key=("id",), format="parquet")
    return read_observations(data, src, label="p1").frame.sort("key")["hash"].to_list()


def test_microsecond_values_read_the_same_at_either_resolution() -> None:
    as_ns = _table("ns", sub_us=0)
    as_us = as_ns.cast(
        pa.schema(
            [
                pa.field("at", pa.timestamp("us")),
                pa.field("id", pa.string()),
                pa.field("local", pa.timestamp("us", tz="America/Denver")),
                pa.field("clock", pa.time64("us")),
                pa.field("took", pa.duration("us")),
                pa.field("day", pa.date32()),
            ]
        )
    )
    assert _hashes(_parquet(as_ns)) == _hashes(_parquet(as_us))


def test_nanoseconds_nested_in_a_list_are_named_in_one_line() -> None:
    table = pa.table(
        {"id": ["a"], "times": pa.array([[NS]], pa.list_(pa.timestamp("ns")))},
    )
    src = config.make_source("feed", key=("id",), format="parquet")
    with pytest.raises(BadPayloadError) as info:
        read_observations(_parquet(table), src, label="p1")
    assert str(info.value) == (
        "source 'feed', payload p1: column 'times' holds nanosecond times "
        "(list<element: timestamp[ns]>) inside a list or struct: feedledger reads them "
        "exactly only as a column of their own"
    )


def test_pandas_style_parquet_through_the_cli(cli: Cli, tmp_path: Path) -> None:
    cli("source", "add", "feed", "--key", "at", "--format", "parquet")
    first = tmp_path / "feed.parquet"
    first.write_bytes(_parquet(_table("ns")))
    cli("ingest", "feed", str(first), "--published-at", "2026-08-01")
    (version,) = cli.json("history", "feed", "2023-11-14T22:13:20.123456789")
    assert version["attributes"]["clock"] == "01:02:03.000000789"
    assert version["attributes"]["took"] == "1 day, 0:00:00.000000789"
    # the same rows a nanosecond later in the clock: a change of that one attribute
    moved = _table("ns").set_column(
        3, "clock", pa.array([3_723_000_000_790, None], pa.time64("ns"))
    )
    second = tmp_path / "feed2.parquet"
    second.write_bytes(_parquet(moved))
    out = json.loads(
        cli("ingest", "feed", str(second), "--published-at", "2026-08-02", "--json").stdout
    )
    assert out["changed"] == 1, out
    latest = cli.json("history", "feed", "2023-11-14T22:13:20.123456789")
    clocks = sorted(v["attributes"]["clock"] for v in latest)
    assert clocks == ["01:02:03.000000789", "01:02:03.000000790"]


def test_nanoseconds_nested_in_geoparquet_are_named_in_one_line() -> None:
    table = pa.table(
        {
            "id": ["a"],
            "times": pa.array([[NS]], pa.list_(pa.timestamp("ns"))),
            "geometry": pa.array(shapely.to_wkb(shapely.points([[0, 0]])).tolist()),
        }
    )
    geo = {
        "version": "1.0.0",
        "primary_column": "geometry",
        "columns": {"geometry": {"encoding": "WKB", "geometry_types": ["Point"]}},
    }
    data = _parquet(table.replace_schema_metadata({"geo": json.dumps(geo)}))
    src = config.make_source("feed", key=("id",), format="geoparquet")
    with pytest.raises(BadPayloadError) as info:
        read_observations(data, src, label="p1")
    assert str(info.value) == (
        "source 'feed', payload p1: column 'times' holds nanosecond times "
        "(list<element: timestamp[ns]>) inside a list or struct: feedledger reads them "
        "exactly only as a column of their own"
    )
