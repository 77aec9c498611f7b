"""A Dagster partition selection as ONE feedledger backfill window.

Dagster hands a run its partition keys in the partitions' own order: for dynamic
partitions the order they were added in, which is not publisher order when a late
publication was archived after a newer one (dagster-io/dagster#28693). feedledger
does not need that order: the keys are publication dates, and a backfill over
[earliest, latest] applies every archived payload of the window after the watermark,
oldest first, as one run with one run id, one summary and gap records for the days
the archive does not hold. So whatever order the keys arrive in, and whether Dagster
runs them as one range or one by one, the ledger sees publisher order.

The window never starts after a publication still waiting: a selection beginning
after the oldest archived publication not yet applied starts on that publication's
day instead, since feedledger applies every waiting publication, oldest first, never
only a newer one (Invariant 5; otherwise the skipped one would become late).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from zoneinfo import ZoneInfo


@dataclass(frozen=True)
class Window:
    start: date
    end: date
    selected: list[date]  # the partition keys, as publication dates, ascending
    extended: bool  # the start moved back to the oldest waiting publication


def publication_day(when: datetime, timezone: str) -> date:
    """A publisher instant's date in the source's timezone: its partition key."""
    return when.astimezone(ZoneInfo(timezone)).date()


def partition_key(when: datetime, timezone: str) -> str:
    return publication_day(when, timezone).isoformat()


def parse_keys(keys: Sequence[str]) -> list[date]:
    """Partition keys (YYYY-MM-DD), in whatever order, as ascending distinct dates."""
    days: set[date] = set()
    for key in keys:
        try:
            days.add(date.fromisoformat(key))
        except ValueError as exc:
            raise ValueError(f"partition key {key!r} is not a publication date YYYY-MM-DD") from exc
    if not days:
        raise ValueError("no partition selected")
    return sorted(days)


def window(keys: Sequence[str], oldest_waiting: date | None) -> Window:
    """The backfill window of a selection of partition keys (module doc);
    `oldest_waiting`: the day of the oldest archived publication after the watermark."""
    days = parse_keys(keys)
    start, end = days[0], days[-1]
    extended = False
    if oldest_waiting is not None and oldest_waiting < start <= end:
        start, extended = oldest_waiting, True
    return Window(start, end, days, extended)
