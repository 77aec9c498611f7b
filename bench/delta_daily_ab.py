"""Paired A/B of the daily incremental Delta export: the same daily export (a kept
`delta_export_bench.py --keep` workspace: the table as the first export left it, the
store with the last day ingested) run by two source trees, alternating, each on a fresh
copy of the table; per run the child's CPU time (user + system, every thread) and wall
time; medians. The machine may be shared: compare CPU seconds.

    PYTHONPATH=$PWD/src .venv/bin/python bench/delta_daily_ab.py --work /tmp/delta/b1m \\
        --a /tmp/delta/old/src --b src --pairs 3
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


def run(src: Path, work: Path, lake: Path, table: str) -> dict[str, float]:
    shutil.rmtree(lake, ignore_errors=True)
    shutil.copytree(work / table, lake)
    env = {**os.environ, "PYTHONPATH": str(src.resolve())}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "feedledger", "--config", str(work / "ws" / "feedledger.toml"),
         "export", "delta", "parcels", "--to", str(lake), "--json"],
        capture_output=True, text=True, check=False, env=env,
    )  # fmt: skip
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{src}: {done.stderr.strip()}")
    rows = json.loads(done.stdout)["rows"]
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"cpu_s": round(cpu, 3), "wall_s": round(wall, 3), "rows": rows}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--a", type=Path, required=True, help="tree A's src folder")
    parser.add_argument("--b", type=Path, required=True, help="tree B's src folder")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument(
        "--table", default="lake-before-daily", help="the table (a folder of --work) copied"
    )
    args = parser.parse_args()
    runs: dict[str, list[dict[str, float]]] = {"a": [], "b": []}
    for _ in range(args.pairs):
        for name in ("a", "b"):
            src = args.a if name == "a" else args.b
            runs[name].append(run(src, args.work, args.work / f"lake-ab-{name}", args.table))
            print(name, runs[name][-1], file=sys.stderr)
    report = {
        name: {
            "src": str(args.a if name == "a" else args.b),
            "cpu_s_median": statistics.median(r["cpu_s"] for r in got),
            "wall_s_median": statistics.median(r["wall_s"] for r in got),
            "runs": got,
        }
        for name, got in runs.items()
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
