"""Runs over a window of publication days (`Source.backfill`, `Source.replay`): their
typed plan and progress callbacks relayed to the pipeline, the pipeline's report as a
typed result, and the one source name a command was given. The parameter lists are
`Source`'s alone."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from typing import Any

from feedledger.api.results import Assessment, NothingToDo, Payload, WindowRun
from feedledger.model.types import RunKind

OnPlan = Callable[[Assessment], None]
OnReplayPlan = Callable[[list[Payload], list[date]], None]
OnProgress = Callable[[int, int, Payload | None], None]  # done, total, payload applied


def window_result(result: Any) -> WindowRun | NothingToDo:
    """The pipeline's report of a backfill or replay, typed."""
    from feedledger.pipeline.catchup.report import NothingToDo as Nothing  # lazy: SQLAlchemy, Arrow

    if isinstance(result, Nothing):
        return NothingToDo(
            result.source, result.reason, RunKind(result.kind), result, hint=result.hint
        )
    return WindowRun.of(result)


def plan_relay(on_plan: OnPlan | None) -> Any:
    """A backfill's plan callback, as the pipeline calls it."""
    if on_plan is None:
        return None
    return lambda plan: on_plan(Assessment.of(plan))


def replay_plan_relay(on_plan: OnReplayPlan | None) -> Any:
    """A replay's plan callback, as the pipeline calls it."""
    if on_plan is None:
        return None
    return lambda refs, missing: on_plan([Payload.of(r) for r in refs], list(missing))


def progress_relay(progress: OnProgress | None) -> Any:
    """A progress callback, as the pipeline calls it (a payload ref, typed here)."""
    if progress is None:
        return None

    def step(done: int, total: int, ref: Any) -> None:
        progress(done, total, Payload.of(ref) if ref is not None else None)

    return step


def one_source(names: str | list[str]) -> str:
    """The one source name of a backfill or replay as typed (the CLI's `backfill a b` or
    `backfill a,b` is refused: ConfigError saying why, before anything is opened)."""
    from feedledger.pipeline.catchup.applying import one_source as one  # lazy: SQLAlchemy, Arrow

    return one(names)
