"""Resident ingest: a warm scheduler against the read-and-hash floor, side by side.

    python bench/resident_bench.py [--data /work/data/n1m] [--daily K] [--vs cold process]
                                   [--backfill N] [--backfill-data DIR] [--store URL]
                                   [--max-warm-sources M] [--keep]

One process runs the scheduler's own loop (`feedledger.scheduler.loop.Scheduler`, the
code `feedledger scheduler` runs: tick -> attempt -> live run or recovery -> ingest),
driven by a clock the bench moves one publication day at a time, over a fetch folder
the bench fills with links to the generated daily files (`bench/gen_parcels.py`). So
imports, the store connection and the source's diff state stay warm between payloads,
as in a scheduler that runs all day.

1. Daily: day 1 is the first load (one tick, reported, not compared). Then for each of
   the next K days, in an order rotating by one each day: the floor (`bench/floor.py
   DAY`, a whole process: interpreter start-up, imports, read, hash) and one ingest of
   that day per lane, each lane a workspace of its own: `warm` (the scheduler, its
   states kept in memory), with `--vs`: `cold` (the same scheduler with
   `--max-warm-sources 0`: the state read back from the Arrow file each time, as
   before the resident tier) and `process` (`feedledger ingest`, a whole process a
   day). Reported per day: each lane's wall time, its ratio to the floor; the medians.
   A scheduler's tick returns once the payload is applied; the compression of its raw
   object queued after it (`Context.after_apply`) is waited for before the next
   measurement and reported apart (`settle_after_s`, `with_settle_ratio`).
2. Backfill (`--backfill N`, N >= 2 days of data): a fresh workspace whose scheduler
   loads day 1, then finds days 2..N missed at once and recovers them (archive fill +
   one backfill, the scheduler's `recover` path) in one tick. Timed: the tick, and by
   the scheduler's own progress callback the backfill's payloads (from its first
   payload's start to its last one's commit; the archive fill before them is reported
   apart). The floor is measured on three of the same files just before and just after
   (median); the target is (N - 1) x 1.3 x floor for the payloads.

Memory: the bench process's RSS after each tick and what the scheduler holds warm
(bytes, from the same summary `health` shows). Prints one JSON object, also kept as
`bench/results/resident-latest.json`.
"""

from __future__ import annotations

import argparse
import io
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

import psutil

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from resultfiles import save_results  # noqa: E402

FLOOR = HERE / "floor.py"
SOURCE = "parcels"
TARGET = 1.3


class BenchClock:
    """The scheduler's clock, moved by the bench: noon UTC of the day it is set to."""

    def __init__(self, day: date) -> None:
        self.day = day

    def now_us(self) -> int:
        from feedledger.model.timeutil import parse_instant, to_us  # lazy: after the CLI set-up

        return to_us(parse_instant(f"{self.day.isoformat()}T12:00:00", "UTC"))

    def sleep(self, seconds: float, stop: threading.Event) -> None:
        stop.wait(0)


def day_files(data: Path) -> list[tuple[date, Path]]:
    got = []
    for path in sorted(data.glob(f"{SOURCE}_*.csv")):
        got.append((date.fromisoformat(path.stem.split("_", 1)[1]), path))
    return got


def floor(path: Path) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, str(FLOOR), str(path)], check=True, capture_output=True)
    return time.perf_counter() - started


def feedledger(ws: Path, *args: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "feedledger", *args], cwd=ws, check=True, capture_output=True
    )


def workspace(root: Path, store: str | None) -> tuple[Path, Path]:
    ws = Path(tempfile.mkdtemp(prefix="resident-", dir=root))
    feed = ws / "feed"
    feed.mkdir()
    feedledger(ws, "init", *(["--store", store] if store else []))
    feedledger(ws, "source", "add", SOURCE, "--key", "parcel_id", "--format", "csv",
               "--kind", "snapshot", "--fetch", str(feed))  # fmt: skip
    return ws, feed


def scheduler(ws: Path, clock: BenchClock, max_warm: int) -> Any:
    from feedledger.scheduler.loop import Options, Scheduler  # lazy: after the CLI set-up

    options = Options(workers=1, dispatch=False, max_warm_sources=max_warm)
    return Scheduler(ws / "feedledger.toml", options, clock=clock, log=io.StringIO())


