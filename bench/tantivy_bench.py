"""The tantivy destination: a 1M-document rebuild and searches over it.

    PYTHONPATH=$PWD/src .venv/bin/python bench/tantivy_bench.py \\
        [--payload FILE.csv --published-at 2026-08-01 | --n 1000000] [--queries 300] [--keep]

Day 1 of the parcel feed (default: `gen_parcels.py --n 1000000 --days 1`, generated
into bench/.work/ once and reused, as sync_bench.py does; `--payload` names a file of
it instead) is ingested into
a fresh SQLite workspace (bench/.work/runs); a destination `bench` is declared as a
tantivy index in the workspace (`--tantivy index --text-fields owner,address,city,
zoning,land_use`) and a manifest freezes every live key. Then, each one whole
`feedledger` process (spawn to exit; wall clock and the child's CPU, user + sys, from
`os.wait4`):

    feedledger sync bench --manifest m --json        # the rebuild: every key accepted
    feedledger reconcile bench --manifest m --json   # must answer complete = true
    feedledger sync bench --manifest m --json        # again: every key already_current

documents/s = N / wall (and N / CPU s). Target: rebuild >= 30,000 documents/s. The
machine is shared (2 cores, often loaded far beyond them): each step also reports its
busiest thread's CPU seconds (psutil, sampled), and N / max(busiest thread, CPU / 2) --
the rate this step cannot beat on an idle 2-core machine (a bound, not a measurement).

Search: `Destination.search` (the public API `feedledger search` and the HTTP API call)
in this process over the 1M-document index, the index opened once; each of `--queries`
queries (words, two-word ORs, field queries, AND, a phrase; picked from the data with a
fixed seed) timed by wall clock (`time.perf_counter`) and this thread's CPU
(`time.thread_time`); p50 and p95 of each. Target: p50 <= 10 ms.

Results: a Markdown table on stdout, JSON in bench/results/tantivy-latest.json.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ingest_bench import RESULTS_DIR, RUNS_DIR, log, machine_info, parse_json_output, run_measured
from resultfiles import save_results
from sync_bench import DEFAULT_SEED, generate_day1

TEXT_FIELDS = "owner,address,city,zoning,land_use"
TARGET_DOCS_PER_S = 30_000.0
TARGET_SEARCH_P50_MS = 10.0


def queries(payload: Path, count: int, seed: int = 7) -> list[str]:
    """A fixed mix of queries built from the first 20,000 rows' words."""
    rng = random.Random(seed)
    owners, streets, uses = [], [], []
    with payload.open(newline="") as f:
        for i, row in enumerate(csv.DictReader(f)):
            if i >= 20_000:
                break
            # (tantivy's query language reads an apostrophe as syntax: O'BRIEN -> obrien)
            owners.append(row["owner"].replace(",", " ").split()[0].lower().replace("'", ""))
            streets.append(row["address"].split()[1].lower())
            uses.append(row["land_use"].split("-")[0].lower())
    out = []
    for i in range(count):
        o, s, u = rng.choice(owners), rng.choice(streets), rng.choice(uses)
        out.append(
            [
                o,
                f"{o} {rng.choice(owners)}",
                f"owner:{o}",
                f"address:{s} AND owner:{o}",
                f'"{s} {rng.choice(["st", "ave", "blvd", "way", "rd", "dr"])}"',
                f"land_use:{u} AND address:{s}",
            ][i % 6]
        )
    return out


