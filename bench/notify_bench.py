"""Notification dispatch benchmark: deliver 10,000 pending messages to a local webhook.

    .venv/bin/python bench/notify_bench.py [--messages 10000] [--concurrency 16] [--dispatchers 1]

A fresh SQLite workspace gets one source and one live ingest of a payload with
`--messages` new entities (one outbox row announcing as many changes); a webhook
subscriber points at a receiver on 127.0.0.1 (a minimal asyncio HTTP/1.1 server in a
child process: it answers 204 with keep-alive and counts requests and distinct
`webhook-id`s). Then `feedledger notify dispatch --once --json` runs as a whole process
and is timed: messages/s = delivered / wall time of that process (fan-out of the outbox
row into deliveries, signing, sending and marking all included). Target: >= 1,000/s.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ingest_bench import RESULTS_DIR, RUNS_DIR, log, machine_info, run_measured
from resultfiles import save_results

RECEIVER = r"""
import asyncio, json, sys
count = 0
ids = set()
async def handle(reader, writer):
    global count
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                name, _, value = line.partition(b":")
                low = name.strip().lower()
                if low == b"content-length":
                    length = int(value)
                elif low == b"webhook-id":
                    ids.add(value.strip())
            if length:
                await reader.readexactly(length)
            count += 1
            writer.write(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n")
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()
async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", int(sys.argv[1]))
    async with server:
        while True:
            await asyncio.sleep(0.2)
            with open(sys.argv[2], "w") as fh:
                json.dump({"requests": count, "distinct_ids": len(ids)}, fh)
asyncio.run(main())
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=10_000)
    ap.add_argument("--concurrency", type=int, default=16, help="per subscriber")
    ap.add_argument("--dispatchers", type=int, default=1, help="processes at once")
    ap.add_argument("--feedledger", type=Path, default=Path(sys.executable).parent / "feedledger")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args(argv)
    RUNS_DIR.mkdir(parents=True, exist_ok=True)
    ws = Path(tempfile.mkdtemp(prefix="notify-", dir=RUNS_DIR))
    port = free_port()
    counts = ws / "receiver.json"
    receiver = subprocess.Popen([sys.executable, "-c", RECEIVER, str(port), str(counts)])
    fl = str(args.feedledger)
    try:
        run_measured([fl, "init"], ws, 600)
        run_measured([fl, "source", "add", "s", "--key", "id"], ws, 600)
        payload = ws / "s_2026-08-01.csv"
        payload.write_text(
            "id,name\n" + "".join(f"{i},n{i}\n" for i in range(args.messages)), encoding="utf-8"
        )
        run_measured([fl, "ingest", "s", str(payload), "--published-at", "2026-08-01"], ws, 600)
        run_measured(
            [
                fl,
                "subscriber",
                "add",
                "hook",
                "--webhook",
                f"http://127.0.0.1:{port}/hook",
                "--secret-env",
                "NOTIFY_BENCH_SECRET",
            ],
            ws,
            600,
        )
        os.environ["NOTIFY_BENCH_SECRET"] = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
        argv = [fl, "notify", "dispatch", "--once", "--concurrency", str(args.concurrency)]
        t0 = time.perf_counter()
        with ThreadPoolExecutor(args.dispatchers) as pool:
            procs = list(
                pool.map(
                    lambda _i: run_measured([*argv, "--json"], ws, 1800), range(args.dispatchers)
                )
            )
        wall = time.perf_counter() - t0
        reports = [json.loads(p.stdout) for p in procs]
        report = {
            k: sum(r[k] for r in reports)
            for k in ("messages_created", "attempted", "delivered", "failed", "dead")
        }
        report["seconds"] = max(r["seconds"] for r in reports)
        time.sleep(0.5)
        seen = json.loads(counts.read_text())
        rate = report["delivered"] / wall
        result = {
            "machine": machine_info(),
            "messages": args.messages,
            "concurrency": args.concurrency,
            "dispatchers": args.dispatchers,
            "dispatch": [p.summary() for p in procs],
            "wall_s": round(wall, 3),
            "reports": reports,
            "receiver": seen,
            "messages_per_s": round(rate, 1),
            "in_process_messages_per_s": round(report["delivered"] / report["seconds"], 1),
        }
        line = (
            f"| {args.messages:,} | {args.concurrency} | {args.dispatchers} | {wall:.2f} | "
            f"{rate:,.0f} | "
            f"{result['in_process_messages_per_s']:,.0f} | {report['delivered']:,} | "
            f"{seen['requests']:,} / {seen['distinct_ids']:,} | "
            f"{max(p.maxrss_kib for p in procs) / 1024:.0f} | "
            f"{'met' if rate >= 1000 else 'MISSED'} |"
        )
        print(
            "| messages | concurrency | dispatchers | dispatch wall s | messages/s "
            "| in-process messages/s "
            "| delivered | receiver requests / distinct ids | peak RSS MiB | target >= 1,000/s |"
        )
        print("|---:|---:|---:|---:|---:|---:|---:|---|---:|---|")
        print(line)
        path = save_results(RESULTS_DIR, "notify", json.dumps(result, indent=2) + "\n")
        log(f"results: {path}")
        ok = report["delivered"] == seen["requests"] == seen["distinct_ids"] == args.messages
        return 0 if ok else 1
    finally:
        receiver.kill()
        receiver.wait()
        if not args.keep:
            shutil.rmtree(ws, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
