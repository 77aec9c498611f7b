"""The scheduler under a fake clock (no sleeping), on SQLite and PostgreSQL: cadence and
publication time, retries with backoff inside the fetch window, staleness and its
alerts once per episode, the eight-day outage recovered by backfill (never a naive
catch-up), recovery on hold, frozen sources, and bad input that fails a run without
stopping the scheduler.
"""

from __future__ import annotations

import io
import json
import threading
from collections import Counter
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from feedledger.ledger.encoding import Decoder
from feedledger.ledger.schema import applications, gaps, outbox, versions
from feedledger.ledger.store import Store
from feedledger.model.timeutil import parse_instant, to_us
from feedledger.scheduler.loop import Options, Scheduler
from helpers import Cli
from scheduler.fake_clock import FakeClock

SRC = "parcels"
TZ = "America/Denver"


def publish(feed: Path, day: str, zoning: str, *, extra: int = 0) -> None:
    """The county publishes its parcels for `day` (two parcels, plus `extra`)."""
    feed.mkdir(parents=True, exist_ok=True)
    rows = [f"0714-22-1,{zoning}", "0714-22-2,A"] + [f"x-{i},B" for i in range(extra)]
    (feed / f"{SRC}_{day}.csv").write_text("parcel,zoning\n" + "\n".join(rows) + "\n")


def declare(cli: Cli, feed: Path, *extra: str) -> None:
    cli("source", "add", SRC, "--key", "parcel", "--timezone", TZ, "--fetch", str(feed),
        "--publish-at", "06:00", "--retry", "600", *extra)  # fmt: skip


def scheduler(cli: Cli, clock: FakeClock) -> tuple[Scheduler, io.StringIO]:
    log = io.StringIO()
    sched = Scheduler(cli.ws.config_path, Options(workers=2, dispatch=False), clock, log)
    return sched, log


def tick(sched: Scheduler) -> list[dict[str, Any]]:
    """One tick, waiting for its attempts; returns their log lines."""
    assert isinstance(sched.log, io.StringIO)
    before = len(sched.log.getvalue().splitlines())
    sched.tick(wait=True)
    lines = [json.loads(x) for x in sched.log.getvalue().splitlines()[before:]]
    return [x for x in lines if x["event"] == "run"]


def rows(cli: Cli, table: Any) -> list[Any]:
    store = Store(cli.ws.store_url)
    try:
        with store.engine.connect() as conn:
            return list(conn.execute(select(table)))
    finally:
        store.close()


def attributes(cli: Cli, version: Any) -> str | None:
    """A version row's attribute text, canonical (stored compact)."""
    store = Store(cli.ws.store_url)
    try:
        with store.engine.connect() as conn:
            return Decoder(conn).row(version)
    finally:
        store.close()


def topics(cli: Cli) -> Counter[str]:
    return Counter(r.topic for r in rows(cli, outbox) if r.topic != "changes")


def health(cli: Cli, at: str) -> dict[str, Any]:
    iso = parse_instant(at, TZ).isoformat()
    result = cli("health", "--at", iso, "--json", expect=None)
    data: dict[str, Any] = json.loads(result.stdout)
    assert result.exit_code == (0 if data["ok"] else 1)
    return data


@pytest.fixture
def feed(tmp_path: Path) -> Path:
    return tmp_path / "feed"


def test_due_at_publication_time_retried_with_backoff_until_it_arrives(
    cli: Cli, feed: Path
) -> None:
    publish(feed, "2026-08-01", "R-0")
    declare(cli, feed, "--fetch-window", "3")
    clock = FakeClock("2026-08-01T07:00")
    sched, _log = scheduler(cli, clock)
    assert [r["outcome"] for r in tick(sched)] == ["applied"]  # the first run
    clock.at("2026-08-02T05:59")
    assert tick(sched) == []  # 08-02's publication is due at 06:00 local
    clock.at("2026-08-02T06:00")
    [late] = tick(sched)
    assert (late["action"], late["outcome"]) == ("live", "not_yet_published")
    clock.at("2026-08-02T06:04")
    assert tick(sched) == []  # backing off: 5 to 10 minutes
    clock.at("2026-08-02T06:10")
    assert [r["outcome"] for r in tick(sched)] == ["not_yet_published"]
    # the window (3 h) closes: no more tries until the next publication is due
    clock.at("2026-08-02T09:30")
    assert [r["outcome"] for r in tick(sched)] == ["not_yet_published"]
    clock.at("2026-08-02T23:00")
    assert tick(sched) == []
    publish(feed, "2026-08-02", "R-1")
    clock.at("2026-08-03T06:00")  # 08-03 is due too: two missed -> recovered, not live
    [rec] = tick(sched)
    assert (rec["action"], rec["outcome"], rec["payloads"]) == ("recover", "recovered", 1)
    assert rec["gaps_recorded"] == 0  # 08-03 may still come: not a gap yet
    publish(feed, "2026-08-03", "R-2")
    clock.at("2026-08-03T06:20")
    [live] = tick(sched)
    assert (live["action"], live["outcome"], live["changes"]) == ("live", "applied", 1)
    assert health(cli, "2026-08-03T07:00")["ok"]