def pct(xs: list[float], q: float) -> float:
    ordered = sorted(xs)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def search_phase(config: Path, qs: list[str]) -> dict[str, Any]:
    import feedledger as fl

    walls, cpus, totals = [], [], []
    with fl.open(config) as led:
        dest = led.destination("bench")
        dest.search("warmup", limit=10)  # the index opened once, as in `serve`
        for q in qs:
            t0, c0 = time.perf_counter(), time.thread_time()
            got = dest.search(q, limit=10)
            walls.append((time.perf_counter() - t0) * 1e3)
            cpus.append((time.thread_time() - c0) * 1e3)
            totals.append(got.total)
    return {
        "queries": len(qs),
        "wall_ms_p50": round(statistics.median(walls), 3),
        "wall_ms_p95": round(pct(walls, 0.95), 3),
        "cpu_ms_p50": round(statistics.median(cpus), 3),
        "cpu_ms_p95": round(pct(cpus, 0.95), 3),
        "matches_median": statistics.median(totals),
        "examples": qs[:6],
    }


class Threads:
    """The busiest thread of this process's child (psutil, sampled every 0.2 s): its
    CPU seconds bound the step's wall on an idle machine from below, as the whole
    process's CPU over the 2 cores does -- the machine here is shared and loaded, so
    the wall clock measured says little about the code."""

    def __init__(self) -> None:
        self.cpu: dict[tuple[int, int], float] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)
        self.thread.start()

    def _poll(self) -> None:
        import psutil

        me = psutil.Process()
        while not self.stop.wait(0.2):
            for child in me.children():
                try:
                    for t in child.threads():
                        self.cpu[(child.pid, t.id)] = t.user_time + t.system_time
                except psutil.Error:
                    continue

    def busiest(self) -> float:
        self.stop.set()
        self.thread.join()
        return max(self.cpu.values(), default=0.0)


def step(name: str, argv: list[str], ws: Path, n: int, ok: tuple[int, ...] = (0,)) -> Any:
    threads = Threads()
    proc = run_measured(argv, ws, 3600.0) if 1 not in ok else _lenient(argv, ws)
    busiest = threads.busiest()
    out = parse_json_output(proc.stdout)
    cpu = proc.user_s + proc.sys_s
    got = {
        **proc.summary(),
        "cpu_s": round(cpu, 3),
        "docs_per_s": round(n / proc.wall_s, 1),
        "docs_per_cpu_s": round(n / cpu, 1),
        "busiest_thread_cpu_s": round(busiest, 3),
        # the wall this step cannot beat on an idle 2-core machine
        "idle_wall_floor_s": round(max(busiest, cpu / 2), 3),
        "output": out,
    }
    log(
        f"  {name:10s} wall {proc.wall_s:7.2f}s  CPU {cpu:7.2f}s  {n / proc.wall_s:>9,.0f} docs/s"
        f"  {proc.maxrss_kib / 1024:6.0f} MiB"
    )
    return got


