"""One rebuild of manifest `m` into destination `bench` of the workspace in the current
directory, in-process, with the CPU of its stages (helper rebuild's profiler).

    cd <workspace> && PYTHONPATH=<tree>/src python <tree>/bench/sync_stages.py 0|1 \
        --db postgresql://postgres@127.0.0.1:5432/h_rebuild --table rb

`1`: the destination table is dropped first (a rebuild into a lost table); `0`: as it is
(a resync when the last rebuild finished). Printed: the sync's outcomes and seconds, the
wall clock, the process CPU (`time.process_time`), the CPU of the destination database's
backends (their /proc utime + stime, polled every 0.2 s, from when each was first seen),
and per wrapped function its thread CPU (`time.thread_time`, summed over calls in any
thread) -- whichever of the functions the tree has (so two trees can be compared).
"""

from __future__ import annotations

import argparse
import collections
import functools
import os
import threading
import time
from typing import Any

import psycopg

WRAPPED = (
    ("feedledger.sync.rebuild", "latest", "latest"),
    ("feedledger.sync.rebuild", "latest_texts", "latest_texts"),
    ("feedledger.sync.rebuild", "default_docs_of", "default_docs_of"),
    ("feedledger.sync.live", "latest", "latest (built)"),
    ("feedledger.sync.live", "default_docs", "default_docs"),
    ("feedledger.sync.manifests", "keys", "manifests.keys"),
    ("feedledger.sync.known", "docs", "known.docs"),
    ("feedledger.sync.known", "next_batch", "known.next_batch"),
    ("feedledger.sync.known", "read", "known.read"),
    ("feedledger.sync.known", "record_range", "known.record_range"),
    ("feedledger.sync.state", "record", "state.record"),
    ("feedledger.sync.state", "mark", "state.mark"),
    ("feedledger.sync.state", "counts", "state.counts"),
    ("feedledger.sync.rebuild", "_serve_live", "_serve_live"),
    ("feedledger.sync.live.Builder", "docs", "Builder.docs"),
    ("feedledger.sync.live.Builder", "built", "Builder.built"),
    ("feedledger.sync.pg_batch.Batches", "write", "Batches.write"),
    ("feedledger.sync.pg_batch.Batches", "_send", "Batches._send"),
    ("feedledger.sync.pg_batch.Batches", "_hash_first", "Batches._hash_first"),
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("drop", choices=["0", "1"])
    ap.add_argument("--db", default="postgresql://postgres@127.0.0.1:5432/h_rebuild")
    ap.add_argument("--table", default="rb")
    args = ap.parse_args()
    dbname = args.db.rsplit("/", 1)[1]
    if args.drop == "1":
        with psycopg.connect(args.db, autocommit=True) as c:
            c.execute(f'DROP TABLE IF EXISTS "{args.table}"')
    acc: collections.Counter[str] = collections.Counter()
    calls: collections.Counter[str] = collections.Counter()
    started, cpu0 = time.perf_counter(), time.process_time()
    import importlib

    from feedledger.api.ledger import open_config

    for where, name, label in WRAPPED:
        mod, _, cls = where.partition(".sync.")
        parts = cls.split(".")
        owner: Any = importlib.import_module(f"{mod}.sync.{parts[0]}")
        for p in parts[1:]:
            owner = getattr(owner, p)
        if not hasattr(owner, name):
            continue
        real = getattr(owner, name)

        def wrapped(*a: Any, _f: Any = real, _l: str = label, **k: Any) -> Any:
            t = time.thread_time()
            try:
                return _f(*a, **k)
            finally:
                acc[_l] += time.thread_time() - t
                calls[_l] += 1

        setattr(owner, name, functools.wraps(real)(wrapped))
    backends: dict[int, list[float]] = {}
    stop = threading.Event()

    def poll() -> None:
        tick = os.sysconf("SC_CLK_TCK")
        with psycopg.connect(args.db, autocommit=True) as c:
            me = c.info.backend_pid
            while not stop.is_set():
                sql = "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> %s"
                for (pid,) in c.execute(sql, (dbname, me)).fetchall():
                    try:
                        with open(f"/proc/{pid}/stat") as f:
                            fields = f.read().rsplit(")", 1)[1].split()
                    except OSError:
                        continue
                    cpu = (int(fields[11]) + int(fields[12])) / tick
                    backends.setdefault(pid, [cpu, cpu])[1] = cpu
                stop.wait(0.2)

    watcher = threading.Thread(target=poll, daemon=True)
    watcher.start()
    with open_config(None) as ledger:
        report = ledger.destination("bench").rebuild("m").to_json()
    stop.set()
    watcher.join()
    wall = time.perf_counter() - started
    outcomes = {k: v for k, v in report["outcomes"].items() if v}
    print(f"outcomes {outcomes} seconds {report['seconds']}")
    print(
        f"wall {wall:.2f} process CPU {time.process_time() - cpu0:.2f} backend CPU "
        f"{sum(b - a for a, b in backends.values()):.2f} ({len(backends)} backends) "
        f"load {os.getloadavg()[0]:.1f}"
    )
    for label, s in acc.most_common():
        print(f"  {label:24s} {s:7.2f} s thread CPU  x{calls[label]}")


if __name__ == "__main__":
    main()
