"""Scheduler processes side by side on one store (PostgreSQL, and SQLite on one
machine): every payload applied exactly once, runs of a source never overlapping; a
worker killed with SIGKILL in the middle of a backfill is taken over by another, which
finishes from the watermark with nothing doubled. Real processes, real clock.
"""

from __future__ import annotations

import itertools
import json
import signal
import socket
import subprocess
import time
from collections import Counter
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from feedledger.faults import ENV as FAULT_ENV
from feedledger.ledger.schema import applications, outbox, runs, versions, watermarks
from feedledger.ledger.store import Store
from feedledger.model.timeutil import parse_instant, to_us
from helpers import Cli
from scheduler import processes
from scheduler.processes import stop

DAYS = 6


def days() -> list[date]:
    today = datetime.now(UTC).date()
    return [today - timedelta(days=DAYS - 1 - i) for i in range(DAYS)]


def publish_all(cli: Cli, feed: Path, name: str) -> None:
    """A source whose publisher has the last DAYS days' files; the ledger has the
    first of them (so the others are missed publications to recover)."""
    folder = feed / name
    folder.mkdir(parents=True)
    for i, day in enumerate(days()):
        (folder / f"{name}_{day}.csv").write_text(f"id,v\n1,{name}-{i}\n2,fixed\n")
    cli("source", "add", name, "--key", "id", "--fetch", str(folder))
    first = folder / f"{name}_{days()[0]}.csv"
    cli("ingest", name, str(first))


def spawn(cli: Cli, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return processes.spawn(cli.ws.config_path, *args, env=env)


def select_all(cli: Cli, table: Any) -> list[Any]:
    return processes.select_all(cli.ws.store_url, table)


def caught_up(cli: Cli, names: list[str]) -> bool:
    newest = to_us(parse_instant(days()[-1].isoformat(), "UTC"))
    marks = {w.source: w.published_at for w in select_all(cli, watermarks)}
    return all(marks.get(n) == newest for n in names)


def wait_caught_up(cli: Cli, names: list[str], procs: list[subprocess.Popen[str]]) -> None:
    processes.wait_until(lambda: caught_up(cli, names), procs, what="catching up")


def assert_once_and_in_turn(cli: Cli, names: list[str]) -> None:
    apps = select_all(cli, applications)
    assert all(a.retracted_at is None for a in apps)
    per_payload = Counter(a.payload_id for a in apps)
    assert len(per_payload) == DAYS * len(names) and set(per_payload.values()) == {1}
    # one version per publication for the changing entity, one for the fixed one
    vs = Counter((v.source, v.key) for v in select_all(cli, versions))
    for n in names:
        assert vs[(n, '["1"]')] == DAYS and vs[(n, '["2"]')] == 1
    # runs of one source never overlap (the abandoned one died holding its lease)
    for n in names:
        mine = sorted(
            (r for r in select_all(cli, runs) if r.source == n and r.status != "abandoned"),
            key=lambda r: r.started_at,
        )
        for a, b in itertools.pairwise(mine):
            assert a.finished_at is not None and a.finished_at <= b.started_at, (a, b)


def test_three_schedulers_share_sources_each_payload_applied_once(cli: Cli, tmp_path: Path) -> None:
    names = ["alpha", "beta", "gamma"]
    for n in names:
        publish_all(cli, tmp_path / "feed", n)
    procs = [spawn(cli, "--workers", "2") for _ in range(3)]
    try:
        wait_caught_up(cli, names, procs)
    finally:
        logs = stop(procs)
    assert_once_and_in_turn(cli, names)
    runs_logged = [e for log in logs for e in log if e["event"] == "run"]
    recovered = [e for e in runs_logged if e["outcome"] == "recovered"]
    # one recovery per source (the events in the message: a second "recovered" run of one
    # source was seen once in CI, every payload still applied once)
    assert sorted(e["source"] for e in recovered) == names, recovered
    assert all(e["payloads"] == DAYS - 1 for e in recovered)
    summaries = Counter(r.source for r in select_all(cli, outbox) if r.topic == "summary")
    assert summaries == dict.fromkeys(names, 1)
    assert all(log[-1]["event"] == "stop" for log in logs)


def test_worker_killed_mid_backfill_is_taken_over_from_the_watermark(
    cli: Cli, tmp_path: Path
) -> None:
    publish_all(cli, tmp_path / "feed", "alpha")
    doomed = spawn(cli, "--once", env={FAULT_ENV: "after_payload:3:kill"})
    doomed.wait(timeout=120)
    assert doomed.returncode == -signal.SIGKILL, processes.stderr_of(doomed)
    applied = select_all(cli, applications)
    assert len(applied) == 1 + 3  # the first ingest, then three payloads of the backfill

    procs = [spawn(cli), spawn(cli)]
    try:
        wait_caught_up(cli, ["alpha"], procs)
    finally:
        stop(procs)
    assert_once_and_in_turn(cli, ["alpha"])
    kinds = {r.run_id: r for r in select_all(cli, runs)}
    # the killed backfill is resumed under its own run id
    (backfill,) = [r for r in kinds.values() if r.kind == "backfill"]
    assert backfill.status == "succeeded"
    assert [r["status"] for r in json.loads(backfill.resumptions)] == ["abandoned"]
    summaries = [r for r in select_all(cli, outbox) if r.topic == "summary"]
    assert len(summaries) == 1 and json.loads(summaries[0].body)["changes"] == DAYS - 1


def test_metrics_and_heartbeat_of_a_running_scheduler(cli: Cli, tmp_path: Path) -> None:
    import httpx

    publish_all(cli, tmp_path / "feed", "alpha")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    proc = spawn(cli, "--metrics-port", str(port), "--lease-ttl", "2")
    try:
        wait_caught_up(cli, ["alpha"], [proc])
        deadline = time.monotonic() + 30
        while True:
            text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
            if 'feedledger_source_missed_publications{source="alpha"} 0.0' in text:
                break
            assert time.monotonic() < deadline, text
            time.sleep(0.2)
        assert 'feedledger_source_stale{source="alpha"} 0.0' in text
        assert 'feedledger_runs_total{action="recover",outcome="recovered",source="alpha"} 1.0' in (
            text
        )
        assert "feedledger_run_duration_seconds_count" in text
    finally:
        stop([proc])


def test_heartbeat_keeps_a_short_lease_alive_while_its_run_lasts(cli: Cli) -> None:
    from feedledger.ledger.runs import leases
    from feedledger.ledger.schema import leases as lease_table

    cli("source", "add", "alpha", "--key", "id")
    store = Store(cli.ws.store_url)
    leases.set_ttl(1)
    try:
        with leases.Heartbeat(store), leases.leased_run(store, "alpha", "backfill") as run:
            first = next(r for r in select_all(cli, lease_table) if r.source == "alpha")
            deadline = time.monotonic() + 30
            while True:  # a beat every third of the TTL renews it
                row = next(r for r in select_all(cli, lease_table) if r.source == "alpha")
                if row.heartbeat_at > first.heartbeat_at and row.expires_at > first.expires_at:
                    break
                assert time.monotonic() < deadline, "no heartbeat in 30 s"
                time.sleep(0.1)
            assert row.holder == run.holder
        after = next(r for r in select_all(cli, lease_table) if r.source == "alpha")
        assert after.holder is None  # released with the run
    finally:
        leases.set_ttl(leases.DEFAULT_TTL_S)
        store.close()
