"""Facts recorded by hand: a gap (`gap add`), a freeze (`freeze` / `thaw`)."""

from __future__ import annotations

from datetime import date, timedelta

from feedledger.context import Context
from feedledger.ledger import gaps
from feedledger.ledger.gaps import manual as manual_gaps
from feedledger.ledger.records import Gap
from feedledger.ledger.runs import freezes, leases
from feedledger.ledger.runs.freezes import Freeze
from feedledger.model.cadence import day_start_us
from feedledger.model.errors import ConfigError
from feedledger.model.types import RunKind
from feedledger.pipeline.catchup.assess import window


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
    label = f"{lo}..{hi}"
    manual_gaps.precheck(store, src.name, src.timezone, start_us, end_us, label)
    with leases.leased_run(store, src.name, RunKind.MANUAL.value) as run:
        manual_gaps.record_by_hand(
            store,
            src.name,
            src.timezone,
            start_us,
            end_us,
            label,
            reason=reason,
            holder=run.holder,
            run_id=run.run_id,
        )
    found = [g for g in gaps.listing(store, src.name) if g.run_id == run.run_id]
    return found[0]


def freeze(ctx: Context, source: str, reason: str | None) -> tuple[Freeze, bool]:
    src = ctx.workspace.source(source)
    return freezes.freeze(ctx.store, src.name, reason)


def thaw(ctx: Context, source: str) -> bool:
    src = ctx.workspace.source(source)
    return freezes.thaw(ctx.store, src.name)
