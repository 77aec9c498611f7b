"""What the publisher still serves, and filling the archive from it -- the first step
of every catch-up (`run`, the scheduler's recovery, `backfill`) and what `assess` calls
"fetchable now".

* a directory: its dated files (listed without reading them);
* a `{date}` template: one fetch per wanted day (404/410 or no such file: not served);
* a plain URL: only what it serves now (one fetch);
* a portal connector (Socrata, CKAN, ArcGIS): likewise only now -- a portal serves its
  current state, never a past day's -- and its rows are downloaded only when the
  portal's publisher date falls in the wanted days.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from feedledger.context import Context
from feedledger.model.cadence import day_start_us, expected_dates, local_date
from feedledger.model.errors import AmbiguousPayloadError, StaleWatermarkError
from feedledger.model.payload import PayloadRef
from feedledger.model.source import SourceConfig
from feedledger.pipeline.intake.archiving import archive_add

if TYPE_CHECKING:
    from feedledger.sources.dated import Fetched


@dataclass(frozen=True)
class Offer:
    """One publication the publisher serves for a wanted day (not yet downloaded for a
    directory: `path`)."""

    day: date
    name: str
    published_at: int | None
    path: Path | None = None
    fetched: Fetched | None = None


def window_days(src: SourceConfig, lo: date, hi: date) -> list[date]:
    """The days of [lo, hi] worth asking the publisher for: every day from a directory
    (listing it costs nothing), the cadence's days from a template or a URL."""
    from feedledger.sources import location_kind  # lazy: the fetchers load httpx

    if src.fetch and location_kind(src.fetch.strip()) == "directory":
        return [lo + timedelta(days=i) for i in range((hi - lo).days + 1)]
    return expected_dates(src.cadence, src.timezone, lo, hi)


def offers(src: SourceConfig, days: list[date]) -> list[Offer]:
    """The publications the source's fetch location serves for `days`, oldest first.
    An unreachable publisher raises (nothing is called lost while it cannot be asked)."""
    from feedledger.sources import (  # lazy: httpx
        fetch,
        fetch_day,
        list_dated,
        location_directory,
        location_kind,
    )

    if not src.fetch or not days:
        return []
    wanted = set(days)
    location = src.fetch.strip()
    kind = location_kind(location)
    found: list[Offer] = []
    if kind == "directory":
        for instant, path in list_dated(
            location_directory(location), src.timezone, source=src.name
        ):
            day = local_date(instant, src.timezone)
            if day in wanted:
                found.append(Offer(day, path.name, instant, path=path))
        return found
    if src.connector is not None:
        got = _connector_now(src, min(days))
    else:
        got = (
            [f for f in (fetch_day(src, d) for d in days) if f is not None]
            if kind == "template"
            else [fetch(src)]
        )
    for f in got:
        if f.data is None or f.published_at is None:
            continue
        day = local_date(f.published_at, src.timezone)
        if day in wanted:
            found.append(Offer(day, f.original_name, f.published_at, fetched=f))
    return found


def _connector_now(src: SourceConfig, first: date) -> list[Fetched]:
    """A portal connector serves only what the portal has now: fetched only when its
    publisher date falls on or after the first wanted day (else nothing is downloaded)."""
    from feedledger.sources import fetch  # lazy: httpx

    try:
        return [fetch(src, watermark=day_start_us(first, src.timezone) - 1)]
    except StaleWatermarkError:
        return []


def fill(
    ctx: Context, src: SourceConfig, days: list[date], *, allow_future: bool = False
) -> list[PayloadRef]:
    """Archive what the publisher still serves for `days`; returns the payloads new to
    the archive. Two payloads claiming one publisher timestamp: the archive keeps what
    it has (`archive reindex` reports these)."""
    from feedledger.sources import read_file  # lazy: httpx

    new: list[PayloadRef] = []
    for offer in offers(src, days):
        f = offer.fetched
        if f is None and offer.path is not None:
            f = read_file(src, offer.path, offer.published_at)
        if f is None or f.data is None or f.published_at is None:
            continue
        try:
            ref, created = archive_add(
                ctx,
                src.name,
                f.data,
                published_at=f.published_at,
                original_name=f.original_name,
                content_type=f.content_type,
                metadata=f.metadata,
                allow_future=allow_future,
            )
        except AmbiguousPayloadError:
            continue
        if created:
            new.append(ref)
    return new
