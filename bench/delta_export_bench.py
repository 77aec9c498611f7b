"""The Delta Lake export at scale (issue 32): a parcel feed of N parcels over D days
(bench/gen_parcels.py: 1 % changed, 0.1 % added, 0.1 % deleted a day), the first export
of days 1..D-1 as one Delta table, then day D ingested and exported incrementally (one
daily run: its new versions appended and the versions they close updated by a merge).

Each export runs as `feedledger export delta` in a child process; reported per export:
wall time, the child's CPU time (user + system, all its threads) and peak RSS, the rows
written, the Delta version, and the table's size on disk. A machine shared with other
work: compare CPU time, not wall time. The table is then read back by polars and its
row count checked against the store's versions.

    PYTHONPATH=$PWD/src .venv/bin/python bench/delta_export_bench.py --n 1000000 --days 30
    [--store postgresql://...] [--work DIR] [--keep]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

import gen_parcels  # noqa: E402


def dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def run_cli(config: Path, *args: str) -> dict[str, Any]:
    """`feedledger --config CONFIG ARGS... --json` in a child; its JSON, wall, CPU, RSS."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "feedledger", "--config", str(config), *args, "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"feedledger {' '.join(args)} failed: {done.stderr.strip()}")
    return {
        "result": json.loads(done.stdout),
        "wall_s": round(wall, 3),
        "cpu_s": round((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), 3),
        # ru_maxrss of the children is the largest child so far (KiB): valid for the
        # export when it is the largest process run yet, as it is here after ingests
        "peak_rss_mib": round(after.ru_maxrss / 1024, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--store", default=None, help="store URL (default: SQLite)")
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--keep", action="store_true", help="keep the workspace")
    parser.add_argument("--out", type=Path, default=None, help="write the JSON here too")
    args = parser.parse_args(argv)

    import feedledger

    files = gen_parcels.generate(args.n, args.days)
    work = args.work or Path(tempfile.mkdtemp(prefix="delta-bench-", dir=BENCH_DIR / ".work"))
    work.mkdir(parents=True, exist_ok=True)
    root = work / "ws"
    lake = work / "lake"
    led = feedledger.init(root, store=args.store)
    config = root / "feedledger.toml"
    report: dict[str, Any] = {"n": args.n, "days": args.days, "store": args.store or "sqlite"}
    try:
        led.add_source("parcels", key=("parcel_id",), timezone="UTC")
        t0 = time.perf_counter()
        for day in files[:-1]:
            led.source("parcels").ingest(day.path, published_at=day.published_at)
        report["ingest_s"] = round(time.perf_counter() - t0, 1)
        print(f"ingested {len(files) - 1} days in {report['ingest_s']} s", file=sys.stderr)

        first = run_cli(config, "export", "delta", "parcels", "--to", str(lake))
        first["table_mib"] = round(dir_size(lake) / 1048576, 1)
        report["first_export"] = first
        if args.keep:  # the table before the daily export, for paired A/B reruns
            shutil.copytree(lake, work / "lake-before-daily")
        print(f"first export: {json.dumps(first)}", file=sys.stderr)

        led.source("parcels").ingest(files[-1].path, published_at=files[-1].published_at)
        daily = run_cli(config, "export", "delta", "parcels", "--to", str(lake))
        daily["table_mib"] = round(dir_size(lake) / 1048576, 1)
        report["daily_export"] = daily
        print(f"daily export: {json.dumps(daily)}", file=sys.stderr)

        import polars as pl

        rows = pl.scan_delta(str(lake)).select(pl.len()).collect().item()
        report["table_rows"] = rows
        report["manifest_versions"] = sum(d.added + d.changed + d.deleted for d in files)
    finally:
        led.close()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(report, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
