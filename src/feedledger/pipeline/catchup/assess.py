"""Assess a window of a source before a backfill: what the archive holds, what can be
replayed, what was published late, which publication days the archive lacks but the
source's fetch location still serves (`fetchable`: a backfill fetches them first; those
not after the watermark it only archives, and `replay --from` folds them in), and
which are unrecoverable (neither archived nor served). A portal connector (Socrata,
CKAN, an ArcGIS layer) serves only its current state: every missed day before its
current publication is unrecoverable, and a catch-up records gaps for them.

The archive is the truth: its sidecars for the source are indexed first (as
`archive reindex` would), so a payload archived by a process that died before
indexing it still counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

from feedledger.context import Context
from feedledger.ledger import queries
from feedledger.model.cadence import day_start_us, expected_dates, local_date
from feedledger.model.errors import AmbiguousPayloadError, ConfigError
from feedledger.model.payload import PayloadRef
from feedledger.model.source import SourceConfig
from feedledger.model.timeutil import iso, parse_instant, zone
from feedledger.pipeline.catchup.served import offers, window_days
from feedledger.pipeline.intake.observing import observed_days


@dataclass
class Assessment:
    source: str
    start: date
    end: date
    watermark_at: int | None
    archived: list[PayloadRef] = field(default_factory=list)
    replayable: list[PayloadRef] = field(default_factory=list)
    late: list[PayloadRef] = field(default_factory=list)
    missing_dates: list[date] = field(default_factory=list)  # not archived
    timezone: str = "UTC"
    # not archived but served now by the fetch location: (day, name, publisher instant)
    fetchable: list[tuple[date, str, int | None]] = field(default_factory=list)
    fetch_checked: bool = False  # whether the fetch location was asked

    @property
    def fetchable_dates(self) -> list[date]:
        return sorted({d for d, _n, _at in self.fetchable})

    @property
    def fetchable_late_dates(self) -> list[date]:
        """The served days whose publication is not after the watermark: `backfill`
        archives them but never applies them over newer state; `replay --from` folds
        them in."""
        wm = self.watermark_at
        return sorted(
            {d for d, _n, at in self.fetchable if wm is not None and at is not None and at <= wm}
        )

    @property
    def unrecoverable_dates(self) -> list[date]:
        served = set(self.fetchable_dates)
        return [d for d in self.missing_dates if d not in served]

    @property
    def unrecoverable_days(self) -> int:
        return len(self.unrecoverable_dates)

    def to_json(self) -> dict[str, Any]:
        def brief(p: PayloadRef) -> dict[str, Any]:
            return {
                "payload_id": p.payload_id,
                "published_at": iso(p.published_at),
                "original_name": p.original_name,
                "size": p.size,
            }

        return {
            "source": self.source,
            "from": self.start.isoformat(),
            "to": self.end.isoformat(),
            "watermark_at": iso(self.watermark_at),
            "archived_payloads": len(self.archived),
            "publisher_dates": sorted(
                {local_date(p.published_at, self.timezone).isoformat() for p in self.archived}
            ),
            "replayable": [brief(p) for p in self.replayable],
            "late": [brief(p) for p in self.late],
            "missing_dates": [d.isoformat() for d in self.missing_dates],
            "unrecoverable_days": self.unrecoverable_days,
            "archived_dates": sorted(
                {local_date(p.published_at, self.timezone).isoformat() for p in self.archived}
            ),
            "fetchable": [
                {"date": d.isoformat(), "original_name": n, "published_at": iso(at)}
                for d, n, at in self.fetchable
            ],
            "fetchable_dates": [d.isoformat() for d in self.fetchable_dates],
            "fetchable_late_dates": [d.isoformat() for d in self.fetchable_late_dates],
            "unrecoverable_dates": [d.isoformat() for d in self.unrecoverable_dates],
            "fetch_checked": self.fetch_checked,
        }


def parse_day(src: SourceConfig, text: str | date, what: str) -> date:
    """A window bound: a date (or a timestamp, whose date in the source's timezone);
    given typed (the public API), a date is taken as it is."""
    if isinstance(text, date):
        return text
    return parse_instant(text, src.timezone, what=what).astimezone(zone(src.timezone)).date()


def window(src: SourceConfig, start: str | date, end: str | date) -> tuple[date, date]:
    lo, hi = parse_day(src, start, "--from"), parse_day(src, end, "--to")
    if hi < lo:
        raise ConfigError(f"--from {start} is after --to {end}", source=src.name)
    return lo, hi


def index_archive(ctx: Context, source: str) -> None:
    """Index every archived publication of `source` not yet in the store (idempotent)."""
    for ref in ctx.archive.scan(source):
        try:
            ctx.store.register_payload(ref)
        except AmbiguousPayloadError:
            continue  # the index keeps the payload it has; `archive reindex` reports these


def assess_window(ctx: Context, src: SourceConfig, lo: date, hi: date) -> Assessment:
    index_archive(ctx, src.name)
    start_us = day_start_us(lo, src.timezone)
    end_us = day_start_us(hi + timedelta(days=1), src.timezone) - 1
    archived = ctx.store.list_payloads(src.name, start_us, end_us)
    wm = ctx.store.watermark(src.name)
    wm_at = wm.published_at if wm else None
    applied = queries.applied_ids(ctx.store, src.name)
    replayable = [p for p in archived if wm_at is None or p.published_at > wm_at]
    late = [
        p
        for p in archived
        if wm_at is not None and p.published_at <= wm_at and p.payload_id not in applied
    ]
    held = {local_date(p.published_at, src.timezone) for p in archived}
    missing = [d for d in expected_dates(src.cadence, src.timezone, lo, hi) if d not in held]
    # a day a fetch observed unchanged is not missing: its state is known (invariant 12)
    seen = observed_days(ctx, src, missing)
    missing = [d for d in missing if d not in seen]
    return Assessment(
        source=src.name,
        start=lo,
        end=hi,
        watermark_at=wm_at,
        archived=archived,
        replayable=replayable,
        late=late,
        missing_dates=missing,
        timezone=src.timezone,
    )


def assess(
    ctx: Context, source: str, start: str | date, end: str | date, *, fetch: bool = True
) -> Assessment:
    """The window's assessment; with `fetch` (and a fetch location), also what the
    publisher still serves for it that the archive lacks (nothing is archived)."""
    src = ctx.workspace.source(source)
    lo, hi = window(src, start, end)
    plan = assess_window(ctx, src, lo, hi)
    if fetch and src.fetch:
        days = window_days(src, lo, hi)
        have = {p.published_at for p in plan.archived}
        have_days = {local_date(p.published_at, src.timezone) for p in plan.archived}
        plan.fetchable = [
            (o.day, o.name, o.published_at)
            for o in offers(src, days)
            if o.published_at not in have and (o.path is not None or o.day not in have_days)
        ]
        plan.fetch_checked = True
    return plan
