"""A fleet's day (issue 31 item 1): `--sources` county feeds of `--parcels` parcels in mixed
formats (tests/scheduler/fleet.py: CSV, GeoJSON, GeoPackage folders, fake ArcGIS
FeatureServer layers), PostgreSQL for the ledger, the archive in a bucket on moto's S3
server (127.0.0.1), `--schedulers` `feedledger scheduler` processes on this machine.

Three phases, each on a fresh PostgreSQL schema whose sources hold yesterday's
publication (applied first by `feedledger ingest` / a layer's first run, untimed):

* day   -- today's publications appear; the schedulers start: wall from their launch
           until every source is applied, each source's latency (launch -> its payload
           committed), the attempts' outcomes, the schedulers' CPU, `health`.
* kill  -- the same day; one scheduler stops inside its first payload's transaction and
           is killed with SIGKILL once half the sources are applied: the take-over time
           of its source (kill -> the new run finished) against 2 lease TTLs, the killed
           source's runs, nothing doubled.
* week  -- `--late` sources missed a week (their files appear late, with the day): wall
           until all are applied, per late source its runs and summaries.

    python bench/fleet_bench.py --sources 300 --parcels 20000 --schedulers 3   # full size
    python bench/fleet_bench.py --sources 30 --parcels 2000 --phases day,kill,week
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the fleet and the scheduler process helpers

from feedledger.config import Workspace  # noqa: E402
from feedledger.faults import ENV as FAULT_ENV  # noqa: E402
from feedledger.ledger.schema import applications, leases, payloads, runs  # noqa: E402
from helpers import migrate, pg_schema_url  # noqa: E402
from scheduler.fleet import Fleet, midnight_us  # noqa: E402
from scheduler.processes import (  # noqa: E402
    kill,
    launch,
    marks,
    run_events,
    select_all,
    started,
    stop,
    wait_until,
)


def cpu_children() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


@contextmanager
def s3_server() -> Iterator[str]:
    """moto's S3 server on 127.0.0.1 for the block, the AWS environment pointed at it:
    its endpoint."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    _host, port = server.get_host_and_port()
    endpoint = f"http://127.0.0.1:{port}"
    os.environ.update(
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION="us-east-1",
        AWS_ENDPOINT_URL_S3=endpoint,
        AWS_EC2_METADATA_DISABLED="true",
    )
    try:
        yield endpoint
    finally:
        server.stop()


def new_fleet(args: argparse.Namespace, tmp: Path, endpoint: str, phase: str) -> tuple[Fleet, str]:
    import boto3
    import psycopg

    schema = f"fleet_{phase}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(args.store, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    bucket = f"fleet-{phase}-{uuid.uuid4().hex[:8]}"
    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=bucket)
    ws = Workspace.create(
        tmp / phase / "ws",
        store_url=pg_schema_url(args.store, schema),
        archive=f"s3://{bucket}/fleet",
        archive_endpoint_url=endpoint,
    )
    migrate(ws.store_url)
    return Fleet(ws, tmp / phase / "feed", args.sources, args.parcels), schema


