"""Typed time values (date, datetime) -> what the pipeline takes (UTC microseconds).

A `date` is 00:00 of that day in the source's timezone (as `YYYY-MM-DD` is on the
command line); an aware `datetime` is that instant; a naive one is a wall-clock time in
the source's timezone, refused (ConfigError naming both readings) when daylight saving
skips or repeats it."""

from __future__ import annotations

from datetime import date, datetime

from feedledger.model.cadence import day_start_us
from feedledger.model.timeutil import from_us, local_instant, to_us, zone

When = date | datetime


def _typed(value: object, what: str) -> None:
    """Refuse in one line a time that is neither a date nor a datetime (say the text
    "2026-08-06", which date.fromisoformat makes one)."""
    if isinstance(value, date):  # (a datetime is a date)
        return
    how = " (date.fromisoformat reads a YYYY-MM-DD text)" if isinstance(value, str) else ""
    raise TypeError(
        f"{what} must be a datetime.date or datetime.datetime, "
        f"not {type(value).__name__} {value!r}{how}"
    )


def instant_us(value: When, tz: str, what: str) -> int:
    _typed(value, what)
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = local_instant(value, tz, text=value.isoformat(), what=what)
        return to_us(value)
    return day_start_us(value, tz)


def opt_instant_us(value: When | None, tz: str, what: str) -> int | None:
    return None if value is None else instant_us(value, tz, what)


def day(value: When, tz: str, what: str) -> date:
    """A window bound: a date, or the date of an instant in the source's timezone."""
    if isinstance(value, datetime):
        return from_us(instant_us(value, tz, what)).astimezone(zone(tz)).date()
    return value


def opt_dt(value: int | None) -> datetime | None:
    return None if value is None else from_us(value)
