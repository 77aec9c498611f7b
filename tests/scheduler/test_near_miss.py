"""A source polled before its publication appears (a near miss: `not_yet_published`)
is not failing: the fetch worked and found nothing new published (invariant 12). No
failure is counted (`health`'s `schedule.failures`, the `failing` alert, the metrics'
`failed` outcome), a failure before it is no longer consecutive, and the source is still
tried again, less and less often while the publication stays away -- and, as long as it
does, health still counts it missed. SQLite and PostgreSQL, under a fake clock."""

from __future__ import annotations

import io
import json
import random
from pathlib import Path
from typing import Any

from sqlalchemy import select

from feedledger.config import Workspace
from feedledger.context import Context
from feedledger.ledger import schedule_state
from feedledger.ledger.schema import outbox
from feedledger.ledger.store import Store
from feedledger.model.timeutil import iso, parse_instant, to_us
from feedledger.pipeline.scheduling import attempt
from feedledger.scheduler.loop import Options, Scheduler
from feedledger.scheduler.metrics import Metrics
from helpers import Cli
from scheduler.fake_clock import FakeClock as Clock

SRC = "parcels"
TZ = "America/Denver"
RETRY_S = 600


def publish(feed: Path, day: str) -> None:
    feed.mkdir(parents=True, exist_ok=True)
    (feed / f"{SRC}_{day}.csv").write_text(f"parcel,zoning\n0714-22-1,{day}\n")


def tick(sched: Scheduler) -> list[dict[str, Any]]:
    assert isinstance(sched.log, io.StringIO)
    before = len(sched.log.getvalue().splitlines())
    sched.tick(wait=True)
    lines = [json.loads(x) for x in sched.log.getvalue().splitlines()[before:]]
    return [x for x in lines if x["event"] == "run"]


def state(ws: Workspace) -> schedule_state.State:
    with Context(Workspace.load(ws.config_path)) as ctx:
        return schedule_state.get(ctx.store, SRC)


def alert_topics(cli: Cli) -> list[str]:
    store = Store(cli.ws.store_url)
    try:
        with store.engine.connect() as conn:
            return [r.topic for r in conn.execute(select(outbox)) if r.topic != "changes"]
    finally:
        store.close()


def source_health(cli: Cli, at: int) -> dict[str, Any]:
    result = cli("health", SRC, "--at", iso(at), "--json", expect=None)
    (got,) = json.loads(result.stdout)["sources"]
    return dict(got)


def started(cli: Cli, feed: Path) -> tuple[Scheduler, Clock]:
    """`parcels`, published daily at 06:00 (Denver), 08-01 applied; 08-02 not yet out."""
    publish(feed, "2026-08-01")
    cli("source", "add", SRC, "--key", "parcel", "--timezone", TZ, "--fetch", str(feed),
        "--publish-at", "06:00", "--retry", str(RETRY_S))  # fmt: skip
    clock = Clock("2026-08-01T07:00")
    sched = Scheduler(cli.ws.config_path, Options(workers=1, dispatch=False), clock, io.StringIO())
    assert [r["outcome"] for r in tick(sched)] == ["applied"]
    return sched, clock


def test_a_publication_polled_before_it_appears_is_a_near_miss_not_a_failure(
    cli: Cli, tmp_path: Path
) -> None:
    feed = tmp_path / "feed"
    sched, clock = started(cli, feed)
    applied = state(cli.ws).last_success_at
    clock.now = to_us(parse_instant("2026-08-02T06:00", TZ))  # 08-02 is due, not out yet
    waits: list[int] = []
    for _ in range(10):  # polled again and again while it stays away
        (line,) = tick(sched)
        assert (line["outcome"], line["error"]) == ("not_yet_published", None), line
        got = state(cli.ws)
        assert (got.last_outcome, got.failures) == ("not_yet_published", 0)
        assert got.last_success_at == applied  # it did not get the publication
        assert got.next_attempt_at is not None and got.next_attempt_at > clock.now
        waits.append(got.next_attempt_at - clock.now)
        clock.now = got.next_attempt_at
    # tried again less and less often (from its lateness: an hour apart at most)
    assert waits[0] <= RETRY_S * 1_000_000 < waits[-1] <= 3600 * 1_000_000, waits
    health = source_health(cli, clock.now)
    assert health["schedule"]["failures"] == 0
    assert health["schedule"]["last_outcome"] == "not_yet_published"
    assert health["missed_publications"] == 1  # still behind: 08-02 has not come
    assert "failing" not in alert_topics(cli)
    # it comes: applied at the next try, as ever
    publish(feed, "2026-08-02")
    (line,) = tick(sched)
    assert line["outcome"] == "applied"
    assert state(cli.ws).failures == 0


def test_a_near_miss_after_a_failure_ends_the_failures_and_is_no_failed_outcome(
    cli: Cli, tmp_path: Path
) -> None:
    feed = tmp_path / "feed"
    started(cli, feed)
    now = to_us(parse_instant("2026-08-02T06:00", TZ))
    hidden = tmp_path / "hidden"
    feed.rename(hidden)  # the location is gone: a failure
    metrics = Metrics()
    with Context(Workspace.load(cli.ws.config_path)) as ctx:
        failed = attempt(ctx, ctx.workspace.source(SRC), now, random.Random(0))
    assert failed.outcome == "failed" and failed.error
    assert state(cli.ws).failures == 1
    hidden.rename(feed)  # back, and 08-02 still not out: a near miss
    later = state(cli.ws).next_attempt_at
    assert later is not None
    with Context(Workspace.load(cli.ws.config_path)) as ctx:
        near = attempt(ctx, ctx.workspace.source(SRC), later, random.Random(0))
    assert (near.outcome, near.error) == ("not_yet_published", None)
    got = state(cli.ws)
    assert (got.failures, got.last_error) == (0, None)
    metrics.observe(near)
    labels = {"source": SRC, "action": "live"}
    sample = metrics.registry.get_sample_value
    assert sample("feedledger_runs_total", {**labels, "outcome": "not_yet_published"}) == 1
    assert sample("feedledger_runs_total", {**labels, "outcome": "failed"}) is None
    assert source_health(cli, later)["schedule"]["failures"] == 0
