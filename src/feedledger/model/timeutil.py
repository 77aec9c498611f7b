"""Time parsing and the storage representation of instants.

All instants are stored as integer microseconds since the Unix epoch, UTC
(`BIGINT` on both backends): exact, sortable, identical on SQLite and PostgreSQL.
A date without a time means 00:00 in the source's timezone; a local time the source's
timezone skips or repeats (daylight saving) is refused unless given with an offset.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from feedledger.model.errors import ConfigError, FutureDateError

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ConfigError(
            f"unknown timezone {name!r} (use an IANA name such as 'America/Denver' or 'UTC')"
        ) from exc


def parse_instant(text: str, tz: str = "UTC", *, what: str = "timestamp") -> datetime:
    """Parse `YYYY-MM-DD` (midnight in `tz`) or an ISO-8601 timestamp into aware UTC.

    A timestamp without an offset is read in `tz`.
    """
    raw = text.strip()
    if not raw:
        raise ConfigError(f"empty {what}; expected YYYY-MM-DD or an ISO-8601 timestamp")
    try:
        if _DATE_RE.match(raw):
            local = datetime.combine(date.fromisoformat(raw), time(0), tzinfo=zone(tz))
            return local.astimezone(UTC)
        value = datetime.fromisoformat(raw.replace("Z", "+00:00") if raw.endswith("Z") else raw)
    except ValueError as exc:
        if _DATE_RE.match(raw[:10]) and not _calendar_day(raw[:10]):
            # the right shape, but no calendar holds it (2026-02-30, month 13, year 0)
            raise ConfigError(
                f"cannot parse {what} {text!r}: {raw[:10]} is no day on the calendar "
                "(YYYY-MM-DD: a month 01-12 and a day that month has)"
            ) from exc
        raise ConfigError(
            f"cannot parse {what} {text!r}: expected YYYY-MM-DD or an ISO-8601 timestamp "
            "such as 2026-08-06T14:30:00Z"
        ) from exc
    if value.tzinfo is None:
        value = local_instant(value, tz, text=raw, what=what)
    return value.astimezone(UTC)


def _calendar_day(text: str) -> bool:
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


def local_instant(value: datetime, tz: str, *, text: str, what: str) -> datetime:
    """A naive wall-clock time read in `tz`. A time the clocks skip (spring forward) or
    pass twice (fall back) has two readings: refused, naming both, so the caller gives
    an offset instead of feedledger guessing one."""
    z = zone(tz)
    first, second = value.replace(tzinfo=z, fold=0), value.replace(tzinfo=z, fold=1)
    if first.utcoffset() == second.utcoffset():
        return first
    exists = first.astimezone(UTC).astimezone(z).replace(tzinfo=None) == value
    problem = (
        "occurs twice there (the clocks go back)"
        if exists
        else "does not exist there (the clocks skip it)"
    )
    readings = " or ".join(
        f"{r.isoformat()} (= {r.astimezone(UTC).isoformat()})"
        for r in sorted((first, second), key=lambda r: r.astimezone(UTC))
    )
    raise ConfigError(
        f"{what} {text!r} is a local time in {tz} that {problem}: it could mean {readings}; "
        "give it with its offset"
    )


DAY_US = 86_400_000_000


def check_not_future(
    value_us: int, now_us: int, *, what: str = "publisher date", allow_future: bool = False
) -> int:
    """A publisher date more than a day after `now_us` (the caller's clock: the fetch
    time) is refused unless `allow_future`: applied, it would put the watermark in the
    future and refuse every later live payload as 'not after the watermark'."""
    if allow_future or value_us <= now_us + DAY_US:
        return value_us
    err = FutureDateError(
        f"{what} {iso(value_us)} is more than a day after now ({iso(now_us)}): a future "
        "publisher date would hold back every later payload (check the date; pass "
        "--allow-future if the publisher really dates it so)"
    )
    err.published_at = value_us
    raise err


def to_us(value: datetime) -> int:
    """Aware datetime -> integer microseconds since the epoch (UTC)."""
    if value.tzinfo is None:
        raise ValueError("naive datetime given; all instants must be timezone-aware")
    delta = value - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


# the instants a datetime can hold (years 1 to 9999), as us UTC
MIN_US = -62_135_596_800_000_000
MAX_US = 253_402_300_799_999_999


def epoch_us(value: object, unit_us: int) -> int | None:
    """A number a publisher states as an epoch time in units of `unit_us` microseconds
    (1_000: milliseconds, 1_000_000: seconds) as us UTC; None where it is not one -- not
    a number (a bool, text), NaN or infinite, or outside years 1 to 9999 -- so the caller
    refuses it in one line instead of an OverflowError or ValueError from deep inside."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    us = int(value) * unit_us  # a fraction of the unit is dropped, as int() does
    return us if MIN_US <= us <= MAX_US else None


def from_us(value: int) -> datetime:
    return _EPOCH + timedelta(microseconds=value)


def iso(value: int | None) -> str | None:
    """Storage microseconds -> ISO-8601 UTC text (`2026-08-06T06:00:00+00:00`), None kept."""
    if value is None:
        return None
    return from_us(value).isoformat()


def now_us() -> int:
    return to_us(datetime.now(UTC))
