"""`feedledger demo`, its zoning part: the runs over the demo's FeatureServer layer and a
parcel's history with its geometry, rendered from the public API."""

from __future__ import annotations

from typing import Any

from feedledger.api.demo import MOVED, ROTATED, ZONING, Demo
from feedledger.cli.common import out, table, when


def show_zoning(demo: Demo) -> None:
    """Print the zoning layer's runs, MOVED's history and what became of ROTATED."""
    from feedledger.api.ledger import open as open_ledger

    z = demo.zoning
    if z is None:
        return
    out.print(
        "\nZoning layer: six parcels as WGS84 polygons, served during the demo by a "
        f"FeatureServer at\n  {z.url}\ndeclared as `source add {ZONING} --connector arcgis "
        "--fetch URL --key PARCEL_ID`;\neach run takes the layer's "
        "editingInfo.dataLastEditDate as the publisher date."
    )
    labels = [f"day {n + 1}" for n in range(len(z.published))] + ["run again"]
    published = [*z.published, z.published[-1]]
    rows = []
    for label, date, r, queries in zip(
        labels, published, z.results, z.feature_queries, strict=True
    ):
        counts = r.to_json()
        rows.append(
            [
                label,
                when(date),
                _status(counts),
                counts.get("added", ""),
                counts.get("changed", ""),
                counts.get("deleted", ""),
                queries,
            ]
        )
    table(
        f"runs of {ZONING} (one per publication of the layer)",
        ["run", "dataLastEditDate", "status", "added", "changed", "deleted", "feature pages"],
        rows,
    )
    with open_ledger(demo.workspace / "feedledger.toml") as led:
        src = led.source(ZONING)
        versions = src.history(MOVED)
        rows, before = [], None
        for v in versions:
            geometry = v.geometry
            rows.append(
                [
                    when(v.valid_from),
                    v.change.value,
                    "(deleted)" if v.attributes is None else v.attributes.get("ZONE", ""),
                    _changed(led, v.run_id),
                    _shape(geometry),
                    _moved(before, geometry),
                ]
            )
            before = geometry
        table(
            f"history of zoning parcel {MOVED}: the geometry is kept as published",
            ["valid_from", "change", "ZONE", "geometry_changed", "geometry", "vertex moved"],
            rows,
        )
        rotated = src.history(ROTATED)
    out.print(
        f"Parcel {ROTATED} was republished on day 2 with its ring starting at another "
        f"vertex:\nthe same polygon, so not a change ({len(rotated)} version"
        f"{'' if len(rotated) == 1 else 's'} in its history)."
    )
    out.print(
        "The demo's FeatureServer stopped when the demo ended: in this workspace\n"
        f"`feedledger run {ZONING}` now reports its address unreachable."
    )


def _status(counts: dict[str, Any]) -> str:
    status = str(counts.get("status", ""))
    return "nothing new" if status == "nothing_to_do" else status


def _changed(led: Any, run_id: str) -> str:
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
