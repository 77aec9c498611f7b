"""PostgreSQL bulk read benchmark (issue 17 target 1, issue 16's stream rate): a whole
source's versions read as Arrow batches, the snapshot's own scan, by each way of
fetching them.

    .venv/bin/python bench/pg_scan_bench.py [--postgres URL] [--database NAME]
        [--template NAME] [--repeat 3] [--methods dbapi,copy,csv,snap-dbapi,snap-copy]
        [--batch 4096]

The ledger: a PostgreSQL database `--database` (default feedledger_pgcopy_bench_1000000_10)
holding a 1M-parcel source; made when missing as a copy (CREATE DATABASE ... TEMPLATE)
of `--template`, the HTTP bench's 1M x 10-day ledger (`http_bench.py --n 1000000
--days 10 --postgres URL` builds it), then `VACUUM ANALYZE versions` (this server runs
without autovacuum: with no statistics the planner sorts instead of scanning the index).
The template is only read: it must have no open connection while it is copied.

Methods, each run in a process of its own (imports and the store's engine made before
the clock starts), alternated --repeat times (a paired order, so load drifts hit each
alike):

- `dbapi`: `arrow_fetch._dbapi` -- a psycopg server-side cursor, `fetchmany` of 4096
  rows, Python tuples zipped into Arrow arrays (the PostgreSQL path before pg_copy);
- `copy`: `pg_copy.batches` -- COPY (FORMAT binary) through the ADBC PostgreSQL driver,
  the rows decoded into Arrow in C;
- `csv`: a candidate measured and not taken: psycopg's `cursor.copy("COPY (...) TO
  STDOUT (FORMAT csv)")` fed to pyarrow's streaming CSV reader (libpq hands COPY data
  over one row per call: a Python call per row remains);
- `snap-copy`, `snap-dbapi`: the whole `snapshot_rows.batches` (the scan, each key's
  latest, the attribute decode) with arrow_fetch's PostgreSQL fetch as it is
  (`pg_copy.batches`), and with the psycopg cursor (`_dbapi`) put back in its place.

Per run: rows, wall seconds, the client's CPU seconds over the read (user+sys,
getrusage), its peak RSS, and the server backend's CPU seconds for the statement
(/proc/<pid>/stat of each backend connected to the bench's database, polled by this
parent process every 20 ms: the pooled connection's backend is seen from its first
statement on, an ADBC connection's within ~20 ms of its start and of its end), with the
load average. Prints a Markdown table and
writes bench/results/pg-scan-latest.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from resultfiles import save_results  # noqa: E402

MARK = "pg_scan_bench"
METHODS = ("dbapi", "copy", "csv", "snap-dbapi", "snap-copy")
BATCH = 4096
SOURCE = "parcels"
VALID = 2**62  # every version stored: the latest day


def own_copy(base: str, name: str, template: str) -> str:
    """The URL of database `name`, made as a copy of `template` and analysed if missing."""
    import psycopg
    from sqlalchemy.engine import make_url

    url = make_url(base).set(database=name).render_as_string(hide_password=False)
    with psycopg.connect(base, autocommit=True) as conn:
        there = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if there is None:
            print(f"copying {template} to {name}", file=sys.stderr)
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
            with psycopg.connect(url, autocommit=True) as new:
                new.execute("VACUUM ANALYZE versions")
    return url


# -- the child: one method, one read ----------------------------------------------------


def child(url: str, method: str, batch: int) -> dict[str, Any]:
    import resource

    import pyarrow as pa

    from feedledger.ledger.readers import arrow_fetch, pg_copy, snapshot_rows
    from feedledger.ledger.store import Store
    from feedledger.ledger.visibility import key_ordered_sql, visible_sql

    schema = pa.schema(
        [
            ("key", pa.string()),
            ("valid_from", pa.int64()),
            ("txn_seq", pa.int64()),
            ("deleted", pa.bool_()),
            ("attributes", pa.string()),
            ("fields_id", pa.int64()),
        ]
    )
    cols = [*schema.names[:4], "COALESCE(attributes, '') AS attributes", "fields_id"]
    where = f"source = :source AND valid_from <= :valid AND {visible_sql(None)}"
    sql = f"/* {MARK} */ " + key_ordered_sql(cols, where)
    params = {"source": SOURCE, "valid": VALID}
    store = Store(url)
    with store.engine.connect() as conn:  # the pool's connection made before the clock
        conn.exec_driver_sql("SELECT 1")
    if method.startswith("snap-"):
        if method == "snap-dbapi":  # the psycopg cursor put back (pg_copy since b859a1d)
            pg_copy.batches = arrow_fetch._dbapi  # type: ignore[assignment]
        snapshot_rows.codebooks.load(store, SOURCE)  # (warm: its import and statement)

        def read() -> Any:
            return snapshot_rows.batches(store, SOURCE, VALID, batch=batch)
    elif method == "dbapi":

        def read() -> Any:
            return arrow_fetch._dbapi(store, sql, params, schema, batch)
    elif method == "copy":
        import adbc_driver_postgresql.dbapi  # noqa: F401  (imported before the clock)

        def read() -> Any:
            return pg_copy.batches(store, sql, params, schema, batch)
    elif method == "csv":

        def read() -> Any:
            return _csv_copy(store, sql, params, schema)
    else:
        raise SystemExit(f"unknown method {method}")
    before = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    rows = 0
    for got in read():
        rows += got.num_rows
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    store.close()
    return {"rows": rows, "wall_s": wall, "cpu_s": cpu, "peak_rss_mib": after.ru_maxrss / 1024}


def _csv_copy(store: Any, sql: str, params: dict[str, Any], schema: Any) -> Any:
    """Candidate (b): COPY ... (FORMAT csv) read by pyarrow's streaming CSV reader."""
    import io
    import re

    import pyarrow.csv as pcsv
    from psycopg import sql as pgsql

    with store.engine.connect() as conn:
        raw: Any = conn.connection.driver_connection
        query = re.sub(
            r"(?<![:\w]):([A-Za-z_]\w*)",
            lambda m: pgsql.Literal(params[m.group(1)]).as_string(raw),
            sql,
        )
        with raw.cursor() as cur, cur.copy(f"COPY ({query}) TO STDOUT (FORMAT csv)") as copy:

            class Chunks(io.RawIOBase):
                left = memoryview(b"")

                def readable(self) -> bool:
                    return True

                def readinto(self, buf: Any) -> int:
                    while not self.left:
                        data = copy.read()
                        if not data:
                            return 0
                        self.left = memoryview(data)
                    n = min(len(buf), len(self.left))
                    buf[:n] = self.left[:n]
                    self.left = self.left[n:]
                    return n

            reader = pcsv.open_csv(
                io.BufferedReader(Chunks(), 1 << 20),
                read_options=pcsv.ReadOptions(column_names=schema.names, block_size=1 << 20),
                parse_options=pcsv.ParseOptions(newlines_in_values=True),
                convert_options=pcsv.ConvertOptions(
                    column_types=schema,
                    strings_can_be_null=False,
                    true_values=["t"],
                    false_values=["f"],
                ),
            )
            yield from reader
        conn.rollback()


