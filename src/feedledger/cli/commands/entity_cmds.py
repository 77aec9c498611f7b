"""Entity commands: `history` (optionally with gaps) and `asof`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from feedledger.cli.common import (
    JSON_OPT,
    emit_json,
    instant,
    ledger,
    opt_instant,
    out,
    show,
    table,
    when,
)

if TYPE_CHECKING:
    from feedledger.api.results import Gap, Version


def history_cmd(
    ctx: typer.Context,
    source: str = typer.Argument(...),
    key: str = typer.Argument(..., help="Key value; compound keys as a JSON array."),
    all_: bool = typer.Option(False, "--all", help="Include retracted versions."),
    known_at: str | None = typer.Option(
        None, "--known-at", help="As the ledger believed at this time."
    ),
    with_gaps: bool = typer.Option(
        False,
        "--with-gaps",
        help="Also show the source's gaps (stretches not observed) between versions; "
        'JSON items then carry "type": "version" or "gap".',
    ),
    json_out: bool = JSON_OPT,
) -> None:
    """Versions of one entity in valid-time order (valid_to derived)."""
    from feedledger.api.results import Version  # lazy: --help loads no API

    with ledger(ctx) as led:
        src = led.source(source)
        geo = src.config.is_geo
        known = opt_instant(known_at, src.config.timezone, "--known-at")
        if with_gaps:
            line = src.history_with_gaps(key, known_at=known, include_retracted=all_)
        else:
            versions = src.history(key, known_at=known, include_retracted=all_)
    if with_gaps:
        items = [
            {"type": "version" if isinstance(i, Version) else "gap", **i.to_json()} for i in line
        ]
        if json_out:
            emit_json(items)
            return
        table(
            f"{source} {key} (with gaps)",
            ["from", "to", "recorded_at", "what", "run_id"],
            [_timeline_row(i) for i in items],
            fold=True,
        )
        return
    if json_out:
        emit_json([v.to_json() for v in versions])
        return
    columns = ["valid_from", "valid_to", "recorded_at", "change", "attributes"]
    columns += ["geometry"] if geo else []  # a GIS source: the geometry in short
    columns += ["run_id", "backfill", "retracted_at"]
    table(
        f"{source} {key}",
        columns,
        [
            [
                when(v.valid_from),
                when(v.valid_to),
                when(v.recorded_at),
                v.change.value,
                _state(v),
                *([geometry_summary(v.geometry)] if geo else []),
                v.run_id[:8],
                v.to_json()["backfill"],
                when(v.retracted_at),
            ]
            for v in versions
        ],
        fold=True,  # the attribute JSON is shown whole, wrapped, never cut
    )


def asof_cmd(
    ctx: typer.Context,
    source: str = typer.Argument(...),
    key: str = typer.Argument(..., help="Key value; compound keys as a JSON array."),
    valid: str = typer.Option(..., "--valid", help="Valid time: what was true then?"),
    known_at: str | None = typer.Option(
        None, "--known-at", help="Transaction time: as believed then."
    ),
    json_out: bool = JSON_OPT,
) -> None:
    """What was KEY at valid time D (optionally as known at TS)?
    present|absent|not_observed|not_known.

    A key the source never had: exit 3, as history (not_known, and not_observed inside
    a gap or before the source's first observation, answer for every key)."""
    with ledger(ctx) as led:
        src = led.source(source)
        tz = src.config.timezone
        answer = src.asof(
            key,
            valid=instant(valid, tz, "--valid"),
            known_at=opt_instant(known_at, tz, "--known-at"),
        )
    if json_out:
        emit_json(answer.to_json())
        return
    v = answer.version
    detail = (
        (f" since {v.valid_from.isoformat()} (recorded {v.recorded_at.isoformat()}): {_state(v)}")
        if v
        else ""
    )
    if v is not None and src.config.is_geo and not v.deleted:
        detail += f"; geometry: {geometry_summary(v.geometry)}"
    if answer.status == "not_observed":
        gap: Gap | None = answer.gap
        last, nxt, nxt_at = answer.last_observed, answer.next_observed, answer.next_observed_at
        where = (
            f"inside a gap {gap.start.isoformat()} .. {gap.end.isoformat()}: {gap.reason}"
            if gap is not None
            else f"before the first observation of {source}"
        )
        detail = f" ({where}); last observed: {_seen(last)}; next observed: " + (
            f"{_seen(nxt)} (payload of {nxt_at.isoformat()})" if nxt_at else "nothing yet"
        )
    elif answer.status == "not_known":
        first = answer.first_recorded_at
        detail = f" (nothing of {source} was recorded " + (
            f"before {first.isoformat()})" if first else "yet)"
        )
    out.print(f"{source} {key} at {valid}: {answer.status.value}{detail}")


def _state(v: Version) -> str:
    """The record as stored (canonical JSON text), or `(deleted)` for a tombstone."""
    attrs = v.to_json()["attributes"]
    return show(attrs) if attrs is not None else "(deleted)"


def geometry_summary(geometry: dict[str, Any] | None) -> str:
    """A geometry in short for a table: its type and vertex count (`Polygon, 5
    vertices`), `-` when there is none."""
    if not geometry:
        return "-"
    kind = str(geometry.get("type", "?"))
    if kind == "GeometryCollection":
        parts = geometry.get("geometries") or []
        return f"{kind} of {len(parts)}, {sum(_vertices(g) for g in parts):,} vertices"
    n = _vertices(geometry)
    return f"{kind}, {n:,} vert{'ex' if n == 1 else 'ices'}"


def _vertices(geometry: dict[str, Any]) -> int:
    """Positions in a GeoJSON geometry's coordinates (nested lists of numbers)."""
    if geometry.get("type") == "GeometryCollection":
        return sum(_vertices(g) for g in geometry.get("geometries") or [])
    stack: list[Any] = [geometry.get("coordinates")]
    count = 0
    while stack:
        item = stack.pop()
        if isinstance(item, list) and item:
            if isinstance(item[0], int | float):
                count += 1
            else:
                stack.extend(item)
    return count


def _seen(v: Version | None) -> str:
    if v is None:
        return "nothing"
    return f"{_state(v)} from {v.valid_from.isoformat()}"


def _timeline_row(item: dict[str, Any]) -> list[Any]:
    """One line of `history --with-gaps` for humans (timestamps as ISO text)."""
    if item["type"] == "gap":
        return [
            item["start"],
            item["end"],
            item["recorded_at"],
            f"NOT OBSERVED: {item['reason']}",
            item["run_id"][:8],
        ]
    attrs = item["attributes"]
    return [
        item["valid_from"],
        item["valid_to"] or "",
        item["recorded_at"],
        show(attrs) if attrs is not None else "(deleted)",
        item["run_id"][:8],
    ]
