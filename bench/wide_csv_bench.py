"""Wide CSV benchmark: writing a payload's versions costs time linear in its columns.

For each width it writes a CSV of ROWS records (`id` plus width-1 text columns), makes a
fresh SQLite workspace, and ingests the file with `feedledger ingest` in a child
process with FEEDLEDGER_TIMINGS=1, then prints the child's wall time and its `read`,
`codebook` and `txn_body` stages (the payload's transaction: where a quadratic cost in
the columns once lived), and each per 1,000 columns: flat when the cost is linear.

    .venv/bin/python bench/wide_csv_bench.py                      # 1k, 2k, 4k, 10k columns
    .venv/bin/python bench/wide_csv_bench.py --widths 500,1000,2000 --rows 3
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STAGES = ("read", "codebook", "txn_body")


def write_csv(path: Path, width: int, rows: int) -> None:
    names = ["id"] + [f"c{i}" for i in range(1, width)]
    with path.open("w", encoding="utf-8", newline="") as fh:
        fh.write(",".join(names) + "\n")
        for r in range(rows):
            fh.write(",".join([str(r)] + [f"v{r}_{i}" for i in range(1, width)]) + "\n")


def feedledger(ws: Path, *args: str, timings: bool = False) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FEEDLEDGER_TIMINGS": "1" if timings else ""}
    return subprocess.run(
        [sys.executable, "-m", "feedledger", *args],
        cwd=ws,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )


def one(width: int, rows: int, tmp: Path) -> dict[str, float]:
    ws = tmp / f"ws{width}"
    ws.mkdir()
    data = tmp / f"wide_{width}.csv"
    write_csv(data, width, rows)
    feedledger(ws, "init")
    feedledger(ws, "source", "add", "wide", "--key", "id")
    start = time.perf_counter()
    done = feedledger(ws, "ingest", "wide", str(data), "--published-at", "2026-08-01", timings=True)
    got = {"wall": time.perf_counter() - start}
    line = next(x for x in done.stderr.splitlines() if x.startswith("timings:"))
    for item in line.split()[1:]:
        name, _, value = item.partition("=")
        if name in STAGES:
            got[name] = float(value)
    return got


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--widths", default="1000,2000,4000,10000")
    parser.add_argument("--rows", type=int, default=3)
    args = parser.parse_args()
    widths = [int(w) for w in args.widths.split(",")]
    print(f"{'columns':>8} {'wall s':>8} " + " ".join(f"{s + ' s':>10}" for s in STAGES), end="")
    print(f" {'txn_body s/1k cols':>19}")
    with tempfile.TemporaryDirectory(prefix="wide_csv_bench") as tmp:
        for width in widths:
            got = one(width, args.rows, Path(tmp))
            per_k = got.get("txn_body", 0.0) / (width / 1000)
            stages = " ".join(f"{got.get(s, 0.0):>10.3f}" for s in STAGES)
            print(f"{width:>8} {got['wall']:>8.2f} {stages} {per_k:>19.3f}", flush=True)


if __name__ == "__main__":
    main()
