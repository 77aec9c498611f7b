"""Work decided before the lease is decided again under it (Invariant 7, the
scheduler race). Each test lets a rival -- another worker, with its own context --
do the work at the one moment that matters: after the caller looked at the ledger and
decided there was work, just before it takes the source's lease. SQLite and PostgreSQL.

* a backfill (the scheduler's recovery) whose window the rival applied: NothingToDo,
  no run record, no summary notification (two "recovered" runs of one source were
  seen once in tests/scheduler/test_processes.py);
* a replay while the rival ingests a newer payload: the replay retracts it with the
  rest, so it applies it again (listed under the lease);
* a live ingest of a payload the rival applied: already applied, no failed run;
* a retraction of a run the rival retracted: refused as "nothing standing", no second
  retraction run, no second retraction notice;
* (no lease, same pattern) a release of a held run a rival reviewer retracted: refused,
  the run stays retracted, its notifications cancelled.
"""

from __future__ import annotations

import random
from datetime import date, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from feedledger.config import Workspace
from feedledger.context import Context
from feedledger.ledger.records import Run
from feedledger.ledger.runs import leases
from feedledger.ledger.runs.lookup import list_runs
from feedledger.ledger.schema import applications, gaps
from feedledger.model.timeutil import to_us
from feedledger.pipeline.catchup.backfill import NothingToDo, RunReport, backfill
from feedledger.pipeline.catchup.replay import replay
from feedledger.pipeline.intake.ingest import ingest
from helpers import Cli
from ledger.runs.lease_rival import NOW, rival_before_lease
from pipeline.backfill_scenario import at, fetch, outbox_rows, zonings
from pipeline.missed_week import OTHER, SRC, WEEK, publish, setup


def denver(day: str) -> int:
    """00:00 America/Denver (MDT) of an August `day`, in microseconds."""
    return to_us(datetime.fromisoformat(at(day)))


def source_runs(ws: Workspace) -> list[Run]:
    with Context(Workspace.load(ws.config_path)) as ctx:
        return list_runs(ctx.store, SRC)


def summaries(ws: Workspace) -> list[Any]:
    return [r for r in outbox_rows(ws) if r.topic == "summary"]


def week_backfill(ctx: Context) -> RunReport | NothingToDo:
    return backfill(ctx, SRC, WEEK[0], WEEK[-1])