def test_eight_day_outage_is_recovered_by_backfill_with_one_summary(
    cli: Cli, feed: Path, tmp_path: Path
) -> None:
    declare(cli, feed)
    lines = tmp_path / "messages.jsonl"
    cli("subscriber", "add", "planning", "--file", str(lines))
    clock = FakeClock("2026-08-01T07:00")
    sched, _log = scheduler(cli, clock)
    zoning = {f"2026-08-{d:02d}": f"Z-{d}" for d in range(1, 13)}
    for day in ("2026-08-01", "2026-08-02"):
        publish(feed, day, zoning[day])
        clock.at(f"{day}T07:00")
        assert [r["outcome"] for r in tick(sched)] == ["applied"]
    # the scheduler is stopped for eight days; the county goes on publishing, except
    # on 08-05 and 08-08
    lost = {"2026-08-05", "2026-08-08"}
    for d in range(3, 11):
        day = f"2026-08-{d:02d}"
        if day not in lost:
            publish(feed, day, zoning[day])
    assert not health(cli, "2026-08-10T07:00")["ok"]  # nobody watching: stale
    clock.at("2026-08-10T07:00")
    sched, _log = scheduler(cli, clock)  # restarted
    [rec] = tick(sched)
    assert (rec["action"], rec["outcome"]) == ("recover", "recovered")
    assert (rec["payloads"], rec["gaps_recorded"], rec["missed"]) == (6, 2, 8)

    # one version per publication, at its publisher date
    mine = sorted(
        (v.valid_from, attributes(cli, v)) for v in rows(cli, versions) if "0714-22-1" in v.key
    )
    published = sorted(set(zoning) - lost - {"2026-08-11", "2026-08-12"})
    assert [json.loads(a)["zoning"] for _at, a in mine] == [zoning[d] for d in published]
    assert [at for at, _a in mine] == [to_us(parse_instant(d, TZ)) for d in published]
    assert len(rows(cli, applications)) == 8
    # gap records exactly where the files are missing
    spans = sorted((g.start_at, g.end_at) for g in rows(cli, gaps))
    assert spans == [
        (to_us(parse_instant(d, TZ)), to_us(parse_instant(d, TZ)) + 86_400_000_000)
        for d in sorted(lost)
    ]
    # history is not news: one summary, no stale alert (recovered before anyone asked)
    assert topics(cli) == {"summary": 1}
    assert [r.status for r in rows(cli, outbox) if r.topic == "changes"].count("pending") == 2
    data = health(cli, "2026-08-10T07:00")
    assert data["ok"] and data["sources"][0]["missed_publications"] == 0
    # and the live cadence resumes
    publish(feed, "2026-08-11", zoning["2026-08-11"])
    clock.at("2026-08-11T06:30")
    assert [(r["action"], r["outcome"]) for r in tick(sched)] == [("live", "applied")]
    cli("notify", "dispatch", "--once")
    sent = [json.loads(x)["body"] for x in lines.read_text().splitlines()]
    assert Counter(b["type"] for b in sent) == {"change": 4, "summary": 1}  # 2+1 live, 1 after
    summary = next(b for b in sent if b["type"] == "summary")
    assert summary["unrecoverable_days"] == 2 and summary["run_id"] == rec["run_id"]


