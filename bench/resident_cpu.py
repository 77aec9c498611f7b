"""Where a warm scheduler tick's CPU goes, against the floor's: CPU seconds, not walls.

    PYTHONPATH=<tree>/src python bench/resident_cpu.py [--data /work/data/n1m30]
                                                       [--days 3] [--label NAME]

On a shared machine wall times say nothing; CPU seconds mostly do. Like
`resident_bench.py` (whose workspace, clock and floor it reuses), one process runs the
scheduler's own loop: day 1 is the first load, then per day the floor (`floor.py`, a
whole process: its CPU from the kernel's child accounting) and one warm tick. Per tick,
one JSON line: its wall and CPU (the whole process, every thread); with a tree that
queues the compression after the attempt (`Scheduler.settled`), that queue's wall and
CPU apart; the CPU of each persistent thread group (`/proc/self/task`: polars'
`async-executor` and `polars` pools, jemalloc's, the Python threads) and of the threads
that ended meanwhile (the ingest's stages); each named stage's CPU in the thread that
ran it (`feedledger.timing.stage`, and the calls `pipeline/intake/stages.py` starts: `T:...`);
the stages' walls. Runs the tree on PYTHONPATH, so two trees alternate for an A/B.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

os.environ["FEEDLEDGER_TIMINGS"] = "1"
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import resident_bench as rb  # noqa: E402
from feedledger import timing  # noqa: E402

CPU: collections.defaultdict[str, float] = collections.defaultdict(float)


@contextlib.contextmanager
def _stage(name: str) -> Iterator[None]:
    """`timing.stage`, also counting the CPU of the thread that runs the stage."""
    wall, cpu = time.perf_counter(), time.thread_time()
    try:
        yield
    finally:
        timing._stages.append((name, time.perf_counter() - wall))
        CPU[name] += time.thread_time() - cpu


timing.stage = _stage  # before the pipeline's modules bind it

from feedledger.pipeline.intake import stages  # noqa: E402

_start = stages.Stages.start


def _timed_start(self: stages.Stages, name: str, call: Callable[..., Any], *args: object) -> Any:
    def timed(*a: object) -> Any:
        cpu = time.thread_time()
        try:
            return call(*a)
        finally:
            CPU["T:" + name] += time.thread_time() - cpu

    return _start(self, name, timed, *args)


stages.Stages.start = _timed_start  # type: ignore[method-assign]


def threads() -> dict[str, tuple[str, float]]:
    """Each live thread of this process: (its name, its CPU seconds so far)."""
    out = {}
    tick = os.sysconf("SC_CLK_TCK")
    for tid in os.listdir("/proc/self/task"):
        try:
            stat = Path(f"/proc/self/task/{tid}/stat").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        out[tid] = (comm, (int(fields[11]) + int(fields[12])) / tick)
    return out


def cpu(who: int) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=Path("/work/data/n1m30"))
    p.add_argument("--days", type=int, default=3)
    p.add_argument("--label", default="")
    p.add_argument("--root", type=Path, default=Path(tempfile.gettempdir()))
    a = p.parse_args()
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    files = rb.day_files(a.data)
    ws, feed = rb.workspace(a.root, None)
    try:
        clock = rb.BenchClock(files[0][0])
        sched = rb.scheduler(ws, clock, 8)
        (feed / files[0][1].name).symlink_to(files[0][1])
        before, wall = cpu(resource.RUSAGE_SELF), time.perf_counter()
        (first,) = sched.tick(wait=True)
        assert first.result().outcome == "applied"
        if hasattr(sched, "settled"):
            sched.settled()
        print(json.dumps({"label": a.label, "first_load": {
            "s": round(time.perf_counter() - wall, 3),
            "cpu": round(cpu(resource.RUSAGE_SELF) - before, 3),
            "wal_mib": round(sched.store.wal_bytes() / 2**20),
        }}), flush=True)  # fmt: skip
        for day, path in files[1 : 1 + a.days]:
            row: dict[str, Any] = {"label": a.label, "day": day.isoformat()}
            before, wall = cpu(resource.RUSAGE_CHILDREN), time.perf_counter()
            rb.floor(path)
            row["floor_s"] = round(time.perf_counter() - wall, 3)
            row["floor_cpu"] = round(cpu(resource.RUSAGE_CHILDREN) - before, 3)
            CPU.clear()
            n0 = len(timing._stages)
            clock.day = day
            (feed / path.name).symlink_to(path)
            live = threads()
            before, wall = cpu(resource.RUSAGE_SELF), time.perf_counter()
            (future,) = sched.tick(wait=True)
            assert future.result().outcome == "applied"
            row["tick_s"] = round(time.perf_counter() - wall, 3)
            row["tick_cpu"] = round(cpu(resource.RUSAGE_SELF) - before, 3)
            whole = row["tick_cpu"]
            if hasattr(sched, "settled"):
                before, wall = cpu(resource.RUSAGE_SELF), time.perf_counter()
                sched.settled()
                row["settle_s"] = round(time.perf_counter() - wall, 3)
                row["settle_cpu"] = round(cpu(resource.RUSAGE_SELF) - before, 3)
                whole += row["settle_cpu"]
            groups: collections.Counter[str] = collections.Counter()
            for tid, (comm, spent) in threads().items():
                groups[comm.rstrip("0123456789-_")] += spent - live.get(tid, (comm, 0.0))[1]
            groups["(ended threads)"] = whole - sum(groups.values())
            row["threads_cpu"] = {k: round(v, 3) for k, v in groups.items() if abs(v) > 0.004}
            row["stage_cpu"] = {k: round(v, 3) for k, v in CPU.items() if v > 0.004}
            row["stage_s"] = {n: round(t, 3) for n, t in timing._stages[n0:] if t > 0.004}
            print(json.dumps(row), flush=True)
        sched.close()
    finally:
        shutil.rmtree(ws, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