def drop(args: argparse.Namespace, schema: str) -> None:
    import psycopg

    with psycopg.connect(args.store, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


@contextmanager
def served_fleet(args: argparse.Namespace, tmp: Path, endpoint: str, phase: str) -> Iterator[Fleet]:
    """A fleet in a PostgreSQL schema and an S3 bucket of its own (`new_fleet`), served
    for the block; its schema dropped after."""
    fleet, schema = new_fleet(args, tmp, endpoint, phase)
    try:
        with fleet.serving() as f:
            yield f
    finally:
        drop(args, schema)


def setup(f: Fleet, args: argparse.Namespace, first: Any, late: list[str]) -> float:
    """Yesterday's publication (the late ones': eight days ago) applied first, in this
    process through the public API (`Source.ingest`, what `feedledger ingest` runs: a
    process per source spent its time importing)."""
    import feedledger

    t = time.monotonic()
    on_time = [n for n in f.names if n not in late]
    f.publish(first, on_time)
    f.publish(first - timedelta(days=7), late)
    cmds = f.first_commands(first, on_time) + f.first_commands(first - timedelta(days=7), late)
    with feedledger.open(f.ws.config_path) as led:
        for _ingest, name, path in cmds:
            led.source(name, require_declared=False).ingest(Path(path))
    f.first_layer_runs(first, on_time)
    f.first_layer_runs(first - timedelta(days=7), late)
    return time.monotonic() - t


def behind(f: Fleet, day: Any) -> list[str]:
    got = marks(f.ws.store_url)
    return [n for n in f.names if got.get(n) != midnight_us(day)]


def health_ok(f: Fleet) -> bool:
    got = subprocess.run(
        [sys.executable, "-m", "feedledger", "--config", str(f.ws.config_path), "health", "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    return got.returncode == 0 and bool(json.loads(got.stdout)["ok"])


def latencies(f: Fleet, day: Any, t0_us: int) -> dict[str, float]:
    apps = select_all(f.ws.store_url, applications)
    s = sorted((a.recorded_at - t0_us) / 1e6 for a in apps if a.published_at == midnight_us(day))
    q = statistics.quantiles(s, n=10) if len(s) > 1 else s
    return {"p50": round(statistics.median(s), 1), "p90": round(q[-1], 1), "max": round(s[-1], 1)}


def once_each(f: Fleet, days_each: dict[str, int]) -> bool:
    apps = select_all(f.ws.store_url, applications)
    return (
        set(Counter(a.payload_id for a in apps).values()) == {1}
        and Counter(a.source for a in apps) == days_each
    )


def spawn_all(f: Fleet, args: argparse.Namespace, n: int) -> list[subprocess.Popen[str]]:
    common = ("--workers", str(args.workers))
    procs = [launch(f.ws.config_path, *common, lease_ttl=args.lease_ttl) for _ in range(n)]
    return [started(p) for p in procs]


def phase_day(f: Fleet, args: argparse.Namespace, day: Any) -> dict[str, Any]:
    f.publish(day)
    cpu0, t0, t0_us = cpu_children(), time.monotonic(), int(time.time() * 1e6)
    procs = spawn_all(f, args, args.schedulers)
    up = time.monotonic() - t0
    try:
        wait_until(lambda: not behind(f, day), procs, timeout=args.timeout, poll=0.5)
        wall = time.monotonic() - t0
    finally:
        logs = stop(procs)
    outcomes = Counter(e["outcome"] for e in run_events(logs))
    return {
        "wall_s": round(wall, 1),
        "schedulers_up_s": round(up, 1),
        "latency_s": latencies(f, day, t0_us),
        "schedulers_cpu_s": round(cpu_children() - cpu0, 1),
        "outcomes": dict(outcomes),
        "applied_once": once_each(f, dict.fromkeys(f.names, 2)),
        "health_ok": health_ok(f),
    }


def phase_kill(f: Fleet, args: argparse.Namespace, day: Any) -> dict[str, Any]:
    f.publish(day)
    pause = {FAULT_ENV: "mid_transaction:pause", "FEEDLEDGER_FAULT_PAUSE_S": "3600"}
    t0 = time.monotonic()
    doomed = started(
        launch(f.ws.config_path, "--workers", "1", env=pause, lease_ttl=args.lease_ttl)
    )

    def held() -> list[str]:
        return [
            r.source
            for r in select_all(f.ws.store_url, leases)
            if r.holder and r.holder.split(":")[1] == str(doomed.pid)
        ]

    others: list[subprocess.Popen[str]] = []
    try:
        wait_until(lambda: bool(held()), [doomed], timeout=args.timeout, poll=0.5)
        (victim,) = held()
        others = spawn_all(f, args, args.schedulers - 1)
        wait_until(
            lambda: len(behind(f, day)) <= len(f.names) // 2,
            [doomed, *others],
            timeout=args.timeout,
            poll=0.5,
        )
        killed = time.time()
        kill(doomed)
        wait_until(lambda: not behind(f, day), others, timeout=args.timeout, poll=0.5)
        wall = time.monotonic() - t0
    finally:
        if doomed.poll() is None:
            kill(doomed)
        logs = stop(others)
    mine = sorted(
        (r for r in select_all(f.ws.store_url, runs) if r.source == victim),
        key=lambda r: r.started_at,
    )
    last = mine[-1]
    n_payloads = Counter(p.source for p in select_all(f.ws.store_url, payloads))
    return {
        "wall_s": round(wall, 1),
        "victim": victim,
        "takeover_s": round(last.finished_at / 1e6 - killed, 1),
        "two_ttls_s": 2 * args.lease_ttl,
        "victim_runs": [r.status for r in mine],
        "outcomes": dict(Counter(e["outcome"] for e in run_events(logs))),
        "applied_once": once_each(f, dict.fromkeys(f.names, 2)),
        "payloads_once": set(n_payloads.values()) == {2},
        "health_ok": health_ok(f),
    }


def phase_week(f: Fleet, args: argparse.Namespace, day: Any, late: list[str]) -> dict[str, Any]:
    f.publish(day)
    for d in [day - timedelta(days=7 - i) for i in range(7)]:
        f.publish(d, late)
    t0 = time.monotonic()
    procs = spawn_all(f, args, args.schedulers)
    try:
        wait_until(lambda: not behind(f, day), procs, timeout=args.timeout, poll=0.5)
        wall = time.monotonic() - t0
    finally:
        logs = stop(procs)
    from feedledger.ledger.schema import outbox

    summaries = Counter(
        r.source for r in select_all(f.ws.store_url, outbox) if r.topic == "summary"
    )
    kinds = Counter(
        (r.source, r.kind) for r in select_all(f.ws.store_url, runs) if r.source in late
    )
    apps = select_all(f.ws.store_url, applications)
    in_order = all(
        [
            a.published_at
            for a in sorted((a for a in apps if a.source == n), key=lambda a: a.txn_seq)
        ]
        == sorted(a.published_at for a in apps if a.source == n)
        for n in late
    )
    return {
        "wall_s": round(wall, 1),
        "late": len(late),
        "one_backfill_each": all(kinds[(n, "backfill")] == 1 for n in late),
        "one_summary_each": summaries == dict.fromkeys(late, 1),
        "in_publisher_order": in_order,
        "applied_once": once_each(f, {n: 9 if n in late else 2 for n in f.names}),
        "outcomes": dict(Counter(e["outcome"] for e in run_events(logs))),
        "health_ok": health_ok(f),
    }


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--sources", type=int, default=300)
    p.add_argument("--parcels", type=int, default=20_000)
    p.add_argument("--schedulers", type=int, default=3)
    p.add_argument("--workers", type=int, default=2, help="--workers of each scheduler")
    p.add_argument("--late", type=int, default=20, help="sources that miss a week (week)")
    p.add_argument("--lease-ttl", type=int, default=60)
    p.add_argument("--phases", default="day,kill,week")
    p.add_argument("--timeout", type=float, default=1800)
    p.add_argument(
        "--store",
        default=os.environ.get(
            "FEEDLEDGER_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
        ),
    )
    args = p.parse_args()
    day = datetime.now(UTC).date()
    report: dict[str, Any] = {
        "sources": args.sources,
        "parcels": args.parcels,
        "schedulers": args.schedulers,
        "workers": args.workers,
    }
    with s3_server() as endpoint, tempfile.TemporaryDirectory(prefix="fleet-bench-") as tmp:
        for phase in args.phases.split(","):
            with served_fleet(args, Path(tmp), endpoint, phase) as f:
                late = f.folder_sources()[: args.late] if phase == "week" else []
                took = setup(f, args, day - timedelta(days=1), late)
                if phase == "day":
                    got = phase_day(f, args, day)
                elif phase == "kill":
                    got = phase_kill(f, args, day)
                else:
                    got = phase_week(f, args, day, late)
                report[phase] = {"setup_s": round(took, 1), **got}
                print(json.dumps({phase: report[phase]}), flush=True)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
