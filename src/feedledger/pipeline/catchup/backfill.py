"""Backfill: archived payloads applied in publisher order, each with ITS OWN publisher
date as `valid_from`, as one run holding the source's lease throughout (the loop it
shares with a replay: `applying.py`; a replay: `replay.py`).

`backfill SOURCE --from D --to D` first archives what the source's fetch location still
serves for the window (`fetch=False`: the archive only), then applies the archived
payloads after the watermark in the window (oldest first). Interrupted, the same request
RESUMES it under the run id it started with (ledger/runs/backfills.py: the source's latest
backfill, unfinished, whose window covers the request); a request reaching beyond that
window starts a new run naming the unfinished one its parent.

Each payload commits in its own transaction (versions, outbox rows -- `suppressed`
unless `notify` -- application, watermark advance). The publication days of the window
the archive does not hold become gap records, and ONE summary notification is queued,
in a last transaction (pipeline/catchup/report.py). A window with nothing to apply is not an
error: `NothingToDo` (exit 0).

What there is to do is decided twice, from the ledger (`_decide`): before the lease (to
say "nothing to do" without taking it) and again under it, where it is acted on, since
another worker may have done the work in between (a scheduler's recovery finished by
another scheduler, or the run of a stalled scheduler whose lease expired taken over and
finished). Which unfinished run a backfill resumes is decided under the lease too
(`leases.continue_run`). A backfill that finds nothing under the lease -- no payload to
apply, no applied one left unannounced by an unfinished run -- returns `NothingToDo` and
leaves no run record and no summary (`leases.NOTHING`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta

from feedledger.context import Context
from feedledger.ledger import queries, runs
from feedledger.ledger.records import Run
from feedledger.ledger.runs import leases, lookup
from feedledger.ledger.runs.backfills import resumable, summarised
from feedledger.model.cadence import day_start_us, local_date
from feedledger.model.errors import ConfigError
from feedledger.model.payload import PayloadRef
from feedledger.model.source import SourceConfig
from feedledger.model.timeutil import iso
from feedledger.model.types import RunKind
from feedledger.pipeline.catchup.applying import Progress, apply_payloads, one_source
from feedledger.pipeline.catchup.assess import (
    Assessment,
    assess_window,
    index_archive,
    window,
)
from feedledger.pipeline.catchup.report import NothingToDo, RunReport, Step, chain_of, finish
from feedledger.pipeline.catchup.served import fill, window_days

__all__ = ["NothingToDo", "Progress", "RunReport", "Step", "backfill"]


def _interrupted_parent(ctx: Context, source: str, kind: str, own: str | None) -> Run | None:
    """The latest earlier run of this kind, if it did not finish (a request beyond its
    window starts a new run that names it as its parent). A run still marked `running`
    counts: if its process is alive, taking the lease refuses us; if it died, taking
    the lease marks it abandoned."""
    earlier = [r for r in lookup.list_runs(ctx.store, source) if r.kind == kind and r.run_id != own]
    if earlier and earlier[-1].status != "succeeded":
        return earlier[-1]
    return None


@dataclass
class _Decision:
    """What a backfill has to do: the window's assessment, and the unfinished run it goes
    on with -- resumed under its id (`resume`), or named the parent of a new run."""

    plan: Assessment
    resume: Run | None
    parent: Run | None
    unannounced: bool  # that run (and those it continues) applied payloads no summary told

    @property
    def work(self) -> bool:
        return bool(self.plan.replayable) or self.unannounced


def _decide(
    ctx: Context,
    src: SourceConfig,
    lo: date,
    hi: date,
    span: tuple[int, int],
    own: str | None,
) -> _Decision:
    """Decided from the ledger, before the lease (to say "nothing to do" without taking
    it) and again under it (`own`: the run just started there), where it is acted on:
    in between another scheduler may have applied the window, or -- the lease of a
    stalled holder having expired -- taken its run over and finished it. A run left
    unfinished is continued only for work: payloads to apply, or applied ones its
    summary has not told yet (its holder died before the last transaction); else the
    backfill is nothing to do, never a run that applies nothing and announces 0 changes."""
    kind = RunKind.BACKFILL.value
    plan = assess_window(ctx, src, lo, hi)
    resume = resumable(ctx.store, src.name, kind, *span, besides=own)
    parent = None if resume is not None else _interrupted_parent(ctx, src.name, kind, own)
    earlier = resume or parent
    unannounced = (
        earlier is not None
        and not summarised(ctx.store, src.name, earlier.run_id)
        and bool(
            queries.run_applications(
                ctx.store, chain_of(ctx, earlier.run_id, earlier.parent_run_id, kind)
            )
        )
    )
    return _Decision(plan, resume, parent, unannounced)


def fetch_window(ctx: Context, src: SourceConfig, lo: date, hi: date) -> list[PayloadRef]:
    """Archive what the source's fetch location still serves for the window (every day
    of it from a directory; the cadence's days from a `{date}` template or a URL)."""
    if not src.fetch:
        return []
    new = fill(ctx, src, window_days(src, lo, hi))
    index_archive(ctx, src.name)
    return new