def _lenient(argv: list[str], ws: Path) -> Any:
    from ingest_bench import CommandFailed

    try:
        return run_measured(argv, ws, 3600.0)
    except CommandFailed as exc:
        if exc.proc.returncode == 1:
            return exc.proc
        raise


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--payload", type=Path, help="a CSV of the parcel feed (default: generated)")
    ap.add_argument("--published-at", default="2026-08-01")
    ap.add_argument("--n", type=int, default=1_000_000, help="parcels generated (no --payload)")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    if args.payload is None:
        args.payload, _ = generate_day1(args.n, DEFAULT_SEED, 600)
        args.published_at = "2026-08-01"
    fl = [sys.executable, "-m", "feedledger"]
    RUNS_DIR.mkdir(parents=True, exist_ok=True)
    ws = Path(tempfile.mkdtemp(prefix="tantivy-", dir=RUNS_DIR))
    result: dict[str, Any] = {
        "benchmark": "tantivy",
        "machine": machine_info(),
        "payload": str(args.payload),
        "workspace": str(ws),
    }
    try:
        run_measured([*fl, "init"], ws, 60)
        run_measured(
            [
                *fl,
                "source",
                "add",
                "parcels",
                "--key",
                "parcel_id",
                "--format",
                "csv",
                "--kind",
                "snapshot",
            ],
            ws,
            60,
        )
        log(f"== ingest {args.payload}")
        ing = run_measured(
            [*fl, "ingest", "parcels", str(args.payload), "--published-at", args.published_at],
            ws,
            3600,
        )
        result["ingest"] = ing.summary()
        run_measured(
            [
                *fl,
                "destination",
                "add",
                "bench",
                "--source",
                "parcels",
                "--tantivy",
                str(ws / "index"),
                "--text-fields",
                TEXT_FIELDS,
            ],
            ws,
            60,
        )
        made = run_measured(
            [*fl, "manifest", "create", "m", "--source", "parcels", "--json"], ws, 600
        )
        n = int(parse_json_output(made.stdout)["population"])
        result["n"] = n
        log(f"== N = {n:,}: rebuild, reconcile, resync")
        sync = [*fl, "sync", "bench", "--manifest", "m", "--json"]
        steps = {"rebuild": step("rebuild", sync, ws, n)}
        rec = [*fl, "reconcile", "bench", "--manifest", "m", "--json"]
        steps["reconcile"] = step("reconcile", rec, ws, n, ok=(0, 1))
        steps["resync"] = step("resync", sync, ws, n)
        result["steps"] = steps
        result["index_bytes"] = sum(p.stat().st_size for p in (ws / "index").iterdir())
        log(f"== search: {args.queries} queries")
        result["search"] = search_phase(ws / "feedledger.toml", queries(args.payload, args.queries))
        log(
            f"  search p50 {result['search']['wall_ms_p50']} ms wall, "
            f"{result['search']['cpu_ms_p50']} ms CPU"
        )
    finally:
        if not args.keep:
            shutil.rmtree(ws, ignore_errors=True)
    s = result["steps"]
    rebuild_ok = s["rebuild"]["docs_per_s"] >= TARGET_DOCS_PER_S
    search_ok = result["search"]["wall_ms_p50"] <= TARGET_SEARCH_P50_MS
    result["targets"] = {
        "rebuild_docs_per_s": TARGET_DOCS_PER_S,
        "rebuild_met": rebuild_ok,
        "search_p50_ms": TARGET_SEARCH_P50_MS,
        "search_met": search_ok,
    }
    lines = [
        "| step | wall s | CPU s | busiest thread CPU s | docs/s (wall) | docs/CPU s "
        "| N / idle-wall floor | peak RSS MiB | result |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for name, st in s.items():
        out = st["output"]
        verdict = (
            f"complete={out.get('complete')}"
            if name == "reconcile"
            else ", ".join(f"{k} {v:,}" for k, v in out.get("outcomes", {}).items() if v)
        )
        lines.append(
            f"| {name} | {st['wall_s']:.2f} | {st['cpu_s']:.2f} | {st['busiest_thread_cpu_s']:.2f}"
            f" | {st['docs_per_s']:,.0f} | {st['docs_per_cpu_s']:,.0f}"
            f" | {result['n'] / st['idle_wall_floor_s']:,.0f}"
            f" | {st['maxrss_kib'] / 1024:.0f} | {verdict} |"
        )
    se = result["search"]
    lines.append(
        f"\nsearch over {result['n']:,} documents, {se['queries']} queries: p50 "
        f"{se['wall_ms_p50']} ms wall ({se['cpu_ms_p50']} ms CPU), p95 "
        f"{se['wall_ms_p95']} ms wall; target p50 <= {TARGET_SEARCH_P50_MS:g} ms: "
        f"{'met' if search_ok else 'MISSED'}; rebuild target >= "
        f"{TARGET_DOCS_PER_S:,.0f} docs/s: {'met' if rebuild_ok else 'MISSED'}"
    )
    result["markdown"] = "\n".join(lines)
    print(result["markdown"])
    log(f"results: {save_results(RESULTS_DIR, 'tantivy', json.dumps(result, indent=2) + chr(10))}")
    return 0 if rebuild_ok and search_ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
