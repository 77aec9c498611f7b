"""The HTTP snapshot's stream without the HTTP (issue 16: >= 200k rows/s, the server's
RSS growth <= 100 MiB): `Source.snapshot_bytes` -- the generator
`GET /api/sources/{s}/snapshot?format=` hands to the response -- read to the end in
this process, for csv and jsonl, on a ledger snapshot_speed_bench.py built.

    .venv/bin/python bench/snapshot_stream_bench.py WORKSPACE --valid YYYY-MM-DD
        [--known-at ISO] [--format csv jsonl] [--repeat 2]

Per format and run: rows/s (the rows as written: the data lines), CPU seconds of this
process, and RSS growth over the process's RSS after a warm-up stream of no rows (the
same warm-up http_bench.py does), sampled while streaming. Not measured here: the
server's HTTP framing and the client (bench/http_bench.py measures those, heavier).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / (1 << 20)


def stream(src: Any, fmt: str, valid: str, known_at: str | None) -> tuple[int, int]:
    """(bytes, lines) of one stream read to the end."""
    from datetime import date, datetime

    day = date.fromisoformat(valid)
    known = datetime.fromisoformat(known_at) if known_at else None
    size = lines = 0
    for chunk in src.snapshot_bytes(valid=day, known_at=known, format=fmt):
        size += len(chunk)
        lines += chunk.count(b"\n")
    return size, lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("workspace", type=Path)
    p.add_argument("--valid", required=True)
    p.add_argument("--known-at", default=None)
    p.add_argument("--format", nargs="+", default=["csv", "jsonl"])
    p.add_argument("--repeat", type=int, default=2)
    args = p.parse_args(argv)

    import feedledger as fl

    led = fl.open(args.workspace / "feedledger.toml")
    src = led.source("parcels")
    for fmt in args.format:
        stream(src, fmt, "2000-01-01", None)  # warm-up: no rows
    base = rss_mib()
    results = []
    for _ in range(args.repeat):
        for fmt in args.format:
            peak = [base]
            done = threading.Event()

            def sample(peak: list[float] = peak, done: threading.Event = done) -> None:
                while not done.wait(0.05):
                    peak[0] = max(peak[0], rss_mib())

            watcher = threading.Thread(target=sample, daemon=True)
            watcher.start()
            load = os.getloadavg()[0]
            t0, c0 = time.perf_counter(), time.process_time()
            size, lines = stream(src, fmt, args.valid, args.known_at)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            done.set()
            watcher.join()
            rows = lines - (1 if fmt == "csv" else 0)  # the CSV header
            got = {
                "format": fmt,
                "rows": rows,
                "bytes": size,
                "seconds": round(wall, 3),
                "cpu_seconds": round(cpu, 3),
                "rows_per_s": round(rows / wall),
                "rows_per_cpu_s": round(rows / cpu),
                "rss_growth_mib": round(peak[0] - base, 1),
                "load_1m": load,
            }
            results.append(got)
            print(json.dumps(got), flush=True)
    led.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
