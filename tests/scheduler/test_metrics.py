"""A scheduler's metrics after a tick (scheduler/metrics.py), on SQLite and PostgreSQL:
each destination's live route lag (what deploy/prometheus/feedledger-rules.yml's
FeedledgerDestinationLagging reads) and the process's last tick and attempts in flight
(FeedledgerSchedulerStuck)."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from pathlib import Path

from feedledger.scheduler.loop import Options, Scheduler
from feedledger.scheduler.metrics import Metrics
from helpers import Cli


def test_a_tick_sets_the_destination_lag_and_the_heartbeat(cli: Cli, tmp_path: Path) -> None:
    feed = tmp_path / "feed"
    feed.mkdir()
    today = datetime.now(UTC).date()
    yesterday = today - timedelta(days=1)
    for day, value in [(yesterday, "a"), (today, "b")]:
        (feed / f"alpha_{day}.csv").write_text(f"id,v\n1,{value}\n2,fixed\n")
    cli("source", "add", "alpha", "--key", "id", "--fetch", str(feed))
    cli("ingest", "alpha", str(feed / f"alpha_{yesterday}.csv"))
    dest = str(tmp_path / "search.db")
    cli("destination", "add", "search", "--source", "alpha", "--sqlite", dest, "--table", "t")

    metrics = Metrics()
    sched = Scheduler(
        cli.ws.config_path, Options(workers=1, dispatch=False), log=io.StringIO(), metrics=metrics
    )
    try:
        before = datetime.now(UTC).timestamp()
        sched.tick(wait=True)  # today's publication applied: one change the route has not synced
    finally:
        sched.close()

    def value(name: str, **labels: str) -> float | None:
        return metrics.registry.get_sample_value(name, labels)

    where = {"destination": "search", "source": "alpha"}
    assert value("feedledger_destination_messages_behind", **where) == 1
    assert value("feedledger_destination_changes_behind", **where) == 1
    assert value("feedledger_destination_paused", **where) == 0
    lag = value("feedledger_destination_lag_seconds", **where)
    assert lag is not None and lag >= 0
    last_tick = value("feedledger_scheduler_last_tick_timestamp_seconds")
    assert last_tick is not None and last_tick >= before
    assert value("feedledger_scheduler_attempts_in_flight") == 0
    runs = value("feedledger_runs_total", source="alpha", action="live", outcome="applied")
    assert runs == 1
