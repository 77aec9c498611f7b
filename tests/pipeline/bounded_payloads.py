"""Generated parcel payloads for the bounded-memory ingest tests: `n` parcels with eleven
attribute columns (deterministic text), a next day changing, adding and deleting some,
and the peak memory of a child process running a command."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import polars as pl

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


# A small process that forks the command, samples its anonymous resident set every
# millisecond (/proc/PID/status `RssAnon`) and reports that peak and the kernel's
# high-water mark of its whole resident set. The command is not spawned from the test's
# process directly: a process started by exec records the resident set its parent had at
# the fork (or, spawned by vfork, the parent's own high-water mark) as its own
# `ru_maxrss`, so a large test runner would stand in for the command's peak.
_MEASURE = """
import os, sys, time
pid = os.fork()
if pid == 0:
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.execv(sys.argv[1], sys.argv[1:])
anon = 0
while True:
    done, status, usage = os.wait4(pid, os.WNOHANG)
    if done:
        break
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"RssAnon:"):
                    anon = max(anon, int(line.split()[1]) * 1024)
    except OSError:
        pass
    time.sleep(0.001)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss * 1024, anon)
"""


@dataclass(frozen=True)
class Peak:
    """A command's peak memory: `anonymous`, its heap and other private memory (sampled
    every millisecond), and `resident`, the kernel's high-water mark of its whole resident
    set, which also counts the pages of its libraries and the files it maps."""

    anonymous: int
    resident: int


def peak_memory(argv: list[str], env: dict[str, str] | None = None, timeout: float = 300) -> Peak:
    """Run `argv` as a grandchild process and return its peak memory (from its exec on).
    Raises if it fails."""
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, *argv],
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    code, *peaks = done.stdout.split()
    if done.returncode != 0 or code != "0":
        raise AssertionError(f"{' '.join(argv)} exited {code or done.returncode}: {done.stderr}")
    return Peak(anonymous=int(peaks[1]), resident=int(peaks[0]))


def feedledger(config: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "feedledger", "--config", str(config), *args]
