"""`feedledger run SOURCE` / `run_source`: fetch from the source's location and apply.

One publication waiting (the normal day): fetch the newest and ingest it as a live run
(HTTP ETag/Last-Modified are remembered per source). More than one waiting -- dated
files after the watermark, or days the cadence expected (pipeline/catchup/recovery.py
`waiting`) -- is never a naive catch-up (docs/architecture.md, Invariant 5): the same `recover` the
scheduler uses archives every publication the source still serves for those days and
applies them oldest first as ONE backfill run, with gap records for the rest and one
summary. `recover=False` refuses instead, naming the waiting publications.
"""

from __future__ import annotations

import json
from contextlib import nullcontext
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from feedledger.context import Context
from feedledger.ledger.runs.freezes import frozen
from feedledger.model.errors import (
    ConfigError,
    FutureDateError,
    SourceFrozenError,
    StaleWatermarkError,
)
from feedledger.model.timeutil import DAY_US, iso, now_us
from feedledger.pipeline.catchup.recovery import recover as recover_days
from feedledger.pipeline.catchup.recovery import waiting
from feedledger.pipeline.catchup.served import offers
from feedledger.pipeline.intake import observing
from feedledger.pipeline.intake.ingest import ingest
from feedledger.pipeline.intake.live_apply import IngestResult
from feedledger.pipeline.intake.observing import DateWentBackError
from feedledger.sources import FetchState, fetch
from feedledger.timing import stage

if TYPE_CHECKING:
    from feedledger.model.source import SourceConfig
    from feedledger.pipeline.catchup.backfill import Progress
    from feedledger.pipeline.catchup.recovery import Recovery
    from feedledger.sources.dated import Fetched


@dataclass
class NothingNew:
    """The publisher serves nothing after the watermark: a success (exit 0)."""

    source: str
    reason: str
    missed_dates: list[str]

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "status": "nothing_to_do",
            "reason": self.reason,
            "missed_dates": self.missed_dates,
        }


def _state_path(ctx: Context, source: str) -> Path:
    return ctx.workspace.state_dir / "fetch" / f"{source}.json"


