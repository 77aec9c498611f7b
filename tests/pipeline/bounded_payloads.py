"""Generated parcel payloads for the bounded-memory ingest tests: `n` parcels with eleven
attribute columns (deterministic text), a next day changing, adding and deleting some,
and the peak RSS of a child process running a command."""

from __future__ import annotations

import os
import subprocess
import sys
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


# A small process that forks the command and reports the kernel's high-water mark of
# its resident set. The command is not spawned from the test's process directly: a
# process started by exec records the resident set its parent had at the fork (or,
# spawned by vfork, the parent's own high-water mark) as its own `ru_maxrss`, so a
# large test runner would stand in for the command's peak.
_MEASURE = """
import os, sys
pid = os.fork()
if pid == 0:
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.execv(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss * 1024)
"""


def peak_rss(argv: list[str], env: dict[str, str] | None = None, timeout: float = 300) -> int:
    """Run `argv` as a grandchild process and return its peak resident set (bytes), as
    the kernel recorded it (`wait4`'s rusage) from its exec on. Raises if it fails."""
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, *argv],
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    code, _, peak = done.stdout.strip().partition(" ")
    if done.returncode != 0 or code != "0":
        raise AssertionError(f"{' '.join(argv)} exited {code or done.returncode}: {done.stderr}")
    return int(peak)


def feedledger(config: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "feedledger", "--config", str(config), *args]
