"""Server CPU of a first load's COPY into an empty `versions` table, by what it keeps up
row by row (bench/README.md "The 1M first load, stop 30"):

    .venv/bin/python bench/pg_first_keys_bench.py --rows 1000000 --rounds 3
        [--url postgresql://postgres@127.0.0.1:5432/postgres] [--serial] [--db NAME]

Per round and mode (alternating): a fresh `versions` table like the store's (the
migrations' schema, in a scratch database), then in one transaction the drops of the
mode, one binary COPY of the same rows (built once by `ledger/encoding/pg_binary.py`,
as a first load sends them: synthetic keys, hashes and ~80-character texts), the builds,
COMMIT. Prints the backend's CPU (from /proc: the server must be this host) for the
COPY, the builds and the whole, and the walls. `--serial`: builds without parallel
workers, so that the backend's CPU is all of theirs.

Modes: `index` drops and rebuilds the secondary index (the path before stop 30),
`keys` the primary key too (ledger/bulk.py now).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import polars as pl
import psycopg

from feedledger.ledger.bulk import VERSION_CONSTANT, VERSION_VARYING
from feedledger.ledger.encoding.pg_binary import (
    PG_SIGNATURE,
    PG_TRAILER,
    VERSION_PG_TYPES,
    binary_rows,
    encode_values,
)


def _rows(n: int) -> bytes:
    rng = np.random.default_rng(20260801)
    frame = pl.DataFrame(
        {
            "version_id": np.arange(1, n + 1, dtype=np.int64),
            "key": [f'["P{i:08d}"]' for i in range(1, n + 1)],
            "deleted": np.zeros(n, dtype=bool),
            "change": np.zeros(n, dtype=np.int16),
            "prev_version_id": pl.Series([None] * n, dtype=pl.Int64),
            "content_hash": rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64),
            "revision": pl.Series([None] * n, dtype=pl.String),
            "attributes": [
                f"{i:08d} LAKE BLVD\x02SPRINGFIELD\x03R-2 {i % 977:04d}" * 2 for i in range(n)
            ],
        }
    )
    kinds = [VERSION_PG_TYPES[c] for c in VERSION_VARYING]
    constants = ["parcels", 1, 2, 1, False, 1]
    tail = encode_values(constants, [VERSION_PG_TYPES[c] for c in VERSION_CONSTANT])
    fields = len(VERSION_VARYING) + len(VERSION_CONSTANT)
    parts = [
        bytes(binary_rows(frame.slice(s, 50_000), kinds, tail, fields=fields))
        for s in range(0, n, 50_000)
    ]
    return PG_SIGNATURE + b"".join(parts) + PG_TRAILER


def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100


def _run(url: str, data: bytes, mode: str, serial: bool) -> str:
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute("DROP TABLE IF EXISTS versions")
        admin.execute("CREATE TABLE versions (LIKE template_versions INCLUDING ALL)")
        admin.execute("CHECKPOINT")
    columns = ", ".join(VERSION_VARYING + VERSION_CONSTANT)
    with psycopg.connect(url) as conn:
        pid = conn.info.backend_pid
        cur = conn.cursor()
        if serial:
            cur.execute("SET max_parallel_maintenance_workers = 0")
        t0, c0 = time.perf_counter(), _cpu(pid)
        cur.execute("LOCK TABLE versions IN ACCESS EXCLUSIVE MODE NOWAIT")
        index = cur.execute(
            "SELECT indexrelid::regclass::text, pg_get_indexdef(indexrelid) FROM pg_index"
            " WHERE indrelid = 'versions'::regclass AND NOT indisprimary"
        ).fetchall()
        rebuild = []
        for name, definition in index:
            cur.execute(f"DROP INDEX {name}")
            rebuild.append(definition)
        if mode == "keys":
            cur.execute("ALTER TABLE versions DROP CONSTRAINT versions_pkey")
            rebuild.insert(
                0, "ALTER TABLE versions ADD CONSTRAINT versions_pkey PRIMARY KEY (version_id)"
            )
        with cur.copy(f"COPY versions ({columns}) FROM STDIN WITH (FORMAT binary)") as copy:
            for start in range(0, len(data), 1 << 20):
                copy.write(data[start : start + (1 << 20)])
        t1, c1 = time.perf_counter(), _cpu(pid)
        for statement in rebuild:
            cur.execute(statement)
        t2, c2 = time.perf_counter(), _cpu(pid)
        conn.commit()
        t3, c3 = time.perf_counter(), _cpu(pid)
    return (
        f"{mode:5} server CPU s: copy {c1 - c0:.2f} builds {c2 - c1:.2f} total {c3 - c0:.2f}"
        f"  wall s: copy {t1 - t0:.2f} builds {t2 - t1:.2f} total {t3 - t0:.2f}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    ap.add_argument("--serial", action="store_true")
    ap.add_argument("--db", default="feedledger_bench_pg_first_keys", help="scratch database")
    args = ap.parse_args()
    db = args.db
    with psycopg.connect(args.url, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {db}")
    url = f"{args.url.rsplit('/', 1)[0]}/{db}"
    try:
        from feedledger.ledger.engine import make_engine, upgrade

        engine = make_engine(url)
        upgrade(engine)
        engine.dispose()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ALTER TABLE versions RENAME TO template_versions")
            conn.execute("ALTER TABLE template_versions RENAME CONSTRAINT versions_pkey TO t_pkey")
            conn.execute("ALTER INDEX ix_versions_source_key RENAME TO t_source_key")
        data = _rows(args.rows)
        for r in range(args.rounds):
            modes = ["index", "keys"] if r % 2 == 0 else ["keys", "index"]
            for mode in modes:
                print(f"round {r + 1} {_run(url, data, mode, args.serial)}", flush=True)
    finally:
        with psycopg.connect(args.url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")


if __name__ == "__main__":
    main()
