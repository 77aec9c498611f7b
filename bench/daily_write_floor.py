"""What a 1 % day's durable write costs at the least, whatever computes it (issue 30 target 1).

    python bench/daily_write_floor.py [--n 1000000] [--changed 12000] [--rounds 5]

A daily ingest of a 1M-row source must, at the least, read its payload (bench/floor.py)
and durably record the day's new versions. This measures the second part alone, in
SQLite as the ledger configures it (WAL, synchronous=FULL, 16 KiB pages), for three
layouts of the versions table's lookup index, each on a table of N rows already
checkpointed:

* ``text``: the index as shipped, ``(source TEXT, key TEXT, valid_from)``;
* ``hash``: a smaller entry, ``(source_id INTEGER, key_hash INTEGER, valid_from)`` --
  what a schema migration to ids and key hashes would leave;
* ``none``: no lookup index at all (the rows appended to the table only): no layout can
  write less.

Each round inserts `--changed` rows whose keys are spread at random over the N keys (a
1 % day: ~10,000 changed, ~1,000 added, ~1,000 deleted), in one transaction, and commits
(the commit's WAL write and fsync included); then checkpoints outside the timing. It
prints one JSON object: the median seconds and the WAL bytes of each layout's day.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import statistics
import tempfile
import time

COLUMNS = (
    "version_id INTEGER PRIMARY KEY, valid_from INTEGER NOT NULL, recorded_at INTEGER NOT NULL,"
    " txn_seq INTEGER NOT NULL, content_hash INTEGER NOT NULL, prev_version_id INTEGER,"
    " fields_id INTEGER, change INTEGER NOT NULL, backfill INTEGER NOT NULL,"
    " deleted INTEGER NOT NULL, source TEXT NOT NULL, key TEXT NOT NULL, key_hash INTEGER,"
    " source_id INTEGER, attributes TEXT"
)
INDEXES = {
    "text": "CREATE INDEX ix ON versions (source, key, valid_from)",
    "hash": "CREATE INDEX ix ON versions (source_id, key_hash, valid_from)",
    "none": None,
}
ATTRS = "\x01MITCHELL, EDWARD\x025409 LAKE BLVD\x03\x04\x05\x06\x070.510\x08248700\x091966"


def _row(i: int, key: int, day: int) -> tuple[object, ...]:
    text = f"P{key:08d}"
    return (i, day, day, day, hash(text) + day, None, 1, 1, 0, 0, "parcels", text,
            hash(text), 1, ATTRS)  # fmt: skip


def _open(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA page_size=16384")
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA cache_size=-262144")
    return conn


def one_layout(folder: str, layout: str, n: int, changed: int, rounds: int) -> dict[str, object]:
    path = os.path.join(folder, f"{layout}.db")
    conn = _open(path)
    conn.execute(f"CREATE TABLE versions ({COLUMNS})")
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO versions VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (_row(i, i, 0) for i in range(n)),
    )
    conn.execute("COMMIT")
    index = INDEXES[layout]
    if index:
        conn.execute(index)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    rng = random.Random(7)
    next_id, times, wal = n, [], []
    for day in range(1, rounds + 1):
        rows = [_row(next_id + j, k, day) for j, k in enumerate(rng.sample(range(n), changed))]
        next_id += changed
        t0 = time.perf_counter()
        conn.execute("BEGIN")
        conn.executemany("INSERT INTO versions VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
        conn.execute("COMMIT")
        times.append(time.perf_counter() - t0)
        wal.append(os.path.getsize(path + "-wal"))
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return {
        "median_s": round(statistics.median(times), 4),
        "wal_bytes": int(statistics.median(wal)),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--changed", type=int, default=12_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--layouts", default="text,hash,none")
    args = parser.parse_args()
    result: dict[str, object] = {"n": args.n, "changed": args.changed, "rounds": args.rounds}
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as folder:
        for layout in args.layouts.split(","):
            result[layout] = one_layout(folder, layout, args.n, args.changed, args.rounds)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
