"""Recovery commands: assess, backfill, replay, retract, gaps, gap add, freeze, thaw.

The procedure after an outage: `freeze` the source, `assess` the window, `backfill` it
(one run, each payload with its own publisher date, notifications suppressed and one
summary queued), `thaw`. A catch-up that stamped the wrong dates is undone with
`retract RUN_ID` and redone with `replay SOURCE --from D`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date
from typing import TYPE_CHECKING, Any

import typer

from feedledger.cli.app import gap_app
from feedledger.cli.common import JSON_OPT, context, emit_json, err, guarded, out, table, when
from feedledger.model.timeutil import iso

if TYPE_CHECKING:
    from feedledger.model.payload import PayloadRef
    from feedledger.pipeline.assess import Assessment
    from feedledger.pipeline.backfill import NothingToDo, Progress, RunReport

FROM_OPT = typer.Option(..., "--from", help="First date (YYYY-MM-DD, source timezone).")
TO_OPT = typer.Option(..., "--to", help="Last date, inclusive.")
NOTIFY_OPT = typer.Option(
    False,
    "--notify",
    help="Queue each payload's change notifications too (default: suppressed; one summary "
    "is queued at the end either way).",
)
MASS_OPT = typer.Option(
    False, "--allow-mass-delete", help="Apply snapshots that delete more than the threshold."
)


def _dates(days: list[date]) -> str:
    return ", ".join(d.isoformat() for d in days)


@contextmanager
def _progress(label: str, quiet: bool) -> Iterator[Progress]:
    """A per-payload progress bar on stderr (nothing when stderr is not a terminal)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    if quiet or not err.is_terminal:
        yield lambda _done, _total, _ref: None
        return
    with Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}"),
        console=err,
        transient=True,
    ) as bar:
        task = bar.add_task("", total=None)

        def step(done: int, total: int, ref: PayloadRef | None) -> None:
            shown = f"{iso(ref.published_at)} applied" if ref is not None else "starting"
            bar.update(task, completed=done, total=total, description=shown)

        yield step


def _warn_missing(source: str, days: list[date]) -> None:
    if days:
        err.print(
            f"[yellow]warning:[/] {source}: {len(days)} publication day(s) have no archived "
            f"payload and cannot be replayed: {_dates(days)} (they are recorded as gaps)",
            markup=True,
        )


def _render_run(report: RunReport | NothingToDo, json_out: bool) -> None:
    from feedledger.pipeline.backfill import NothingToDo

    if isinstance(report, NothingToDo):
        if report.hint:
            err.print(f"[yellow]warning:[/] {report.source}: {report.hint}", markup=True)
        if json_out:
            emit_json(report)
        else:
            out.print(f"{report.source}: nothing to do ({report.kind}): {report.reason}.")
        return
    if json_out:
        emit_json(report)
        return
    if report.fetched:
        out.print(f"fetched into the archive first: {len(report.fetched)} payload(s)")
    if report.resumed:
        out.print(
            f"resumed run {report.run_id} (interrupted {report.resumed} time(s)); it "
            "keeps its run id"
        )
    table(
        f"{report.kind} of {report.source}: run {report.run_id}",
        ["published_at", "payload_id", "changes"],
        [[when(s.published_at), s.payload_id, s.changes] for s in report.steps],
    )
    if report.kind == "replay":
        out.print(
            f"retracted first: {report.retracted_payloads} payload(s), "
            f"{report.retracted_versions} version(s)"
        )
    out.print(
        f"gaps recorded: {report.gaps_recorded}; notifications "
        f"{'queued per payload' if report.notify else 'suppressed'}; summary queued:"
    )
    out.print(f"  {report.summary}")


