"""CPU seconds of three parts of a 1M daily, a base tree's module against this tree's,
alternating in one process (bench/README.md "The daily, stop 41").

    PYTHONPATH=$PWD/src python bench/daily_cuts_bench.py --base /tmp/daily-base/src \\
        --workspace WS --day /work/data/n1m/parcels_2026-08-03.csv [--rounds 9]

WS: a workspace holding days 1-2 of the same gen_parcels.py folder (source `parcels`,
key `parcel_id`); its store is copied once to a temporary file, never written. Parts:

* `check_keys`: `formats/readers._check_keys` of the day's observations;
* `sorted_rows`: `diff/aligned.sorted_rows` of the day's keys against the state file's;
* `insert_frame`: `ledger/bulk.insert_frame` of 12,000 version rows shaped like a daily's
  (two Booleans, a null revision, the constants as columns) into the copy's `versions`,
  rolled back each time.

Each round runs base then this tree, or the other way round (alternating); one JSON object
with the medians and every round's figures.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import polars as pl
from sqlalchemy import create_engine, text

from feedledger.config import Workspace
from feedledger.diff import aligned
from feedledger.formats import read_observations, readers
from feedledger.ledger import bulk, statecache


def _module(base: Path, rel: str, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, base / rel)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _versions(conn: Any) -> pl.DataFrame:
    top = conn.execute(text("SELECT max(version_id) FROM versions")).scalar()
    rows = conn.execute(
        text(
            "SELECT key, content_hash, attributes FROM versions "
            "WHERE version_id % 83 = 0 ORDER BY key LIMIT 12000"
        )
    ).all()
    n = len(rows)
    return pl.DataFrame(
        {
            "version_id": range(top + 1, top + 1 + n),
            "key": [r[0] for r in rows],
            "deleted": [False] * n,
            "change": [2] * n,
            "prev_version_id": [None if i % 12 == 0 else i for i in range(n)],
            "content_hash": [r[1] + 1 for r in rows],
            "revision": pl.Series([None] * n, dtype=pl.String),
            "attributes": [r[2] for r in rows],
        },
        schema_overrides={"prev_version_id": pl.Int64},
    ).with_columns(
        pl.lit("parcels").alias("source"),
        pl.lit(1_786_000_000_000_000).alias("valid_from"),
        pl.lit(1_786_000_000_000_001).alias("recorded_at"),
        pl.lit(99).alias("txn_seq"),
        pl.lit(False).alias("backfill"),
        pl.lit(1).alias("fields_id"),
    )


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--base", type=Path, required=True, help="the base tree's src folder")
    p.add_argument("--workspace", type=Path, required=True)
    p.add_argument("--day", type=Path, default=Path("/work/data/n1m/parcels_2026-08-03.csv"))
    p.add_argument("--rounds", type=int, default=9)
    args = p.parse_args()
    old_readers = _module(args.base, "feedledger/formats/readers.py", "base_readers")
    old_aligned = _module(args.base, "feedledger/diff/aligned.py", "base_aligned")
    old_bulk = _module(args.base, "feedledger/ledger/bulk.py", "base_bulk")

    ws = Workspace.load(args.workspace / "feedledger.toml")
    src = ws.source("parcels")
    obs = read_observations(args.day.read_bytes(), src, label="day")
    cached = sorted((args.workspace / ".feedledger/cache/state").glob("parcels.*.arrow"))[-1]
    state_keys = statecache._read(cached).get_column("key")
    keys = obs.frame.get_column("key")
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "ledger.db"
        with create_engine(f"sqlite:///{args.workspace / '.feedledger/ledger.db'}").connect() as c:
            c.exec_driver_sql("PRAGMA wal_checkpoint(PASSIVE)")
        shutil.copy(args.workspace / ".feedledger/ledger.db", db)
        engine = create_engine(f"sqlite:///{db}")
        with engine.connect() as conn:
            frame = _versions(conn)

        def insert(module: ModuleType) -> None:
            with engine.connect() as conn:
                conn.exec_driver_sql("BEGIN IMMEDIATE")
                module.insert_frame(conn, "versions", frame)
                conn.exec_driver_sql("ROLLBACK")

        parts = {
            "check_keys": (
                lambda: old_readers._check_keys(obs, src, "day"),
                lambda: readers._check_keys(obs, src, "day"),
            ),
            "sorted_rows": (
                lambda: old_aligned.sorted_rows(keys, state_keys),
                lambda: aligned.sorted_rows(keys, state_keys),
            ),
            "insert_frame": (lambda: insert(old_bulk), lambda: insert(bulk)),
        }
        assert aligned.sorted_rows(keys, state_keys).equals(
            old_aligned.sorted_rows(keys, state_keys)
        )
        got: dict[str, dict[str, list[float]]] = {k: {"base": [], "now": []} for k in parts}
        for r in range(args.rounds):
            for part, (base_call, now_call) in parts.items():
                order = [("base", base_call), ("now", now_call)]
                for label, call in order if r % 2 == 0 else order[::-1]:
                    cpu = time.process_time()
                    call()
                    got[part][label].append(round(time.process_time() - cpu, 4))
        engine.dispose()
    print(
        json.dumps(
            {
                part: {
                    **{f"{k}_median": round(statistics.median(v), 4) for k, v in runs.items()},
                    **runs,
                }
                for part, runs in got.items()
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