def tick(sched: Any) -> dict[str, Any]:
    """One tick, waited for: its wall time and the attempt it made."""
    started = time.perf_counter()
    (future,) = sched.tick(wait=True)
    wall = time.perf_counter() - started
    attempt = future.result()
    # the payload's raw object is compressed on the scheduler's queue after the attempt
    # (Context.after_apply): waited for here, timed apart, so that it never runs beside
    # the next measurement (a tree before the queue compresses inside the attempt)
    if hasattr(sched, "settled"):
        sched.settled()
    after = time.perf_counter() - started - wall
    if attempt.outcome not in ("applied", "recovered"):
        raise SystemExit(f"resident_bench: the tick did {attempt.to_json()}")
    return {
        "tick_s": round(wall, 3),
        "settle_after_s": round(after, 3),
        "attempt_s": round(attempt.seconds, 3),
        "outcome": attempt.outcome,
        "payloads": attempt.payloads,
        "changes": attempt.changes,
        "rss_mib": round(psutil.Process().memory_info().rss / 2**20),
        "warm_mib": round(sched.cache.warm.bytes_held / 2**20, 1),
    }


class Lane:
    """One way of ingesting the daily payloads, in a workspace of its own."""

    def __init__(self, args: argparse.Namespace, label: str, first: tuple[date, Path]) -> None:
        self.label = label
        self.ws, self.feed = workspace(args.root, args.store)
        self.clock = BenchClock(first[0])
        self.sched = None
        if label == "process":  # `feedledger ingest`, a whole process a day (a cron job)
            self.first = {"tick_s": round(self.ingest(*first), 3)}
            return
        warm = args.max_warm_sources if label == "warm" else 0
        self.sched = scheduler(self.ws, self.clock, warm)
        (self.feed / first[1].name).symlink_to(first[1])
        self.first = tick(self.sched)

    def ingest(self, day: date, path: Path) -> float:
        started = time.perf_counter()
        feedledger(self.ws, "ingest", SOURCE, str(path), "--published-at", day.isoformat())
        return time.perf_counter() - started

    def day(self, day: date, path: Path) -> dict[str, Any]:
        if self.sched is None:
            return {"tick_s": round(self.ingest(day, path), 3)}
        self.clock.day = day
        (self.feed / path.name).symlink_to(path)
        return tick(self.sched)

    def close(self, keep: bool) -> dict[str, Any] | None:
        summary = None
        if self.sched is not None:
            if self.sched.cache.warm is not None:
                summary = self.sched.cache.warm.summary()
            self.sched.close()
        if not keep:
            shutil.rmtree(self.ws, ignore_errors=True)
        return summary


def daily(args: argparse.Namespace, files: list[tuple[date, Path]]) -> dict[str, Any]:
    """Per day, in an order rotating by one each day: the floor process and one ingest
    of each lane (`warm` always; `cold`, `process` with --vs)."""
    lanes = [Lane(args, label, files[0]) for label in ["warm", *args.vs]]
    try:
        rows = []
        for i, (day, path) in enumerate(files[1 : args.daily + 1]):
            order: list[Lane | None] = [None, *lanes]  # None: the floor
            order = order[i % len(order) :] + order[: i % len(order)]
            row: dict[str, Any] = {"day": day.isoformat()}
            for lane in order:
                if lane is None:
                    row["floor_s"] = round(floor(path), 3)
                else:
                    got = lane.day(day, path)
                    row.update({f"{lane.label}_{k}": v for k, v in got.items()})
            for lane in lanes:
                row[f"{lane.label}_ratio"] = round(row[f"{lane.label}_tick_s"] / row["floor_s"], 3)
                if f"{lane.label}_settle_after_s" in row:  # the compression after it too
                    whole = row[f"{lane.label}_tick_s"] + row[f"{lane.label}_settle_after_s"]
                    row[f"{lane.label}_with_settle_ratio"] = round(whole / row["floor_s"], 3)
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)
        out: dict[str, Any] = {"first_load": {lane.label: lane.first for lane in lanes}}
        out["days"] = rows
        out["median_floor_s"] = statistics.median(r["floor_s"] for r in rows)
        for lane in lanes:
            out[f"median_{lane.label}_s"] = statistics.median(
                r[f"{lane.label}_tick_s"] for r in rows
            )
            out[f"median_{lane.label}_ratio"] = statistics.median(
                r[f"{lane.label}_ratio"] for r in rows
            )
            if lane.sched is not None:
                out[f"median_{lane.label}_with_settle_ratio"] = statistics.median(
                    r[f"{lane.label}_with_settle_ratio"] for r in rows
                )
        out["target_ratio"] = TARGET
        return out
    finally:
        for lane in lanes:
            summary = lane.close(args.keep)
            if summary is not None:
                print(json.dumps({"lane": lane.label, "warm": summary}), file=sys.stderr)


