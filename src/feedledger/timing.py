"""Optional stage timings (`FEEDLEDGER_TIMINGS=1` prints them to stderr at exit;
`FEEDLEDGER_TIMINGS=rss` adds, at the end of each stage, the process's peak resident set
in MiB and, on Linux, its anonymous and file-backed parts at that moment;
`FEEDLEDGER_TIMINGS=cpu` adds the process's user and system CPU seconds (all threads)
spent during each stage and, where the platform counts them, its minor page faults in
thousands: `.kflt`, the pages it touched for the first time, most of the system time of
a large payload's).

Used by the benchmarks to show where the time of a run goes; off by default.
"""

from __future__ import annotations

import atexit
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

ENABLED = os.environ.get("FEEDLEDGER_TIMINGS") in ("1", "rss", "cpu")
_RSS = os.environ.get("FEEDLEDGER_TIMINGS") == "rss"
_CPU = os.environ.get("FEEDLEDGER_TIMINGS") == "cpu"
_T0 = time.perf_counter()
_stages: list[tuple[str, float]] = []
_reported = False


@contextmanager
def stage(name: str) -> Iterator[None]:
    if not ENABLED:
        yield
        return
    start = time.perf_counter()
    cpu = os.times() if _CPU else None
    faults = _faults() if _CPU else None
    try:
        yield
    finally:
        _stages.append((name, time.perf_counter() - start))
        if cpu is not None:
            now = os.times()
            _stages.extend(
                ((f"{name}.user", now.user - cpu.user), (f"{name}.sys", now.system - cpu.system))
            )
        if faults is not None:
            _stages.append((f"{name}.kflt", ((_faults() or 0) - faults) / 1000))
        if _RSS:
            _stages.extend((f"{name}.{part}", mib) for part, mib in _memory().items())


def _faults() -> int | None:
    """The process's minor page faults so far (all threads), None where not counted."""
    try:
        import resource  # lazy: POSIX only (none on Windows)

        return int(resource.getrusage(resource.RUSAGE_SELF).ru_minflt)
    except (ImportError, OSError):
        return None


_STATUS = {"VmHWM": "peak_mib", "RssAnon": "anon_mib", "RssFile": "file_mib"}


def _memory() -> dict[str, float]:
    """The peak resident set and, on Linux, the anonymous and file-backed resident parts
    now, in MiB. Linux's own high-water mark (`VmHWM`) counts from this program's start;
    `ru_maxrss` (elsewhere) would also count the parent's set at the fork."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            fields = dict(line.split(":", 1) for line in status if ":" in line)
        return {
            name: int(fields[key].split()[0]) / 1024
            for key, name in _STATUS.items()
            if key in fields
        }
    except OSError:
        import resource  # lazy: POSIX only (none on Windows), for =rss

        return {"peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def report() -> None:
    """Print the stage timings once (at exit, or earlier by a fast-exiting caller)."""
    global _reported
    if not ENABLED or _reported:
        return
    _reported = True
    total = time.perf_counter() - _T0
    parts = " ".join(f"{n}={t:.3f}" for n, t in _stages)
    sys.stderr.write(f"timings: since-import={total:.3f} {parts}\n")


if ENABLED:
    atexit.register(report)
