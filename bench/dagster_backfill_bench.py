"""The Dagster integration's cost over feedledger's own backfill: the same 30 daily
publications (N parcels each, ~2 % changed a day) applied as ONE backfill, directly
(`Source.backfill`) and through Dagster (a partition range materialised in-process,
`dagster.materialize` with an ephemeral instance). CPU seconds of this process
(`time.process_time`, the machine is shared: never wall time), each in a fresh workspace.

    PYTHONPATH=$PWD/src .venv/bin/python bench/dagster_backfill_bench.py [--rows 20000] [--days 30]
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
import warnings
from datetime import date, timedelta
from pathlib import Path

import dagster as dg

import feedledger as fl
from feedledger.dagster import FeedledgerResource, feedledger_assets

START = date(2026, 7, 1)


def prepare(root: Path, rows: int, days: int) -> tuple[Path, list[str]]:
    """A workspace whose source has `days` publications archived, none applied."""
    rnd = random.Random(7)
    zoning = [rnd.choice(["R-1", "R-2", "MU-1", "A"]) for _ in range(rows)]
    keys = []
    with fl.init(root / "ws") as led:
        led.add_source("larimer", key=["parcel_id"], timezone="UTC")
        src = led.source("larimer")
        for d in range(days):
            for i in rnd.sample(range(rows), rows // 50):
                zoning[i] = rnd.choice(["R-1", "R-2", "MU-1", "MU-2", "A"])
            day = START + timedelta(days=d)
            body = "parcel_id,zoning\n" + "".join(f"{i},{z}\n" for i, z in enumerate(zoning))
            src.archive_add(body.encode(), published_at=day, name=f"larimer_{day}.csv")
            keys.append(day.isoformat())
    return root / "ws", keys


def direct(rows: int, days: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        ws, keys = prepare(Path(tmp), rows, days)
        with fl.open(ws) as led:
            t0 = time.process_time()
            run = led.source("larimer").backfill(keys[0], keys[-1], fetch=False)
            spent = time.process_time() - t0
        assert isinstance(run, fl.WindowRun) and len(run.steps) == days
        return spent


def through_dagster(rows: int, days: int) -> float:
    with tempfile.TemporaryDirectory() as tmp, dg.DagsterInstance.ephemeral() as instance:
        ws, keys = prepare(Path(tmp), rows, days)
        resource = FeedledgerResource(workspace=str(ws), backfill_fetch=False)
        t0 = time.process_time()
        instance.add_dynamic_partitions("feedledger_larimer_publications", list(reversed(keys)))
        key = dg.AssetKey(["feedledger", "larimer", "publications"])
        asset = feedledger_assets(resource, sources=["larimer"]).resolve_assets_def(key)
        tags = {
            "dagster/asset_partition_range_start": keys[-1],
            "dagster/asset_partition_range_end": keys[0],
        }
        result = dg.materialize([asset], instance=instance, tags=tags)
        spent = time.process_time() - t0
        assert result.success
        with fl.open(ws) as led:
            (run,) = led.source("larimer").runs()
            assert run.payloads == days
        return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--days", type=int, default=30)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    plain = direct(args.rows, args.days)
    dagster = through_dagster(args.rows, args.days)
    print(json.dumps({
        "rows": args.rows, "days": args.days,
        "direct_cpu_s": round(plain, 2), "dagster_cpu_s": round(dagster, 2),
        "overhead_cpu_s": round(dagster - plain, 2),
    }))  # fmt: skip


if __name__ == "__main__":
    main()
