"""Bytes on disk per version (issue 17): a first load and one daily ingest of the
generated parcel roll (gen_parcels.py), then the store's size over its versions.

    .venv/bin/python bench/version_bytes.py --n 1000000 [--backends sqlite,postgresql]
        [--feedledger PATH] [--postgres-url URL]

SQLite: the database file's size (after a checkpoint) / versions, and `dbstat`'s bytes
per version of each table and index. PostgreSQL: `pg_total_relation_size('versions')`
(heap, TOAST and indexes) / versions, and each relation's part. Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
SOURCE = "parcels"


def _run(argv: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def _files(n: int, seed: int) -> list[Path]:
    gen = [sys.executable, str(BENCH / "gen_parcels.py"), "--n", str(n), "--days", "2"]
    out = subprocess.run(
        [*gen, "--seed", str(seed), "--json"], check=True, capture_output=True, text=True
    )
    info = json.loads(out.stdout)
    return [Path(f["path"]) for f in info["days"]][:2]


def _sqlite(db: Path) -> dict[str, Any]:
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        n = conn.execute("SELECT count(*) FROM versions").fetchone()[0]
        parts = conn.execute(
            "SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC LIMIT 6"
        ).fetchall()
    size = db.stat().st_size
    return {
        "versions": n,
        "file_bytes": size,
        "bytes_per_version": round(size / n, 1),
        "parts_bytes_per_version": {name: round(b / n, 1) for name, b in parts},
    }


def _postgres(url: str) -> dict[str, Any]:
    import psycopg

    with psycopg.connect(url) as conn:
        n = conn.execute("SELECT count(*) FROM versions").fetchone()[0]  # type: ignore[index]
        total = conn.execute("SELECT pg_total_relation_size('versions')").fetchone()[0]  # type: ignore[index]
        parts = conn.execute(
            "SELECT c.relname, pg_relation_size(c.oid) FROM pg_class c "
            "WHERE c.relname = 'versions' OR c.oid IN "
            "(SELECT indexrelid FROM pg_index WHERE indrelid = 'versions'::regclass)"
        ).fetchall()
    return {
        "versions": n,
        "total_relation_bytes": total,
        "bytes_per_version": round(total / n, 1),
        "parts_bytes_per_version": {name: round(b / n, 1) for name, b in parts},
    }


def measure(exe: str, backend: str, files: list[Path], pg_admin: str) -> dict[str, Any]:
    ws = Path(tempfile.mkdtemp(prefix=f"vbytes-{backend}-"))
    init = [exe, "init"]
    db_name = f"feedledger_vbytes_{os.getpid()}"
    url = pg_admin.rsplit("/", 1)[0] + "/" + db_name
    if backend == "postgresql":
        import psycopg

        with psycopg.connect(pg_admin, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {db_name}")
            admin.execute(f"CREATE DATABASE {db_name}")
        init += ["--store", url]
    _run(init, ws)
    add = [exe, "source", "add", SOURCE, "--key", "parcel_id", "--format", "csv"]
    _run([*add, "--kind", "snapshot"], ws)
    seconds = []
    for day, path in enumerate(files, 1):
        argv = [exe, "ingest", SOURCE, str(path), "--published-at", f"2026-08-{day:02d}"]
        seconds.append(round(_run(argv, ws), 2))
    if backend == "sqlite":
        result = _sqlite(ws / ".feedledger" / "ledger.db")
    else:
        result = _postgres(url)
        import psycopg

        with psycopg.connect(pg_admin, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {db_name}")
    return {"backend": backend, "ingest_seconds": seconds, **result}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=1_000_000)
    p.add_argument("--seed", type=int, default=20260801)
    p.add_argument("--backends", default="sqlite,postgresql")
    p.add_argument("--feedledger", default=str(Path(sys.executable).with_name("feedledger")))
    p.add_argument(
        "--postgres-url",
        default=os.environ.get(
            "FEEDLEDGER_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
    )
    a = p.parse_args()
    files = _files(a.n, a.seed)
    out = [measure(a.feedledger, b, files, a.postgres_url) for b in a.backends.split(",")]
    print(json.dumps({"n": a.n, "results": out}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
