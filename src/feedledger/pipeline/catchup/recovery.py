"""Recovering missed publications the right way (never a naive catch-up): first fill
the archive with every dated publication the publisher still serves for the missed
days, then backfill -- each archived payload applied in publisher order at its own
publisher date, notifications suppressed, ONE summary, and gap records for the days
nobody can have any more.

`waiting` decides, and `recover` acts, for every entry point: the scheduler's
attempts and `feedledger run` / `run_source` (docs/architecture.md, Invariant 5: when several
publications are waiting, every one the source still serves is applied, oldest first).

The backfill window ends at the newest publication obtained: days after it are not
lost yet (the publisher may only be late), so they stay missed and are tried again.
An unfinished recovery is resumed under its run id (ledger/runs/backfills.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import Any

from feedledger.context import Context
from feedledger.model.cadence import local_date
from feedledger.model.errors import FeedledgerError
from feedledger.model.payload import PayloadRef
from feedledger.model.source import SourceConfig
from feedledger.model.timeutil import now_us
from feedledger.pipeline.catchup.assess import index_archive
from feedledger.pipeline.catchup.backfill import Progress, RunReport, backfill
from feedledger.pipeline.catchup.served import fill
from feedledger.pipeline.health import missed_dates
from feedledger.pipeline.intake.observing import observed


@dataclass
class Recovery:
    source: str
    days: list[date]
    archived: list[PayloadRef] = field(default_factory=list)  # new to the archive
    report: RunReport | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "missed_dates": [d.isoformat() for d in self.days],
            "archived_now": len(self.archived),
            "backfill": self.report.to_json() if self.report is not None else None,
        }


def waiting(ctx: Context, src: SourceConfig, now: int) -> list[date]:
    """The publication days waiting after the watermark: those the cadence expected by
    `now` (minus recorded gaps), plus those of the dated files a directory holds after
    the watermark. A source never applied waits for every dated file its directory
    holds, when it holds more than one (its first run loads them all, oldest first:
    Invariant 5); else for nothing (the first run takes the newest: a `{date}` template
    or a URL cannot say how far back its publications go)."""
    wm = ctx.store.watermark(src.name)
    first = wm is None or wm.published_at is None
    days = set() if first else set(missed_dates(ctx, src, now))
    location = (src.fetch or "").strip()
    from feedledger.sources import list_dated, location_directory, location_kind  # lazy: httpx

    if location and location_kind(location) == "directory":
        try:
            listed = list_dated(location_directory(location), src.timezone, source=src.name)
        except FeedledgerError:
            listed = []  # an unreadable location: the fetch itself reports it
        after = None if wm is None else wm.published_at
        for instant, _path in listed:
            if after is None or instant > after:
                days.add(local_date(instant, src.timezone))
    if first and len(days) < 2:
        return []
    return sorted(days)


def served(
    ctx: Context, src: SourceConfig, days: list[date], *, allow_future: bool = False
) -> list[PayloadRef]:
    """Archive what the publisher still serves for `days` (pipeline/catchup/served.py)."""
    return fill(ctx, src, days, allow_future=allow_future)


def recover(
    ctx: Context,
    src: SourceConfig,
    days: list[date],
    *,
    progress: Progress | None = None,
    allow_future: bool = False,
    now: int | None = None,
) -> Recovery:
    """Fill the archive for the missed `days`, then backfill from the first of them to
    the newest publication the archive now holds. A source serving its current state
    (a portal, a URL) was observed at `now` when that succeeded (pipeline/intake/observing)."""
    out = Recovery(src.name, days)
    out.archived = served(ctx, src, days, allow_future=allow_future)
    index_archive(ctx, src.name)
    wm = ctx.store.watermark(src.name)
    after = wm.published_at if wm is not None else None
    held = [p for p in ctx.store.list_payloads(src.name) if after is None or p.published_at > after]
    if not held:
        return out  # nothing to replay yet: the days stay missed, tried again later
    last = local_date(held[-1].published_at, src.timezone)
    report = backfill(
        ctx,
        src.name,
        days[0].isoformat(),
        max(last, days[0]).isoformat(),
        fetch=False,
        progress=progress,
    )
    if isinstance(report, RunReport):
        out.report = report
        report.fetched = out.archived
        observed(ctx, src, now if now is not None else now_us(), held[-1].published_at)
    return out
