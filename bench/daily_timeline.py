"""A `feedledger` command's timeline: when each stage ran, on which thread, and the CPU
each thread spent (helper proc, bench/README.md "Daily process (helper proc, 2026-12-06)").

    cd WORKSPACE && PYTHONPATH=TREE/src chrt -f 1 python bench/daily_timeline.py \\
        ingest parcels /work/data/n1m/parcels_2026-08-03.csv --published-at 2026-08-03 --json

runs the command as `feedledger` would (`cli/main.main`), with `FEEDLEDGER_TIMINGS=1`'s
stages recorded as (start, end) in seconds since the process started, plus the thread's
CPU seconds inside the stage, and each `pipeline/intake/stages.Stage` (the `archive`, `store` and
`compress` threads) as a whole. At exit it prints them in start order on stderr, then the
main thread's CPU before the read, and the process's CPU (all threads: what is left
beyond the ones named is Polars' own thread pool). Only timing hooks are added.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

T0 = time.perf_counter()


def _since_start() -> float:
    """Seconds since the kernel started this process (the interpreter's start-up too)."""
    with open("/proc/self/stat", encoding="ascii") as f:
        started = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/uptime", encoding="ascii") as f:
        up = float(f.read().split()[0])
    return up - started / os.sysconf("SC_CLK_TCK")


OFFSET = _since_start() - (time.perf_counter() - T0)
os.environ["FEEDLEDGER_TIMINGS"] = "1"

import feedledger.timing as timing  # noqa: E402

LOG: list[tuple[str, str, float, float, float]] = []
CPU_AT_READ: list[float] = []
_stage = timing.stage


def _now() -> float:
    return time.perf_counter() - T0 + OFFSET


@contextmanager
def stage(name: str) -> Iterator[None]:
    start, cpu = _now(), time.thread_time()
    if name == "read" and not CPU_AT_READ:
        CPU_AT_READ.append(cpu)
    try:
        with _stage(name):
            yield
    finally:
        LOG.append((name, threading.current_thread().name, start, _now(), time.thread_time() - cpu))


timing.stage = stage  # before any module binds `from feedledger.timing import stage`

import feedledger.pipeline.intake.stages as stages  # noqa: E402

_init = stages.Stage.__init__


def _stage_init(self: Any, name: str, call: Callable[[], Any]) -> None:
    def timed() -> Any:
        start, cpu = _now(), time.thread_time()
        try:
            return call()
        finally:
            thread = threading.current_thread().name
            LOG.append((f"T:{name}", thread, start, _now(), time.thread_time() - cpu))

    _init(self, name, timed)


stages.Stage.__init__ = _stage_init  # type: ignore[method-assign]


def report() -> None:
    for name, thread, start, end, cpu in sorted(LOG, key=lambda row: row[2]):
        print(
            f"{name:16s} {thread[:18]:18s} {start:7.3f} -> {end:7.3f}  ({end - start:6.3f}) "
            f"cpu {cpu:6.3f}",
            file=sys.stderr,
        )
    if CPU_AT_READ:
        print(f"main cpu at read start: {CPU_AT_READ[0]:.3f}", file=sys.stderr)
    times = os.times()
    print(
        f"proc cpu {times.user + times.system:.3f} main-thread cpu {time.thread_time():.3f}",
        file=sys.stderr,
    )


timing.report = report
sys.argv = ["feedledger", *sys.argv[1:]]
from feedledger.cli.main import main  # noqa: E402

main()
