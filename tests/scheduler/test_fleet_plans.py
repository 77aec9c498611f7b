"""At a fleet's size (300 sources, a year of daily runs each: ~110,000 rows in runs,
payloads, applications, the outbox and observations, inserted directly), every
statement a scheduler sends on PostgreSQL -- a tick over the 300 sources (what is due,
their health and alert episodes, the attempts of the due ones), a lease taken over from
a dead holder, renewed by the heartbeat and released with its run -- is planned without
a sequential scan of those tables (EXPLAIN after ANALYZE), the health of every source
read each tick included: runs held for review, the last fetch per source and the
standing gaps after each watermark (ledger/views/health.py, migration 0014)."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from feedledger import config
from feedledger.config import Workspace
from feedledger.ledger.runs import leases
from feedledger.scheduler.loop import Options, Scheduler
from helpers import backend_store, migrate
from scheduler.fleet import midnight_us

SOURCES, DAYS = 300, 365
BIG = {"runs", "payloads", "applications", "outbox", "observations", "gaps"}
DAY_US = 86_400_000_000
FILL = """
INSERT INTO payloads (payload_id, source, sha256, published_at, fetched_at, size, indexed_at)
SELECT md5('p' || s || ':' || d)::varchar(32), 'county' || lpad(s::text, 3, '0'),
       md5('h' || s || ':' || d) || md5('x' || s || ':' || d), %(first)s + d * %(day)s,
       %(first)s + d * %(day)s, 1000, %(first)s + d * %(day)s
FROM generate_series(0, %(sources)s - 1) s, generate_series(0, %(days)s - 1) d;
INSERT INTO runs (run_id, source, kind, status, started_at, finished_at, holder, payloads, changes)
SELECT md5('r' || s || ':' || d), 'county' || lpad(s::text, 3, '0'), 'live', 'succeeded',
       %(first)s + d * %(day)s, %(first)s + d * %(day)s + 1000, 'gone:1:ab:1', 1, 10
FROM generate_series(0, %(sources)s - 1) s, generate_series(0, %(days)s - 1) d;
INSERT INTO applications (payload_id, run_id, source, txn_seq, recorded_at, published_at,
                          changes, first_version_id, counts, prev_published_at)
SELECT md5('p' || s || ':' || d)::varchar(32), md5('r' || s || ':' || d),
       'county' || lpad(s::text, 3, '0'), s * %(days)s + d + 1, %(first)s + d * %(day)s,
       %(first)s + d * %(day)s, 10, (s * %(days)s + d) * 10, '{}',
       CASE WHEN d > 0 THEN %(first)s + (d - 1) * %(day)s END
FROM generate_series(0, %(sources)s - 1) s, generate_series(0, %(days)s - 1) d;
INSERT INTO outbox (source, run_id, payload_id, topic, status, idempotency_key, changes,
                    body, created_at)
SELECT 'county' || lpad(s::text, 3, '0'), md5('r' || s || ':' || d),
       md5('p' || s || ':' || d)::varchar(32), 'changes', 'delivered',
       'k' || s || ':' || d, 10, '{}', %(first)s + d * %(day)s
FROM generate_series(0, %(sources)s - 1) s, generate_series(0, %(days)s - 1) d;
INSERT INTO observations (source, published_at, observed_until)
SELECT 'county' || lpad(s::text, 3, '0'), %(first)s + d * %(day)s, %(first)s + d * %(day)s + 1
FROM generate_series(0, %(sources)s - 1) s, generate_series(0, %(days)s - 1) d;
INSERT INTO gaps (source, start_at, end_at, reason, run_id, recorded_at)
SELECT 'county' || lpad(s::text, 3, '0'), %(first)s - (g + 2) * %(day)s,
       %(first)s - (g + 1) * %(day)s, 'outage', md5('g' || s || ':' || g), %(first)s
FROM generate_series(0, %(sources)s - 1) s, generate_series(0, 9) g;
INSERT INTO watermarks (source, published_at, payload_id, txn_seq, recorded_at)
SELECT 'county' || lpad(s::text, 3, '0'), %(first)s + (%(days)s - 1) * %(day)s,
       md5('p' || s || ':' || (%(days)s - 1))::varchar(32), (s + 1) * %(days)s,
       %(first)s + (%(days)s - 1) * %(day)s
FROM generate_series(0, %(sources)s - 1) s;
INSERT INTO schedule_state (source, first_attempt_at, last_attempt_at, last_success_at,
                            last_outcome, failures, next_attempt_at)
SELECT 'county' || lpad(s::text, 3, '0'), %(first)s, %(now)s, %(now)s, 'applied', 0,
       CASE WHEN s < 3 THEN NULL ELSE %(now)s + %(day)s END
