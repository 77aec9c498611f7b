"""A source's publication calendar (the dashboard's source page): one cell per expected
publication day of a window (and per day a publication arrived on outside the
cadence), each saying what became of that day's publication and naming its run."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from enum import StrEnum
from typing import Any

from feedledger.api._deprecated import deprecated
from feedledger.api.results import Gap
from feedledger.context import Context
from feedledger.model.cadence import day_start_us, expected_dates, local_date
from feedledger.model.source import SourceConfig
from feedledger.model.timeutil import from_us, now_us, to_us

# the longest window one calendar shows (a year and a day)
MAX_DAYS = 366


class DayState(StrEnum):
    LIVE = "live"  # applied by a live run
    BACKFILL = "backfill"  # applied by a backfill or replay run
    HELD = "held"  # applied by a live run held for review
    RETRACTED = "retracted"  # applied, then retracted (nothing applied since)
    GAP = "gap"  # inside a standing gap: "not observed"
    LATE = "late"  # archived after a newer publication was applied: never applied
    WAITING = "waiting"  # archived after the watermark, not applied yet
    MISSED = "missed"  # expected, nothing archived, no gap recorded


@dataclass(frozen=True)
class CalendarDay:
    day: date
    expected: bool  # the cadence expects a publication on this day
    state: DayState
    run_id: str | None = None  # the run that applied (held, retracted) it
    payload_id: str | None = None
    published_at: datetime | None = None
    recorded_at: datetime | None = None
    gap_reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "day": self.day.isoformat(),
            "expected": self.expected,
            "state": self.state.value,
            "run_id": self.run_id,
            "payload_id": self.payload_id,
            "published_at": None if self.published_at is None else self.published_at.isoformat(),
            "recorded_at": None if self.recorded_at is None else self.recorded_at.isoformat(),
            "gap_reason": self.gap_reason,
        }


@dataclass(frozen=True)
class Calendar:
    source: str
    cadence: str
    timezone: str
    start: date
    end: date
    days: list[CalendarDay]

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "cadence": self.cadence,
            "timezone": self.timezone,
            "start": self.start.isoformat(),
            "end": self.end.isoformat(),
            "days": [d.to_json() for d in self.days],
        }


def calendar(
    ledger: Any, source: str, start: date | None = None, end: date | None = None
) -> Calendar:
    """Deprecated: `ledger.source(source).calendar(start, end)` (`ledger` a `Ledger`;
    typed loosely so that this module does not import the one that imports it)."""
    deprecated(
        "feedledger.api.calendar.calendar(led, source, ...)", "led.source(source).calendar(...)"
    )
    found: Calendar = ledger.source(source).calendar(start, end)
    return found


def build(
    ctx: Context, cfg: SourceConfig, gaps: list[Gap], start: date | None, end: date | None
) -> Calendar:
    """`Source.calendar`: the calendar of the source `cfg` (its standing `gaps`) from
    `start` to `end` (inclusive; defaults: its first publication or gap, and today in
    its timezone), at most MAX_DAYS days (the last)."""
    from feedledger.ledger.views.calendar import applied_payloads  # lazy: SQLAlchemy, Arrow

    source, tz = cfg.name, cfg.timezone
    store = ctx.store
    payloads = store.list_payloads(source)
    hi = end or local_date(now_us(), tz)
    if start is None:
        firsts = [local_date(p.published_at, tz) for p in payloads[:1]]
        firsts += [local_date(_us(g.start), tz) for g in gaps]
        start = min(firsts) if firsts else hi
    lo = max(start, hi - timedelta(days=MAX_DAYS - 1))
    lo_us, hi_us = day_start_us(lo, tz), day_start_us(hi + timedelta(days=1), tz) - 1
    wm = store.watermark(source)
    applied: dict[date, Any] = {}
    retracted: dict[date, Any] = {}
    for a in applied_payloads(store, source, lo_us, hi_us):
        (retracted if a.retracted_at is not None else applied)[local_date(a.published_at, tz)] = a
    inside = [p for p in payloads if lo_us <= p.published_at <= hi_us]
    archived = {local_date(p.published_at, tz): p for p in inside}
    expected = set(expected_dates(cfg.cadence, tz, lo, hi))
    days = sorted(expected | set(applied) | set(retracted) | set(archived))
    cells = []
    for d in days:
        at = day_start_us(d, tz)
        gap = next((g for g in gaps if _us(g.start) <= at < _us(g.end)), None)
        cells.append(_cell(d, d in expected, applied.get(d), retracted.get(d), gap,
                           archived.get(d), None if wm is None else wm.published_at))  # fmt: skip
    return Calendar(source, cfg.cadence, tz, lo, hi, cells)


def _us(value: datetime) -> int:
    return to_us(value)


def _cell(
    d: date, expected: bool, app: Any, gone: Any, gap: Any, payload: Any, wm_at: int | None
) -> CalendarDay:
    if app is not None or gone is not None:
        a = app if app is not None else gone
        if app is None:
            state = DayState.RETRACTED
        elif a.status == "held":
            state = DayState.HELD
        elif a.kind in ("backfill", "replay"):
            state = DayState.BACKFILL
        else:
            state = DayState.LIVE
        return CalendarDay(
            d, expected, state, a.run_id, a.payload_id, from_us(a.published_at),
            from_us(a.recorded_at),
        )  # fmt: skip
    if gap is not None:
        return CalendarDay(d, expected, DayState.GAP, gap.run_id, gap_reason=gap.reason)
    if payload is not None:
        late = wm_at is not None and payload.published_at <= wm_at
        return CalendarDay(
            d, expected, DayState.LATE if late else DayState.WAITING,
            payload_id=payload.payload_id, published_at=from_us(payload.published_at),
        )  # fmt: skip
    return CalendarDay(d, expected, DayState.MISSED)
