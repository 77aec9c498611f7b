"""HTTP API benchmark (`feedledger serve`, issue 16): `asof` and `history` latency at
20 concurrent clients, and a streamed snapshot's rows/s and server RSS growth.

    .venv/bin/python bench/http_bench.py [--n 100000] [--days 3] [--clients 20]
                                         [--client wrk|threads] [--seconds 10]
                                         [--requests 4000] [--workers N] [--postgres URL]

A ledger of `--n` parcels x `--days` daily snapshots (bench/gen_parcels.py) is built
once per (n, days, backend) under bench/.work/http-* and reused; `feedledger serve
--port 0` runs it in its own process. Measured:

- latency, by one of two load generators (`--client`):
  `wrk` (default; Debian's wrk, `apt-get install -y --no-install-recommends wrk`):
  `--clients` keep-alive connections on one wrk thread for `--seconds` per kind, each
  request `asof?valid=<a random day>` (or `history`) of a random parcel
  (bench/http_keys.lua), after a 2 s warm-up; a C client costs little CPU, so the
  figures are the server's, not the load generator's (both share the 2 cores);
  `threads` (the first client): `--clients` Python threads, each with its own
  keep-alive httpx client, send `--requests` requests in all, alternating the kinds;
  its own CPU (~1 ms a request under the GIL) competes with the server's.
  p50/p90/p99 in ms of each kind, and the server's CPU time per request (its
  processes' user+sys over the measured requests);
- snapshot: `/snapshot?format=jsonl` and `format=csv` of the last day, read to the end
  by one client: rows/s, and the server's RSS (psutil, sampled every 20 ms) growth
  over its RSS before the request, after a warm-up snapshot of no rows (which loads
  the libraries an export imports: reported apart as `warm_up_rss_growth_mib`).

Prints a Markdown table and writes bench/results/http-latest.json. Targets (issue 16,
on 1M x 10): p50 <= 15 ms, p99 <= 60 ms; >= 200k rows/s; RSS growth <= 100 MiB.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from datetime import date
from pathlib import Path
from typing import Any

import httpx
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import gen_parcels  # noqa: E402
from resultfiles import save_results  # noqa: E402


def build(n: int, days: int, postgres: str | None) -> Path:
    """The workspace (built once per n, days and backend)."""
    import feedledger as fl

    tag = "pg" if postgres else "sqlite"
    root = ROOT / "bench" / ".work" / f"http-{tag}-{n}-{days}"
    done = root / "BUILT"
    if done.exists():
        return root
    if postgres:
        postgres = own_database(postgres, f"feedledger_http_bench_{n}_{days}")
    files = gen_parcels.generate(n=n, days=days)
    if root.exists():
        import shutil

        shutil.rmtree(root)
    t0 = time.perf_counter()
    led = fl.init(root, store=postgres) if postgres else fl.init(root)
    with led:
        src = led.add_source("parcels", key=["parcel_id"], timezone="UTC", hold_factor=1e9)
        for f in files:
            src.ingest(f.path, published_at=f.published_at)
            print(f"built {f.path.name} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    done.write_text(json.dumps({"build_s": round(time.perf_counter() - t0, 1)}))
    return root


def own_database(url: str, name: str) -> str:
    """A fresh database `name` on the server of `url` (dropped first if there): the
    bench never writes into a database it did not create."""
    import psycopg
    from sqlalchemy.engine import make_url

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    return make_url(url).set(database=name).render_as_string(hide_password=False)


def keys_of(n: int, days: int) -> list[str]:
    first = gen_parcels.generate(n=n, days=days, log=False)[0].path
    with first.open() as fh:
        fh.readline()
        return [line.split(",", 1)[0] for line in fh]


def start(root: Path, workers: int) -> tuple[subprocess.Popen[str], str]:
    exe = str(Path(sys.executable).with_name("feedledger"))
    proc = subprocess.Popen(
        [
            exe,
            "--config",
            str(root / "feedledger.toml"),
            "serve",
            "--port",
            "0",
            "--workers",
            str(workers),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    found = re.search(r"(http://[\d.]+:\d+)/", line)
    if not found:
        proc.kill()
        raise SystemExit(f"serve did not announce its URL: {line!r}")
    url = found.group(1)
    for _ in range(600):
        try:
            httpx.get(url + "/api/health", timeout=5)
            break
        except httpx.TransportError:
            time.sleep(0.05)
    return proc, url


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def latency(
    url: str, keys: list[str], days: int, clients: int, total: int, pid: int
) -> dict[str, Any]:
    per: dict[str, list[float]] = {"asof": [], "history": []}
    errors = [0]
    lock = threading.Lock()
    each = total // clients

    def work(seed: int) -> None:
        rnd = random.Random(seed)
        got: dict[str, list[float]] = {"asof": [], "history": []}
        with httpx.Client(base_url=url, timeout=30) as c:
            c.get("/api/health")  # connection up
            for i in range(each):
                key = rnd.choice(keys)
                if i % 2:
                    kind, path = "history", f"/api/sources/parcels/entities/{key}/history"
                else:
                    day = 1 + rnd.randrange(days)
                    kind = "asof"
                    path = f"/api/sources/parcels/entities/{key}/asof?valid=2026-08-{day:02d}"
                t = time.perf_counter()
                r = c.get(path)
                ms = (time.perf_counter() - t) * 1000
                got[kind].append(ms)
                if r.status_code != 200:
                    with lock:
                        errors[0] += 1
        with lock:
            for k, v in got.items():
                per[k] += v

    threads = [threading.Thread(target=work, args=(s,)) for s in range(clients)]
    cpu0 = server_cpu(pid)
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    done = each * clients
    out: dict[str, Any] = {"client": f"{clients} Python threads (httpx)"}
    out |= {"requests": done, "wall_s": round(wall, 2)}
    out["server_cpu_ms_per_request"] = round((server_cpu(pid) - cpu0) / done * 1000, 3)
    out |= {"req_per_s": round(done / wall, 1), "errors": errors[0]}
    for k, v in per.items():
        out[k] = {q: round(pct(v, p), 2) for q, p in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))}
        out[k]["mean"] = round(statistics.fmean(v), 2)
    return out


def server_cpu(pid: int) -> float:
    """CPU seconds (user + sys) used so far by the server: with --workers, its
    supervisor's and its workers' summed."""
    proc = psutil.Process(pid)
    total = 0.0
    for p in [proc, *proc.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            t = p.cpu_times()
            total += t.user + t.system
    return total


def wrk_ms(text: str) -> float:
    """A wrk latency figure (`812.00us`, `1.23ms`, `1.01s`) in ms."""
    for unit, scale in (("us", 0.001), ("ms", 1.0), ("s", 1000.0)):
        if text.endswith(unit):
            return round(float(text[: -len(unit)]) * scale, 2)
    raise ValueError(f"not a wrk latency: {text!r}")


def latency_wrk(
    url: str, n: int, days: int, clients: int, seconds: int, pid: int
) -> dict[str, Any]:
    """Each kind alone for `seconds` at `clients` connections (bench/http_keys.lua)."""
    script = ROOT / "bench" / "http_keys.lua"

    def run(kind: str, secs: int) -> str:
        env = {**os.environ, "FL_N": str(n), "FL_DAYS": str(days), "FL_KIND": kind}
        cmd = ["wrk", "-t1", f"-c{clients}", f"-d{secs}s", "--timeout", "60s", "--latency"]
        cmd += ["-s", str(script), url]
        return subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout

    run("mix", 2)  # warm-up
    out: dict[str, Any] = {"client": f"wrk -t1 -c{clients} -d{seconds}s", "errors": 0}
    done = 0
    wall = 0.0
    cpu = 0.0
    for kind in ("asof", "history"):
        cpu0 = server_cpu(pid)
        text = run(kind, seconds)
        cpu += server_cpu(pid) - cpu0
        pcts = dict(re.findall(r"^\s+(50|90|99)%\s+(\S+)\s*$", text, re.M))
        count = int(re.search(r"(\d+) requests in ([\d.]+)(m?s)", text).group(1))  # type: ignore[union-attr]
        bad = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
        out["errors"] += int(bad.group(1)) if bad else 0
        done += count
        wall += seconds
        out[kind] = {f"p{q}": wrk_ms(pcts[q]) for q in ("50", "90", "99")}
        out[kind]["requests"] = count
        out[kind]["req_per_s"] = round(count / seconds, 1)
    out |= {"requests": done, "wall_s": wall, "req_per_s": round(done / wall, 1)}
    out["server_cpu_ms_per_request"] = round(cpu / done * 1000, 3)
    return out


def rss(proc: psutil.Process) -> int:
    """The server's RSS: with --workers, the supervisor's and its workers' summed."""
    total = proc.memory_info().rss
    for child in proc.children(recursive=True):
        with contextlib.suppress(psutil.Error):
            total += child.memory_info().rss
    return total


