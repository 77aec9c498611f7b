"""Typed results: `AsOf.last_observed_at` / `.next_observed_at` / `.first_recorded_at`
and `SnapshotGap`'s are datetimes (their `to_json()` unchanged), and
`Source.history_frame(key)` / `history_frame(keys=[...])` is a polars DataFrame with
typed columns (times as Datetime UTC, attributes as String columns, a GIS source's
geometry as WKB), not the object columns a frame of `Version.to_json()` gives. SQLite
and PostgreSQL."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime

import polars as pl
import pytest
import shapely

import feedledger as fl
from feedledger.config import Workspace

STAMP = pl.Datetime("us", "UTC")


def test_asof_times_are_datetimes_and_their_json_is_unchanged(workspace: Workspace) -> None:
    with fl.open(workspace.config_path) as led:
        s = led.add_source("s", key=["id"], timezone="UTC")
        s.ingest(b"id,v\na,1\n", published_at=date(2026, 8, 1))
        s.ingest(b"id,v\na,2\n", published_at=date(2026, 8, 5))
        s.add_gap(date(2026, 8, 2), date(2026, 8, 3), "outage")
        inside = s.asof("a", valid=date(2026, 8, 2))
        assert inside.status is fl.Presence.NOT_OBSERVED
        assert inside.last_observed_at == datetime(2026, 8, 1, tzinfo=UTC)
        assert inside.next_observed_at == datetime(2026, 8, 5, tzinfo=UTC)
        assert inside.to_json()["last_observed_at"] == "2026-08-01T00:00:00+00:00"
        assert inside.to_json()["next_observed_at"] == "2026-08-05T00:00:00+00:00"
        early = s.asof("a", valid=date(2026, 8, 1), known_at=datetime(2001, 1, 1, tzinfo=UTC))
        assert early.status is fl.Presence.NOT_KNOWN
        assert isinstance(early.first_recorded_at, datetime)
        assert early.to_json()["first_recorded_at"] == early.first_recorded_at.isoformat()
        gap = s.snapshot_gap(valid=date(2026, 8, 3))
        assert gap is not None and gap.last_observed_at == datetime(2026, 8, 1, tzinfo=UTC)
        assert gap.to_json()["next_observed_at"] == "2026-08-05T00:00:00+00:00"


def test_history_frame_has_typed_columns(workspace: Workspace) -> None:
    with fl.open(workspace.config_path) as led:
        s = led.add_source("s", key=["id"], timezone="UTC")
        s.ingest(b"id,v,valid_from\na,1,x\nb,2,y\n", published_at=date(2026, 8, 1))
        s.ingest(b"id,v,valid_from\na,2.50,x\n", published_at=date(2026, 8, 2))  # b deleted
        one = s.history_frame("a")
        assert one.schema["valid_from"] == STAMP and one.schema["valid_to"] == STAMP
        assert one.schema["recorded_at"] == STAMP and one.schema["retracted_at"] == STAMP
        assert one.schema["backfill"] == pl.Boolean and one.schema["deleted"] == pl.Boolean
        assert not any(t == pl.Object for t in one.schema.values())
        assert one["v"].to_list() == ["1", "2.50"]  # as stated
        assert one["valid_from"].to_list() == [
            datetime(2026, 8, 1, tzinfo=UTC),
            datetime(2026, 8, 2, tzinfo=UTC),
        ]
        assert one["valid_to"].to_list() == [datetime(2026, 8, 2, tzinfo=UTC), None]
        assert one["attributes.valid_from"].to_list() == ["x", "x"]  # a clashing name
        assert one.columns[-3:] == ["id", "v", "attributes.valid_from"]  # key first, by name
        versions = s.history("a")
        assert one["run_id"].to_list() == [v.run_id for v in versions]
        assert one["change"].to_list() == ["added", "changed"]
        both = s.history_frame(keys=["a", "b"])
        assert both["key"].to_list() == ["a", "a", "b", "b"]
        tomb = both.filter(pl.col("key") == "b").row(1, named=True)
        assert tomb["deleted"] is True and tomb["v"] is None and tomb["change"] == "deleted"
        with pytest.raises(fl.NotFoundError):
            s.history_frame(keys=["a", "nobody"])
        with pytest.raises(fl.ConfigError):
            s.history_frame()


def test_history_frame_of_a_gis_source_has_wkb_geometry(workspace: Workspace) -> None:
    def feature(pid: str, x: float) -> dict[str, object]:
        ring = [[x, 0.0], [x + 1, 0.0], [x + 1, 1.0], [x, 1.0], [x, 0.0]]
        return {
            "type": "Feature",
            "properties": {"parcel_id": pid, "zoning": "R-1"},
            "geometry": {"type": "Polygon", "coordinates": [ring]},
        }

    def collection(*features: dict[str, object]) -> bytes:
        return json.dumps({"type": "FeatureCollection", "features": list(features)}).encode()

    with fl.open(workspace.config_path) as led:
        z = led.add_source("z", key=["parcel_id"], timezone="UTC", format="geojson")
        z.ingest(collection(feature("p1", 0)), published_at=date(2026, 8, 1), name="d1.geojson")
        z.ingest(collection(feature("p1", 5)), published_at=date(2026, 8, 2), name="d2.geojson")
        got = z.history_frame("p1")
        assert got.schema["geometry"] == pl.Binary
        shapes = shapely.from_wkb(got["geometry"].to_list())
        assert [s.bounds[0] for s in shapes] == [0.0, 5.0]
        assert got["zoning"].to_list() == ["R-1", "R-1"]
