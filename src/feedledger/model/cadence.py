"""Expected publication dates of a source (its `cadence`), in the source's timezone.

`daily` expects a publication every calendar date, `weekdays` Monday to Friday, and a
5-field cron expression (croniter) every date on which it fires at least once. Used to
tell which dates of a window the archive should hold a payload for (missing dates are
what a backfill cannot replay and records as gaps).
"""

from __future__ import annotations

from datetime import date, datetime, time, timedelta

from feedledger.model.timeutil import zone


def expected_dates(cadence: str, tz: str, start: date, end: date) -> list[date]:
    """Dates in [start, end] (inclusive) on which `cadence` expects a publication."""
    if end < start:
        return []
    days = [start + timedelta(days=i) for i in range((end - start).days + 1)]
    if cadence == "daily":
        return days
    if cadence == "weekdays":
        return [d for d in days if d.weekday() < 5]
    from croniter import croniter

    tzinfo = zone(tz)
    first = datetime.combine(start, time(0), tzinfo) - timedelta(microseconds=1)
    last = datetime.combine(end + timedelta(days=1), time(0), tzinfo)
    it = croniter(cadence, first)
    seen: list[date] = []
    while True:
        fire: datetime = it.get_next(datetime)
        if fire >= last:
            return seen
        local = fire.astimezone(tzinfo).date()
        if not seen or seen[-1] != local:
            seen.append(local)


def local_date(instant_us: int, tz: str) -> date:
    """The calendar date of an instant in the source's timezone."""
    from feedledger.model.timeutil import from_us

    return from_us(instant_us).astimezone(zone(tz)).date()


def day_start_us(day: date, tz: str) -> int:
    """00:00 of `day` in the source's timezone, as UTC microseconds."""
    from feedledger.model.timeutil import to_us

    return to_us(datetime.combine(day, time(0), zone(tz)))


def stretches(days: list[date]) -> list[tuple[date, date]]:
    """Consecutive runs of sorted dates as (first, last) pairs."""
    out: list[tuple[date, date]] = []
    for d in days:
        if out and out[-1][1] + timedelta(days=1) == d:
            out[-1] = (out[-1][0], d)
        else:
            out.append((d, d))
    return out
