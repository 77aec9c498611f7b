"""Facts recorded by hand: a gap (`gap add`), a freeze (`freeze` / `thaw`)."""

from __future__ import annotations

from datetime import date, timedelta

from sqlalchemy import Connection

from feedledger.context import Context
from feedledger.ledger import freezes, gaps, leases
from feedledger.ledger.freezes import Freeze
from feedledger.ledger.records import Gap
from feedledger.ledger.retraction import commit_time, standing
from feedledger.model.cadence import day_start_us, local_date
from feedledger.model.errors import ConfigError
from feedledger.model.types import RunKind
from feedledger.pipeline.assess import window


def add_gap(ctx: Context, source: str, start: str | date, end: str | date, reason: str) -> Gap:
    """Record that `source` was not observed from `start` to `end` (dates, inclusive),
    as a run of kind `manual` (so it can be retracted by its run id)."""
    src = ctx.workspace.source(source)
    lo, hi = window(src, start, end)
    if not reason.strip():
        raise ConfigError("--reason must say why the source was not observed", source=src.name)
    start_us = day_start_us(lo, src.timezone)
    end_us = day_start_us(hi + timedelta(days=1), src.timezone)
    store = ctx.store
    with store.engine.connect() as conn:  # checked before the lease: a refusal leaves no trace
        _check_unobserved(conn, src.name, src.timezone, start_us, end_us, f"{lo}..{hi}")
    with leases.leased_run(store, src.name, RunKind.MANUAL.value) as run, store.begin() as conn:
        leases.check_held(conn, src.name, run.holder, run.run_id)
        _check_unobserved(conn, src.name, src.timezone, start_us, end_us, f"{lo}..{hi}")
        _wm, at = commit_time(store, conn, src.name)
        gaps.record(
            conn, src.name, [(start_us, end_us)], reason=reason, run_id=run.run_id, recorded_at=at
        )
    found = [g for g in gaps.listing(store, src.name) if g.run_id == run.run_id]
    return found[0]


def _check_unobserved(
    conn: Connection, source: str, tz: str, start_us: int, end_us: int, label: str
) -> None:
    inside = [a for a in standing(conn, source) if start_us <= a.published_at < end_us]
    if inside:
        days = sorted({local_date(a.published_at, tz) for a in inside})
        raise ConfigError(
            f"payloads published on {', '.join(map(str, days))} were applied inside "
            f"{label}: those days were observed; nothing was recorded",
            source=source,
            hint="a gap covers only days with no applied payload",
        )
    if gaps.covering(conn, source, start_us, end_us):
        raise ConfigError(f"a gap for {label} is already recorded; nothing changed", source=source)


def freeze(ctx: Context, source: str, reason: str | None) -> tuple[Freeze, bool]:
    src = ctx.workspace.source(source)
    return freezes.freeze(ctx.store, src.name, reason)


def thaw(ctx: Context, source: str) -> bool:
    src = ctx.workspace.source(source)
    return freezes.thaw(ctx.store, src.name)
