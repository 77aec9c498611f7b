"""`health`'s three fleet-wide reads (runs held for review, the last fetch per source,
the standing gaps) at a fleet's size on PostgreSQL: the statements before migration
0014 against a store at 0013 (A) and this tree's (ledger/views/health.py) against a
store at head (B), each store filled with tests/scheduler/test_fleet_plans.py's FILL
(300 sources x 365 days) and ANALYZEd. The server's own `Execution Time` of the three
(EXPLAIN ANALYZE), rounds in A B / B A order, medians and their ratio.

    PYTHONPATH=src:tests .venv/bin/python bench/health_reads_bench.py \\
        [--postgres postgresql://postgres@127.0.0.1:5432/test] [--rounds 7]

Two schemas are created on the database and dropped at the end."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "scheduler")]

import psycopg  # noqa: E402
from alembic import command  # noqa: E402
from sqlalchemy import Engine, event, func, select  # noqa: E402
from test_fleet_plans import DAY_US, DAYS, FILL, SOURCES  # noqa: E402

from feedledger.ledger import engine as eng  # noqa: E402
from feedledger.ledger.schema import gaps, payloads, runs  # noqa: E402
from feedledger.ledger.store import Store  # noqa: E402
from feedledger.ledger.views.health import health_rows  # noqa: E402
from feedledger.ledger.visibility import visible  # noqa: E402
from helpers import pg_schema_url  # noqa: E402
from scheduler.fleet import midnight_us  # noqa: E402

NAMES = [f"county{s:03d}" for s in range(SOURCES)]
Stmts = list[tuple[str, Any]]


def make(base: str, target: str) -> tuple[str, str, Engine]:
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(base, autocommit=True) as c:
        c.execute(f"CREATE SCHEMA {schema}")
    url = pg_schema_url(base, schema)
    engine = eng.make_engine(url)
    with engine.begin() as conn:
        command.upgrade(eng._config(conn), target)
    yesterday = datetime.now(UTC).date() - timedelta(days=1)
    params = {
        "first": midnight_us(yesterday) - (DAYS - 1) * DAY_US,
        "day": DAY_US,
        "days": DAYS,
        "sources": SOURCES,
        "now": midnight_us(yesterday) + DAY_US,
    }
    raw = engine.raw_connection()
    cur = raw.cursor()
    for statement in FILL.split(";"):
        if statement.strip():
            cur.execute(statement, params)
    cur.execute("ANALYZE")
    raw.commit()
    raw.close()
    return schema, url, engine


def before_0014(engine: Engine) -> Stmts:
    """The three statements as ledger/views/health.py sent them before migration 0014."""
    stmts = (
        select(runs.c.source, func.count())
        .where(runs.c.source.in_(NAMES), runs.c.status == "held")
        .group_by(runs.c.source),
        select(payloads.c.source, func.max(payloads.c.fetched_at))
        .where(payloads.c.source.in_(NAMES))
        .group_by(payloads.c.source),
        select(gaps.c.source, gaps.c.start_at, gaps.c.end_at)
        .where(gaps.c.source.in_(NAMES), visible(gaps, None))
        .order_by(gaps.c.source, gaps.c.start_at, gaps.c.gap_id),
    )
    kw = {"literal_binds": True}
    return [(str(s.compile(dialect=engine.dialect, compile_kwargs=kw)), None) for s in stmts]


def this_tree(url: str) -> Stmts:
    store = Store(url)
    sent: Stmts = []

    def record(_c: Any, _cur: Any, statement: str, params: Any, _x: Any, _m: bool) -> None:
        sent.append((statement, params))

    event.listen(store.engine, "before_cursor_execute", record)
    health_rows(store, NAMES)
    store.close()
    keep = ("count(*)", "max(payloads.fetched_at)", "FROM gaps")
    got = [(s, p) for s, p in sent if any(k in s for k in keep)]
    assert len(got) == 3, [s[:80] for s, _ in got]
    return got


def execution_ms(engine: Engine, stmts: Stmts) -> float:
    raw = engine.raw_connection()
    try:
        cur = raw.cursor()
        total = 0.0
        for statement, params in stmts:
            cur.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + statement, params)
            total += float(cur.fetchone()[0][0]["Execution Time"])
        return total
    finally:
        raw.rollback()
        raw.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/test")
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    made = [make(args.postgres, "0013_observations"), make(args.postgres, "head")]
    try:
        (_, _, old), (_, new_url, new) = made
        a, b = before_0014(old), this_tree(new_url)
        times: dict[str, list[float]] = {"A": [], "B": []}
        for r in range(args.rounds):
            for which in "AB" if r % 2 == 0 else "BA":
                times[which].append(execution_ms(old, a) if which == "A" else execution_ms(new, b))
        ma, mb = statistics.median(times["A"]), statistics.median(times["B"])
        print(json.dumps({"before_0014_ms": times["A"], "this_tree_ms": times["B"],
                          "median_before_ms": round(ma, 2), "median_this_ms": round(mb, 2),
                          "ratio": round(ma / mb, 1)}))  # fmt: skip
    finally:
        for schema, _url, engine in made:
            engine.dispose()
            with psycopg.connect(args.postgres, autocommit=True) as c:
                c.execute(f"DROP SCHEMA {schema} CASCADE")


if __name__ == "__main__":
    main()
