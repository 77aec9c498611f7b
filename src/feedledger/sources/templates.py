"""Dated fetch locations: a URL or directory path carrying the publication date, as
`{date}` (ISO, 2026-08-06) or `{date:%Y%m%d}` (any strftime format) -- e.g.
`https://county.example/parcels_{date}.csv`. A template reaches any publication the
publisher still serves, not only the newest: that is what fills the archive before a
backfill (`served`)."""

from __future__ import annotations

import re
from datetime import date, datetime, time, timedelta

from feedledger.model.cadence import expected_dates, local_date
from feedledger.model.errors import ConfigError, FeedledgerError, NotFoundError
from feedledger.model.source import SourceConfig
from feedledger.model.timeutil import now_us, to_us, zone
from feedledger.sources.dated import Fetched
from feedledger.sources.location import fetch_location

_FIELD_RE = re.compile(r"\{date(?::([^{}]*))?\}")


def is_template(location: str | None) -> bool:
    return bool(location) and _FIELD_RE.search(location or "") is not None


def for_day(location: str, day: date) -> str:
    """The location of `day`'s publication."""

    def fill(match: re.Match[str]) -> str:
        fmt = match.group(1)
        return day.isoformat() if not fmt else day.strftime(fmt)

    return _FIELD_RE.sub(fill, location)


def fetch_day(src: SourceConfig, day: date) -> Fetched | None:
    """`day`'s publication, or None when the publisher does not serve it (HTTP 404 or
    410, no such file)."""
    if src.fetch is None or not is_template(src.fetch):
        raise ConfigError("the fetch location carries no {date}", source=src.name)
    one = src.model_copy(update={"fetch": for_day(src.fetch, day)})
    try:
        got = fetch_location(one, (one.fetch or "").strip(), single=True)
    except NotFoundError:
        return None
    except FeedledgerError as exc:
        if re.search(r"HTTP (404|410)\b", exc.problem):
            return None
        raise
    if got.published_at is None and src.published_from.by_filename:
        # the template carries the date even where the name does not show it
        start = to_us(datetime.combine(day, time(0), zone(src.timezone)))
        got = Fetched(
            got.data, start, got.original_name, got.content_type, got.etag, got.last_modified
        )
    return got


def newest_of_template(src: SourceConfig, now: int | None, days_back: int = 31) -> Fetched:
    """The newest publication the template reaches, trying the newest expected date
    first and going back at most `days_back` days. `now`: the caller's clock."""
    today = local_date(now if now is not None else now_us(), src.timezone)
    days = expected_dates(src.cadence, src.timezone, today - timedelta(days=days_back), today)
    for day in reversed(days):
        got = fetch_day(src, day)
        if got is not None:
            return got
    raise NotFoundError(
        f"the publisher serves none of the last {days_back} days' publications at {src.fetch}",
        source=src.name,
    )
