"""The guarded write alone: `Target.write` of B batches of 20,000 parcel-like documents
into a fresh PostgreSQL table (every one accepted), then the same batches again through
a new Target, as a resync process would (every one already current), in this process --
no ledger, no process start-up.

    PYTHONPATH=<tree>/src .venv/bin/python bench/sync_write_bench.py [B]

Run it alternately with two trees (`PYTHONPATH=/tmp/old/src`, then this one) to compare
their write paths. Prints wall and this thread's CPU per pass, and the CPU of the
destination's backend process (a server on this machine: /proc/<pid>/stat; "-" if
unreadable) -- the part of a write a loaded machine's wall clock hides; the table is
dropped.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
import uuid

from sqlalchemy import create_engine, text

from feedledger.model.destination import Destination, generation_rank
from feedledger.sync.target import Target
from feedledger.sync.transform import Doc

URL = os.environ.get(
    "FEEDLEDGER_BENCH_DESTINATION_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
GEN = "M-1"


def batch(b: int) -> list[Doc]:
    out = []
    for i in range(b * 20000, (b + 1) * 20000):
        body = {
            "acres": "0.510",
            "address": f"{i} LAKE BLVD",
            "assessed_value": "248700",
            "city": "SPRINGFIELD",
            "flood_zone": "X",
            "land_use": "MULTI-FAMILY",
            "last_sale_date": "2004-04-26",
            "owner": f"MITCHELL, EDWARD {i}",
            "year_built": "1966",
            "zip": "62707",
            "zoning": "R-2",
        }
        doc = json.dumps(body, separators=(",", ":"))
        digest = hashlib.sha256(doc.encode()).hexdigest()[:32]
        out.append(
            Doc(json.dumps([f"P{i:08d}"]), i + 1, GEN, generation_rank(GEN), digest, False, doc)
        )
    return out


def backend_cpu(t: Target) -> tuple[int, float | None]:
    """(pid, user+sys CPU seconds) of the backend of `t`'s pooled connection (one writer
    thread here: always the same one)."""
    raw = t.engine.raw_connection()
    try:
        cur = raw.cursor()
        cur.execute("SELECT pg_backend_pid()")
        pid = int(cur.fetchone()[0])
        raw.commit()
    finally:
        raw.close()
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return pid, None
    return pid, (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    n_batches = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    table = "wb_" + uuid.uuid4().hex[:8]
    dest = Destination("d", "s", "postgres", URL, table, ("owner", "address"))
    batches = [batch(b) for b in range(n_batches)]
    try:
        for label, want in (("load", "accepted"), ("no-op", "already_current")):
            t = Target(dest)  # the no-op: a new process's Target (nothing sent yet)
            try:
                t.ensure()
                pid, s0 = backend_cpu(t)
                t0, c0 = time.perf_counter(), time.thread_time()
                ok = sum(v.verdict == want for docs in batches for v in t.write(docs))
                wall, cpu = time.perf_counter() - t0, time.thread_time() - c0
                pid1, s1 = backend_cpu(t)
            finally:
                t.close()
            server = "-" if s0 is None or s1 is None or pid1 != pid else f"{s1 - s0:.2f}s"
            print(f"{label}: {wall:.2f}s wall, {cpu:.2f}s cpu, server {server}, {want} {ok:,}")
    finally:
        engine = create_engine(URL.replace("postgresql://", "postgresql+psycopg://", 1))
        with engine.begin() as conn:
            conn.execute(text(f"DROP TABLE IF EXISTS {table}"))
        engine.dispose()


if __name__ == "__main__":
    main()
