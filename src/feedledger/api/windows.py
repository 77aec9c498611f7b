"""Runs over a window of publication days through the public API: backfill and
replay (`Source.backfill`/`replay`, and by name `Ledger.backfill`/`replay` as the CLI
takes them), with typed plan and progress callbacks."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

from feedledger.api.reports import Assessment, NothingToDo, Payload, WindowRun
from feedledger.api.times import When, day
from feedledger.model.types import RunKind

if TYPE_CHECKING:
    from feedledger.context import Context


def _window(result: Any) -> WindowRun | NothingToDo:
    from feedledger.pipeline.catchup.report import NothingToDo as Nothing

    if isinstance(result, Nothing):
        return NothingToDo(
            result.source, result.reason, RunKind(result.kind), result, hint=result.hint
        )
    return WindowRun.of(result)


OnPlan = Callable[[Assessment], None]
OnReplayPlan = Callable[[list[Payload], list[date]], None]
OnProgress = Callable[[int, int, Payload | None], None]  # done, total, payload applied


def day_arg(ctx: Context, source: str, value: When | str, what: str) -> date | str:
    """A window bound for the pipeline: text as typed (parsed there, in the source's
    timezone), a date as it is, an instant's date in the source's timezone."""
    if isinstance(value, datetime):
        return day(value, ctx.workspace.source(source).timezone, what)
    return value


def _progress(progress: OnProgress | None) -> Any:
    if progress is None:
        return None

    def step(done: int, total: int, ref: Any) -> None:
        progress(done, total, Payload.of(ref) if ref is not None else None)

    return step


def run_backfill(
    ctx: Context,
    source: str | list[str],
    start: When | str,
    end: When | str,
    *,
    notify: bool = False,
    fetch: bool = True,
    allow_mass_delete: bool = False,
    on_plan: OnPlan | None = None,
    progress: OnProgress | None = None,
) -> WindowRun | NothingToDo:
    """`Source.backfill` / `Ledger.backfill` (`source`: ONE name; a list or a
    comma-separated text of several is refused, as the CLI's `backfill a b` is)."""
    from feedledger.pipeline.catchup.backfill import backfill

    names = [source] if isinstance(source, str) else source
    one = names[0] if len(names) == 1 and "," not in names[0] else None
    return _window(
        backfill(
            ctx,
            source,
            day_arg(ctx, one, start, "start") if one else start,
            day_arg(ctx, one, end, "end") if one else end,
            notify=notify,
            fetch=fetch,
            allow_mass_delete=allow_mass_delete,
            on_plan=(lambda plan: on_plan(Assessment.of(plan))) if on_plan else None,
            progress=_progress(progress),
        )
    )


def run_replay(
    ctx: Context,
    source: str | list[str],
    start: When | str,
    *,
    notify: bool = False,
    allow_mass_delete: bool = False,
    on_plan: OnReplayPlan | None = None,
    progress: OnProgress | None = None,
) -> WindowRun | NothingToDo:
    """`Source.replay` / `Ledger.replay` (`source` as in `run_backfill`)."""
    from feedledger.pipeline.catchup.backfill import replay

    names = [source] if isinstance(source, str) else source
    one = names[0] if len(names) == 1 and "," not in names[0] else None
    return _window(
        replay(
            ctx,
            source,
            day_arg(ctx, one, start, "start") if one else start,
            notify=notify,
            allow_mass_delete=allow_mass_delete,
            on_plan=(
                (lambda refs, missing: on_plan([Payload.of(r) for r in refs], list(missing)))
                if on_plan
                else None
            ),
            progress=_progress(progress),
        )
    )
