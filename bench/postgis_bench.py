"""The PostGIS destination's rebuild of 1M parcel polygons, end to end, as a user runs it.

    PYTHONPATH=$PWD/src .venv/bin/python bench/postgis_bench.py \
        --pg postgresql://postgres@127.0.0.1:5432/test [--n 1000000] [--kinds postgis,postgres]

The data is gis_bench.py's (`gen N`: N polygons of 10 vertices, 9 typed properties,
EPSG:4326; cached under bench/.work/gis, or the main checkout's copy). A workspace
(SQLite store) is made once under /tmp/postgis_bench/ws-N and day 1 ingested into it
(kept for the next run). Then per kind: `destination add` (a new table; for postgis
the table typed from the ledger: geometry types, CRS, a sample of the attributes),
`manifest create` and `sync --manifest` (the rebuild: every record accepted), then a
second manifest's `sync` (a resync: every record already current). Each step is a
`feedledger` process: its wall time, its CPU (user+sys, from `wait4`'s rusage) and
the PostgreSQL server's CPU over the step (user+sys of every `postgres` process, by
psutil: the server is shared with other work on this machine, so this one is an
upper bound). Records per second are over wall time and over client+server CPU.
JSON in bench/results/postgis-latest.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import psutil

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from resultfiles import save_results  # noqa: E402

MAIN_DATA = Path("/work/main/bench/.work/gis")


def data(n: int) -> Path:
    name = f"parcels-{n}-day1.gpkg"
    for folder in (BENCH / ".work" / "gis", MAIN_DATA):
        if (folder / name).exists():
            return folder / name
    subprocess.run([sys.executable, str(BENCH / "gis_bench.py"), "gen", str(n)], check=True)
    return BENCH / ".work" / "gis" / name


def server_cpu() -> float:
    total = 0.0
    for p in psutil.process_iter(["name"]):
        if p.info["name"] and p.info["name"].startswith("postgres"):
            try:
                t = p.cpu_times()
                total += t.user + t.system
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                pass
    return total


def step(ws: Path, *args: str) -> dict[str, Any]:
    """One `feedledger` process: wall, its CPU, the server's CPU, its JSON output."""
    env = {**os.environ, "PYTHONPATH": str(BENCH.parent / "src")}
    cmd = [sys.executable, "-m", "feedledger", *args]
    s0, w0 = server_cpu(), time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ws, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - w0
    out = proc.stdout.read().decode() if proc.stdout else ""
    err = proc.stderr.read().decode() if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(args)} failed: {err.strip()[-2000:]}")
    got: dict[str, Any] = {
        "wall_s": round(wall, 2),
        "client_cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
        "server_cpu_s": round(server_cpu() - s0, 2),
    }
    with contextlib.suppress(ValueError):
        got["output"] = json.loads(out)
    return got


def workspace(n: int) -> Path:
    ws = Path(f"/tmp/postgis_bench/ws-{n}")
    if (ws / "ingested").exists():
        return ws
    ws.mkdir(parents=True, exist_ok=True)
    step(ws, "init")
    step(ws, "source", "add", "parcels", "--key", "parcel_id", "--format", "gpkg")
    got = step(ws, "ingest", "parcels", str(data(n)), "--published-at", "2026-08-01")
    print(f"ingest day 1: {got['wall_s']} s wall", file=sys.stderr)
    (ws / "ingested").write_text("1")
    return ws


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pg", required=True)
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--kinds", default="postgis,postgres")
    args = ap.parse_args()
    ws = workspace(args.n)
    results: dict[str, Any] = {"n": args.n, "cpus": os.cpu_count()}
    import psycopg

    with psycopg.connect(args.pg, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS postgis")
    for kind in args.kinds.split(","):
        name = f"b{uuid.uuid4().hex[:8]}"
        table = f"bench_{kind}_{name}"
        try:
            res: dict[str, Any] = {}
            res["add"] = step(ws, "destination", "add", name, "--source", "parcels",
                              f"--{kind}", args.pg, "--table", table, "--json")  # fmt: skip
            for phase, manifest in (("rebuild", "m1"), ("resync", "m2")):
                step(ws, "manifest", "create", f"{name}{manifest}", "--source", "parcels")
                got = step(ws, "sync", name, "--manifest", f"{name}{manifest}", "--json")
                outcomes = got.pop("output", {}).get("outcomes")
                cpu = got["client_cpu_s"] + got["server_cpu_s"]
                got.update(outcomes=outcomes, docs_per_wall_s=round(args.n / got["wall_s"]),
                           docs_per_cpu_s=round(args.n / cpu) if cpu else None)  # fmt: skip
                res[phase] = got
                print(f"{kind} {phase}: {json.dumps(got)}", file=sys.stderr)
            res["add"].pop("output", None)
            with psycopg.connect(args.pg) as conn:
                res["table_bytes"] = conn.execute(
                    "SELECT pg_total_relation_size(%s)", (table,)
                ).fetchone()[0]  # type: ignore[index]
            results[kind] = res
        finally:
            step(ws, "destination", "remove", name)
            with psycopg.connect(args.pg, autocommit=True) as conn:
                conn.execute(f'DROP TABLE IF EXISTS "{table}"')
    print(json.dumps(results, indent=2))
    save_results(BENCH / "results", "postgis", json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
