"""Expected publication dates of a source (its `cadence`), in the source's timezone.

`daily` expects a publication every calendar date, `weekdays` Monday to Friday, and a
5-field cron expression (croniter) every date on which it fires at least once. Used to
tell which dates of a window the archive should hold a payload for (missing dates are
what a backfill cannot replay and records as gaps).
"""

from __future__ import annotations

from datetime import date, datetime, time, timedelta

from feedledger.model.timeutil import from_us, to_us, zone


def expected_dates(cadence: str, tz: str, start: date, end: date) -> list[date]:
    """Dates in [start, end] (inclusive) on which `cadence` expects a publication."""
    if end < start:
        return []
    days = [start + timedelta(days=i) for i in range((end - start).days + 1)]
    if cadence == "daily":
        return days
    if cadence == "weekdays":
        return [d for d in days if d.weekday() < 5]
    from croniter import croniter  # lazy: croniter only for cron cadences

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


def due_at(cadence: str, tz: str, day: date, publish_at: str = "00:00") -> int:
    """When the publication of `day` is due, as UTC microseconds: `publish_at` (HH:MM,
    local) on that day; for a cron cadence, its first firing that day."""
    tzinfo = zone(tz)
    if cadence in ("daily", "weekdays"):
        hour, minute = (int(x) for x in publish_at.split(":"))
        return to_us(datetime.combine(day, time(hour, minute), tzinfo))
    from croniter import croniter  # lazy: croniter only for cron cadences

    start = datetime.combine(day, time(0), tzinfo) - timedelta(microseconds=1)
    fire: datetime = croniter(cadence, start).get_next(datetime)
    return to_us(fire)


def due_dates(
    cadence: str, tz: str, after: date, now_us: int, publish_at: str = "00:00"
) -> list[date]:
    """Expected publication dates after `after` whose publication is due by `now_us`."""
    today = local_date(now_us, tz)
    return [
        d
        for d in expected_dates(cadence, tz, after + timedelta(days=1), today)
        if due_at(cadence, tz, d, publish_at) <= now_us
    ]


def next_due(cadence: str, tz: str, now_us: int, publish_at: str = "00:00") -> int:
    """The due time of the first expected publication after `now_us`."""
    day = local_date(now_us, tz)
    for days in expected_dates(cadence, tz, day, day + timedelta(days=400)):
        at = due_at(cadence, tz, days, publish_at)
        if at > now_us:
            return at
    return now_us + 86_400_000_000


def local_date(instant_us: int, tz: str) -> date:
    """The calendar date of an instant in the source's timezone."""
    return from_us(instant_us).astimezone(zone(tz)).date()


def day_start_us(day: date, tz: str) -> int:
    """00:00 of `day` in the source's timezone, as UTC microseconds."""
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
