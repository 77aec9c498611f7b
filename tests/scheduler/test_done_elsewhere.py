"""A scheduler that loses a race is not failing: two schedulers attempt one source at
the same tick, and the rival does the work just before the other takes the source's
lease (ledger/runs/lease_rival.rival_before_lease). The loser's attempt is `done_elsewhere`:
no failure counted, no backoff, shown so in the log line, `health` and the metrics.
SQLite and PostgreSQL.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from feedledger.config import Workspace
from feedledger.context import Context
from feedledger.ledger import schedule_state
from feedledger.model.timeutil import to_us
from feedledger.pipeline.scheduling import Attempt, attempt
from feedledger.scheduler.metrics import Metrics
from helpers import Cli
from ledger.runs.lease_rival import NOW, rival_before_lease
from pipeline.backfill_scenario import at
from pipeline.missed_week import SRC, WEEK, setup

# the evening of 08-03 in America/Denver: one publication (08-03's) due
ONE_DUE = to_us(datetime(2026, 8, 4, 4, 0, tzinfo=UTC))


def tick_at(now: int) -> Any:
    def tick(ctx: Context) -> Attempt:
        return attempt(ctx, ctx.workspace.source(SRC), now, random.Random(0))

    return tick


def race(monkeypatch: pytest.MonkeyPatch, ws: Workspace, now: int) -> tuple[Attempt, Attempt]:
    """(the rival's attempt, the loser's), both at `now`."""
    tick = tick_at(now)
    with (
        rival_before_lease(monkeypatch, ws, tick) as rival,
        Context(Workspace.load(ws.config_path)) as ctx,
    ):
        late = tick(ctx)
    (first,) = rival
    return first, late


def schedule(ws: Workspace) -> schedule_state.State:
    with Context(Workspace.load(ws.config_path)) as ctx:
        return schedule_state.get(ctx.store, SRC)


def runs_counted(metrics: Metrics, action: str, outcome: str) -> float | None:
    labels = {"source": SRC, "action": action, "outcome": outcome}
    return metrics.registry.get_sample_value("feedledger_runs_total", labels)


def test_a_recovery_another_scheduler_finished_is_done_elsewhere(
    cli: Cli, workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    setup(cli, tmp_path)
    first, late = race(monkeypatch, workspace, NOW)
    assert (first.action, first.outcome) == ("recover", "recovered")
    assert (late.action, late.outcome, late.error, late.run_id) == (
        "recover",
        "done_elsewhere",
        None,
        None,
    )
    assert late.detail["done_by_run"] == first.run_id
    assert late.detail["watermark_at"] == at(WEEK[-1])
    line = late.to_json()
    assert (line["event"], line["outcome"], line["done_by_run"]) == (
        "run",
        "done_elsewhere",
        first.run_id,
    )
    state = schedule(workspace)
    assert (state.last_outcome, state.failures, state.next_attempt_at) == (
        "done_elsewhere",
        0,
        None,
    )
    health = cli.json("health", SRC, "--at", "2026-08-11T18:00:00+00:00")["sources"][0]
    assert health["schedule"]["last_outcome"] == "done_elsewhere"
    assert (health["schedule"]["failures"], health["missed_publications"]) == (0, 0)
    metrics = Metrics()
    metrics.observe(late)
    assert runs_counted(metrics, "recover", "done_elsewhere") == 1
    assert runs_counted(metrics, "recover", "waiting") is None


def test_a_live_payload_another_scheduler_applied_is_done_elsewhere(
    cli: Cli, workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    setup(cli, tmp_path, [WEEK[0]])
    first, late = race(monkeypatch, workspace, ONE_DUE)
    assert (first.action, first.outcome, first.payloads) == ("live", "applied", 1)
    assert (late.action, late.outcome, late.error) == ("live", "done_elsewhere", None)
    assert late.detail["done_by_run"] == first.run_id
    state = schedule(workspace)
    assert (state.last_outcome, state.failures, state.next_attempt_at) == (
        "done_elsewhere",
        0,
        None,
    )
    assert cli.json("watermark", SRC)["published_at"] == at(WEEK[0])


def test_nothing_new_without_a_rival_still_backs_off(
    cli: Cli, workspace: Workspace, tmp_path: Path
) -> None:
    """The same attempt with nobody racing: the payload was applied before the attempt
    began, so the publisher has nothing new yet -- a near miss (not a failure), tried
    again after a backoff."""
    setup(cli, tmp_path, [WEEK[0]])
    tick = tick_at(ONE_DUE)
    with Context(Workspace.load(workspace.config_path)) as ctx:
        assert tick(ctx).outcome == "applied"
    later = ONE_DUE + 3_600_000_000
    with Context(Workspace.load(workspace.config_path)) as ctx:
        src = ctx.workspace.source(SRC)
        again = attempt(ctx, src, later, random.Random(0))
    assert again.outcome == "not_yet_published"
    state = schedule(workspace)
    assert state.failures == 0 and state.next_attempt_at is not None
    assert state.next_attempt_at > later