def register(app: typer.Typer) -> None:

    @app.command("assess")
    @guarded
    def assess_cmd(
        ctx: typer.Context,
        source: str = typer.Argument(..., help="Source name."),
        start: str = FROM_OPT,
        end: str = TO_OPT,
        no_fetch: bool = typer.Option(
            False, "--no-fetch", help="Do not ask the fetch location what it still serves."
        ),
        json_out: bool = JSON_OPT,
    ) -> None:
        """What a backfill of the window could replay, what arrived late, which
        publication days the archive lacks but the fetch location still serves (a
        backfill fetches them), and which are unrecoverable (neither)."""
        from feedledger.pipeline.assess import assess

        with context(ctx) as c:
            plan = assess(c, source, start, end, fetch=not no_fetch)
        if json_out:
            emit_json(plan)
            return
        _render_plan(plan)

    @app.command("backfill")
    @guarded
    def backfill_cmd(
        ctx: typer.Context,
        source: list[str] = typer.Argument(..., help="ONE source name."),
        start: str = FROM_OPT,
        end: str = TO_OPT,
        notify: bool = NOTIFY_OPT,
        allow_mass_delete: bool = MASS_OPT,
        no_fetch: bool = typer.Option(
            False,
            "--no-fetch",
            help="Use only the archive (default: first archive what the source's fetch "
            "location still serves for the window).",
        ),
        json_out: bool = JSON_OPT,
    ) -> None:
        """Archive what the fetch location still serves for the window, then replay the
        archived payloads after the watermark in it, oldest first, each with its own
        publisher date as valid_from, as ONE run. Run it again after an interruption: it
        continues under the same run id. Nothing to replay is a success (exit 0)."""
        from feedledger.pipeline.backfill import backfill

        def on_plan(plan: Assessment) -> None:
            _warn_missing(plan.source, plan.missing_dates)

        with context(ctx) as c, _progress("backfill", quiet=False) as step:
            report = backfill(
                c,
                source,
                start,
                end,
                notify=notify,
                allow_mass_delete=allow_mass_delete,
                fetch=not no_fetch,
                on_plan=on_plan,
                progress=step,
            )
        _render_run(report, json_out)

    @app.command("replay")
    @guarded
    def replay_cmd(
        ctx: typer.Context,
        source: list[str] = typer.Argument(..., help="ONE source name."),
        start: str = typer.Option(..., "--from", help="Replay from this date on."),
        notify: bool = NOTIFY_OPT,
        allow_mass_delete: bool = MASS_OPT,
        json_out: bool = JSON_OPT,
    ) -> None:
        """Retract the source's versions valid from --from on, then apply every archived
        payload from that date in publisher order (late and restated ones included)."""
        from feedledger.pipeline.backfill import replay

        def on_plan(refs: list[PayloadRef], missing: list[date]) -> None:
            err.print(f"replaying {len(refs)} archived payload(s)")
            _warn_missing(refs[0].source, missing)

        with context(ctx) as c, _progress("replay", quiet=False) as step:
            report = replay(
                c,
                source,
                start,
                notify=notify,
                allow_mass_delete=allow_mass_delete,
                on_plan=on_plan,
                progress=step,
            )
        _render_run(report, json_out)

    @app.command("retract")
    @guarded
    def retract_cmd(
        ctx: typer.Context,
        run_id: str = typer.Argument(
            ..., help="The run whose writes to retract (its id or any unique prefix)."
        ),
        cascade: bool = typer.Option(
            False, "--cascade", help="Also retract the later runs of the source (newest first)."
        ),
        json_out: bool = JSON_OPT,
    ) -> None:
        """Mark every version and gap written by RUN_ID retracted (nothing is deleted) and
        move the watermark back to before it. `--known-at` queries still show the old
        belief."""
        from feedledger.ledger import run_ids
        from feedledger.pipeline.retract import retract_run

        with context(ctx) as c:
            report = retract_run(c, run_ids.resolve(c.store, run_id), cascade=cascade)
        if json_out:
            emit_json(report)
            return
        wm = report.watermark
        out.print(
            f"{report.source}: retraction run {report.run_id} retracted "
            f"{report.versions:,} version(s) from {report.payloads} payload(s) and "
            f"{report.gaps} gap(s) of run(s) {', '.join(report.retracted_runs)}; watermark now "
            f"{iso(wm.published_at) if wm and wm.published_at else 'empty'}"
        )

    @app.command("review")
    @guarded
    def review_cmd(
        ctx: typer.Context,
        run_id: str = typer.Argument(
            ..., help="A live run held for review (its id or any unique prefix)."
        ),
        release: bool = typer.Option(False, "--release", help="Send its notifications."),
        retract: bool = typer.Option(
            False, "--retract", help="Retract the run; its notifications never go out."
        ),
        json_out: bool = JSON_OPT,
    ) -> None:
        """Decide on a live run held for an unusual burst of changes (`runs` shows it
        `held`): release its notifications, or retract it."""
        from feedledger.ledger import run_ids
        from feedledger.pipeline.review import review

        with context(ctx) as c:
            run_id = run_ids.resolve(c.store, run_id)
            data = review(c, run_id, release=release, retract=retract)
        if json_out:
            emit_json(data)
        elif data["action"] == "released":
            out.print(f"run {run_id}: {data['notifications']} notification(s) released")
        else:
            out.print(
                f"run {run_id}: retracted; {data['notifications_cancelled']} notification(s) "
                "cancelled"
            )

    @app.command("gaps")
    @guarded
    def gaps_cmd(
        ctx: typer.Context,
        source: str = typer.Argument(...),
        all_: bool = typer.Option(False, "--all", help="Include retracted gaps."),
        known_at: str | None = typer.Option(None, "--known-at", help="As believed then."),
        json_out: bool = JSON_OPT,
    ) -> None:
        """Stretches of valid time in which the source was not observed, as `asof` judges
        them: a payload applied later for a day inside a gap shrinks or splits it."""
        from feedledger.pipeline import query

        with context(ctx) as c:
            found = query.list_gaps(c, source, include_retracted=all_, known_at=known_at)
        if json_out:
            emit_json(found)
            return
        table(
            f"gaps of {source}",
            ["start", "end", "reason", "run_id", "recorded_at", "retracted_at"],
            [
                [
                    when(g.start_at),
                    when(g.end_at),
                    g.reason,
                    g.run_id[:8],
                    when(g.recorded_at),
                    when(g.retracted_at),
                ]
                for g in found
            ],
            fold=True,
        )

    @gap_app.command("add")
    @guarded
    def gap_add_cmd(
        ctx: typer.Context,
        source: str = typer.Argument(...),
        start: str = FROM_OPT,
        end: str = TO_OPT,
        reason: str = typer.Option(..., "--reason", help="Why the source was not observed."),
        json_out: bool = JSON_OPT,
    ) -> None:
        """Record by hand that SOURCE was not observed from --from to --to (inclusive),
        e.g. when no archive exists for an outage. As-of queries inside it answer
        not_observed."""
        from feedledger.pipeline.manual import add_gap

        with context(ctx) as c:
            gap = add_gap(c, source, start, end, reason)
        if json_out:
            emit_json(gap)
            return
        out.print(
            f"{source}: gap {iso(gap.start_at)} .. {iso(gap.end_at)} recorded by run "
            f"{gap.run_id} ({gap.reason})"
        )

    @app.command("freeze")
    @guarded
    def freeze_cmd(
        ctx: typer.Context,
        source: str = typer.Argument(...),
        reason: str | None = typer.Option(None, "--reason", help="Shown to refused runs."),
        json_out: bool = JSON_OPT,
    ) -> None:
        """Refuse live runs of SOURCE until `thaw` (backfill/replay/retract still work)."""
        from feedledger.pipeline.manual import freeze

        with context(ctx) as c:
            ice, new = freeze(c, source, reason)
        data: dict[str, Any] = {
            "source": ice.source,
            "frozen": True,
            "frozen_at": iso(ice.frozen_at),
            "reason": ice.reason,
            "changed": new,
        }
        if json_out:
            emit_json(data)
        else:
            out.print(
                f"{source}: {'frozen' if new else 'already frozen'} since {data['frozen_at']}"
            )

    @app.command("thaw")
    @guarded
    def thaw_cmd(
        ctx: typer.Context, source: str = typer.Argument(...), json_out: bool = JSON_OPT
    ) -> None:
        """Allow live runs of SOURCE again."""
        from feedledger.pipeline.manual import thaw

        with context(ctx) as c:
            changed = thaw(c, source)
        if json_out:
            emit_json({"source": source, "frozen": False, "changed": changed})
        else:
            out.print(f"{source}: {'thawed' if changed else 'was not frozen'}")


def _render_plan(plan: Assessment) -> None:
    data = plan.to_json()
    out.print(
        f"{plan.source} {data['from']} .. {data['to']}: watermark "
        f"{data['watermark_at'] or 'empty'}; {data['archived_payloads']} archived payload(s)"
    )
    table(
        "replayable (after the watermark, publisher order)",
        ["published_at", "payload_id", "original_name"],
        [[when(p.published_at), p.payload_id, p.original_name] for p in plan.replayable],
    )
    if plan.late:
        out.print(
            f"late (published before the watermark, never applied; fold in with "
            f"`replay --from`): {', '.join(iso(p.published_at) or '' for p in plan.late)}"
        )
    if plan.fetchable:
        out.print(
            f"fetchable now (not archived, still served; `backfill` fetches them): "
            f"{len(plan.fetchable)} -- {_dates(plan.fetchable_dates)}"
        )
    out.print(
        "missing publication days (not archived"
        + (", not served" if plan.fetch_checked else "")
        + f", unrecoverable): {plan.unrecoverable_days}"
        + (f" -- {_dates(plan.unrecoverable_dates)}" if plan.unrecoverable_dates else "")
    )