def backfill(
    ctx: Context,
    source: str | list[str],
    start: str | date,
    end: str | date,
    *,
    notify: bool = False,
    allow_mass_delete: bool = False,
    fetch: bool = True,
    on_plan: Callable[[Assessment], None] | None = None,
    progress: Progress | None = None,
) -> RunReport | NothingToDo:
    src = ctx.workspace.source(one_source(source))
    lo, hi = window(src, start, end)
    fetched = fetch_window(ctx, src, lo, hi) if fetch else []
    span = (day_start_us(lo, src.timezone), day_start_us(hi + timedelta(days=1), src.timezone) - 1)
    kind = RunKind.BACKFILL.value
    first = _decide(ctx, src, lo, hi, span, None)
    if not first.work:
        if first.plan.late:  # work this command must not do: not "nothing to do"
            raise _late_only(src, first.plan, len(fetched))
        return _nothing_to_replay(src, first.plan)
    if on_plan:
        on_plan(first.plan)
    nothing: NothingToDo | ConfigError | None = None
    # a fresh run: which unfinished run it goes on with, if any, is decided under the lease
    with leases.leased_run(ctx.store, src.name, kind, window=span) as run:
        report = RunReport(src.name, kind, run.run_id, notify=notify, fetched=fetched)
        # the lease is ours: the killed (or stalled) holder of an unfinished backfill is
        # now marked abandoned, and nobody else can move the watermark or end a run.
        # Decided again, from the ledger: another scheduler may have applied the window
        # since the look above, or taken over the run unfinished then and finished it
        now = _decide(ctx, src, lo, hi, span, run.run_id)
        plan = now.plan
        if not now.work:
            # nothing to apply or announce: no run record, no summary, no gaps (a run
            # left unfinished stays as it was)
            run.outcome = leases.NOTHING
            nothing = (
                _late_only(src, plan, len(fetched)) if plan.late else _nothing_to_replay(src, plan)
            )
        else:
            if now.resume is not None:
                leases.continue_run(ctx.store, run, now.resume.run_id)
                report.run_id = run.run_id
                resumed = lookup.get_run(ctx.store, run.run_id)
                report.resumed = len(resumed.resumed) if resumed is not None else 0
                report.parent_run_id = resumed.parent_run_id if resumed is not None else None
            elif now.parent is not None:
                report.parent_run_id = now.parent.run_id
                runs.set_parent(ctx.store, run.run_id, now.parent.run_id)
            report.missing_dates = plan.missing_dates
            report.late = plan.late
            report.steps = apply_payloads(
                ctx,
                src,
                plan.replayable,
                run=run,
                notify=notify,
                allow_mass_delete=allow_mass_delete,
                progress=progress,
            )
            last = plan.replayable[-1].payload_id if plan.replayable else ""
            finish(
                ctx,
                src,
                report,
                run=run,
                reason=f"backfill {lo}..{hi}: no archived payload for a publication day",
                last_payload=last,
                word="Backfill",
            )
    if isinstance(nothing, ConfigError):
        raise nothing
    return nothing if nothing is not None else report


def _late_only(src: SourceConfig, plan: Assessment, fetched: int = 0) -> ConfigError:
    """Nothing after the watermark, but archived payloads behind it were never applied:
    a backfill must not apply them over newer state; a replay folds them in. `fetched`:
    how many this backfill archived from the fetch location first (said, as they stay)."""
    archived = f"; the {fetched} fetched now are archived" if fetched else ""
    return ConfigError(
        f"nothing to replay between {plan.start} and {plan.end}: no archived payload there "
        f"is after the watermark ({iso(plan.watermark_at) or 'none'}){archived}",
        source=src.name,
        hint=(
            f"{len(plan.late)} archived payload(s) in the window are older than the watermark "
            f"(late or restated); fold them in with `feedledger replay {src.name} --from "
            f"{local_date(plan.late[0].published_at, src.timezone)}`"
        ),
    )


def _nothing_to_replay(src: SourceConfig, plan: Assessment) -> NothingToDo:
    hint = None
    if plan.archived:
        reason = (
            f"every archived payload between {plan.start} and {plan.end} is at or before the "
            f"watermark ({iso(plan.watermark_at) or 'none'})"
        )
    else:
        reason = f"the archive holds no payload of this source between {plan.start} and {plan.end}"
    return NothingToDo(
        src.name,
        RunKind.BACKFILL.value,
        plan.start,
        plan.end,
        plan.watermark_at,
        reason,
        late=plan.late,
        hint=hint,
    )