def test_stale_is_announced_once_per_episode_and_once_when_it_clears(cli: Cli, feed: Path) -> None:
    publish(feed, "2026-08-01", "R-0")
    declare(cli, feed, "--stale-after", "1")
    clock = FakeClock("2026-08-01T07:00")
    sched, _log = scheduler(cli, clock)
    tick(sched)
    for hour in range(0, 24 * 3, 2):  # three days of ticks, the publisher silent
        clock.at("2026-08-02T07:00")
        clock.now += hour * 3_600_000_000
        tick(sched)
    assert topics(cli) == {"stale": 1}
    for d in ("2026-08-02", "2026-08-03", "2026-08-04"):
        publish(feed, d, f"Z-{d}")
    clock.now += 3_600_000_000
    tick(sched)
    assert topics(cli) == {"stale": 1, "stale_cleared": 1, "summary": 1}
    tick(sched)
    assert topics(cli) == {"stale": 1, "stale_cleared": 1, "summary": 1}


def test_recovery_on_hold_waits_for_an_operator(cli: Cli, feed: Path) -> None:
    publish(feed, "2026-08-01", "R-0")
    declare(cli, feed, "--recovery", "hold")
    clock = FakeClock("2026-08-01T07:00")
    sched, _log = scheduler(cli, clock)
    tick(sched)
    for d in ("2026-08-02", "2026-08-03"):
        publish(feed, d, f"Z-{d}")
    clock.at("2026-08-03T07:00")
    [held] = tick(sched)
    assert (held["action"], held["outcome"]) == ("hold", "held")
    assert "feedledger backfill parcels" in held["hint"]
    clock.at("2026-08-04T07:00")
    tick(sched)
    assert topics(cli)["recovery_held"] == 1
    assert len(rows(cli, applications)) == 1  # nothing applied behind the operator's back
    cli("archive", "add", SRC, str(feed / f"{SRC}_2026-08-02.csv"))
    cli("archive", "add", SRC, str(feed / f"{SRC}_2026-08-03.csv"))
    cli("backfill", SRC, "--from", "2026-08-02", "--to", "2026-08-03")
    clock.at("2026-08-04T07:30")
    tick(sched)
    assert topics(cli)["recovery_held_cleared"] == 1


def test_frozen_sources_are_skipped_and_shown_frozen(cli: Cli, feed: Path) -> None:
    publish(feed, "2026-08-01", "R-0")
    declare(cli, feed)
    cli("freeze", SRC, "--reason", "portal restating")
    clock = FakeClock("2026-08-05T07:00")
    sched, _log = scheduler(cli, clock)
    assert tick(sched) == []
    data = health(cli, "2026-08-05T07:00")
    assert data["ok"] and data["sources"][0]["status"] == "frozen"
    assert rows(cli, applications) == []


def test_bad_fetch_locations_fail_the_run_never_the_scheduler(
    cli: Cli, feed: Path, tmp_path: Path
) -> None:
    feed.mkdir()
    (feed / "parcels_latest.csv").write_text("parcel,zoning\n1,A\n")  # no date in its name
    declare(cli, feed)
    cli("source", "add", "gone", "--key", "id", "--fetch", "http://127.0.0.1:9/x_{date}.csv")
    cli("source", "add", "nowhere", "--key", "id", "--fetch", str(tmp_path / "missing"))
    clock = FakeClock("2026-08-01T07:00")
    sched, _log = scheduler(cli, clock)
    results = {r["source"]: r for r in tick(sched)}
    assert {s: r["outcome"] for s, r in results.items()} == {
        "gone": "failed",
        "nowhere": "failed",
        "parcels": "failed",
    }
    assert "no file" in results["parcels"]["error"] and "date" in results["parcels"]["error"]
    assert "does not exist" in results["nowhere"]["error"]
    assert "serves none" in results["gone"]["error"] or "reach" in results["gone"]["error"]
    assert topics(cli) == {"failing": 3}
    tick(sched)  # backing off; announced once
    clock.now += 86_400_000_000
    tick(sched)
    tick(sched)
    # a day later they are stale too (two publications missed): announced once each
    assert topics(cli) == {"failing": 3, "stale": 3}
    status = {s["source"]: s for s in health(cli, "2026-08-02T08:00")["sources"]}
    assert status["parcels"]["schedule"]["failures"] == 2
    assert status["parcels"]["schedule"]["last_error"]


@pytest.mark.parametrize(
    ("option", "value", "problem"),
    [
        ("--cadence", "0 25 * * *", "cron"),
        ("--timezone", "Mars/Olympus", "zone"),
        ("--publish-at", "25:00", "HH:MM"),
        ("--recovery", "later", "recovery"),
    ],
)
def test_bad_schedule_declarations_are_refused_at_source_add(
    cli: Cli, option: str, value: str, problem: str
) -> None:
    result = cli("source", "add", "s", "--key", "id", option, value, expect=2)
    assert problem.lower() in result.stderr.lower()


