"""Snapshot speed benchmark (issue 17 target 1, issue 17 target 4's "1 day vs 30 days"):
`feedledger snapshot parcels --valid D --format csv|parquet -o FILE` of a 1M-parcel
source, each a whole process, on a ledger holding 1 day and one holding 30 days.

    .venv/bin/python bench/snapshot_speed_bench.py [--n 1000000] [--days 30]
        [--repeat 3] [--postgres URL] [--work DIR] [--floor]

Ledgers (built once under --work, reused; a BUILT marker says complete): `one` holds
day 1 of bench/gen_parcels.py's feed, `many` days 1..--days (1 % changed, 0.1 % added
and deleted a day). Measured per ledger and format, --repeat times alternating (a
paired order, so load drifts hit every case alike):

- `latest`: --valid the last day stored;
- `past`: --valid day 1 (of the `many` ledger: the versions of later days are skipped);
- `known_at`: --valid the last day, --known-at just after the last day was recorded.

Each process's wall seconds and peak RSS (ru_maxrss of the child) are reported as
min/median/max, with the machine's load average. `--floor`: polars reading the day's
CSV once and writing the same rows as CSV and Parquet (the floor of a writer, bench/
README.md). Results go to bench/results/snapshot-speed-latest.json.
The feed is generated and the ledgers built by a child process (this script with
--build-only): on Linux a child's ru_maxrss is never below its parent's peak RSS
when it was started (exec keeps the high-water mark), so a harness that had ingested
1M rows itself reported ~1.1 GiB for every snapshot. `harness_maxrss_mib` in the
results is that floor.
Targets (issue 17): <= 2 s, peak RSS <= 600 MiB, `many` within 1.2x of `one`.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import gen_parcels  # noqa: E402
from resultfiles import save_results  # noqa: E402

FORMATS = ("csv", "parquet")


def own_database(url: str, name: str) -> str:
    """A fresh database `name` on the server of `url` (dropped first if there)."""
    import psycopg
    from sqlalchemy.engine import make_url

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    return make_url(url).set(database=name).render_as_string(hide_password=False)


def build(work: Path, name: str, files: list[Any], postgres: str | None) -> Path:
    """A workspace holding `files` (built once; reused when its BUILT marker exists)."""
    import feedledger as fl

    root = work / name
    if (root / "BUILT").exists():
        return root
    if root.exists():
        shutil.rmtree(root)
    if postgres:
        postgres = own_database(postgres, f"feedledger_snapbench_{name}")
    t0 = time.perf_counter()
    led = fl.init(root, store=postgres) if postgres else fl.init(root)
    with led:
        src = led.add_source("parcels", key=["parcel_id"], timezone="UTC", hold_factor=1e9)
        for f in files:
            src.ingest(f.path, published_at=f.published_at)
            print(f"{name}: {f.path.name} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    if postgres:  # the planner's statistics after the bulk loads (autovacuum's job,
        # not always done yet): without them it sorts instead of scanning the index
        import psycopg

        with psycopg.connect(postgres.replace("+psycopg", ""), autocommit=True) as conn:
            conn.execute("ANALYZE versions")
    (root / "BUILT").write_text(json.dumps({"days": len(files)}))
    return root


def run(argv: list[str], cwd: Path) -> tuple[float, float, float]:
    """Wall seconds, peak RSS (MiB) and CPU seconds (user + sys) of one process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if status != 0:
        assert proc.stderr is not None
        raise SystemExit(f"{' '.join(argv)} failed: {proc.stderr.read().decode()[-2000:]}")
    return wall, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


def recorded_after_last(root: Path) -> str:
    """An instant just after the last payload was recorded (a --known-at inside the
    ledger's life that still sees every day)."""
    import feedledger as fl

    with fl.open(root / "feedledger.toml") as led:
        runs = led.source("parcels").runs()
    finished = runs[-1].finished_at if runs else None
    assert finished is not None
    return finished.isoformat()


def stats(values: list[float]) -> dict[str, float]:
    return {
        "min": round(min(values), 3),
        "median": round(statistics.median(values), 3),
        "max": round(max(values), 3),
    }


def floor(day_csv: Path, out: Path) -> dict[str, float]:
    """polars: read the day's CSV (not timed), write it as CSV and as Parquet (timed)."""
    import polars as pl

    frame = pl.read_csv(day_csv, infer_schema=False)
    got: dict[str, float] = {}
    for fmt in FORMATS:
        target = out / f"floor.{fmt}"
        t0 = time.perf_counter()
        if fmt == "csv":
            frame.write_csv(target)
        else:
            frame.write_parquet(target)
        got[fmt] = round(time.perf_counter() - t0, 3)
    return got


