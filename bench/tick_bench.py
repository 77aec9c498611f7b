"""What a scheduler's tick costs over a fleet whose day is done (issue 31 item 1): every
one of `--sources` folder sources applied up to today (a watermark row each, today's
date; nothing due), on a fresh PostgreSQL schema. A `Scheduler` (scheduler/loop.py) of
this process ticks `--ticks` times, each waiting for what it started (nothing); printed:
the process CPU seconds per tick (user + system, all threads) and the statements sent
to PostgreSQL per tick. Run it with another tree's `src` first on PYTHONPATH to compare
(the CPU of a paired A/B; the machine may be loaded: counts are exact, seconds not).

    PYTHONPATH=$PWD/src .venv/bin/python bench/tick_bench.py --sources 300 --ticks 20
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tempfile
import uuid
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # helpers: migrate, pg_schema_url

from helpers import migrate, pg_schema_url  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--sources", type=int, default=300)
    p.add_argument("--ticks", type=int, default=20)
    p.add_argument(
        "--store",
        default=os.environ.get(
            "FEEDLEDGER_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
        ),
    )
    args = p.parse_args()
    import psycopg
    from sqlalchemy import event

    from feedledger.config import Workspace
    from feedledger.scheduler.loop import Options, Scheduler

    schema = f"tick_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(args.store, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        with tempfile.TemporaryDirectory(prefix="tick-bench-") as tmp:
            root = Path(tmp)
            url = pg_schema_url(args.store, schema)
            Workspace.create(root / "ws", store_url=url, archive=str(root / "archive"))
            migrate(url)
            today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
            midnight = int(today.timestamp()) * 1_000_000
            config = root / "ws" / "feedledger.toml"
            lines = [config.read_text()]
            for i in range(args.sources):
                folder = root / "feed" / f"s{i:03d}"
                folder.mkdir(parents=True)
                lines.append(f'\n[sources.s{i:03d}]\nkey = ["id"]\nfetch = "{folder}"\n')
            config.write_text("".join(lines))
            with psycopg.connect(url.split("?")[0], autocommit=True) as conn:
                conn.execute(f"SET search_path TO {schema}")
                with conn.cursor() as cur:
                    cur.executemany(
                        "INSERT INTO watermarks (source, published_at, payload_id, txn_seq,"
                        " recorded_at) VALUES (%s, %s, %s, 1, %s)",
                        [(f"s{i:03d}", midnight, f"p{i}", midnight) for i in range(args.sources)],
                    )
            sched = Scheduler(config, Options(dispatch=False, seed=1), log=io.StringIO())
            statements = [0]

            def count(*_a: object) -> None:
                statements[0] += 1

            event.listen(sched.store.engine, "before_cursor_execute", count)
            try:
                sched.tick(wait=True)  # warm: imports, connections, the config's first parse
                statements[0] = 0
                t0 = os.times()
                for _ in range(args.ticks):
                    started = sched.tick(wait=True)
                    assert not started, "a source was due: the fleet's day is not done"
                t1 = os.times()
            finally:
                sched.close()
            cpu = (t1.user - t0.user) + (t1.system - t0.system)
            print(
                json.dumps(
                    {
                        "sources": args.sources,
                        "ticks": args.ticks,
                        "cpu_s_per_tick": round(cpu / args.ticks, 4),
                        "statements_per_tick": statements[0] / args.ticks,
                    }
                )
            )
    finally:
        with psycopg.connect(args.store, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


if __name__ == "__main__":
    main()
