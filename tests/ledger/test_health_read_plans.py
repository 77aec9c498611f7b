"""What `health` reads of many sources at once (ledger/views/health.py: runs held for
review, the last fetch per source, the standing gaps after each watermark) searches
the indexes of migration 0014 on SQLite (`EXPLAIN QUERY PLAN`: no full scan of runs,
payloads or gaps, after ANALYZE), and answers what a plain read of every row gives.
PostgreSQL's plans at a fleet's size: tests/scheduler/test_fleet_plans.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import event, insert, select

from feedledger.ledger.schema import gaps, payloads, runs, watermarks
from feedledger.ledger.store import Store
from feedledger.ledger.views.health import health_rows
from feedledger.ledger.visibility import visible
from helpers import migrate

SOURCES, DAYS = 40, 30
DAY = 86_400_000_000
T0 = 1_780_000_000_000_000


def _fill(store: Store) -> None:
    names = [f"s{s:02d}" for s in range(SOURCES)]
    with store.begin() as conn:
        conn.execute(
            insert(payloads),
            [
                dict(payload_id=f"p{s}-{d}", source=n, sha256="0" * 64, published_at=T0 + d * DAY,
                     fetched_at=T0 + d * DAY + (s % 7), size=1, indexed_at=T0)
                for s, n in enumerate(names) for d in range(DAYS)
            ],
        )  # fmt: skip
        conn.execute(
            insert(runs),
            [
                dict(run_id=f"r{s}-{d}", source=n, kind="live", holder="h",
                     status="held" if (s + d) % 11 == 0 else "succeeded", started_at=T0 + d * DAY)
                for s, n in enumerate(names) for d in range(DAYS)
            ],
        )  # fmt: skip
        last = T0 + (DAYS - 1) * DAY
        conn.execute(
            insert(watermarks),
            [dict(source=n, published_at=last, txn_seq=1, recorded_at=T0) for n in names[1:]],
        )
        conn.execute(
            insert(gaps),
            [
                dict(source=n, start_at=T0 + g * DAY, end_at=T0 + (g + 1) * DAY, reason="x",
                     run_id=f"g{s}-{g}", recorded_at=T0, retracted_at=T0 if g == DAYS else None)
                for s, n in enumerate(names) for g in range(0, DAYS + 4, 2)
            ],
        )  # fmt: skip
        conn.exec_driver_sql("ANALYZE")


def test_health_reads_search_the_indexes_and_agree_with_every_row(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    migrate(url)
    store = Store(url)
    try:
        _fill(store)
        sent: list[tuple[str, Any]] = []

        def record(_c: Any, _cur: Any, statement: str, params: Any, _x: Any, _m: bool) -> None:
            sent.append((statement, params))

        names = [f"s{s:02d}" for s in range(SOURCES)]
        event.listen(store.engine, "before_cursor_execute", record)
        try:
            got = health_rows(store, names)
        finally:
            event.remove(store.engine, "before_cursor_execute", record)
        raw = store.engine.raw_connection()
        try:
            cur = raw.cursor()
            plans = []
            for statement, params in sent:
                cur.execute("EXPLAIN QUERY PLAN " + statement, params)
                plans.append("\n".join(str(r[-1]) for r in cur.fetchall()))
        finally:
            raw.close()
        text = "\n\n".join(plans)
        for table in ("runs", "payloads", "gaps"):
            assert f"SEARCH {table} USING" in text, text
            assert f"SCAN {table}" not in text, text
        with store.engine.connect() as conn:
            every = conn.execute(select(payloads.c.source, payloads.c.fetched_at)).all()
            held = conn.execute(select(runs.c.source).where(runs.c.status == "held")).all()
            standing = conn.execute(
                select(gaps.c.source, gaps.c.start_at, gaps.c.end_at)
                .where(visible(gaps, None))
                .order_by(gaps.c.source, gaps.c.start_at, gaps.c.gap_id)
            ).all()
    finally:
        store.close()
    last = T0 + (DAYS - 1) * DAY
    for n in names:
        rows = got[n]
        assert rows.last_fetched_at == max(at for s, at in every if s == n)
        assert rows.held_runs == sum(1 for (s,) in held if s == n)
        after = [(a, b) for s, a, b in standing if s == n and b > last]
        assert rows.gap_spans == (after if n != "s00" else [])  # s00: no watermark, no attempt
    assert any(got[n].gap_spans for n in names) and any(got[n].held_runs for n in names)
