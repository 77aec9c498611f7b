"""The scheduler follows a source with its Delta export (`export delta --follow`):
after each attempt that applied payloads, the table is brought up to date in the same
process (a `delta_export` log line), on a queue of its own: a slow export does not
hold the worker, the next source's attempt runs meanwhile; `--no-follow` stops it.
Fake clock, no sleeping; SQLite and PostgreSQL."""

from __future__ import annotations

import io
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from feedledger.lake import export as lake_export
from feedledger.scheduler.loop import Options, Scheduler
from helpers import Cli
from lake.delta_scenario import DAYS, HEADER, SRC, assert_equals_history, table_rows
from scheduler.fake_clock import FakeClock

TZ = "UTC"


HANG_S = 60.0  # a hang-detecting deadline, never reached when all is well


def publish(feed: Path, day: str, source: str = SRC) -> None:
    feed.mkdir(parents=True, exist_ok=True)
    lines = [",".join(HEADER)] + [",".join(r) for r in DAYS[day]]
    (feed / f"{source}_{day}.csv").write_text("\n".join(lines) + "\n")


def tick(sched: Scheduler, *, settle: bool = True) -> list[dict[str, Any]]:
    """The log lines of one tick (and, with `settle`, of the exports it queued)."""
    assert isinstance(sched.log, io.StringIO)
    before = len(sched.log.getvalue().splitlines())
    sched.tick(wait=True)
    if settle:
        sched.settled()
    return [json.loads(x) for x in sched.log.getvalue().splitlines()[before:]]


def test_the_scheduler_exports_after_each_applied_run(cli: Cli, tmp_path: Path) -> None:
    feed, uri = tmp_path / "feed", str(tmp_path / "lake")
    cli("source", "add", SRC, "--key", "parcel_id", "--timezone", TZ, "--fetch", str(feed),
        "--publish-at", "06:00")  # fmt: skip
    publish(feed, "2025-08-01")
    clock = FakeClock("2025-08-01T07:00", TZ)
    sched = Scheduler(cli.ws.config_path, Options(workers=1, dispatch=False), clock, io.StringIO())
    try:
        assert [e["outcome"] for e in tick(sched) if e["event"] == "run"] == ["applied"]
        first = cli.json("export", "delta", SRC, "--to", uri, "--follow")
        assert first["delta_version"] == 0
        assert [p["follow"] for p in cli.json("export", "status")] == [True]

        publish(feed, "2025-08-02")
        clock.at("2025-08-02T06:30")
        events = tick(sched)
        assert [e["outcome"] for e in events if e["event"] == "run"] == ["applied"]
        [done] = [e for e in events if e["event"] == "delta_export"]
        assert (done["target"], done["delta_version"], done["committed"]) == (uri, 1, True)
        assert_equals_history(cli, table_rows(uri))

        clock.at("2025-08-03T06:30")  # nothing new published: no run applied, no export
        assert [e for e in tick(sched) if e["event"] == "delta_export"] == []

        cli("export", "delta", SRC, "--to", uri, "--no-follow")
        publish(feed, "2025-08-03")
        clock.at("2025-08-03T09:00")
        events = tick(sched)
        assert [e["outcome"] for e in events if e["event"] == "run"] == ["applied"]
        assert [e for e in events if e["event"] == "delta_export"] == []
    finally:
        sched.close()


def test_a_slow_export_does_not_delay_the_next_sources_run(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    feed_a, feed_b, uri = tmp_path / "a", tmp_path / "b", str(tmp_path / "lake")
    for name, feed in ((SRC, feed_a), ("zeta", feed_b)):
        cli("source", "add", name, "--key", "parcel_id", "--timezone", TZ, "--fetch",
            str(feed), "--publish-at", "06:00")  # fmt: skip
    publish(feed_a, "2025-08-01")
    publish(feed_b, "2025-08-01", "zeta")
    clock = FakeClock("2025-08-01T07:00", TZ)
    sched = Scheduler(cli.ws.config_path, Options(workers=1, dispatch=False), clock, io.StringIO())
    # parcels' attempt first, then zeta's, on the one worker
    monkeypatch.setattr(sched, "_in_turn", lambda ctx: sorted(ctx.workspace.sources.items()))
    started, release = threading.Event(), threading.Event()
    real = lake_export.follow_run

    def slow(ctx: Any, source: str) -> list[lake_export.DeltaExport]:
        started.set()
        assert release.wait(HANG_S), "the test never released the export"
        return real(ctx, source)

    try:
        tick(sched)
        cli("export", "delta", SRC, "--to", uri, "--follow")
        # slowed from here: day 1's runs (nothing followed yet) must not wait on it
        monkeypatch.setattr(lake_export, "follow_run", slow)

        publish(feed_a, "2025-08-02")
        publish(feed_b, "2025-08-02", "zeta")
        clock.at("2025-08-02T06:30")
        # one worker: parcels' run, its export queued (and blocked), then zeta's run
        events = tick(sched, settle=False)
        runs = [(e["source"], e["outcome"]) for e in events if e["event"] == "run"]
        assert sorted(runs) == [(SRC, "applied"), ("zeta", "applied")]
        assert started.wait(HANG_S) and not release.is_set()
        assert [e for e in events if e["event"] == "delta_export"] == []

        release.set()
        sched.settled()
        done = [json.loads(x) for x in sched.log.getvalue().splitlines()]
        [export] = [e for e in done if e["event"] == "delta_export"]
        assert (export["target"], export["delta_version"], export["committed"]) == (uri, 1, True)
        assert_equals_history(cli, table_rows(uri))
    finally:
        release.set()
        sched.close()