def watch_payloads(sched: Any) -> list[float]:
    """Instants at which the scheduler's backfill starts and finishes each payload: its
    own progress callback (the one that stops a backfill on SIGTERM), observed."""
    marks: list[float] = []
    make = sched._progress

    def progress() -> Callable[[int, int, object], None]:
        step = make()

        def observed(done: int, total: int, ref: object) -> None:
            marks.append(time.perf_counter())
            step(done, total, ref)

        return observed

    sched._progress = progress
    return marks


def backfill(args: argparse.Namespace, files: list[tuple[date, Path]]) -> dict[str, Any]:
    files = files[: args.backfill]
    sample = [p for _d, p in files[1 :: max(1, len(files) // 3)]][:3]
    ws, feed = workspace(args.root, args.store)
    try:
        clock = BenchClock(files[0][0])
        sched = scheduler(ws, clock, args.max_warm_sources)
        (feed / files[0][1].name).symlink_to(files[0][1])
        first = tick(sched)
        floors = [floor(p) for p in sample]
        for _day, path in files[1:]:
            (feed / path.name).symlink_to(path)
        clock.day = files[-1][0]
        marks = watch_payloads(sched)
        got = tick(sched)
        floors += [floor(p) for p in sample]
        sched.close()
        payloads = len(files) - 1
        per = statistics.median(floors)
        applying = marks[-1] - marks[0]  # the backfill's payloads, after the archive fill
        steps = [b - a for a, b in itertools.pairwise(marks)]
        return {
            "first_load": first,
            "recovery": got,
            "payloads": payloads,
            "fill_s": round(got["attempt_s"] - applying, 3),
            "backfill_s": round(applying, 3),
            "per_payload_s": round(applying / payloads, 3),
            "slowest_payload_s": round(max(steps), 3),
            "floor_s": round(per, 3),
            "floors_s": [round(f, 3) for f in floors],
            "ratio_per_payload": round(applying / payloads / per, 3),
            "target_s": round(payloads * TARGET * per, 1),
        }
    finally:
        if not args.keep:
            shutil.rmtree(ws, ignore_errors=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=Path("/work/data/n1m"))
    p.add_argument("--daily", type=int, default=2, help="daily payloads after day 1 (2)")
    p.add_argument("--backfill", type=int, default=0, help="days in the backfill phase (0: none)")
    p.add_argument("--backfill-data", type=Path, default=None, help="default: --data")
    p.add_argument("--store", default=None, help="a PostgreSQL URL (default: SQLite)")
    p.add_argument("--max-warm-sources", type=int, default=8)
    p.add_argument(
        "--vs",
        nargs="*",
        default=[],
        choices=["cold", "process"],
        help="also, side by side: a scheduler keeping nothing warm (cold) and "
        "`feedledger ingest` whole processes (process)",
    )
    p.add_argument("--root", type=Path, default=Path(tempfile.gettempdir()))
    p.add_argument("--keep", action="store_true", help="keep the workspaces")
    args = p.parse_args()
    files = day_files(args.data)
    if len(files) < args.daily + 1:
        raise SystemExit(
            f"resident_bench: {args.data} has {len(files)} days, need {args.daily + 1}"
        )
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    out: dict[str, Any] = {"data": str(args.data), "store": args.store or "sqlite"}
    if args.daily:
        out["daily"] = daily(args, files)
    if args.backfill:
        more = day_files(args.backfill_data or args.data)
        if len(more) < args.backfill:
            raise SystemExit(f"resident_bench: need {args.backfill} days of data")
        out["backfill"] = backfill(args, more)
    text = json.dumps(out, indent=1)
    save_results(HERE / "results", "resident", text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
