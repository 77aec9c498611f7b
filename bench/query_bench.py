"""Python API query latency (issue 17, target 4): `Source.asof` and `Source.history` of
random parcels on a `--n` parcels x `--days` daily snapshots ledger, in one process.

    .venv/bin/python bench/query_bench.py [--n 1000000] [--days 30] [--queries 2000]
                                          [--postgres URL]

The ledger is http_bench.py's (bench/.work/http-{sqlite,pg}-N-DAYS, built once and
reused). Each query is timed alone (perf_counter around the call, its JSON made too:
`to_json()`), alternating asof (a random day of the range, as known now) and history;
every 4th asof also gives `known_at` (a random earlier day). Reports p50/p90/p99 ms and
the process CPU per query, writes bench/results/query[-pg]-latest.json. Target: p50 <= 2
ms on 1M x 30, both backends.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from datetime import date, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import gen_parcels  # noqa: E402
import http_bench  # noqa: E402
from resultfiles import save_results  # noqa: E402


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


def measure(root: Path, n: int, days: int, queries: int, seed: int = 1) -> dict[str, Any]:
    import feedledger as fl

    rnd = random.Random(seed)
    first = gen_parcels.FIRST_DAY
    times: dict[str, list[float]] = {"asof": [], "history": []}
    with fl.open(root) as led:
        src = led.source("parcels")
        for _ in range(50):  # warm-up: imports, the connection, its statement cache
            src.asof(f"P{rnd.randint(1, n):08d}", valid=first).to_json()
        cpu0 = time.process_time()
        wall0 = time.perf_counter()
        for i in range(queries):
            key = f"P{rnd.randint(1, n):08d}"
            if i % 2:
                t = time.perf_counter()
                [v.to_json() for v in src.history(key)]
                times["history"].append((time.perf_counter() - t) * 1000)
                continue
            valid = first + timedelta(days=rnd.randrange(days))
            known = None
            if i % 8 == 0:
                known = first + timedelta(days=rnd.randrange(days))
            t = time.perf_counter()
            src.asof(key, valid=valid, known_at=known).to_json()
            times["asof"].append((time.perf_counter() - t) * 1000)
        cpu = time.process_time() - cpu0
        wall = time.perf_counter() - wall0
    out: dict[str, Any] = {"queries": queries, "wall_s": round(wall, 2)}
    out["cpu_ms_per_query"] = round(cpu / queries * 1000, 3)
    for kind, values in times.items():
        out[kind] = {q: pct(values, p) for q, p in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--queries", type=int, default=2000)
    ap.add_argument("--postgres", default=None, help="a PostgreSQL server URL (see http_bench)")
    args = ap.parse_args(argv)
    rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True, check=False).stdout.strip()  # fmt: skip
    root = http_bench.build(args.n, args.days, args.postgres)
    load_start = os.getloadavg()
    lat = measure(root, args.n, args.days, args.queries)
    result = {
        "bench": "query",
        "git_rev": rev,
        "backend": "postgresql" if args.postgres else "sqlite",
        "n": args.n,
        "days": args.days,
        "cpus": os.cpu_count(),
        "load_start": [round(x, 2) for x in load_start],
        "load_end": [round(x, 2) for x in os.getloadavg()],
        "latency": lat,
        "first_day": date.isoformat(gen_parcels.FIRST_DAY),
    }
    load = f"load {result['load_start'][0]} -> {result['load_end'][0]}"
    print(f"| {result['backend']} n={args.n:,} x {args.days} days, in-process ({load}) "
          f"| p50 ms | p90 ms | p99 ms |")  # fmt: skip
    print("|---|---|---|---|")
    for k in ("asof", "history"):
        print(f"| {k} | {lat[k]['p50']} | {lat[k]['p90']} | {lat[k]['p99']} |")
    print(f"| CPU per query | {lat['cpu_ms_per_query']} ms | | |")
    tag = "query-pg" if args.postgres else "query"
    save_results(ROOT / "bench" / "results", tag, json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
