"""Width benchmark (issue 13, items 8-9): reading a payload costs time and memory
linear in its cells, however many fields a record has.

For each format (JSONL, Parquet, CSV) and width (10 ... 1,000 fields) it writes one
payload of ROWS records, then reads it in a fresh child process exactly as `ingest` does
(`read_observations`, then the attribute texts of every record) and records the child's
wall time, CPU time and peak RSS (`ru_maxrss` from `os.wait4`). For CSV it also times
polars alone reading the same file (`pl.read_csv(data, infer_schema=False)`), the
item-9 reference. Times are the best of three reads in one child.

    .venv/bin/python bench/width_bench.py                       # the default series
    .venv/bin/python bench/width_bench.py --widths 10,100,1000 --rows 2000
    .venv/bin/python bench/width_bench.py --target              # 1,000 cols x 10,000 rows CSV

This harness never imports polars (a child's peak RSS starts at its parent's).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FORMATS = ("jsonl", "parquet", "csv")


def generate(fmt: str, fields: int, rows: int, path: Path) -> None:
    """Child: one payload; `id` plus fields-1 short text values (some repeated)."""
    names = ["id"] + [f"f{i:04d}" for i in range(1, fields)]
    if fmt == "csv":
        with path.open("w", encoding="utf-8", newline="") as fh:
            fh.write(",".join(names) + "\n")
            for r in range(rows):
                fh.write(",".join([str(r)] + [f"v{r % 97}_{i}" for i in range(1, fields)]) + "\n")
        return
    records = [
        {"id": r, **{n: f"v{r % 97}_{i}" for i, n in enumerate(names[1:], 1)}} for r in range(rows)
    ]
    if fmt == "jsonl":
        with path.open("w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(rec) + "\n" for rec in records)
        return
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(records), path)


def measure(fmt: str, path: Path, what: str) -> None:
    """Child: read the payload as ingest does (or with polars alone); print seconds."""
    data = path.read_bytes()
    if what == "polars":
        import polars as pl

        best = min(_timed(lambda: pl.read_csv(data, infer_schema=False)) for _ in range(3))
        print(json.dumps({"seconds": best}))
        return
    from feedledger.config import make_source
    from feedledger.formats import read_observations

    src = make_source("wide", key=("id",), format=fmt)
    best: dict[str, float] = {}
    for _ in range(3):  # best of three, as for polars alone
        start, cpu = time.perf_counter(), time.process_time()
        obs = read_observations(data, src, label=path.name)
        read_s = time.perf_counter() - start
        texts = obs.attributes(obs.frame["idx"])
        got = {
            "read": read_s,
            "seconds": time.perf_counter() - start,
            "cpu": time.process_time() - cpu,
        }
        assert texts.len() == obs.height
        del obs, texts
        best = {k: min(v, best.get(k, v)) for k, v in got.items()}
    print(json.dumps(best))


def _timed(fn: object) -> float:
    start = time.perf_counter()
    fn()  # type: ignore[operator]
    return time.perf_counter() - start


def child(*args: str, timeout: float) -> tuple[dict[str, float], int]:
    """Run this script as a child; its JSON line and peak RSS (KiB)."""
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(
            [sys.executable, __file__, *args], stdout=out, stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                proc.kill()
                os.wait4(proc.pid, 0)
                raise SystemExit(f"timed out after {timeout:.0f} s: {args}")
            time.sleep(0.02)
        proc.returncode = os.waitstatus_to_exitcode(status)
        assert proc.stderr is not None
        err = proc.stderr.read().decode()
        if proc.returncode:
            raise SystemExit(f"child failed ({args}):\n{err}")
        out.seek(0)
        lines = out.read().decode().strip().splitlines()
        return (json.loads(lines[-1]) if lines else {}), usage.ru_maxrss


def run(
    formats: list[str], widths: list[int], rows: int, timeout: float
) -> list[dict[str, object]]:
    results: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="width-bench-") as tmp:
        for fmt in formats:
            for fields in widths:
                path = Path(tmp) / f"wide_{fields}.{fmt}"
                child("--gen", fmt, str(fields), str(rows), str(path), timeout=timeout)
                got, rss = child("--measure", fmt, str(path), "feedledger", timeout=timeout)
                row: dict[str, object] = {
                    "format": fmt,
                    "fields": fields,
                    "rows": rows,
                    "mb": path.stat().st_size / 1e6,
                    "read_s": got["read"],
                    "seconds": got["seconds"],
                    "cpu_s": got["cpu"],
                    "us_per_cell": got["seconds"] / (fields * rows) * 1e6,
                    "peak_rss_mib": rss / 1024,
                }
                if fmt == "csv":
                    alone, _ = child("--measure", fmt, str(path), "polars", timeout=timeout)
                    row["polars_s"] = alone["seconds"]
                results.append(row)
                print(_line(row), file=sys.stderr)
                path.unlink()
    return results


def _line(r: dict[str, object]) -> str:
    polars = (
        f"{r['polars_s']:.3f} | {float(r['read_s']) / float(r['polars_s']):.2f}x"  # type: ignore[arg-type]
        if "polars_s" in r
        else "- | -"
    )
    return (
        f"| {r['format']} | {r['fields']:,} | {r['rows']:,} | {r['mb']:.1f} | "
        f"{r['read_s']:.3f} | {r['seconds']:.3f} | {r['cpu_s']:.3f} | "
        f"{r['us_per_cell']:.2f} | {r['peak_rss_mib']:.0f} | {polars} |"
    )


HEADER = (
    "| format | fields | rows | MB | read s | read+texts s | cpu s | µs/cell | peak RSS MiB "
    "| polars alone s | read / polars |\n|---|---|---|---|---|---|---|---|---|---|---|"
)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--gen":
        fmt, fields, rows, path = sys.argv[2:6]
        generate(fmt, int(fields), int(rows), Path(path))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--measure":
        measure(sys.argv[2], Path(sys.argv[3]), sys.argv[4])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--formats", default=",".join(FORMATS))
    ap.add_argument("--widths", default="10,30,100,300,1000")
    ap.add_argument("--rows", type=int, default=2000)
    ap.add_argument("--target", action="store_true", help="only 1,000 cols x 10,000 rows CSV")
    ap.add_argument("--timeout", type=float, default=600)
    args = ap.parse_args()
    if args.target:
        formats, widths, rows = ["csv"], [1000], 10_000
    else:
        formats = args.formats.split(",")
        widths = [int(w) for w in args.widths.split(",")]
        rows = args.rows
    load = os.getloadavg()
    results = run(formats, widths, rows, args.timeout)
    print(HEADER)
    for r in results:
        print(_line(r))
    print(f"\nload average at start {load[0]:.2f}, at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
