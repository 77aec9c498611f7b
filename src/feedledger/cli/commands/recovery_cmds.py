"""Recovery commands: assess, backfill, replay, retract, review (gaps, gap add, freeze
and thaw are in gap_cmds.py).

The procedure after an outage: `freeze` the source, `assess` the window, `backfill` it
(one run, each payload with its own publisher date, notifications suppressed and one
summary queued), `thaw`. A catch-up that stamped the wrong dates is undone with
`retract RUN_ID` and redone with `replay SOURCE --from D`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

import typer

from feedledger.cli.commands.sync_render import CountLog, rate_column
from feedledger.cli.common import (
    JSON_OPT,
    emit_json,
    err,
    ledger,
    out,
    table,
    warn_invalid_geometries,
    when,
)

if TYPE_CHECKING:
    from feedledger.api.results import Assessment, NothingToDo, Payload, WindowRun
    from feedledger.api.windows import OnProgress

FROM_OPT = typer.Option(..., "--from", help="First date (YYYY-MM-DD, source timezone).")
TO_OPT = typer.Option(..., "--to", help="Last date, inclusive.")
NOTIFY_OPT = typer.Option(
    False,
    "--notify",
    help="Queue each payload's change notifications too (default: suppressed; one summary "
    "is queued at the end either way).",
)
PROGRESS_OPT = typer.Option(
    10.0,
    "--progress-every",
    min=0.0,
    help="With stderr not a terminal, a progress line this often (s; 0: never).",
)
MASS_OPT = typer.Option(
    False, "--allow-mass-delete", help="Apply snapshots that delete more than the threshold."
)


def dates(days: list[date]) -> str:
    return ", ".join(d.isoformat() for d in days)


@contextmanager
def _progress(label: str, quiet: bool, every_s: float = 10.0) -> Iterator[OnProgress]:
    """A per-payload progress bar on stderr (counts and rate); when stderr is not a
    terminal (a log), a plain line every `every_s` seconds (0: none) and at the end."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn  # lazy: bars only

    if quiet or (not err.is_terminal and every_s <= 0):
        yield lambda _done, _total, _ref: None
        return
    if not err.is_terminal:
        log = CountLog(label, "payloads", every_s, lambda line: err.print(line, markup=False))

        def line(done: int, total: int, ref: Payload | None) -> None:
            if ref is not None:  # the start (no payload yet) is not a line
                log(done, total, f"{when(ref.published_at)} applied")

        yield line
        return
    with Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        rate_column("payloads"),
        TextColumn("{task.description}"),
        console=err,
        transient=True,
    ) as bar:
        task = bar.add_task("", total=None)

        def step(done: int, total: int, ref: Payload | None) -> None:
            shown = f"{ref.published_at.isoformat()} applied" if ref is not None else "starting"
            bar.update(task, completed=done, total=total, description=shown)

        yield step


def _warn_missing(source: str, days: list[date]) -> None:
    if days:
        err.print(
            f"[yellow]warning:[/] {source}: {len(days)} publication day(s) have no archived "
            f"payload and cannot be replayed: {dates(days)} (they are recorded as gaps)",
            markup=True,
        )


