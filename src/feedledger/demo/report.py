"""What `feedledger demo` shows, composed from the public API: the ingested payloads, a
parcel's bitemporal history and as-of answers, the zoning layer's runs and a parcel's
geometry change, then what to try next. Tables and paragraphs of text, in order; the CLI
(cli/commands/demo_cmd.py) renders them (a `datetime` cell as its compact UTC time)."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import feedledger as fl
from feedledger.demo.workspace import PARCEL, SOURCE, Demo
from feedledger.demo.zoning import MOVED, ROTATED, ZONING


@dataclass(frozen=True)
class Table:
    title: str
    columns: list[str]
    rows: list[list[Any]]


def report(demo: Demo) -> Iterator[Table | str]:
    """The demo's tables and texts, in the order they are shown."""
    yield Table(
        "ingested payloads (one live run each)",
        ["file", "published_at", "added", "changed", "deleted", "run_id"],
        [
            [
                f.name,
                r.published_at,
                r.to_json().get("added"),
                r.to_json().get("changed"),
                r.to_json().get("deleted"),
                r.run_id[:8] if r.run_id else "",
            ]
            for f, r in zip(demo.files, demo.results, strict=True)
        ],
    )
    with fl.open(demo.workspace / "feedledger.toml") as led:
        src = led.source(SOURCE)
        versions = src.history(PARCEL)
        yield Table(
            f"history of parcel {PARCEL}: valid time from the publisher, "
            "recorded_at from the commit",
            ["valid_from", "valid_to", "recorded_at", "change", "zoning"],
            [
                [
                    v.valid_from,
                    v.valid_to,
                    v.recorded_at,
                    v.change.value,
                    _zoning(v.attributes),
                ]
                for v in versions
            ],
        )
        rows = []
        for day in ("2026-08-04", "2026-08-08", "2026-08-14", "2026-08-20"):
            ans = src.asof(PARCEL, valid=date.fromisoformat(day))
            v = ans.version
            rows.append([day, ans.status.value, _zoning(v.attributes if v else None)])
        for day in ("2026-08-01", "2026-08-12", "2026-08-20"):
            ans = src.asof("0902-33-4", valid=date.fromisoformat(day))
            version = ans.version
            rows.append(
                [
                    f"{day} (0902-33-4)",
                    ans.status.value,
                    _zoning(version.attributes) if version else "(not yet published)",
                ]
            )
        yield Table("as-of answers", ["valid date", "status", "zoning"], rows)
    yield from zoning_report(demo)
    ws = demo.workspace
    exe = _exe()
    yield (
        f"\nDemo workspace: {ws}\nTry next:\n"
        f"  cd {ws}\n"
        f"  {exe} history {SOURCE} {PARCEL} --json\n"
        f"  {exe} asof {SOURCE} {PARCEL} --valid 2026-08-08 --known-at 2026-08-01\n"
        f"  {exe} runs {SOURCE}\n"
        f"  {exe} snapshot {SOURCE} --valid 2026-08-12\n"
        f"  {exe} archive list {SOURCE}\n"
        f"  {exe} verify {SOURCE}\n"
        f"  {exe} history {ZONING} {MOVED} --json      # each version's geometry as GeoJSON\n"
        f"  {exe} runs {ZONING}\n"
        f"\nThe dashboard (HTTP API and pages, on 127.0.0.1:8765; Ctrl-C stops it):\n"
        f"  {exe} --config {ws / 'feedledger.toml'} serve\n"
        f"  then open http://127.0.0.1:8765/sources/{SOURCE}/entities/{PARCEL}"
    )


def _exe() -> str:
    """`feedledger` if it is on PATH, else the full path of this installation's script."""
    if shutil.which("feedledger"):
        return "feedledger"
    candidate = Path(sys.executable).parent / "feedledger"
    return str(candidate) if candidate.exists() else "feedledger"


def _zoning(attrs: dict[str, Any] | None) -> str:
    if attrs is None:
        return "(deleted)"
    return str(attrs.get("zoning", ""))


