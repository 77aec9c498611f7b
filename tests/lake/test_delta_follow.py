"""The scheduler follows a source with its Delta export (`export delta --follow`):
after each attempt that applied payloads, the table is brought up to date in the same
process (a `delta_export` log line); `--no-follow` stops it. Fake clock, no sleeping;
SQLite and PostgreSQL."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from feedledger.scheduler.loop import Options, Scheduler
from helpers import Cli
from lake.delta_scenario import DAYS, HEADER, SRC, assert_equals_history, table_rows
from scheduler.fake_clock import FakeClock

TZ = "UTC"


def publish(feed: Path, day: str) -> None:
    feed.mkdir(parents=True, exist_ok=True)
    lines = [",".join(HEADER)] + [",".join(r) for r in DAYS[day]]
    (feed / f"{SRC}_{day}.csv").write_text("\n".join(lines) + "\n")


def tick(sched: Scheduler) -> list[dict[str, Any]]:
    assert isinstance(sched.log, io.StringIO)
    before = len(sched.log.getvalue().splitlines())
    sched.tick(wait=True)
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
