"""Optional stage timings (`FEEDLEDGER_TIMINGS=1` prints them to stderr at exit;
`FEEDLEDGER_TIMINGS=rss` adds the process's peak RSS in MiB at the end of each stage).

Used by the benchmarks to show where the time of a run goes; off by default.
"""

from __future__ import annotations

import atexit
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

ENABLED = os.environ.get("FEEDLEDGER_TIMINGS") in ("1", "rss")
_RSS = os.environ.get("FEEDLEDGER_TIMINGS") == "rss"
_T0 = time.perf_counter()
_stages: list[tuple[str, float]] = []
_reported = False


@contextmanager
def stage(name: str) -> Iterator[None]:
    if not ENABLED:
        yield
        return
    start = time.perf_counter()
    try:
        yield
    finally:
        _stages.append((name, time.perf_counter() - start))
        if _RSS:
            import resource  # lazy: POSIX only (none on Windows), for =rss

            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
            _stages.append((f"{name}.peak_mib", float(peak)))


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