def _render_run(report: WindowRun | NothingToDo, json_out: bool) -> None:
    from feedledger.api.results import NothingToDo  # lazy: --help loads no API

    if isinstance(report, NothingToDo):
        if report.hint:
            err.print(f"[yellow]warning:[/] {report.source}: {report.hint}", markup=True)
        if json_out:
            emit_json(report.to_json())
        else:
            out.print(f"{report.source}: nothing to do ({report.kind}): {report.reason}.")
        return
    warn_invalid_geometries(report.source, report.invalid_geometries)
    if json_out:
        emit_json(report.to_json())
        return
    if report.fetched:
        out.print(f"fetched into the archive first: {report.fetched} payload(s)")
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
            f"{report.retracted_versions} version(s); not delivered yet, now cancelled: "
            f"{report.notifications_cancelled} notification(s), "
            f"{report.messages_cancelled} message(s)"
        )
    out.print(
        f"gaps recorded: {report.gaps_recorded}; notifications "
        f"{'queued per payload' if report.notify else 'suppressed'}; summary queued:"
    )
    out.print(f"  {report.summary}")


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
    backfill fetches them; those not after the watermark are then folded in by
    replay), and which are unrecoverable (neither)."""
    with ledger(ctx) as led:
        plan = led.source(source).assess(start, end, fetch=not no_fetch)
    if json_out:
        emit_json(plan.to_json())
        return
    _render_plan(plan)


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
    progress_every: float = PROGRESS_OPT,
    json_out: bool = JSON_OPT,
) -> None:
    """Archive what the fetch location still serves for the window, then replay the
    archived payloads after the watermark in it, oldest first, each with its own
    publisher date as valid_from, as ONE run. Run it again after an interruption: it
    continues under the same run id. Nothing to replay is a success (exit 0); only
    payloads older than the watermark in the window (late or restated, archived or
    fetched now) refuse it (exit 2), pointing at `replay`, which folds them in."""

    from feedledger.api.windows import one_source  # lazy: --help loads no API

    def on_plan(plan: Assessment) -> None:
        _warn_missing(plan.source, plan.missing_dates)

    with ledger(ctx) as led, _progress("backfill", False, progress_every) as step:
        report = led.source(one_source(source)).backfill(
            start,
            end,
            notify=notify,
            allow_mass_delete=allow_mass_delete,
            fetch=not no_fetch,
            on_plan=on_plan,
            progress=step,
        )
    _render_run(report, json_out)


def replay_cmd(
    ctx: typer.Context,
    source: list[str] = typer.Argument(..., help="ONE source name."),
    start: str = typer.Option(..., "--from", help="Replay from this date on."),
    notify: bool = NOTIFY_OPT,
    allow_mass_delete: bool = MASS_OPT,
    progress_every: float = PROGRESS_OPT,
    json_out: bool = JSON_OPT,
) -> None:
    """Retract the source's versions valid from --from on, then apply every archived
    payload from that date in publisher order (late and restated ones included)."""

    from feedledger.api.windows import one_source  # lazy: --help loads no API

    def on_plan(refs: list[Payload], missing: list[date]) -> None:
        err.print(f"replaying {len(refs)} archived payload(s)")
        _warn_missing(refs[0].source, missing)

    with ledger(ctx) as led, _progress("replay", False, progress_every) as step:
        report = led.source(one_source(source)).replay(
            start,
            notify=notify,
            allow_mass_delete=allow_mass_delete,
            on_plan=on_plan,
            progress=step,
        )
    _render_run(report, json_out)


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
    with ledger(ctx) as led:
        report = led.retract(run_id, cascade=cascade)
    data = report.to_json()
    if json_out:
        emit_json(data)
        return
    out.print(
        f"{report.source}: retraction run {report.run_id} retracted "
        f"{report.versions:,} version(s) from {report.payloads} payload(s) and "
        f"{report.gaps} gap(s) of run(s) {', '.join(report.retracted_runs)}; watermark now "
        f"{data['watermark']['published_at'] or 'empty'}"
    )


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
    with ledger(ctx) as led:
        decision = led.review(run_id, release=release, retract=retract)
    if json_out:
        emit_json(decision.to_json())
    elif decision.action == "released":
        out.print(f"run {decision.run_id}: {decision.notifications} notification(s) released")
    else:
        out.print(
            f"run {decision.run_id}: retracted; {decision.notifications_cancelled} "
            "notification(s) cancelled"
        )


def _render_plan(plan: Assessment) -> None:
    data = plan.to_json()
    out.print(
        f"{plan.source} {data['from']} .. {data['to']}: watermark "
        f"{data['watermark_at'] or 'empty'}; {data['archived_payloads']} archived payload(s)"
    )
    table(
        "replayable (after the watermark, publisher order)",
        ["published_at", "payload_id", "original_name"],
        [
            [_when(p["published_at"]), p["payload_id"], p["original_name"]]
            for p in data["replayable"]
        ],
    )
    if data["late"]:
        out.print(
            f"late (published before the watermark, never applied; fold in with "
            f"`replay --from`): {', '.join(p['published_at'] or '' for p in data['late'])}"
        )
    late = set(plan.fetchable_late_dates)
    ahead = [d for d in plan.fetchable_dates if d not in late]
    if ahead:
        out.print(
            f"fetchable now (not archived, still served; `backfill` fetches and applies "
            f"them): {len(ahead)} day(s) -- {dates(ahead)}"
        )
    if late:
        first = min(late).isoformat()
        out.print(
            f"fetchable but not after the watermark (not archived, still served; "
            f"`backfill` only archives them, never applying them over newer state; then "
            f"`feedledger replay {plan.source} --from {first}` folds them in): "
            f"{len(late)} day(s) -- {dates(sorted(late))}"
        )
    out.print(
        "missing publication days (not archived"
        + (", not served" if data["fetch_checked"] else "")
        + f", unrecoverable): {data['unrecoverable_days']}"
        + (f" -- {dates(plan.unrecoverable_dates)}" if plan.unrecoverable_dates else "")
    )


def _when(text: Any) -> str:
    return when(datetime.fromisoformat(text) if text else None)