def floor(root: Path, day: str) -> dict[str, Any]:
    """Rows/s of merely reading the rows the export streams, in this process (the
    store's query, no formatting, no HTTP): `pipeline.snapshot_export.rows`."""
    import feedledger as fl
    from feedledger.pipeline.exports import snapshot as snapshot_export

    with fl.open(root) as led:
        src = led.source("parcels")
        valid = src._us(date.fromisoformat(day), "valid")
        t0 = time.perf_counter()
        found = snapshot_export.rows(led.context, "parcels", valid, None)
        rows = sum(1 for _ in found)
        wall = time.perf_counter() - t0
    return {"rows": rows, "wall_s": round(wall, 2), "rows_per_s": round(rows / wall)}


def snapshot(url: str, pid: int, fmt: str, day: str) -> dict[str, Any]:
    proc = psutil.Process(pid)
    before = rss(proc)
    peak = [before]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            try:
                peak[0] = max(peak[0], rss(proc))
            except psutil.Error:
                return
            time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    rows = 0
    size = 0
    t0 = time.perf_counter()
    path = f"/api/sources/parcels/snapshot?valid={day}&format={fmt}"
    with httpx.stream("GET", url + path, timeout=600) as r:
        r.raise_for_status()
        for chunk in r.iter_bytes():
            rows += chunk.count(b"\n")
            size += len(chunk)
    wall = time.perf_counter() - t0
    stop.set()
    sampler.join()
    rows -= 1 if fmt == "csv" and rows else 0  # the header
    return {
        "format": fmt,
        "rows": rows,
        "bytes": size,
        "wall_s": round(wall, 2),
        "rows_per_s": round(rows / wall) if rows else 0,
        "rss_before_mib": round(before / 2**20, 1),
        "rss_growth_mib": round((peak[0] - before) / 2**20, 1),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--days", type=int, default=3)
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--requests", type=int, default=4000, help="the threads client's total")
    ap.add_argument("--client", choices=["wrk", "threads"], default="wrk")
    ap.add_argument("--seconds", type=int, default=10, help="wrk: seconds per kind")
    ap.add_argument("--no-snapshot", action="store_true", help="latency only")
    ap.add_argument("--workers", type=int, default=1, help="feedledger serve --workers")
    ap.add_argument(
        "--postgres",
        default=None,
        help="a PostgreSQL server URL: the bench creates its own database there "
        "(feedledger_http_bench_N_DAYS; default: SQLite)",
    )
    args = ap.parse_args(argv)
    rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True, check=False).stdout.strip()  # fmt: skip
    load_start = os.getloadavg()
    root = build(args.n, args.days, args.postgres)
    keys = keys_of(args.n, args.days)
    proc, url = start(root, args.workers)
    try:
        if args.client == "wrk":
            lat = latency_wrk(url, args.n, args.days, args.clients, args.seconds, proc.pid)
        else:
            lat = latency(url, keys, args.days, args.clients, args.requests, proc.pid)
        last = gen_parcels.FIRST_DAY.toordinal() + args.days  # the day after the last
        day = date.fromordinal(last).isoformat()
        # warm-up: a snapshot before the first publication (no rows) loads what an
        # export imports (polars, pyarrow: ~100 MiB of libraries, once per process),
        # so that the growth measured is the stream's own
        formats = () if args.no_snapshot else ("jsonl", "csv")
        warm = [snapshot(url, proc.pid, fmt, "2000-01-01") for fmt in formats]
        snaps = [snapshot(url, proc.pid, fmt, day) for fmt in formats]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    base = floor(root, day) if snaps else {"rows_per_s": 0}
    result = {
        "bench": "http",
        "git_rev": rev,
        "backend": "postgresql" if args.postgres else "sqlite",
        "n": args.n,
        "days": args.days,
        "clients": args.clients,
        "cpus": os.cpu_count(),
        "load_start": [round(x, 2) for x in load_start],
        "load_end": [round(x, 2) for x in os.getloadavg()],
        "latency": lat,
        "workers": args.workers,
        "snapshot": snaps,
        "snapshot_floor_api": base,
        "warm_up_rss_growth_mib": [w["rss_growth_mib"] for w in warm],
        "server_exit": proc.returncode,
    }
    load = f"load {result['load_start'][0]} -> {result['load_end'][0]}"
    print(f"| {result['backend']} n={args.n:,} x {args.days} days, {lat['client']}, "
          f"{args.workers} worker(s) ({load}) | p50 ms | p99 ms |")  # fmt: skip
    print("|---|---|---|")
    for k in ("asof", "history"):
        print(f"| {k} | {lat[k]['p50']} | {lat[k]['p99']} |")
    print(f"| server CPU per request | {lat['server_cpu_ms_per_request']} ms | |")
    if snaps:
        print(f"| floor: the export's rows read in-process | {base['rows_per_s']:,} rows/s | |")
    for s in snaps:
        print(f"| snapshot {s['format']}: {s['rows']:,} rows | {s['rows_per_s']:,} rows/s | "
              f"RSS +{s['rss_growth_mib']} MiB |")  # fmt: skip
    tag = "http" if not args.postgres else "http-pg"
    tag += "-threads" if args.client == "threads" else ""
    tag += f"-w{args.workers}" if args.workers > 1 else ""
    tag += f"-c{args.clients}" if args.clients != 20 else ""
    save_results(ROOT / "bench" / "results", tag, json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
