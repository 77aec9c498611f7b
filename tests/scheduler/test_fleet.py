"""A fleet: 12 county feeds of 500 parcels in mixed formats (tests/scheduler/fleet.py:
CSV, GeoJSON and GeoPackage folders, fake ArcGIS FeatureServer layers), the archive on
S3 (moto's server on 127.0.0.1), three `feedledger scheduler` processes sharing the
store. A day is applied once per source and `health` is green after it; a scheduler
killed with SIGKILL mid-day leaves its source to the others, taken over well within two
lease TTLs, with one abandoned run and one finished; a week missed by a few sources is
recovered as one backfill each, in publisher order, with one summary each.
bench/fleet_bench.py runs the same at full size (300 sources x 20,000 parcels).
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from fault_pause import FaultPause
from feedledger.config import Workspace
from feedledger.ledger.schema import applications, leases, outbox, payloads, runs, versions
from helpers import Cli, migrate
from scheduler.fleet import Fleet, day_rows, midnight_us
from scheduler.processes import (
    kill,
    marks,
    run_events,
    select_all,
    spawn,
    spawn_many,
    stop,
    wait_until,
)

SOURCES, PARCELS = 12, 500  # twice the six workers of the three schedulers
LATE = 4  # sources that miss a week


@pytest.fixture
def fleet(store_url: str, s3_bucket: str, s3_env: str, tmp_path: Path) -> Iterator[Fleet]:
    ws = Workspace.create(
        tmp_path / "ws",
        store_url=store_url,
        archive=f"s3://{s3_bucket}/fleet",
        archive_endpoint_url=s3_env,
    )
    migrate(ws.store_url)
    with Fleet(ws, tmp_path / "feed", SOURCES, PARCELS).serving() as f:
        yield f


def today() -> date:
    return datetime.now(UTC).date()


def start(f: Fleet, first: date, late: list[str] | None = None) -> Cli:
    """Every source's publication of `first` applied as its first (the late ones': a
    week before)."""
    cli = Cli(f.ws)
    late = late or []
    on_time = [n for n in f.names if n not in late]
    f.publish(first, on_time)
    f.publish(first - timedelta(days=7), late)
    for args in f.first_commands(first, on_time) + f.first_commands(
        first - timedelta(days=7), late
    ):
        cli(*args)
    f.first_layer_runs(first, on_time)
    f.first_layer_runs(first - timedelta(days=7), late)
    return cli


def behind(f: Fleet, day: date) -> list[str]:
    got = marks(f.ws.store_url)
    return [n for n in f.names if got.get(n) != midnight_us(day)]


def wait_day(f: Fleet, day: date, procs: list[Any]) -> float:
    # a bound for a stuck fleet, not a speed claim (bench/fleet_bench.py measures that)
    return wait_until(
        lambda: not behind(f, day),
        procs,
        what=lambda: f"{behind(f, day)} behind {day}",
        timeout=600,
    )


def expected_changes(parcels: int, before: date, after: date) -> int:
    old = {k: (z, v) for k, z, v in day_rows(parcels, before)}
    new = {k: (z, v) for k, z, v in day_rows(parcels, after)}
    return sum(old.get(k) != new.get(k) for k in old.keys() | new.keys())


def assert_applied_once(f: Fleet, days_per_source: int) -> None:
    """Each payload applied once, none retracted, each source `days_per_source` times."""
    apps = select_all(f.ws.store_url, applications)
    assert all(a.retracted_at is None for a in apps)
    assert set(Counter(a.payload_id for a in apps).values()) == {1}
    per_source = Counter(a.source for a in apps)
    assert per_source == dict.fromkeys(f.names, days_per_source)


def assert_runs_never_overlap(f: Fleet) -> None:
    by_source: dict[str, list[Any]] = {}
    for r in select_all(f.ws.store_url, runs):
        if r.status != "abandoned":
            by_source.setdefault(r.source, []).append(r)
    for mine in by_source.values():
        mine.sort(key=lambda r: r.started_at)
        for a, b in itertools.pairwise(mine):
            assert a.finished_at is not None and a.finished_at <= b.started_at, (a, b)


def assert_each_applied_once(attempts: list[dict[str, Any]], names: list[str]) -> None:
    """No attempt failed or lost its record, and each of these sources is logged applied
    by exactly one attempt (a scheduler logs each attempt as it ends)."""
    assert not [e for e in attempts if e["outcome"] == "failed"], attempts
    assert not [e for e in attempts if "not_recorded" in e], attempts
    applied = Counter(e["source"] for e in attempts if e["outcome"] == "applied")
    wrong = [n for n in names if applied[n] != 1]
    assert not wrong, [json.dumps(e) for e in attempts if e["source"] in wrong]
    assert applied.keys() <= set(names)


def assert_healthy(cli: Cli) -> None:
    report = cli.json("health")
    assert report["ok"] and not report["stale"], report
    cli("health")  # exit 0


def test_a_day_of_the_fleet_applies_every_source_once(fleet: Fleet) -> None:
    day = today()
    cli = start(fleet, day - timedelta(days=1))
    fleet.publish(day)
    procs = spawn_many(3, fleet.ws.config_path, "--workers", "2")
    try:
        wait_day(fleet, day, procs)
    finally:
        logs = stop(procs)
    assert_applied_once(fleet, 2)
    assert_runs_never_overlap(fleet)
    attempts = run_events(logs)
    assert_each_applied_once(attempts, fleet.names)
    # what each source's day changed: the versions its payload wrote
    want = expected_changes(PARCELS, day - timedelta(days=1), day)
    apps = select_all(fleet.ws.store_url, applications)
    todays = [a for a in apps if a.published_at == midnight_us(day)]
    assert len(todays) == SOURCES and {a.changes for a in todays} == {want}
    assert Counter(a.source for a in todays) == dict.fromkeys(fleet.names, 1)
    assert len(select_all(fleet.ws.store_url, versions)) == sum(a.changes for a in apps)
    assert_healthy(cli)


def held_by(f: Fleet, pid: int) -> list[str]:
    """Sources whose lease a process holds now (holders are host:pid:token:start)."""
    return [
        r.source
        for r in select_all(f.ws.store_url, leases)
        if r.holder is not None and r.holder.split(":")[1] == str(pid)
    ]


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
def test_a_scheduler_killed_mid_day_leaves_its_source_to_the_others(fleet: Fleet) -> None:
    # PostgreSQL only: on SQLite a writer stopped inside its transaction holds the one
    # write lock of the store, and every other scheduler waits for it
    ttl = 60  # the scheduler's default --lease-ttl
    day = today()
    cli = start(fleet, day - timedelta(days=1))
    fleet.publish(day)
    # one scheduler stops inside its first payload's transaction (lease held, run
    # running), as if the machine froze there; the others go on with the day
    # (held there until it is killed: the pause says when it is inside it)
    pause = FaultPause(fleet.ws.config_path.parent, "mid_transaction")
    doomed = spawn(fleet.ws.config_path, "--workers", "1", env=pause.env(), lease_ttl=ttl)
    others: list[Any] = []
    dead_log: list[dict[str, Any]] = []
    try:
        pause.wait(doomed, 600)
        (victim,) = held_by(fleet, doomed.pid)
        others = spawn_many(2, fleet.ws.config_path, "--workers", "2", lease_ttl=ttl)
        wait_until(
            lambda: len(behind(fleet, day)) <= SOURCES // 2,
            [doomed, *others],
            what="half a day",
            timeout=600,
        )
        assert victim in behind(fleet, day)
        killed_at = datetime.now(UTC).timestamp()
        dead_log = kill(doomed)  # the attempts it finished before are in its log
        wait_day(fleet, day, others)
    finally:
        if doomed.poll() is None:
            kill(doomed)
        logs = stop(others)
    assert_applied_once(fleet, 2)
    assert_runs_never_overlap(fleet)
    assert Counter(p.source for p in select_all(fleet.ws.store_url, payloads)) == dict.fromkeys(
        fleet.names, 2
    )
    mine = sorted(
        (r for r in select_all(fleet.ws.store_url, runs) if r.source == victim),
        key=lambda r: r.started_at,
    )
    first, dead, finished = mine  # the first payload's run, then the day's two
    assert first.status == "succeeded"
    assert dead.status == "abandoned" and dead.holder.split(":")[1] == str(doomed.pid)
    assert finished.status == "succeeded" and finished.kind == "live"
    (app,) = [
        a
        for a in select_all(fleet.ws.store_url, applications)
        if a.source == victim and a.published_at == midnight_us(day)
    ]
    assert app.run_id == finished.run_id
    # taken over well within two lease TTLs of the kill (on one host a dead holder's
    # lease is taken at once, without waiting for it to expire)
    assert finished.finished_at / 1e6 - killed_at < 2 * ttl
    # the killed one stopped inside its first payload: every applying attempt is logged
    assert_each_applied_once(run_events([dead_log, *logs]), fleet.names)
    assert_healthy(cli)


def test_a_week_missed_by_some_sources_is_recovered_as_one_backfill_each(fleet: Fleet) -> None:
    day = today()
    late = fleet.folder_sources()[:LATE]
    cli = start(fleet, day - timedelta(days=1), late=late)
    fleet.publish(day)
    week = [day - timedelta(days=7 - i) for i in range(7)]
    for d in week:  # the late sources' week appears at last, with their day
        fleet.publish(d, late)
    procs = spawn_many(3, fleet.ws.config_path, "--workers", "2")
    try:
        wait_day(fleet, day, procs)
    finally:
        logs = stop(procs)
    apps = select_all(fleet.ws.store_url, applications)
    assert all(a.retracted_at is None for a in apps)
    assert set(Counter(a.payload_id for a in apps).values()) == {1}
    every = Counter(a.source for a in apps)
    assert every == {n: 1 + (8 if n in late else 1) for n in fleet.names}
    by_run = {r.run_id: r for r in select_all(fleet.ws.store_url, runs)}
    for n in late:
        mine = sorted((a for a in apps if a.source == n), key=lambda a: a.txn_seq)
        # in publisher order, each after the one before, none skipped
        assert [a.published_at for a in mine] == [
            midnight_us(d) for d in [week[0] - timedelta(days=1), *week, day]
        ]
        assert all(b.prev_published_at == a.published_at for a, b in itertools.pairwise(mine))
        # the week and the day: one backfill
        (backfill,) = {a.run_id for a in mine[1:]}
        assert by_run[backfill].kind == "backfill" and by_run[backfill].status == "succeeded"
    summaries = [r for r in select_all(fleet.ws.store_url, outbox) if r.topic == "summary"]
    assert Counter(r.source for r in summaries) == dict.fromkeys(late, 1)
    want = sum(
        expected_changes(PARCELS, a, b)
        for a, b in itertools.pairwise([week[0] - timedelta(days=1), *week, day])
    )
    assert {json.loads(r.body)["changes"] for r in summaries} == {want}
    attempts = run_events(logs)
    recovered = Counter(e["source"] for e in attempts if e["outcome"] == "recovered")
    assert recovered == dict.fromkeys(late, 1)
    assert_each_applied_once(attempts, [n for n in fleet.names if n not in late])
    assert_healthy(cli)
