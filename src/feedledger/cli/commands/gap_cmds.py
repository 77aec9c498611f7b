"""Gap and freeze commands: gaps, gap add, freeze, thaw (see recovery_cmds.py for the
procedure after an outage they belong to)."""

from __future__ import annotations

import typer

from feedledger.cli.commands.recovery_cmds import FROM_OPT, TO_OPT
from feedledger.cli.common import JSON_OPT, emit_json, ledger, opt_instant, out, table, when


def gaps_cmd(
    ctx: typer.Context,
    source: str = typer.Argument(...),
    all_: bool = typer.Option(False, "--all", help="Include retracted gaps."),
    known_at: str | None = typer.Option(None, "--known-at", help="As believed then."),
    json_out: bool = JSON_OPT,
) -> None:
    """Stretches of valid time in which the source was not observed, as `asof` judges
    them: a payload applied later for a day inside a gap shrinks or splits it."""
    with ledger(ctx) as led:
        src = led.source(source)
        known = opt_instant(known_at, src.config.timezone, "--known-at")
        found = src.gaps(known_at=known, include_retracted=all_)
    if json_out:
        emit_json([g.to_json() for g in found])
        return
    table(
        f"gaps of {source}",
        ["start", "end", "reason", "run_id", "recorded_at", "retracted_at"],
        [
            [
                when(g.start),
                when(g.end),
                g.reason,
                g.run_id[:8],
                when(g.recorded_at),
                when(g.retracted_at),
            ]
            for g in found
        ],
        fold=True,
    )


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
    with ledger(ctx) as led:
        gap = led.source(source).add_gap(start, end, reason)
    if json_out:
        emit_json(gap.to_json())
        return
    out.print(
        f"{source}: gap {gap.start.isoformat()} .. {gap.end.isoformat()} recorded by run "
        f"{gap.run_id} ({gap.reason})"
    )


def freeze_cmd(
    ctx: typer.Context,
    source: str = typer.Argument(...),
    reason: str | None = typer.Option(None, "--reason", help="Shown to refused runs."),
    json_out: bool = JSON_OPT,
) -> None:
    """Refuse live runs of SOURCE until `thaw` (backfill/replay/retract still work)."""
    with ledger(ctx) as led:
        state = led.source(source).freeze(reason)
    data = state.to_json()
    if json_out:
        emit_json(data)
    else:
        out.print(
            f"{source}: {'frozen' if state.changed else 'already frozen'} since {data['frozen_at']}"
        )


def thaw_cmd(
    ctx: typer.Context, source: str = typer.Argument(...), json_out: bool = JSON_OPT
) -> None:
    """Allow live runs of SOURCE again."""
    with ledger(ctx) as led:
        state = led.source(source).thaw()
    if json_out:
        emit_json(state.to_json())
    else:
        out.print(f"{source}: {'thawed' if state.changed else 'was not frozen'}")
