"""Replay: `replay SOURCE --from D` first retracts every standing application of the
source published on or after D (and the gaps after D), moving the watermark back, then
applies every archived payload from D on, late ones included, as one run holding the
source's lease throughout (the loop it shares with a backfill: `applying.py`). In the
retraction's transaction it cancels what it retracted and nobody was delivered yet, and
queues one retraction notice for whoever was (pipeline/catchup/replay_retraction.py), as
`retract` does.

Each payload commits in its own transaction (versions, outbox rows -- `suppressed`
unless `notify` -- application, watermark advance). The publication days from D the
archive does not hold become gap records, and ONE summary notification is queued, in a
last transaction (pipeline/catchup/report.py). An archive with nothing from D on is not
an error: `NothingToDo` (exit 0). A replay lists the archive again under its lease: a
payload another run archived and applied since the first look is retracted and
re-applied with the rest.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date

from feedledger import faults
from feedledger.context import Context
from feedledger.ledger.runs import leases
from feedledger.ledger.runs.retraction import Retracted, Scope, retract_scope
from feedledger.ledger.store import Transaction
from feedledger.model.cadence import day_start_us, expected_dates, local_date
from feedledger.model.errors import FeedledgerError
from feedledger.model.payload import PayloadRef
from feedledger.model.source import SourceConfig
from feedledger.model.types import RunKind
from feedledger.pipeline.catchup.applying import Progress, apply_payloads, one_source
from feedledger.pipeline.catchup.assess import index_archive, parse_day
from feedledger.pipeline.catchup.replay_retraction import withdraw
from feedledger.pipeline.catchup.report import NothingToDo, RunReport, finish
from feedledger.pipeline.intake.observing import observed_days


def _missing_days(ctx: Context, src: SourceConfig, day: date, refs: list[PayloadRef]) -> list[date]:
    """The publication days from `day` to the last of `refs` that none of them has and
    no fetch observed unchanged (pipeline/intake/observing.py: those are known, not gaps)."""
    last_day = local_date(refs[-1].published_at, src.timezone)
    held = {local_date(r.published_at, src.timezone) for r in refs}
    days = [d for d in expected_dates(src.cadence, src.timezone, day, last_day) if d not in held]
    seen = observed_days(ctx, src, days)
    return [d for d in days if d not in seen]


def _check_readable(ctx: Context, refs: list[PayloadRef]) -> None:
    """Read back (decompressed, sha256 checked) every payload a replay is to re-apply,
    before it retracts anything: a damaged one -- a flipped bit, a missing keyframe --
    refuses the replay with the ledger untouched, where it would otherwise stop after
    the retraction, the source's state taken back to before the damage. Read in order,
    each delta decodes against the payload read just before it."""
    for ref in refs:
        try:
            ctx.archive.get(ref.sha256)
        except FeedledgerError as exc:
            raise exc.extend(
                f"payload {ref.label} cannot be read back, so the replay retracted nothing"
            ) from None


def replay(
    ctx: Context,
    source: str | list[str],
    start: str | date,
    *,
    notify: bool = False,
    allow_mass_delete: bool = False,
    on_plan: Callable[[list[PayloadRef], list[date]], None] | None = None,
    progress: Progress | None = None,
) -> RunReport | NothingToDo:
    src = ctx.workspace.source(one_source(source))
    day = parse_day(src, start, "--from")
    start_us = day_start_us(day, src.timezone)
    index_archive(ctx, src.name)
    refs = ctx.store.list_payloads(src.name, start_us, None)
    if not refs:
        wm = ctx.store.watermark(src.name)
        return NothingToDo(
            src.name,
            RunKind.REPLAY.value,
            day,
            None,
            wm.published_at if wm is not None else None,
            f"the archive holds no payload published on or after {day}",
            hint="`feedledger archive list` shows what is archived",
        )
    if on_plan:
        on_plan(refs, _missing_days(ctx, src, day, refs))
    with leases.leased_run(ctx.store, src.name, RunKind.REPLAY.value) as run:
        report = RunReport(src.name, RunKind.REPLAY.value, run.run_id, notify=notify)
        # listed again under the lease: a payload another run archived and applied since
        # the look above is retracted below with the rest, so it must be re-applied too
        refs = ctx.store.list_payloads(src.name, start_us, None)
        report.missing_dates = _missing_days(ctx, src, day, refs)
        _check_readable(ctx, refs)

        def told(conn: Transaction, done: Retracted) -> None:
            # in the retraction's transaction (Invariant 11): what it took back and was
            # not delivered yet is cancelled; who heard of it is told once
            gone = withdraw(conn, done, source=src.name, run_id=run.run_id, published_from=start_us)
            report.notifications_cancelled = gone.notifications_cancelled
            report.messages_cancelled = gone.messages_cancelled

        done = retract_scope(
            ctx.store,
            src.name,
            Scope(published_from=start_us),
            holder=run.holder,
            by=run.run_id,
            then=told,
        )
        report.retracted_payloads = len(done.payloads)
        report.retracted_versions = done.versions
        report.retracted_runs = done.runs
        faults.point("after_retraction")
        report.steps = apply_payloads(
            ctx,
            src,
            refs,
            run=run,
            notify=notify,
            allow_mass_delete=allow_mass_delete,
            progress=progress,
        )
        finish(
            ctx,
            src,
            report,
            run=run,
            reason=f"replay from {day}: no archived payload for a publication day",
            last_payload=refs[-1].payload_id,
            word="Replay",
        )
    return report
