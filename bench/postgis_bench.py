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
the CPU of the PostgreSQL backends that served it (found by `application_name`, set
with PGAPPNAME, polled by psutil every 0.2 s). Records per second are over wall
time and over client+server CPU.
JSON in bench/results/postgis-latest.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import psutil

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from resultfiles import save_results  # noqa: E402

MAIN_DATA = Path("/work/main/bench/.work/gis")
APP = "postgis_bench"


def data(n: int) -> Path:
    name = f"parcels-{n}-day1.gpkg"
    for folder in (BENCH / ".work" / "gis", MAIN_DATA):
        if (folder / name).exists():
            return folder / name
    subprocess.run([sys.executable, str(BENCH / "gis_bench.py"), "gen", str(n)], check=True)
    return BENCH / ".work" / "gis" / name


class Backends:
    """CPU (user+sys) of the PostgreSQL backends serving this bench's `feedledger`
    processes (`application_name` APP, set through PGAPPNAME), polled every 0.2 s:
    a backend's last sample is kept after it ends (at most 0.2 s of it unseen)."""

    def __init__(self, pg: str) -> None:
        import psycopg

        self.conn = psycopg.connect(pg, autocommit=True)
        self.seen: dict[int, float] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self.stop.wait(0.2):
            pids = [r[0] for r in self.conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (APP,)
            ).fetchall()]  # fmt: skip
            for pid in pids:
                try:
                    t = psutil.Process(pid).cpu_times()
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
                self.seen[pid] = t.user + t.system

    def __enter__(self) -> Backends:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()
        self.conn.close()

    def total(self) -> float:
        return sum(self.seen.values())


def step(ws: Path, *args: str, pg: str | None = None) -> dict[str, Any]:
    """One `feedledger` process: wall, its CPU, its server backends' CPU (`pg`), its
    JSON output."""
    env = {**os.environ, "PYTHONPATH": str(BENCH.parent / "src"), "PGAPPNAME": APP}
    cmd = [sys.executable, "-m", "feedledger", *args]
    backends = Backends(pg) if pg else None
    if backends is not None:
        backends.__enter__()
    w0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ws, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - w0
    if backends is not None:
        backends.__exit__()
    out = proc.stdout.read().decode() if proc.stdout else ""
    err = proc.stderr.read().decode() if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(args)} failed: {err.strip()[-2000:]}")
    got: dict[str, Any] = {
        "wall_s": round(wall, 2),
        "client_cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
        "server_cpu_s": round(backends.total(), 2) if backends is not None else None,
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
    ap.add_argument("--out", default="postgis", help="results: bench/results/OUT-latest.json")
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
                              f"--{kind}", args.pg, "--table", table, "--json",
                              pg=args.pg)  # fmt: skip
            for phase, manifest in (("rebuild", "m1"), ("resync", "m2")):
                step(ws, "manifest", "create", f"{name}{manifest}", "--source", "parcels")
                got = step(ws, "sync", name, "--manifest", f"{name}{manifest}", "--json",
                           pg=args.pg)  # fmt: skip
                outcomes = got.pop("output", {}).get("outcomes")
                cpu = got["client_cpu_s"] + (got["server_cpu_s"] or 0)
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
            save_results(BENCH / "results", args.out, json.dumps(results, indent=2))
        finally:
            step(ws, "destination", "remove", name)
            with psycopg.connect(args.pg, autocommit=True) as conn:
                conn.execute(f'DROP TABLE IF EXISTS "{table}"')
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
