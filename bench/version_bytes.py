"""Bytes on disk per version (issue 17; issue 31's production guide): a first load and
`--days - 1` daily ingests of the generated parcel roll (gen_parcels.py), then the
store's size over its versions.

    .venv/bin/python bench/version_bytes.py --n 1000000 [--backends sqlite,postgresql]
        [--days 2] [--data DIR] [--feedledger PATH] [--postgres-url URL]

SQLite: the database file's size (after a checkpoint) / versions, and `dbstat`'s bytes
per version of each table and index. PostgreSQL: `pg_total_relation_size('versions')`
(heap, TOAST and indexes) / versions, each relation's part, and the whole database's
growth over the empty schema (`pg_database_size` after `init`: every table, the payload
index, runs, outbox). Each is taken after the first load (`first_load`) and after the last
day (the top level); `daily_bytes_per_version` is the growth between the two over the
versions the dailies added: what a long-lived store grows by. `--data` takes
gen_parcels.py's `--out` folder (default: the generator's cache). Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
SOURCE = "parcels"


def _run(argv: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def _files(n: int, seed: int, days: int, data: Path | None) -> list[Path]:
    gen = [sys.executable, str(BENCH / "gen_parcels.py"), "--n", str(n), "--days", str(days)]
    gen += ["--out", str(data.resolve())] if data is not None else []
    out = subprocess.run(
        [*gen, "--seed", str(seed), "--json"], check=True, capture_output=True, text=True
    )
    info = json.loads(out.stdout)
    return [Path(f["path"]) for f in info["days"]][:days]


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


def _database_bytes(url: str) -> int:
    import psycopg

    with psycopg.connect(url) as conn:
        return int(conn.execute("SELECT pg_database_size(current_database())").fetchone()[0])  # type: ignore[index]


def _postgres(url: str, empty: int) -> dict[str, Any]:
    import psycopg

    with psycopg.connect(url) as conn:
        n = conn.execute("SELECT count(*) FROM versions").fetchone()[0]  # type: ignore[index]
        total = conn.execute("SELECT pg_total_relation_size('versions')").fetchone()[0]  # type: ignore[index]
        whole = conn.execute("SELECT pg_database_size(current_database())").fetchone()[0]  # type: ignore[index]
        parts = conn.execute(
            "SELECT c.relname, pg_relation_size(c.oid) FROM pg_class c "
            "WHERE c.relname = 'versions' OR c.oid IN "
            "(SELECT indexrelid FROM pg_index WHERE indrelid = 'versions'::regclass)"
        ).fetchall()
    return {
        "versions": n,
        "total_relation_bytes": total,
        "bytes_per_version": round(total / n, 1),
        "database_growth_bytes": whole - empty,
        "database_bytes_per_version": round((whole - empty) / n, 1),
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
    empty = _database_bytes(url) if backend == "postgresql" else 0

    def size() -> dict[str, Any]:
        if backend == "sqlite":
            return _sqlite(ws / ".feedledger" / "ledger.db")
        return _postgres(url, empty)

    seconds = []
    first: dict[str, Any] = {}
    start = date(2026, 8, 1)
    for day, path in enumerate(files):
        published = (start + timedelta(days=day)).isoformat()
        argv = [exe, "ingest", SOURCE, str(path), "--published-at", published]
        seconds.append(round(_run(argv, ws), 2))
        if day == 0:
            first = size()
    result = size()
    grown = result["versions"] - first["versions"]
    bytes_key = "file_bytes" if backend == "sqlite" else "database_growth_bytes"
    if grown:
        result["daily_versions"] = grown
        result["daily_bytes_per_version"] = round((result[bytes_key] - first[bytes_key]) / grown, 1)
        if backend == "postgresql":
            result["daily_versions_relation_bytes_per_version"] = round(
                (result["total_relation_bytes"] - first["total_relation_bytes"]) / grown, 1
            )
    result["first_load"] = first
    if backend == "postgresql":
        import psycopg

        with psycopg.connect(pg_admin, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {db_name}")
    shutil.rmtree(ws, ignore_errors=True)
    return {"backend": backend, "ingest_seconds": seconds, **result}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=1_000_000)
    p.add_argument("--seed", type=int, default=20260801)
    p.add_argument("--backends", default="sqlite,postgresql")
    p.add_argument("--days", type=int, default=2, help="the first load and days - 1 dailies")
    p.add_argument("--data", type=Path, help="gen_parcels.py --out folder (default: its cache)")
    p.add_argument("--feedledger", default=str(Path(sys.executable).with_name("feedledger")))
    p.add_argument(
        "--postgres-url",
        default=os.environ.get(
            "FEEDLEDGER_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
    )
    a = p.parse_args()
    files = _files(a.n, a.seed, a.days, a.data)
    out = [measure(a.feedledger, b, files, a.postgres_url) for b in a.backends.split(",")]
    print(json.dumps({"n": a.n, "days": len(files), "results": out}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