def test_expected_dates_follow_weekdays_and_cron(cli: Cli, feed: Path) -> None:
    from feedledger.model.cadence import due_dates

    friday = date(2026, 8, 7)
    monday_9 = to_us(parse_instant("2026-08-10T09:00", TZ))
    assert due_dates("weekdays", TZ, friday, monday_9) == [friday + timedelta(days=3)]
    assert due_dates("0 10 * * 1-5", TZ, friday, monday_9) == []  # due at 10:00
    assert due_dates("daily", TZ, friday, monday_9, "10:00") == [date(2026, 8, 8), date(2026, 8, 9)]


def test_a_date_template_fetches_each_missed_day_the_publisher_still_serves(
    cli: Cli, tmp_path: Path
) -> None:
    import http.server

    served: dict[str, bytes] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = served.get(self.path.rsplit("/", 1)[-1])
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/files/{SRC}_{{date}}.csv"
        cli("source", "add", SRC, "--key", "parcel", "--timezone", TZ, "--fetch", url)

        def serve(day: str, zoning: str) -> None:
            served[f"{SRC}_{day}.csv"] = f"parcel,zoning\n0714-22-1,{zoning}\n".encode()

        serve("2026-08-01", "R-0")
        clock = FakeClock("2026-08-01T07:00")
        sched, _log = scheduler(cli, clock)
        assert [r["outcome"] for r in tick(sched)] == ["applied"]
        for d in ("2026-08-02", "2026-08-04"):  # 08-03 is no longer served
            serve(d, f"Z-{d}")
        clock.at("2026-08-05T07:00")  # 08-05 is not published yet
        [rec] = tick(sched)
        assert (rec["outcome"], rec["payloads"], rec["gaps_recorded"]) == ("recovered", 2, 1)
        assert rec["archived_now"] == 2
        [gap] = rows(cli, gaps)
        assert gap.start_at == to_us(parse_instant("2026-08-03", TZ))
        serve("2026-08-05", "Z-5")
        clock.at("2026-08-05T08:00")
        assert [(r["action"], r["outcome"]) for r in tick(sched)] == [("live", "applied")]
        assert health(cli, "2026-08-05T09:00")["ok"]
    finally:
        server.shutdown()
        server.server_close()


def test_a_stop_during_recovery_ends_after_a_whole_payload_and_resumes(
    cli: Cli, feed: Path
) -> None:
    publish(feed, "2026-08-01", "R-0")
    declare(cli, feed)
    clock = FakeClock("2026-08-01T07:00")
    sched, _log = scheduler(cli, clock)
    tick(sched)
    for d in range(2, 8):
        publish(feed, f"2026-08-{d:02d}", f"Z-{d}")
    clock.at("2026-08-07T07:00")
    real = sched._progress

    def stopping() -> Any:
        inner = real()

        def step(done: int, total: int, ref: object) -> None:
            if done == 2:
                sched.stop.set()  # SIGTERM arrives while the second payload commits
            inner(done, total, ref)

        return step

    sched._progress = stopping  # type: ignore[method-assign]
    [cut] = tick(sched)
    assert cut["outcome"] == "interrupted"
    assert len(rows(cli, applications)) == 1 + 2  # whole payloads only
    assert health(cli, "2026-08-07T07:00")["sources"][0]["lease"]["state"] == "free"
    sched.stop.clear()
    sched._progress = real  # type: ignore[method-assign]
    [done] = tick(sched)
    assert (done["outcome"], done["payloads"]) == ("recovered", 4)
    assert len(rows(cli, applications)) == 7
    assert topics(cli) == {"summary": 1}


def test_an_error_in_a_tick_is_logged_and_the_scheduler_goes_on(
    cli: Cli, feed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    publish(feed, "2026-08-01", "R-0")
    declare(cli, feed)
    clock = FakeClock("2026-08-01T07:00")
    sched, log = scheduler(cli, clock)

    def down(*_a: object, **_k: object) -> None:
        raise ConnectionError("the store went away")

    monkeypatch.setattr(sched, "tick", down)
    sched.run(once=True)  # no exception
    events = [json.loads(x) for x in log.getvalue().splitlines()]
    assert [e["event"] for e in events] == ["start", "error", "stop"]
    assert "the store went away" in events[1]["error"]
