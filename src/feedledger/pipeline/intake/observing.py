"""Observations (docs/architecture.md, Invariant 12): a fetch that succeeded observed
the source, whether it found something new or not -- for a source whose fetch states
its *current* state: a portal connector (ArcGIS, Socrata, CKAN: dated by their last
edit) or a plain http(s) URL (HTTP 304, the same ETag or the same bytes: unchanged).
Such a poll makes the days up to it observed: not missed (`health`), not waiting (no
recovery), never gaps. A folder or a `{date}` template serves one file per
publication: a day without its file is a publication missing, not an observation.

Recorded durably per source in `schedule_state` (ledger/schedule_state.observed: when,
and the publisher date stated then), read by `health`, the scheduler and `run`.

The publisher's date is also checked here (B-items of issue 28): one that went back
before the watermark with other content (a layer restored from a backup) is archived,
not applied, said in one line and kept as the source's `date_problem` until a good
fetch; a date ahead of the clock is refused where every date passes
(pipeline/intake/archiving.resolve_published_at) and kept as the problem too. `health` fails
while a problem stands.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from datetime import date
from typing import TYPE_CHECKING

from feedledger.context import Context
from feedledger.ledger import schedule_state
from feedledger.model.cadence import due_at, local_date
from feedledger.model.errors import AmbiguousPayloadError, StaleWatermarkError
from feedledger.model.source import SourceConfig
from feedledger.model.timeutil import iso
from feedledger.pipeline.intake.archiving import archive_add

if TYPE_CHECKING:
    from feedledger.model.errors import FutureDateError
    from feedledger.sources.dated import Fetched


class DateWentBackError(StaleWatermarkError):
    """The publisher's date is before the watermark and its content differs from the
    payload applied there (exit 6, as any payload not after the watermark)."""


def observes(src: SourceConfig) -> bool:
    """Whether a successful fetch of `src` observes its current state (module doc)."""
    if src.connector is not None:
        return True
    location = (src.fetch or "").strip()
    from feedledger.sources import location_kind  # lazy: the fetchers load httpx

    return bool(location) and location_kind(location) == "url"


def observed(ctx: Context, src: SourceConfig, at: int, published_at: int | None) -> None:
    """Record that a fetch at `at` succeeded (a no-op for a dated-file source): the
    state the publisher dated `published_at` (None, an HTTP 304: the watermark's) held
    until `at`."""
    if not observes(src):
        return
    since = published_at
    if since is None:
        wm = ctx.store.watermark(src.name)
        since = wm.published_at if wm is not None else None
    schedule_state.observed(ctx.store, src.name, at=at, published_at=published_at, held_since=since)


def observed_days(ctx: Context, src: SourceConfig, days: list[date]) -> set[date]:
    """Those of `days` whose publication was due inside a span a fetch observed (the
    state then was known: never a gap)."""
    if not days or not observes(src):
        return set()
    spans = schedule_state.observed_spans(ctx.store, src.name)
    if not spans:
        return set()

    def seen(d: date) -> bool:
        at = due_at(src.cadence, src.timezone, d, src.publish_at)
        return any(a <= at <= b for a, b in spans)

    return {d for d in days if seen(d)}


def problem(ctx: Context, src: SourceConfig, text: str, published_at: int | None) -> None:
    """Keep the publisher date's problem until a good fetch clears it."""
    schedule_state.date_problem(ctx.store, src.name, problem=text, published_at=published_at)


def went_back(ctx: Context, src: SourceConfig, got: Fetched, at: int) -> StaleWatermarkError:
    """`got` is dated strictly before the watermark. Same bytes as the payload applied
    at the watermark: nothing changed (an observation; the StaleWatermarkError to
    raise says "nothing new"). Other bytes: archived for replay, never applied, the
    problem kept for `health`, and the DateWentBackError to raise says what to do."""
    assert got.data is not None and got.published_at is not None
    wm = ctx.store.watermark(src.name)
    assert wm is not None and wm.published_at is not None
    applied = [
        p
        for p in ctx.store.list_payloads(src.name, wm.published_at, wm.published_at)
        if p.payload_id == wm.payload_id
    ]
    sha = hashlib.sha256(got.data).hexdigest()
    stated, mark = iso(got.published_at), iso(wm.published_at)
    if applied and applied[0].sha256 == sha:
        # the state found is the watermark's: it held until now (the date stated
        # earlier claims nothing about the days before the watermark)
        observed(ctx, src, at, wm.published_at)
        return StaleWatermarkError(
            f"nothing new: the publisher's date {stated} went back before the watermark "
            f"{mark}, but its content is the payload applied there",
            source=src.name,
        )
    try:
        ref, _created = archive_add(
            ctx,
            src.name,
            got.data,
            published_at=got.published_at,
            original_name=got.original_name,
            content_type=got.content_type,
            metadata=got.metadata,
        )
        kept = f"the publication is archived as payload {ref.payload_id}"
    except AmbiguousPayloadError:
        kept = f"the archive already holds another publication dated {stated}"
    day = local_date(got.published_at, src.timezone).isoformat()
    text = (
        f"the publisher's date {stated} went back before the watermark {mark} and the "
        f"content differs from the payload applied there (restored from a backup?); "
        f"nothing was applied, {kept}"
    )
    problem(ctx, src, text, got.published_at)
    return DateWentBackError(
        text,
        source=src.name,
        payload=got.original_name,
        hint=f"`feedledger replay {src.name} --from {day}` folds it into history at its "
        f"own date, or accept the restored layer as a correction dated now: "
        f"`feedledger run {src.name} --accept-restored`",
    )


def future(ctx: Context, src: SourceConfig, exc: FutureDateError) -> None:
    """A fetched publisher date was refused as ahead of the clock: kept for `health`."""
    when = exc.published_at
    problem(
        ctx,
        src,
        f"the publisher's date {iso(when)} is ahead of the clock; refused, nothing "
        "applied (check the publisher; `run --allow-future` applies it anyway)",
        when,
    )


def as_correction(got: Fetched, at: int) -> Fetched:
    """`run --accept-restored`: the restored publication dated `at` (the fetch), its
    own date kept in its sidecar."""
    meta = {**(got.metadata or {}), "restored_publisher_date": iso(got.published_at)}
    return replace(got, published_at=at, metadata=meta)