def test_a_backfill_whose_window_a_rival_applied_first_leaves_no_run(
    cli: Cli, workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    setup(cli, tmp_path)
    with (
        rival_before_lease(monkeypatch, workspace, week_backfill) as rival,
        Context(Workspace.load(workspace.config_path)) as ctx,
    ):
        got = week_backfill(ctx)
    (won,) = rival
    assert isinstance(won, RunReport) and len(won.steps) == len(WEEK)
    assert isinstance(got, NothingToDo) and got.kind == "backfill"
    assert "at or before the watermark" in got.reason
    # one backfill run, the rival's, with every payload; nothing left by the other
    (run,) = [r for r in source_runs(workspace) if r.kind == "backfill"]
    assert (run.run_id, run.status, run.payloads) == (won.run_id, "succeeded", len(WEEK))
    assert [r.run_id for r in summaries(workspace)] == [won.run_id]
    assert all(g.run_id == won.run_id for g in fetch(workspace, select(gaps))[0])
    assert zonings(cli)[-1] == (at("2026-08-09"), "MU-3")


def test_the_schedulers_recovery_finished_by_another_scheduler_is_one_recovered_run(
    cli: Cli, workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two schedulers attempt the source at the same tick: both see the week waiting
    (outside the lease); the rival recovers it while the other reaches for the lease."""
    from feedledger.pipeline.scheduling import attempt

    setup(cli, tmp_path)

    def tick(ctx: Context) -> Any:
        return attempt(ctx, ctx.workspace.source(SRC), NOW, random.Random(0))

    with (
        rival_before_lease(monkeypatch, workspace, tick) as rival,
        Context(Workspace.load(workspace.config_path)) as ctx,
    ):
        late = tick(ctx)
    (first,) = rival
    assert (first.action, first.outcome, first.payloads) == ("recover", "recovered", len(WEEK))
    assert late.action == "recover" and late.outcome != "recovered"
    assert late.run_id is None and late.error is None
    backfills = [r for r in source_runs(workspace) if r.kind == "backfill"]
    assert [(r.run_id, r.status) for r in backfills] == [(first.run_id, "succeeded")]
    assert [r.run_id for r in summaries(workspace)] == [first.run_id]
    assert cli.json("watermark", SRC)["published_at"] == at("2026-08-11")


def test_a_replay_applies_again_what_a_rival_ingested_before_its_lease(
    cli: Cli, workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The replay listed 08-03 .. 08-05; the rival's live run applies 08-06 before the
    replay's lease. The replay retracts everything from 08-03, 08-06 included, so it must
    apply 08-06 again: the watermark never goes back."""
    setup(cli, tmp_path, [])
    feed = tmp_path / "exports"
    for day in WEEK[:3]:
        cli("ingest", SRC, str(publish(feed, day)), "--published-at", day)
    newer = publish(tmp_path / "later", "2026-08-06")

    def live(ctx: Context) -> Any:
        return ingest(ctx, SRC, newer.read_bytes(), published_at="2026-08-06")

    with (
        rival_before_lease(monkeypatch, workspace, live) as rival,
        Context(Workspace.load(workspace.config_path)) as ctx,
    ):
        got = replay(ctx, SRC, WEEK[0])
    (won,) = rival
    assert won.status == "applied"
    assert isinstance(got, RunReport) and got.retracted_payloads == 4
    assert [s.published_at for s in got.steps] == [denver(d) for d in (*WEEK[:3], "2026-08-06")]
    assert cli.json("watermark", SRC)["published_at"] == at("2026-08-06")
    assert zonings(cli)[-1] == (at("2026-08-06"), "MU-2")
    standing = [a for a in fetch(workspace, select(applications))[0] if a.retracted_at is None]
    replayed = [a.run_id for a in standing if a.published_at >= denver(WEEK[0])]
    assert replayed == [got.run_id] * 4


def test_a_live_payload_a_rival_applied_first_is_already_applied_not_a_failed_run(
    cli: Cli, workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    setup(cli, tmp_path, [])
    data = publish(tmp_path / "exports", WEEK[0]).read_bytes()

    def live(ctx: Context) -> Any:
        return ingest(ctx, SRC, data, published_at=WEEK[0])

    before = source_runs(workspace)
    with (
        rival_before_lease(monkeypatch, workspace, live) as rival,
        Context(Workspace.load(workspace.config_path)) as ctx,
    ):
        got = live(ctx)
    (won,) = rival
    assert won.status == "applied"
    assert got.status == "already_applied" and got.applied_by == won.run_id
    after = source_runs(workspace)
    assert [r.run_id for r in after[len(before) :]] == [won.run_id]
    assert all(r.status == "succeeded" for r in after)
    assert date.fromisoformat(cli.json("watermark", SRC)["published_at"][:10]) == date(2026, 8, 3)


def test_a_run_a_rival_retracted_first_is_refused_leaving_no_second_retraction(
    cli: Cli, workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from feedledger.model.errors import ConfigError
    from feedledger.pipeline.retract import retract_run

    setup(cli, tmp_path, [])
    path = publish(tmp_path / "exports", WEEK[0])
    target = cli.json("ingest", SRC, str(path), "--published-at", WEEK[0])["run_id"]

    def retract(ctx: Context) -> Any:
        return retract_run(ctx, target)

    with (
        rival_before_lease(monkeypatch, workspace, retract) as rival,
        Context(Workspace.load(workspace.config_path)) as ctx,
        pytest.raises(ConfigError, match="nothing standing to retract"),
    ):
        retract(ctx)
    (won,) = rival
    assert won.versions == 2 and won.retracted_runs == [target]
    retractions = [r for r in source_runs(workspace) if r.kind == "retraction"]
    assert [(r.run_id, r.status) for r in retractions] == [(won.run_id, "succeeded")]
    notices = [r.run_id for r in outbox_rows(workspace) if r.topic == "retraction"]
    assert notices == [won.run_id]
    assert cli.json("watermark", SRC)["published_at"] == at("2026-08-02")


def test_a_release_after_a_rival_retracted_the_held_run_is_refused(
    cli: Cli, workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review has no lease: the release looks at the run (held), then settles it; a rival
    reviewer retracts it in between. The release must not mark the retracted run
    succeeded (it is decided again in the settling transaction)."""
    from feedledger.ledger import notices
    from feedledger.model.errors import ConfigError
    from feedledger.pipeline.review import review
    from pipeline.held_burst import held_burst
    from pipeline.held_burst import setup as review_setup

    review_setup(cli, tmp_path)
    held = held_burst(cli, tmp_path)["run_id"]
    real = notices.settle
    rival: list[Any] = []

    def settle(*args: Any, **kwargs: Any) -> Any:
        if not rival:
            rival.append(None)
            with Context(Workspace.load(workspace.config_path)) as other:
                rival[0] = review(other, held, release=False, retract=True)
        return real(*args, **kwargs)

    monkeypatch.setattr(notices, "settle", settle)
    with (
        Context(Workspace.load(workspace.config_path)) as ctx,
        pytest.raises(ConfigError, match=r"no longer held for review \(status retracted\)"),
    ):
        review(ctx, held, release=True, retract=False)
    assert rival[0]["action"] == "retracted"
    status = {r["run_id"]: r["status"] for r in cli.json("runs", "s")}
    assert status[held] == "retracted"
    mine = [r.status for r in outbox_rows(workspace) if r.run_id == held]
    assert mine and set(mine) == {"cancelled"}


def test_a_run_that_wrote_anything_is_finished_not_removed(
    cli: Cli, workspace: Workspace, tmp_path: Path
) -> None:
    """`leases.NOTHING` removes only a run nothing names: one that recorded a gap is
    finished `succeeded` as usual (runs.discard refuses it)."""
    from feedledger.ledger.gaps import manual as manual_gaps

    setup(cli, tmp_path, [])
    with Context(Workspace.load(workspace.config_path)) as ctx:
        store = ctx.store
        with leases.leased_run(store, SRC, "manual") as run:
            manual_gaps.record_by_hand(
                store, SRC, "America/Denver", denver("2026-08-05"), denver("2026-08-06"),
                "2026-08-05", reason="outage", holder=run.holder, run_id=run.run_id,
            )  # fmt: skip
            run.outcome = leases.NOTHING
        with leases.leased_run(store, SRC, "manual") as empty:
            empty.outcome = leases.NOTHING
    kept = {r.run_id: r.status for r in source_runs(workspace)}
    assert kept[run.run_id] == "succeeded" and empty.run_id not in kept
    assert [g.run_id for g in fetch(workspace, select(gaps))[0]] == [run.run_id]


def count_diffs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One item appended for each diff computed (`bounded.diff`, whole or in partitions,
    what `apply` calls), ahead or not."""
    from feedledger.pipeline.intake import bounded

    diffs: list[int] = []
    real = bounded.diff

    def counted(*args: Any, **kwargs: Any) -> Any:
        diffs.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(bounded, "diff", counted)
    return diffs


def test_a_diff_computed_ahead_is_computed_again_when_a_rival_moved_the_source(
    cli: Cli, workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A live ingest diffs its payload while the bytes are archived, before the lease
    (`apply.diff_ahead`). A rival applies 08-03 in between: the diff against 08-02's
    state is stale, so 08-04 is diffed again under the lease, against 08-03's."""

    setup(cli, tmp_path, [])
    feed = tmp_path / "exports"
    early, late = publish(feed, WEEK[0]).read_bytes(), publish(feed, WEEK[1]).read_bytes()
    diffs = count_diffs(monkeypatch)

    def rival_live(ctx: Context) -> Any:
        return ingest(ctx, SRC, early, published_at=WEEK[0])

    with (
        rival_before_lease(monkeypatch, workspace, rival_live) as rival,
        Context(Workspace.load(workspace.config_path)) as ctx,
    ):
        got = ingest(ctx, SRC, late, published_at=WEEK[1])
    (won,) = rival
    assert won.status == "applied" and won.changes == 2  # 08-02 -> 08-03: KEY, OTHER new
    # against 08-03: only OTHER's owner changed (against 08-02 it would be 2 changes)
    assert got.status == "applied" and got.changes == 1
    assert (got.counts["changed"], got.counts["unchanged"]) == (1, 1)
    assert len(diffs) == 3  # the rival's (ahead, used), this one's ahead, then again
    owners = cli.json("history", SRC, OTHER)
    assert [v["attributes"]["owner"] for v in owners] == [
        "owner-2026-08-03",
        "owner-2026-08-04",
    ]


def test_a_diff_computed_ahead_is_used_when_the_source_did_not_move(
    cli: Cli, workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:

    setup(cli, tmp_path, [])
    data = publish(tmp_path / "exports", WEEK[0]).read_bytes()
    diffs = count_diffs(monkeypatch)
    with Context(Workspace.load(workspace.config_path)) as ctx:
        got = ingest(ctx, SRC, data, published_at=WEEK[0])
    assert got.status == "applied" and got.changes == 2 and len(diffs) == 1
