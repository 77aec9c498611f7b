"""A scheduler's memory over a fleet's day (issue 31's loose end: one scheduler of the
300-source example grew to ~2.4 GB RSS). The fleet of bench/fleet_bench.py
(tests/scheduler/fleet.py: CSV, GeoJSON, GeoPackage, ArcGIS sources; PostgreSQL, the
archive on moto's S3 server), yesterday applied; then ONE `feedledger scheduler` process
applies `--days` days of every source while psutil samples its RSS every 0.2 s. Reported:
the RSS curve against the sources applied (every tenth of the way), its peak, the RSS
once the day is done and the process idles (between runs: what it holds), and what it
says it keeps warm (`health`'s resident report).

    python bench/scheduler_rss_bench.py --sources 60 --parcels 20000 --max-warm-sources 2
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

import psutil  # noqa: E402

from fleet_bench import behind, s3_server, served_fleet, setup  # noqa: E402
from scheduler.fleet import Fleet  # noqa: E402
from scheduler.processes import launch, started, stop, wait_until  # noqa: E402

MIB = 1 << 20


class Sampler(threading.Thread):
    """The RSS of `pid` every `every` s, with how many sources were behind then."""

    def __init__(self, pid: int, count: Any, every: float = 0.2) -> None:
        super().__init__(daemon=True)
        self.proc, self.count, self.every = psutil.Process(pid), count, every
        self.samples: list[tuple[float, int, int]] = []
        self.halt = threading.Event()

    def run(self) -> None:
        t0 = time.monotonic()
        while not self.halt.wait(self.every):
            try:
                rss = self.proc.memory_info().rss
            except psutil.Error:
                return
            self.samples.append((time.monotonic() - t0, self.count(), rss))


def resident(f: Fleet) -> dict[str, Any]:
    got = subprocess.run(
        [sys.executable, "-m", "feedledger", "--config", str(f.ws.config_path), "health", "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    return {"resident": json.loads(got.stdout)["resident"]}


def run_days(f: Fleet, args: argparse.Namespace, first: Any) -> dict[str, Any]:
    proc = started(
        launch(
            f.ws.config_path,
            "--workers",
            str(args.workers),
            "--max-warm-sources",
            str(args.max_warm_sources),
            lease_ttl=60,
        )
    )
    report: dict[str, Any] = {}
    try:
        for i in range(args.days):
            day = first + timedelta(days=i)
            f.publish(day)
            sampler = Sampler(proc.pid, lambda d=day: len(f.names) - len(behind(f, d)))
            sampler.start()
            wait_until(lambda d=day: not behind(f, d), [proc], timeout=args.timeout, poll=0.5)
            t_done = time.monotonic()
            while time.monotonic() - t_done < args.idle:  # between runs: what it holds
                time.sleep(0.2)
            sampler.halt.set()
            sampler.join()
            s = sampler.samples
            curve = []
            for tenth in range(1, 11):
                goal = len(f.names) * tenth // 10
                hit = next((rss for _t, n, rss in s if n >= goal), s[-1][2])
                curve.append([goal, round(hit / MIB)])
            report[f"day{i + 1}"] = {
                "rss_mib_by_sources_applied": curve,
                "peak_rss_mib": round(max(r for _t, _n, r in s) / MIB),
                "idle_rss_mib": round(s[-1][2] / MIB),
            }
            print(json.dumps({f"day{i + 1}": report[f"day{i + 1}"]}), flush=True)
        report.update(resident(f))
    finally:
        stop([proc])
    return report


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--sources", type=int, default=60)
    p.add_argument("--parcels", type=int, default=20_000)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--max-warm-sources", type=int, default=8)
    p.add_argument("--days", type=int, default=2)
    p.add_argument("--idle", type=float, default=5.0, help="seconds sampled after a day")
    p.add_argument("--timeout", type=float, default=3600)
    p.add_argument("--store", default="postgresql://postgres@127.0.0.1:5432/test")
    args = p.parse_args()
    args.schedulers = 2  # setup's parallel first ingests
    # the days run end today (a later date would be refused as in the future)
    day = datetime.now(UTC).date() - timedelta(days=args.days - 1)
    report: dict[str, Any] = {k: getattr(args, k) for k in ("sources", "parcels", "workers")}
    report["max_warm_sources"] = args.max_warm_sources
    with (
        s3_server() as endpoint,
        tempfile.TemporaryDirectory(prefix="rss-bench-") as tmp,
        served_fleet(args, Path(tmp), endpoint, "rss") as f,
    ):
        report["setup_s"] = round(setup(f, args, day - timedelta(days=1), []), 1)
        report.update(run_days(f, args, day))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