FROM generate_series(0, %(sources)s - 1) s;
INSERT INTO leases (source) SELECT 'county' || lpad(s::text, 3, '0')
FROM generate_series(0, %(sources)s - 1) s;
"""


@pytest.fixture
def fleet_store(tmp_path: Path) -> Iterator[Workspace]:
    """300 folder sources whose ledgers hold a year up to yesterday; three are due
    (today's publication), the others tried already and waiting for tomorrow."""
    with backend_store("postgresql", tmp_path) as url:
        ws = Workspace.create(tmp_path / "ws", store_url=url, archive=str(tmp_path / "archive"))
        migrate(ws.store_url)
        for s in range(SOURCES):
            folder = tmp_path / "feed" / f"county{s:03d}"
            folder.mkdir(parents=True)
            ws.add_source(config.make_source(f"county{s:03d}", key=("id",), fetch=str(folder)))
        yesterday = datetime.now(UTC).date() - timedelta(days=1)
        params = {
            "first": midnight_us(yesterday) - (DAYS - 1) * DAY_US,
            "day": DAY_US,
            "days": DAYS,
            "sources": SOURCES,
            "now": midnight_us(yesterday) + DAY_US,
        }
        import psycopg

        from feedledger.ledger.engine import make_engine

        engine = make_engine(ws.store_url)
        raw = engine.raw_connection()
        try:
            cur = raw.cursor()
            for statement in FILL.split(";"):
                if statement.strip():
                    cur.execute(statement, params)
            for table in [*BIG, "watermarks", "schedule_state", "leases"]:
                cur.execute(f"ANALYZE {table}")
            raw.commit()
        finally:
            raw.close()
            engine.dispose()
        assert psycopg  # the driver the store uses on PostgreSQL
        yield Workspace.load(ws.config_path)


def scans(plan: list[dict[str, Any]]) -> list[str]:
    """The tables a plan reads by sequential scan."""
    found: list[str] = []

    def walk(node: dict[str, Any]) -> None:
        if node.get("Node Type") == "Seq Scan":
            found.append(str(node.get("Relation Name")))
        for child in node.get("Plans", []):
            walk(child)

    for top in plan:
        walk(top["Plan"])
    return found


def test_a_schedulers_statements_use_indexes_at_a_fleets_size(fleet_store: Workspace) -> None:
    sched = Scheduler(
        fleet_store.config_path, Options(workers=2, dispatch=False), log=io.StringIO()
    )
    sent: list[tuple[str, Any]] = []

    def record(_conn: Any, _cur: Any, statement: str, params: Any, _ctx: Any, many: bool) -> None:
        if statement.lstrip().split(None, 1)[0].upper() in (
            "SELECT",
            "INSERT",
            "UPDATE",
            "DELETE",
            "WITH",
        ):
            sent.append((statement, params[0] if many and params else params))

    engine = sched.store.engine
    event.listen(engine, "before_cursor_execute", record)
    try:
        sched.tick(wait=True)  # 300 sources looked at, the 3 due ones attempted
        leases.set_ttl(60)
        with engine.begin() as conn:  # a dead worker's lease and run
            conn.exec_driver_sql(
                "UPDATE leases SET holder = 'gone:1:ab:1', run_id = md5('r0:364'),"
                " expires_at = 0 WHERE source = 'county000'"
            )
            conn.exec_driver_sql(
                "UPDATE runs SET status = 'running', holder = 'gone:1:ab:1'"
                " WHERE run_id = md5('r0:364')"
            )
        with leases.leased_run(sched.store, "county000", "live"):
            leases.renew(sched.store)
    finally:
        event.remove(engine, "before_cursor_execute", record)
        sched.close()
    log = [json.loads(x) for x in sched.log.getvalue().splitlines() if x.startswith("{")]
    assert sorted(e["source"] for e in log if e["event"] == "run") == [
        "county000",
        "county001",
        "county002",
    ]
    assert any("FROM leases" in s and "FOR UPDATE SKIP LOCKED" in s for s, _ in sent)
    assert any(s.startswith("UPDATE runs") for s, _ in sent)  # the dead holder's run abandoned
    bad: list[tuple[str, list[str]]] = []
    raw = engine.raw_connection()
    try:
        cur = raw.cursor()
        for statement, params in {
            (s, json.dumps(p, default=str, sort_keys=True)): (s, p) for s, p in sent
        }.values():
            cur.execute("EXPLAIN (FORMAT JSON) " + statement, params)
            plan = cur.fetchone()[0]
            hit = [t for t in scans(plan) if t in BIG]
            if hit:
                bad.append((statement, hit))
    finally:
        raw.rollback()
        raw.close()
    for read in ("SELECT runs.source, count(*)", "max(payloads.fetched_at)", "gaps.end_at >"):
        assert any(read in s for s, _ in sent), read  # the health reads were among them
    assert bad == [], "\n\n".join(f"{hit}: {' '.join(s.split())[:500]}" for s, hit in bad)