def _load_state(path: Path) -> FetchState | None:
    try:
        return FetchState(**json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return None


def run_source(
    ctx: Context,
    source: str,
    *,
    allow_mass_delete: bool = False,
    now: int | None = None,
    recover: bool = True,
    progress: Progress | None = None,
    allow_future: bool = False,
    accept_restored: bool = False,
) -> IngestResult | Recovery | NothingNew | None:
    """Fetch and apply what is waiting (see the module docstring). Returns the live
    run's result, the recovery (several publications were waiting), NothingNew (the
    newest served is not after the watermark) or None (HTTP 304). `now`: the caller's
    clock, for the cadence's expected days and a `{date}` location's newest date.
    A publisher date ahead of the clock is refused unless `allow_future`; one gone back
    before the watermark with other content is refused unless `accept_restored`
    (pipeline/intake/observing.py); either is kept as the source's date problem."""
    try:
        return _run_source(
            ctx,
            source,
            allow_mass_delete=allow_mass_delete,
            now=now,
            recover=recover,
            progress=progress,
            allow_future=allow_future,
            accept_restored=accept_restored,
        )
    except FutureDateError as exc:
        observing.future(ctx, ctx.workspace.source(source), exc)
        raise


def _run_source(
    ctx: Context,
    source: str,
    *,
    allow_mass_delete: bool,
    now: int | None,
    recover: bool,
    progress: Progress | None,
    allow_future: bool,
    accept_restored: bool,
) -> IngestResult | Recovery | NothingNew | None:
    src = ctx.workspace.source(source)
    _need_fetch(src.name, src.fetch)
    clock = now if now is not None else now_us()
    with ctx.store.engine.connect() as conn:
        ice = frozen(conn, src.name)
    if ice is not None:
        raise SourceFrozenError(
            f"the source is frozen (since {iso(ice.frozen_at)}"
            + (f": {ice.reason}" if ice.reason else "")
            + "); live runs are refused while it is, nothing changed",
            source=src.name,
            hint=f"backfill, replay and retract still work; `feedledger thaw {src.name}` "
            "resumes live runs",
        )
    days = waiting(ctx, src, clock)
    if len(days) > 1:
        if not recover:
            _refuse(ctx, src.name, days)
        rec = recover_days(ctx, src, days, progress=progress, allow_future=allow_future, now=clock)
        if rec.report is not None:
            return rec
        # the publisher serves none of the waiting days yet: the newest it serves is
        # fetched as usual (already applied, not modified, or not after the watermark)
    try:
        return live_run(
            ctx,
            src.name,
            allow_mass_delete=allow_mass_delete,
            now=now,
            allow_future=allow_future,
            accept_restored=accept_restored,
        )
    except DateWentBackError:
        raise  # not "nothing new": the publisher's state differs from the ledger's
    except StaleWatermarkError as exc:
        reason = exc.problem
        wm = ctx.store.watermark(src.name)
        if wm is not None and wm.published_at is not None and wm.published_at > clock + DAY_US:
            # a watermark in the future holds back every later payload: never silently
            reason += (
                f"; the watermark {iso(wm.published_at)} is ahead of the clock, so every "
                "later publication is held back (retract the run that applied it)"
            )
        return NothingNew(src.name, reason, [d.isoformat() for d in days])


def _need_fetch(source: str, fetch: str | None) -> None:
    if not fetch:
        raise ConfigError(
            "this source has no fetch location",
            source=source,
            hint="declare one with `feedledger source add ... --fetch DIR_OR_URL "
            "--replace`, or use `feedledger ingest SOURCE FILE`",
        )


def _refuse(ctx: Context, source: str, days: list[Any]) -> None:
    """--no-recover: refuse when the source serves more than one waiting publication."""
    src = ctx.workspace.source(source)
    found = offers(src, days)
    if len(found) <= 1:
        return
    names = ", ".join(o.name for o in found[:10]) + (
        f" and {len(found) - 10} more" if len(found) > 10 else ""
    )
    raise ConfigError(
        f"{len(found)} publications are waiting ({names}); applying only the newest would "
        "lose the states in between, and --no-recover forbids applying them all",
        source=source,
        hint=f"`feedledger backfill {source} --from {found[0].day} --to {found[-1].day}` "
        "applies them oldest first as one run (or run without --no-recover)",
    )


def live_run(
    ctx: Context,
    source: str,
    *,
    allow_mass_delete: bool = False,
    now: int | None = None,
    allow_future: bool = False,
    accept_restored: bool = False,
) -> IngestResult | None:
    """Fetch the newest payload and ingest it as a live run (what the scheduler does
    when one publication is due). None when the publisher has nothing new (HTTP 304).
    A successful fetch, new or not, observes a source serving its current state
    (pipeline/intake/observing.py) at `now` (the caller's clock; default the fetch time)."""
    src = ctx.workspace.source(source)
    _need_fetch(source, src.fetch)
    assert src.fetch is not None
    from feedledger.formats.spatial.geo_pages import page_reader  # lazy: shapely, pyogrio (a fetch)

    path = _state_path(ctx, source)
    fetched_at = now_us()
    clock = now if now is not None else fetched_at
    wm = ctx.store.watermark(source) if src.connector else None
    watermark = wm.published_at if wm is not None else None
    # an ArcGIS layer is read a page at a time while the next page downloads
    pages = page_reader(src, geometry_text=watermark is None)
    restored = False
    with pages or nullcontext():
        try:
            with stage("fetch"):
                got = fetch(
                    src, previous=_load_state(path), now_us=now, watermark=watermark, pages=pages
                )
        except StaleWatermarkError as exc:
            stated = exc.published_at
            if stated is None or watermark is None or stated >= watermark:
                observing.observed(ctx, src, clock, stated)
                raise
            # the portal's date went back: only its content tells whether it changed
            got = fetch(src, now_us=now)
            if not accept_restored:
                raise observing.went_back(ctx, src, got, clock) from None
            got, pages, restored = observing.as_correction(got, clock), None, True
        if got.data is None:
            observing.observed(ctx, src, clock, None)
            return None
        # hand ingest the only reference to the bytes, so that it can free them once
        # they are archived and parsed (`got` keeps just what is known about them)
        box, got = [got.data], replace(got, data=None)
        try:
            result = ingest(
                ctx,
                source,
                box.pop(),
                published_at=got.published_at,
                original_name=got.original_name,
                content_type=got.content_type,
                allow_mass_delete=allow_mass_delete,
                fetched_at=fetched_at,
                allow_future=allow_future or restored,
                metadata=got.metadata,
                pre_read=None if pages is None else pages.observations,
            )
        except StaleWatermarkError:
            # an HTTP source's date not after the watermark (the bytes are archived)
            _not_after(ctx, src, got, clock)
            raise
    observing.observed(ctx, src, clock, got.published_at)
    if got.etag or got.last_modified:
        path.parent.mkdir(parents=True, exist_ok=True)
        state = FetchState(etag=got.etag, last_modified=got.last_modified, url=src.fetch)
        path.write_text(json.dumps(asdict(state)), encoding="utf-8")
    return result


def _not_after(ctx: Context, src: SourceConfig, got: Fetched, clock: int) -> None:
    """An HTTP source answered a payload not after the watermark: the same date is an
    observation; an earlier one with other content is a date gone back."""
    if not observing.observes(src):
        return  # a folder's newest file behind the watermark: nothing to do
    wm = ctx.store.watermark(src.name)
    stated = got.published_at
    if wm is None or wm.published_at is None or stated is None or stated >= wm.published_at:
        observing.observed(ctx, src, clock, stated)
        return
    # the bytes were handed to ingest (and archived by it): read them back to compare
    ref = ctx.store.list_payloads(src.name, stated, stated)
    data = ctx.archive.get(ref[-1].sha256) if ref else None
    if data is not None:
        raise observing.went_back(ctx, src, replace(got, data=data), clock)
