"""The layers the OGC API - Features tests read (imported as `from ogc_layers import
...`): a GeoJSON parcel source in EPSG:4326 over three publications with a recorded gap
between the second and the third, and a CSV source without geometry.

`parcels`: day 1 (2026-08-01) N squares on a grid; day 2 (2026-08-02) some change an
attribute, some move, some are deleted, some are added; a gap 2026-08-03 .. 08-04
(recorded); day 3 (2026-08-05) a few change again. `DAYS` holds each day's features,
so a test can tell what the layer was at any time without asking feedledger."""

from __future__ import annotations

import json
from datetime import date
from typing import Any

import feedledger as fl

N = 40
CELL = 0.01  # degrees between parcels
X0, Y0 = -105.0, 40.0
GAP = (date(2026, 8, 3), date(2026, 8, 4))
PUBLISHED = [date(2026, 8, 1), date(2026, 8, 2), date(2026, 8, 5)]

Feature = tuple[dict[str, Any], dict[str, Any] | None]


def _square(i: int, shift: float = 0.0) -> dict[str, Any]:
    x = X0 + (i % 8) * CELL + shift
    y = Y0 + (i // 8) * CELL
    s = CELL * 0.6
    ring = [[x, y], [x + s, y], [x + s, y + s], [x, y + s], [x, y]]
    return {"type": "Polygon", "coordinates": [ring]}


def _days() -> list[dict[str, Feature]]:
    day1 = {
        f"P{i:03d}": (
            {"parcel": f"P{i:03d}", "zoning": "R-1", "floors": i % 4, "area": 1.5 + i},
            _square(i),
        )
        for i in range(N)
    }
    day2 = dict(day1)
    for i in range(0, 5):  # an attribute changes
        p, g = day2[f"P{i:03d}"]
        day2[f"P{i:03d}"] = ({**p, "zoning": "MU-2"}, g)
    for i in range(5, 8):  # the shape moves
        p, _g = day2[f"P{i:03d}"]
        day2[f"P{i:03d}"] = (p, _square(i, shift=CELL * 0.2))
    for i in range(30, 34):  # deleted
        del day2[f"P{i:03d}"]
    for i in range(N, N + 3):  # added, the last one with no geometry
        geom = _square(i) if i < N + 2 else None
        day2[f"P{i:03d}"] = (
            {"parcel": f"P{i:03d}", "zoning": "C-1", "floors": 1, "area": 2.0},
            geom,
        )
    day3 = dict(day2)
    for i in (10, 11):
        p, g = day3[f"P{i:03d}"]
        day3[f"P{i:03d}"] = ({**p, "floors": 9}, g)
    return [day1, day2, day3]


DAYS = _days()


def collection(features: dict[str, Feature]) -> bytes:
    body = [{"type": "Feature", "properties": p, "geometry": g} for p, g in features.values()]
    return json.dumps({"type": "FeatureCollection", "features": body}).encode()


OWNERS = b"owner_id,name,city\n" + b"".join(f"O{i},name {i},Loveland\n".encode() for i in range(12))


def build(led: fl.Ledger) -> None:
    """`parcels` (three days and the gap) and `owners` (one CSV, no geometry)."""
    parcels = led.add_source("parcels", key=["parcel"], format="geojson", timezone="UTC")
    for day, features in zip(PUBLISHED, DAYS, strict=True):
        parcels.ingest(collection(features), published_at=day, name=f"parcels-{day}.geojson")
    parcels.add_gap(GAP[0], GAP[1], "portal down")
    owners = led.add_source("owners", key=["owner_id"], timezone="UTC")
    owners.ingest(OWNERS, published_at=date(2026, 8, 1), name="owners.csv")


def envelope(geometry: dict[str, Any] | None) -> tuple[float, float, float, float] | None:
    if geometry is None:
        return None
    xs = [c[0] for ring in geometry["coordinates"] for c in ring]
    ys = [c[1] for ring in geometry["coordinates"] for c in ring]
    return (min(xs), min(ys), max(xs), max(ys))


def in_bbox(geometry: dict[str, Any] | None, bbox: tuple[float, float, float, float]) -> bool:
    """The envelope test the layer's bbox filter documents, written again here."""
    env = envelope(geometry)
    if env is None:
        return False
    return env[2] >= bbox[0] and env[0] <= bbox[2] and env[3] >= bbox[1] and env[1] <= bbox[3]
