"""Recovering missed publications the right way (never a naive catch-up): first fill
the archive with every dated publication the publisher still serves for the missed
days, then backfill -- each archived payload applied in publisher order at its own
publisher date, notifications suppressed, ONE summary, and gap records for the days
nobody can have any more.

The backfill window ends at the newest publication obtained: days after it are not
lost yet (the publisher may only be late), so they stay missed and are tried again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import Any

from feedledger.model.cadence import local_date
from feedledger.model.errors import AmbiguousPayloadError
from feedledger.model.payload import PayloadRef
from feedledger.model.source import SourceConfig
from feedledger.pipeline.archiving import archive_add
from feedledger.pipeline.assess import index_archive
from feedledger.pipeline.backfill import Progress, RunReport, backfill
from feedledger.pipeline.context import Context


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


def served(ctx: Context, src: SourceConfig, days: list[date]) -> list[PayloadRef]:
    """Archive what the publisher still serves for `days` (a directory: its dated files
    of those days; a `{date}` template: one fetch per day; a plain URL: whatever it
    serves now). Returns the payloads new to the archive. An unreachable publisher
    raises: nothing is recorded as lost while it cannot be asked."""
    from feedledger.sources import fetch, fetch_day, is_template, list_dated
    from feedledger.sources.dated import Fetched

    wanted = set(days)
    got: list[Fetched] = []
    location = src.fetch or ""
    if is_template(location):
        got = [f for f in (fetch_day(src, d) for d in days) if f is not None]
    elif location.lower().startswith(("http://", "https://")):
        got = [fetch(src)]
    else:
        from feedledger.sources import read_file

        base = location.removeprefix("file://")
        for instant, path in list_dated(base, src.timezone, source=src.name):
            if local_date(instant, src.timezone) in wanted:
                got.append(read_file(src, path, instant))
    new: list[PayloadRef] = []
    for f in got:
        if f.data is None or f.published_at is None:
            continue
        if local_date(f.published_at, src.timezone) not in wanted:
            continue
        try:
            ref, created = archive_add(
                ctx,
                src.name,
                f.data,
                published_at=f.published_at,
                original_name=f.original_name,
                content_type=f.content_type,
            )
        except AmbiguousPayloadError:
            continue  # the archive keeps what it has; `archive reindex` reports these
        if created:
            new.append(ref)
    return new


def recover(
    ctx: Context, src: SourceConfig, days: list[date], *, progress: Progress | None = None
) -> Recovery:
    """Fill the archive for the missed `days`, then backfill from the first of them to
    the newest publication the archive now holds."""
    out = Recovery(src.name, days)
    out.archived = served(ctx, src, days)
    index_archive(ctx, src.name)
    wm = ctx.store.watermark(src.name)
    after = wm.published_at if wm is not None else None
    held = [p for p in ctx.store.list_payloads(src.name) if after is None or p.published_at > after]
    if not held:
        return out  # nothing to replay yet: the days stay missed, tried again later
    last = local_date(held[-1].published_at, src.timezone)
    out.report = backfill(
        ctx, src.name, days[0].isoformat(), max(last, days[0]).isoformat(), progress=progress
    )
    return out
