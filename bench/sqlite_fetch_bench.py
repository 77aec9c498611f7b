"""The SQLite snapshot's fetch alone (issue 17 target 4's "1 day vs 30 days"): the
query `snapshot_rows.batches` sends, read as `ledger.readers.arrow_fetch` reads it (the sqlite3
module's cursor, each `fetchmany` turned into an Arrow batch) in this process, no
per-key pass and no writer, so the store's share of a snapshot shows.

    .venv/bin/python bench/sqlite_fetch_bench.py LEDGER_DB DAY [--repeat 3]
        [--cache-kib N] [--mmap BYTES]

LEDGER_DB: a workspace's `.feedledger/ledger.db` (e.g. one built by
snapshot_speed_bench.py under bench/.work/snapshot-speed/); DAY: the valid date
(YYYY-MM-DD, end of day UTC). Prints rows, wall and CPU seconds per run.
"""

from __future__ import annotations

import argparse
import datetime
import sqlite3
import time
from collections.abc import Iterator

import pyarrow as pa

from feedledger.ledger.readers import arrow_fetch
from feedledger.ledger.readers import snapshot_rows as sr
from feedledger.ledger.visibility import key_ordered_sql, visible_sql


def fetch(path: str, valid: int, cache_kib: int, mmap: int) -> Iterator[pa.RecordBatch]:
    scan = pa.schema(sr._SCAN)
    cols = [sr._NOT_NULL.get(c, c) for c in scan.names]
    sql = key_ordered_sql(
        cols, f"source = :source AND valid_from <= :valid AND {visible_sql(None)}"
    )
    query, values = arrow_fetch._positional(sql, {"source": "parcels", "valid": valid}, "?")
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
    try:
        conn.execute(f"PRAGMA cache_size=-{cache_kib}")
        if mmap:
            conn.execute(f"PRAGMA mmap_size={mmap}")
        cur = conn.execute(query, values)
        yield from arrow_fetch._rows(cur, scan, sr.BATCH_ROWS, sqlite=True)
        cur.close()
    finally:
        conn.close()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("db")
    p.add_argument("day")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--cache-kib", type=int, default=arrow_fetch.STREAM_CACHE_KIB)
    p.add_argument("--mmap", type=int, default=0)
    args = p.parse_args()
    end = datetime.datetime.fromisoformat(f"{args.day}T23:59:59+00:00")
    valid = int(end.timestamp() * 1_000_000)
    for _ in range(args.repeat):
        t0, c0, rows = time.perf_counter(), time.process_time(), 0
        for got in fetch(args.db, valid, args.cache_kib, args.mmap):
            rows += got.num_rows
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        print(f"{rows} rows: {wall:.3f} s wall, {cpu:.3f} CPU s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