# -- the parent: runs, the server's CPU, the table -----------------------------------------


class ServerCpu:
    """The CPU seconds of the server backends on the bench's database (its own copy:
    only the measured process connects to it) from when each is first seen."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.first: dict[int, float] = {}
        self.last: dict[int, float] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ServerCpu:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()

    def seconds(self) -> float:
        return sum(self.last[p] - self.first[p] for p in self.first)

    def _run(self) -> None:
        import psycopg

        tick = os.sysconf("SC_CLK_TCK")
        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self.stop.is_set():
                found = conn.execute(
                    "SELECT pid FROM pg_stat_activity WHERE pid <> pg_backend_pid()"
                    " AND datname = current_database()"
                ).fetchall()
                for (pid,) in found:
                    self.first.setdefault(pid, _cpu(pid, tick) or 0.0)
                for pid in self.first:
                    now = _cpu(pid, tick)
                    if now is not None:
                        self.last[pid] = now
                self.stop.wait(0.02)


def _cpu(pid: int, tick: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / tick  # utime, stime


def run_one(url: str, method: str, batch: int) -> dict[str, Any]:
    load = os.getloadavg()[0]
    with ServerCpu(url) as server:
        out = subprocess.run(
            [sys.executable, __file__, "--child", method, "--url", url, "--batch", str(batch)],
            capture_output=True,
            text=True,
            check=False,
        )
    if out.returncode != 0:
        raise SystemExit(f"{method} failed:\n{out.stderr}")
    got: dict[str, Any] = json.loads(out.stdout)
    got.update(method=method, server_cpu_s=server.seconds(), load=load)
    got["rows_per_s"] = got["rows"] / got["wall_s"]
    return got


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/postgres")
    ap.add_argument("--database", default="feedledger_pgcopy_bench_1000000_10")
    ap.add_argument("--template", default="feedledger_http_bench_1000000_10")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--batch", type=int, default=BATCH)
    ap.add_argument("--child")
    ap.add_argument("--url")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.url, args.child, args.batch)), flush=True)
        if args.child == "csv":
            # pyarrow's CSV reader over a Python file object now and then aborted at
            # interpreter exit ("terminate called without an active exception"),
            # after its figures were out: the candidate's process ends without that
            os._exit(0)
        return
    url = own_copy(args.postgres, args.database, args.template)
    methods = args.methods.split(",")
    runs: list[dict[str, Any]] = []
    for i in range(args.repeat):
        for method in methods if i % 2 == 0 else reversed(methods):
            got = run_one(url, method, args.batch)
            print(json.dumps(got), file=sys.stderr)
            runs.append(got)
    print(
        "| method | rows | wall s (median) | rows/s (median) | client CPU s | server CPU s |"
        " peak RSS MiB | load |"
    )
    print("|---|---|---|---|---|---|---|---|")
    summary = {}
    for method in methods:
        mine = [r for r in runs if r["method"] == method]
        med = {k: statistics.median(r[k] for r in mine) for k in mine[0] if k != "method"}
        summary[method] = med
        print(
            f"| {method} | {mine[0]['rows']} | {med['wall_s']:.2f} | {med['rows_per_s']:,.0f}"
            f" | {med['cpu_s']:.2f} | {med['server_cpu_s']:.2f} | {med['peak_rss_mib']:.0f}"
            f" | {min(r['load'] for r in mine):.1f}-{max(r['load'] for r in mine):.1f} |"
        )
    text = json.dumps(
        {"database": args.database, "batch": args.batch, "runs": runs, "median": summary}, indent=1
    )
    name = "pg-scan" if args.batch == BATCH else f"pg-scan-b{args.batch}"
    print(save_results(ROOT / "bench" / "results", name, text), file=sys.stderr)


if __name__ == "__main__":
    main()
