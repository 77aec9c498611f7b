"""The demo's zoning layer: six parcels as WGS84 polygons on the demo's own FeatureServer
(pipeline/demo_featureserver.py), declared as an `--connector arcgis` source and run on
three publication days, then once more with nothing new:

- day 1: the layer as first published;
- day 2: parcel MOVED gets one vertex moved (its north-east corner, a lot-line
  adjustment: a geometry change only) and parcel ROTATED is republished with its ring
  starting at another vertex (the same polygon: not a change);
- day 3: parcel MOVED is rezoned R-1 -> MU-2;
- a last run with the layer unchanged: nothing new, no feature downloaded.

The server listens on 127.0.0.1 only while the demo runs; the source stays declared with
its (then closed) port, so a later `feedledger run zoning` reports it unreachable."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from feedledger.config import Workspace, make_source
from feedledger.context import Context
from feedledger.pipeline.demo_featureserver import Feature, Layer, Ring, serving
from feedledger.pipeline.run import run_source

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
        out.append(Feature(attributes, ring))
    return out


def _ms(when: datetime) -> int:
    return int(when.timestamp() * 1000)


@dataclass
class ZoningResult:
    """The layer's URL (closed once the demo returns), the publisher date of each day,
    each run's result (IngestResult, NothingNew...) and the feature queries each run sent."""

    url: str = ""
    published: list[datetime] = field(default_factory=lambda: list(EDITS))
    results: list[Any] = field(default_factory=list)
    feature_queries: list[int] = field(default_factory=list)


def build_zoning(config_path: Path) -> ZoningResult:
    """Serve the layer, declare the `zoning` source in the workspace at `config_path`,
    and run it for each publication day, then once more with nothing new."""
    layer = Layer(features(0), _ms(EDITS[0]))
    out = ZoningResult()
    with serving(layer) as url:
        out.url = url
        ws = Workspace.load(config_path)
        ws.add_source(
            make_source(
                ZONING,
                key=("PARCEL_ID",),
                connector="arcgis",
                fetch=url,
                timezone="America/Denver",
                cadence="daily",
            )
        )
        with Context(Workspace.load(config_path)) as ctx:
            for day, edit in enumerate([*EDITS, EDITS[-1]]):
                layer.features, layer.edit_date = features(min(day, 2)), _ms(edit)
                before = len(layer.requests)
                # the caller's clock: an hour after the edit, so only that day is due
                now = (_ms(edit) + 3_600_000) * 1000
                out.results.append(run_source(ctx, ZONING, now=now))
                out.feature_queries.append(_feature_queries(layer, before))
    return out


def _feature_queries(layer: Layer, since: int) -> int:
    """Queries after request `since` that asked for features (not counts or ids)."""
    return sum(
        1
        for path, q in layer.requests[since:]
        if path.endswith("/query")
        and q.get("returnCountOnly") != "true"
        and q.get("returnIdsOnly") != "true"
    )