def zoning_report(demo: Demo) -> Iterator[Table | str]:
    """The zoning layer's runs, MOVED's history and what became of ROTATED."""
    z = demo.zoning
    if z is None:
        return
    yield (
        "\nZoning layer: six parcels as WGS84 polygons, served during the demo by a "
        f"FeatureServer at\n  {z.url}\ndeclared as `source add {ZONING} --connector arcgis "
        "--fetch URL --key PARCEL_ID`;\neach run takes the layer's "
        "editingInfo.dataLastEditDate as the publisher date."
    )
    labels = [f"day {n + 1}" for n in range(len(z.published))] + ["run again"]
    published = [*z.published, z.published[-1]]
    rows = []
    for label, edited, r, queries in zip(
        labels, published, z.results, z.feature_queries, strict=True
    ):
        counts = r.to_json()
        rows.append(
            [
                label,
                edited,
                _status(counts),
                counts.get("added", ""),
                counts.get("changed", ""),
                counts.get("deleted", ""),
                queries,
            ]
        )
    yield Table(
        f"runs of {ZONING} (one per publication of the layer)",
        ["run", "dataLastEditDate", "status", "added", "changed", "deleted", "feature pages"],
        rows,
    )
    with fl.open(demo.workspace / "feedledger.toml") as led:
        src = led.source(ZONING)
        versions = src.history(MOVED)
        rows, before = [], None
        for v in versions:
            geometry = v.geometry
            rows.append(
                [
                    v.valid_from,
                    v.change.value,
                    "(deleted)" if v.attributes is None else v.attributes.get("ZONE", ""),
                    _changed(led, v.run_id),
                    _shape(geometry),
                    _moved(before, geometry),
                ]
            )
            before = geometry
        yield Table(
            f"history of zoning parcel {MOVED}: the geometry is kept as published",
            ["valid_from", "change", "ZONE", "geometry_changed", "geometry", "vertex moved"],
            rows,
        )
        rotated = src.history(ROTATED)
    yield (
        f"Parcel {ROTATED} was republished on day 2 with its ring starting at another "
        f"vertex:\nthe same polygon, so not a change ({len(rotated)} version"
        f"{'' if len(rotated) == 1 else 's'} in its history)."
    )
    yield (
        "The demo's FeatureServer stopped when the demo ended: in this workspace\n"
        f"`feedledger run {ZONING}` now reports its address unreachable."
    )


def _status(counts: dict[str, Any]) -> str:
    status = str(counts.get("status", ""))
    return "nothing new" if status == "nothing_to_do" else status


def _changed(led: fl.Ledger, run_id: str) -> str:
    """Whether the run's change to MOVED changed its geometry, as the ledger judged it."""
    for change in led.changes(run_id):
        if change.key in (MOVED, [MOVED]):
            flag = change.geometry_changed
            return "" if flag is None else ("yes" if flag else "no")
    return ""


def _ring(geometry: dict[str, Any] | None) -> list[tuple[float, float]]:
    """The outer ring's vertices of a Polygon or a single-part MultiPolygon."""
    if geometry is None:
        return []
    coords = geometry.get("coordinates") or []
    if geometry.get("type") == "MultiPolygon":
        coords = coords[0] if coords else []
    return [(float(p[0]), float(p[1])) for p in (coords[0] if coords else [])]


def _shape(geometry: dict[str, Any] | None) -> str:
    ring = _ring(geometry)
    if geometry is None or not ring:
        return "(none)"
    return f"{geometry.get('type')}, {len(ring)} vertices"


def _moved(before: dict[str, Any] | None, after: dict[str, Any] | None) -> str:
    """The vertices that left and the vertices that came, e.g. `(x, y) -> (x', y)`."""
    old, new = set(_ring(before)), set(_ring(after))
    if not old or not new or old == new:
        return ""
    gone = ", ".join(f"({x:.5f}, {y:.5f})" for x, y in sorted(old - new))
    came = ", ".join(f"({x:.5f}, {y:.5f})" for x, y in sorted(new - old))
    return f"{gone} -> {came}"
