"""Backfill and replay: archived payloads applied in publisher order, each with ITS OWN
publisher date as `valid_from`, as one run holding the source's lease throughout.

* `backfill SOURCE --from D --to D` applies the archived payloads after the watermark in
  the window (oldest first). Interrupted, it resumes from the watermark when run again;
  the new run records the interrupted one as its parent (one logical backfill).
* `replay SOURCE --from D` first retracts every standing application of the source
  published on or after D (and the gaps after D), moving the watermark back, then applies
  every archived payload from D on, late ones included.

Each payload commits in its own transaction (versions, outbox rows -- `suppressed`
unless `notify` -- application, watermark advance). The publication days of the window
the archive does not hold become gap records, and ONE summary notification is queued,
in a last transaction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

from feedledger import faults
from feedledger.formats import read_observations
from feedledger.ledger import gaps, leases, notices, queries
from feedledger.ledger.leases import LeasedRun
from feedledger.ledger.retraction import commit_time, retract, rewind_watermark, standing
from feedledger.model.cadence import day_start_us, expected_dates, local_date, stretches
from feedledger.model.errors import ConfigError, NotFoundError
from feedledger.model.payload import PayloadRef
from feedledger.model.source import SourceConfig
from feedledger.model.timeutil import iso
from feedledger.model.types import RunKind
from feedledger.pipeline.apply import apply_observations
from feedledger.pipeline.assess import Assessment, assess_window, index_archive, parse_day, window
from feedledger.pipeline.context import Context

# progress(done, total, payload just applied or None before the first)
Progress = Callable[[int, int, PayloadRef | None], None]


@dataclass
class Step:
    published_at: int
    payload_id: str
    changes: int

    def to_json(self) -> dict[str, Any]:
        return {
            "published_at": iso(self.published_at),
            "payload_id": self.payload_id,
            "changes": self.changes,
        }


@dataclass
class RunReport:
    """What a backfill or replay did."""

    source: str
    kind: str
    run_id: str
    parent_run_id: str | None = None
    steps: list[Step] = field(default_factory=list)
    missing_dates: list[date] = field(default_factory=list)
    gaps_recorded: int = 0
    retracted_versions: int = 0
    retracted_payloads: int = 0
    late: list[PayloadRef] = field(default_factory=list)  # in the window, behind the watermark
    summary: str = ""
    notify: bool = False

    @property
    def changes(self) -> int:
        return sum(s.changes for s in self.steps)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "run_id": self.run_id,
            "kind": self.kind,
            "source": self.source,
            "parent_run_id": self.parent_run_id,
            "steps": [s.to_json() for s in self.steps],
            "unrecoverable_days": len(self.missing_dates),
            "missing_dates": [d.isoformat() for d in self.missing_dates],
            "gaps_recorded": self.gaps_recorded,
            "late": [
                {"payload_id": p.payload_id, "published_at": iso(p.published_at)} for p in self.late
            ],
            "notified": self.notify,
            "summary": self.summary,
        }
        if self.kind == RunKind.REPLAY.value:
            data["retracted_payloads"] = self.retracted_payloads
            data["retracted_versions"] = self.retracted_versions
        return data


def _one_source(source: str | list[str]) -> str:
    names = [source] if isinstance(source, str) else list(source)
    names = [n for part in names for n in part.split(",") if n.strip()]
    if len(names) != 1:
        raise ConfigError(
            f"backfill and replay take one source at a time, not {len(names)} "
            f"({', '.join(names) or 'none'}): sources publish on different dates and keep "
            "different archives, and one run id per source keeps each retractable on its own",
            hint="run the command once per source",
        )
    return names[0].strip()


def _apply_payloads(
    ctx: Context,
    src: SourceConfig,
    refs: list[PayloadRef],
    *,
    run: LeasedRun,
    notify: bool,
    allow_mass_delete: bool,
    progress: Progress | None,
) -> list[Step]:
    steps: list[Step] = []
    if progress:
        progress(0, len(refs), None)
    for i, ref in enumerate(refs, start=1):
        data = ctx.archive.get(ref.sha256)
        obs = read_observations(data, src, label=ref.label)
        applied = apply_observations(
            ctx,
            src,
            ref,
            obs,
            run_id=run.run_id,
            holder=run.holder,
            backfill=True,
            allow_mass_delete=allow_mass_delete,
            outbox_status="pending" if notify else "suppressed",
        )
        steps.append(Step(ref.published_at, ref.payload_id, applied.changes))
        if progress:
            progress(i, len(refs), ref)
        faults.point("after_payload", i)
    return steps


def _missing_spans(src: SourceConfig, missing: list[date]) -> list[tuple[int, int]]:
    return [
        (day_start_us(a, src.timezone), day_start_us(b + timedelta(days=1), src.timezone))
        for a, b in stretches(missing)
    ]


def _summary(
    report: RunReport, src: SourceConfig, chain: list[tuple[str, int, int]], word: str
) -> str:
    days = sorted({local_date(at, src.timezone) for _r, at, _n in chain})
    total = sum(n for _r, _at, n in chain)
    span = f" ({days[0]} to {days[-1]})" if days else ""
    text = (
        f"{word} for {src.name}: {total} changes recovered across {len(days)} publication "
        f"day(s){span}. {len(report.missing_dates)} day(s) had no archived payload and were "
        f"not replayed. Change details are queryable by run_id {report.run_id}"
    )
    if report.parent_run_id:
        text += f" (resuming run {report.parent_run_id})"
    text += "."
    if report.late:
        first = local_date(report.late[0].published_at, src.timezone)
        text += (
            f" {len(report.late)} archived payload(s) in the window are older than the "
            f"watermark and were not applied; `feedledger replay {src.name} --from {first}` "
            "folds them in."
        )
    return text


def _finish(
    ctx: Context,
    src: SourceConfig,
    report: RunReport,
    *,
    run: LeasedRun,
    reason: str,
    last_payload: str,
    word: str,
) -> None:
    """Last transaction of the run: gap records for the missing days and ONE summary
    notification (idempotent per run)."""
    store = ctx.store
    chain_ids = [report.run_id]
    parent = report.parent_run_id
    while parent is not None:
        chain_ids.append(parent)
        earlier = queries.get_run(store, parent)
        same_kind = earlier is not None and earlier.kind == report.kind
        parent = earlier.parent_run_id if earlier is not None and same_kind else None
    chain = queries.run_applications(store, chain_ids)
    report.summary = _summary(report, src, chain, word)
    with store.begin() as conn:
        leases.check_held(conn, src.name, run.holder, run.run_id)
        _wm, at = commit_time(store, conn, src.name)
        report.gaps_recorded = gaps.record(
            conn,
            src.name,
            _missing_spans(src, report.missing_dates),
            reason=reason,
            run_id=report.run_id,
            recorded_at=at,
        )
        total = sum(n for _r, _at, n in chain)
        body = {
            "text": report.summary,
            "source": src.name,
            "run_id": report.run_id,
            "parent_run_id": report.parent_run_id,
            "changes": total,
            "publication_days": len({local_date(a, src.timezone) for _r, a, _n in chain}),
            "first": iso(chain[0][1]) if chain else None,
            "last": iso(chain[-1][1]) if chain else None,
            "unrecoverable_days": len(report.missing_dates),
            "missing_dates": [d.isoformat() for d in report.missing_dates],
        }
        notices.queue(
            conn,
            source=src.name,
            run_id=report.run_id,
            topic="summary",
            payload_id=last_payload,
            changes=total,
            body=body,
            at_us=at,
        )


def _interrupted_parent(ctx: Context, source: str, kind: str, own: str | None) -> str | None:
    """The latest earlier run of this kind, if it did not finish (its work is resumed).
    A run still marked `running` counts: if its process is alive, taking the lease
    refuses us; if it died, taking the lease marks it abandoned."""
    earlier = [
        r for r in queries.list_runs(ctx.store, source) if r.kind == kind and r.run_id != own
    ]
    if earlier and earlier[-1].status != "succeeded":
        return earlier[-1].run_id
    return None


def backfill(
    ctx: Context,
    source: str | list[str],
    start: str,
    end: str,
    *,
    notify: bool = False,
    allow_mass_delete: bool = False,
    on_plan: Callable[[Assessment], None] | None = None,
    progress: Progress | None = None,
) -> RunReport:
    src = ctx.workspace.source(_one_source(source))
    lo, hi = window(src, start, end)
    plan = assess_window(ctx, src, lo, hi)
    parent = _interrupted_parent(ctx, src.name, RunKind.BACKFILL.value, None)
    if not plan.replayable and parent is None:
        raise _nothing_to_replay(src, plan)
    if on_plan:
        on_plan(plan)
    with leases.leased_run(ctx.store, src.name, RunKind.BACKFILL.value) as run:
        report = RunReport(src.name, RunKind.BACKFILL.value, run.run_id, notify=notify)
        # the lease is ours: the killed holder of an interrupted backfill is now marked
        # abandoned, and the watermark can no longer move under us
        report.parent_run_id = _interrupted_parent(
            ctx, src.name, RunKind.BACKFILL.value, run.run_id
        )
        if report.parent_run_id:
            ctx.store.set_run_parent(run.run_id, report.parent_run_id)
        plan = assess_window(ctx, src, lo, hi)
        report.missing_dates = plan.missing_dates
        report.late = plan.late
        report.steps = _apply_payloads(
            ctx,
            src,
            plan.replayable,
            run=run,
            notify=notify,
            allow_mass_delete=allow_mass_delete,
            progress=progress,
        )
        last = plan.replayable[-1].payload_id if plan.replayable else ""
        _finish(
            ctx,
            src,
            report,
            run=run,
            reason=f"backfill {lo}..{hi}: no archived payload for a publication day",
            last_payload=last,
            word="Backfill",
        )
    return report


def _nothing_to_replay(src: SourceConfig, plan: Assessment) -> ConfigError:
    hint = "nothing to do"
    if plan.late:
        hint = (
            f"{len(plan.late)} archived payload(s) in the window are older than the watermark "
            f"(late or restated); fold them in with `feedledger replay {src.name} --from "
            f"{local_date(plan.late[0].published_at, src.timezone)}`"
        )
    elif not plan.archived:
        hint = "the archive holds no payload of this source in the window"
    return ConfigError(
        f"nothing to replay between {plan.start} and {plan.end}: no archived payload there "
        f"is after the watermark ({iso(plan.watermark_at) or 'none'})",
        source=src.name,
        hint=hint,
    )


def replay(
    ctx: Context,
    source: str | list[str],
    start: str,
    *,
    notify: bool = False,
    allow_mass_delete: bool = False,
    on_plan: Callable[[list[PayloadRef], list[date]], None] | None = None,
    progress: Progress | None = None,
) -> RunReport:
    src = ctx.workspace.source(_one_source(source))
    day = parse_day(src, start, "--from")
    start_us = day_start_us(day, src.timezone)
    index_archive(ctx, src.name)
    refs = ctx.store.list_payloads(src.name, start_us, None)
    if not refs:
        raise NotFoundError(
            f"nothing to replay: the archive holds no payload published on or after {day}",
            source=src.name,
            hint="`feedledger archive list` shows what is archived",
        )
    last_day = local_date(refs[-1].published_at, src.timezone)
    held = {local_date(r.published_at, src.timezone) for r in refs}
    missing = [d for d in expected_dates(src.cadence, src.timezone, day, last_day) if d not in held]
    if on_plan:
        on_plan(refs, missing)
    with leases.leased_run(ctx.store, src.name, RunKind.REPLAY.value) as run:
        report = RunReport(src.name, RunKind.REPLAY.value, run.run_id, notify=notify)
        report.missing_dates = missing
        store = ctx.store
        with store.begin() as conn:
            leases.check_held(conn, src.name, run.holder, run.run_id)
            wm, at = commit_time(store, conn, src.name)
            doomed = [a for a in standing(conn, src.name) if a.published_at >= start_us]
            report.retracted_payloads = len(doomed)
            report.retracted_versions = retract(conn, doomed, by=run.run_id, at_us=at)
            gaps.retract_from(conn, src.name, start_us, by=run.run_id, at_us=at)
            rewind_watermark(conn, src.name, wm, at_us=at)
        faults.point("after_retraction")
        report.steps = _apply_payloads(
            ctx,
            src,
            refs,
            run=run,
            notify=notify,
            allow_mass_delete=allow_mass_delete,
            progress=progress,
        )
        _finish(
            ctx,
            src,
            report,
            run=run,
            reason=f"replay from {day}: no archived payload for a publication day",
            last_payload=refs[-1].payload_id,
            word="Replay",
        )
    return report
