"""Generated parcel payloads for the bounded-memory ingest tests: `n` parcels with eleven
attribute columns (deterministic text), a next day changing, adding and deleting some,
and the peak RSS of a child process running a command."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import psutil

ATTRIBUTES = [f"a{i:02d}" for i in range(11)]


def parcels(n: int, day: int = 1) -> pl.DataFrame:
    """Day 1: parcels 0..n-1. Day 2: every 50th changes one attribute, every 500th
    (offset 7) is gone, and n/500 new parcels follow."""
    ids = pl.int_range(0, n + (n // 500 if day > 1 else 0), eager=True).alias("i")
    frame = pl.DataFrame(ids)
    if day > 1:
        frame = frame.filter((pl.col("i") % 500 != 7) | (pl.col("i") >= n))
    changed = (pl.col("i") % 50 == 3) & pl.lit(day > 1)
    return frame.select(
        pl.format("P{}", pl.col("i").cast(pl.String).str.zfill(9)).alias("parcel_id"),
        *[
            pl.when(changed & pl.lit(name == "a03"))
            .then(pl.lit('changed, "quoted"'))
            .otherwise(
                pl.format("{}-{}", pl.lit(name), (pl.col("i") * (k + 3) % 99991).cast(pl.String))
            )
            .alias(name)
            for k, name in enumerate(ATTRIBUTES)
        ],
    )


def write(frame: pl.DataFrame, path: Path) -> Path:
    frame.write_csv(path)
    return path


def peak_rss(argv: list[str], env: dict[str, str] | None = None, timeout: float = 300) -> int:
    """Run `argv` as a child process and return its peak resident set (bytes): the most
    the kernel recorded for it (`wait4`'s rusage), never less than psutil saw while it
    ran. Raises if the command fails."""
    proc = subprocess.Popen(
        argv,
        env={**os.environ, **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    watched = psutil.Process(proc.pid)
    seen = 0
    deadline = time.monotonic() + timeout
    while True:
        # wait4, not Popen.poll: the child's own rusage comes with its exit status
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"{' '.join(argv)} took more than {timeout} s")
        with contextlib.suppress(psutil.Error):  # (it may have just exited)
            seen = max(seen, watched.memory_info().rss)
        time.sleep(0.005)
    proc.returncode = code = os.waitstatus_to_exitcode(status)
    stderr = proc.stderr.read().decode() if proc.stderr else ""
    if code != 0:
        raise AssertionError(f"{' '.join(argv)} exited {code}: {stderr}")
    peak = usage.ru_maxrss * 1024
    return max(peak, seen)


def feedledger(config: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "feedledger", "--config", str(config), *args]