def http(ledgers: dict[str, Path], files: list[Any], postgres: str | None) -> int:
    """`GET /api/sources/parcels/snapshot?format=jsonl|csv` of the `many` ledger's last
    day through `feedledger serve` (bench/http_bench.py's server and client): rows/s
    and the server's RSS growth, after a warm-up snapshot of no rows."""
    import http_bench

    root = ledgers["many"]
    day = files[-1].published_at[:10]
    proc, url = http_bench.start(root, 1)
    got: dict[str, Any] = {"load_start": os.getloadavg()[0]}
    try:
        for fmt in ("jsonl", "csv"):
            http_bench.snapshot(url, proc.pid, fmt, "2000-01-01")  # warm-up: no rows
            got[fmt] = http_bench.snapshot(url, proc.pid, fmt, day)
            print(fmt, got[fmt], file=sys.stderr)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    got["load_end"] = os.getloadavg()[0]
    print(json.dumps(got))
    bench = "snapshot-http" + ("-pg" if postgres else "")
    save_results(ROOT / "bench" / "results", bench, json.dumps(got, indent=2) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=1_000_000)
    p.add_argument("--days", type=int, default=30)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--postgres", default=None, help="a PostgreSQL server URL (default SQLite)")
    p.add_argument("--work", type=Path, default=ROOT / "bench" / ".work" / "snapshot-speed")
    p.add_argument("--parcels", type=Path, default=None, help="gen_parcels output dir")
    p.add_argument("--build-only", action="store_true")
    p.add_argument("--floor", action="store_true", help="also time the polars floor")
    p.add_argument(
        "--http", action="store_true", help="only the HTTP stream (issue 16): rows/s, RSS growth"
    )
    args = p.parse_args(argv)

    tag = f"{'pg' if args.postgres else 'sqlite'}-{args.n}"
    work = args.work / tag
    work.mkdir(parents=True, exist_ok=True)
    names = (f"one-{tag}", f"many{args.days}-{tag}")
    seed = gen_parcels.DEFAULT_SEED
    generated = gen_parcels._read_manifest(
        args.parcels or gen_parcels.cache_dir(args.n, seed), args.n, seed
    )
    built = all((work / n / "BUILT").exists() for n in names)
    if not args.build_only and (
        not built or generated is None or len(generated["days"]) < args.days
    ):
        # built by a child, so that this process stays small (see the docstring)
        build_argv = [a for a in (argv if argv is not None else sys.argv[1:]) if a != "--floor"]
        subprocess.run([sys.executable, __file__, *build_argv, "--build-only"], check=True)
    # (after the child: the day files are there then, and only read back here)
    files = gen_parcels.generate(n=args.n, days=args.days, out=args.parcels)
    ledgers = {
        "one": build(work, f"one-{tag}", files[:1], args.postgres),
        "many": build(work, f"many{args.days}-{tag}", files, args.postgres),
    }
    if args.build_only:
        return 0
    if args.http:
        return http(ledgers, files, args.postgres)
    exe = str(Path(sys.executable).with_name("feedledger"))
    first = files[0].published_at[:10]
    cases: list[tuple[str, str, list[str]]] = []
    for name, root in ledgers.items():
        last = (files[0] if name == "one" else files[-1]).published_at[:10]
        known = recorded_after_last(root)
        cases.append((name, "latest", ["--valid", last]))
        cases.append((name, "known_at", ["--valid", last, "--known-at", known]))
        if name == "many":
            cases.append((name, "past", ["--valid", first]))
    out = work / "out"
    out.mkdir(exist_ok=True)
    times: dict[str, list[float]] = {}
    rss: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    loads: list[float] = []
    for _ in range(args.repeat):
        for fmt in FORMATS:
            for name, case, extra in cases:
                root = ledgers[name]
                argv_ = [exe, "--config", str(root / "feedledger.toml"), "snapshot", "parcels"]
                argv_ += [*extra, "--format", fmt, "-o", str(out / f"{name}-{case}.{fmt}")]
                wall, peak, used = run(argv_, root)
                label = f"{name}/{case}/{fmt}"
                times.setdefault(label, []).append(wall)
                rss.setdefault(label, []).append(peak)
                cpu.setdefault(label, []).append(used)
                loads.append(os.getloadavg()[0])
                print(f"{label}: {wall:.2f} s, cpu {used:.2f} s, {peak:.0f} MiB", file=sys.stderr)
    results: dict[str, Any] = {
        "n": args.n,
        "days": args.days,
        "backend": "postgresql" if args.postgres else "sqlite",
        "load_avg_1m": stats(loads),
        # the floor of every child's ru_maxrss (see the docstring)
        "harness_maxrss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "cases": {
            label: {
                "seconds": stats(times[label]),
                "cpu_seconds": stats(cpu[label]),
                "peak_rss_mib": stats(rss[label]),
            }
            for label in times
        },
    }
    for fmt in FORMATS:
        one = statistics.median(times[f"one/latest/{fmt}"])
        many = statistics.median(times[f"many/latest/{fmt}"])
        results[f"many_over_one_{fmt}"] = round(many / one, 3)
        one_cpu = statistics.median(cpu[f"one/latest/{fmt}"])
        results[f"many_over_one_cpu_{fmt}"] = round(
            statistics.median(cpu[f"many/latest/{fmt}"]) / one_cpu, 3
        )
    if args.floor:
        results["polars_floor_s"] = floor(files[0].path, out)
    print("| case | wall s min / median / max | CPU s median | peak RSS MiB (max) |")
    print("|---|---|---|---|")
    for label, got in results["cases"].items():
        s, peak, used = got["seconds"], got["peak_rss_mib"]["max"], got["cpu_seconds"]["median"]
        print(f"| {label} | {s['min']} / {s['median']} / {s['max']} | {used} | {peak} |")
    print(json.dumps({k: v for k, v in results.items() if k != "cases"}))
    bench = "snapshot-speed" + ("-pg" if args.postgres else "")
    save_results(ROOT / "bench" / "results", bench, json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
