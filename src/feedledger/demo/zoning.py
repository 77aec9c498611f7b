"""The demo's zoning layer: six parcels as WGS84 polygons on the project's fake
FeatureServer (demo/featureserver.py), declared as an `--connector arcgis` source and run
on three publication days, then once more with nothing new:

- day 1: the layer as first published;
- day 2: parcel MOVED gets one vertex moved (its north-east corner, a lot-line
  adjustment: a geometry change only) and parcel ROTATED is republished with its ring
  starting at another vertex (the same polygon: not a change);
- day 3: parcel MOVED is rezoned R-1 -> MU-2;
- a last run with the layer unchanged: nothing new, no feature downloaded.

The server listens on 127.0.0.1 only while the demo runs; the source stays declared with
its (then closed) port, so a later `feedledger run zoning` reports it unreachable.

The runs go through the public API but for one call: each run is `pipeline.intake.run.run_source`
with the caller's clock (`now`: an hour after that day's edit), which `Source.run` does not
take; on the real clock every day since the first edit would be due at once."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import feedledger as fl
from feedledger.demo.featureserver import FakeArcGIS, Feature, serving

# the one import under the public API (see the docstring): the run on the caller's clock
from feedledger.pipeline.intake.run import NothingNew, run_source

if TYPE_CHECKING:
    from feedledger import Ingested, Ledger, NothingToDo, NotModified

Ring = list[list[float]]

ZONING = "zoning"
MOVED = "0714-22-1"  # vertex moved on day 2, rezoned on day 3
ROTATED = "0714-22-3"  # ring republished from another vertex on day 2
# the layer's editingInfo.dataLastEditDate on each publication day (the publisher date)
EDITS = [
    datetime(2026, 8, 3, 15, 30, tzinfo=UTC),
    datetime(2026, 8, 4, 15, 10, tzinfo=UTC),
    datetime(2026, 8, 5, 16, 5, tzinfo=UTC),
]
MOVE = 0.00002  # degrees east (about 1.7 m at 40.6 N)
WGS84 = 4326
FIELDS: list[dict[str, Any]] = [
    {"name": "OBJECTID", "type": "esriFieldTypeOID", "alias": "OBJECTID"},
    {"name": "PARCEL_ID", "type": "esriFieldTypeString", "alias": "Parcel ID", "length": 16},
    {"name": "ZONE", "type": "esriFieldTypeString", "alias": "Zoning district", "length": 8},
    {"name": "ACRES", "type": "esriFieldTypeDouble", "alias": "Acres"},
]

# parcel id, zone, acres, south-west corner (lon, lat); each parcel 0.0004 x 0.0003 deg
_PARCELS = [
    ("0714-22-1", "R-1", 0.21, -105.0890, 40.5905),
    ("0714-22-2", "R-1", 0.19, -105.0886, 40.5905),
    ("0714-22-3", "R-2", 0.33, -105.0882, 40.5905),
    ("0801-10-7", "C-1", 0.48, -105.0772, 40.5890),
    ("0801-10-8", "MU-2", 0.52, -105.0772, 40.5894),
    ("0902-33-4", "I-1", 2.75, -105.0700, 40.5850),
]


def _ring(x0: float, y0: float, *, ne_shift: float = 0.0) -> Ring:
    """A closed clockwise ring (Esri's outer-ring orientation) from the south-west corner."""
    x1, y1 = round(x0 + 0.0004, 6), round(y0 + 0.0003, 6)
    ne = [round(x1 + ne_shift, 6), y1]
    return [[x0, y0], [x0, y1], ne, [x1, y0], [x0, y0]]


def features(day: int) -> list[Feature]:
    """The layer as published on `day` (0, 1, 2)."""
    out = []
    for oid, (parcel, zone, acres, x0, y0) in enumerate(_PARCELS, start=1):
        ring = _ring(x0, y0, ne_shift=MOVE if parcel == MOVED and day >= 1 else 0.0)
        if parcel == ROTATED and day >= 1:
            ring = ring[1:] + ring[1:2]  # starts at its second vertex: the same polygon
        if parcel == MOVED and day >= 2:
            zone = "MU-2"
        attributes = {"OBJECTID": oid, "PARCEL_ID": parcel, "ZONE": zone, "ACRES": acres}
        out.append({"attributes": attributes, "rings": [ring]})
    return out


def layer(day: int = 0) -> FakeArcGIS:
    """The layer as published on `day`: an 11.1 FeatureServer layer stored in WGS84,
    pages of 4, its extent the parcels' bounding box, its schema edited with its data."""
    return FakeArcGIS(
        features=features(day),
        fields=FIELDS,
        edit_date=_ms(EDITS[day]),
        schema_edit_date=None,
        max_record_count=4,
        wkid=WGS84,
        extent=None,
    )


def _ms(when: datetime) -> int:
    return int(when.timestamp() * 1000)


@dataclass(frozen=True)
class ZoningDemo:
    """The zoning part: the layer's URL (served only while the demo ran), the layer's
    publisher date (editingInfo.dataLastEditDate) for each run, each run's result (the
    last run: the layer unchanged, nothing new) and how many feature queries each sent."""

    url: str
    published: list[datetime]
    results: list[Ingested | NothingToDo | NotModified]
    feature_queries: list[int] = field(default_factory=list)


def run_zoning(led: Ledger) -> ZoningDemo:
    """Serve the layer, declare the `zoning` source in `led`'s workspace, and run it for
    each publication day, then once more with nothing new."""
    results: list[Ingested | NothingToDo | NotModified] = []
    queries: list[int] = []
    with serving(layer(0)) as fake:
        led.add_source(
            ZONING,
            key=("PARCEL_ID",),
            connector="arcgis",
            fetch=fake.url,
            timezone="America/Denver",
            cadence="daily",
        )
        for day, edit in enumerate([*EDITS, EDITS[-1]]):
            fake.features, fake.edit_date = features(min(day, 2)), _ms(edit)
            before = len(fake.feature_requests)
            # the caller's clock: an hour after the edit, so only that day is due
            now = (_ms(edit) + 3_600_000) * 1000
            results.append(_result(run_source(led.context, ZONING, now=now)))
            queries.append(len(fake.feature_requests) - before)
        url = fake.url
    return ZoningDemo(url, list(EDITS), results, queries)


def _result(result: Any) -> Ingested | NothingToDo | NotModified:
    """A run's result as the public API types it (as `Source.run` answers)."""
    if result is None:
        return fl.NotModified(ZONING)
    if isinstance(result, NothingNew):
        return fl.NothingToDo(result.source, result.reason, None, result)
    return fl.Ingested.of(result)
