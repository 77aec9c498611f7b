"""The statements of an entity's `asof`/`history` read
(ledger/readers/entity_read.py) use the indexes, on SQLite (`EXPLAIN QUERY PLAN`) and
PostgreSQL (`EXPLAIN`, after ANALYZE of a few thousand versions): the versions by
`ix_versions_source_key`, never a full scan of versions; and the read's answers are
those of the SQLAlchemy queries it replaced (`queries.history`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import feedledger as fl
from feedledger.config import Workspace
from feedledger.ledger import queries
from feedledger.ledger.readers import entity_read
from helpers import BACKENDS, backend_store, migrate

N = 3000


def _csv(day: int) -> bytes:
    rows = "".join(f"{i},{'v' if i % 10 else f'v{day}'}\n" for i in range(N))
    return f"id,v\n{rows}".encode()


@pytest.fixture(scope="module", params=BACKENDS)
def led(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    tmp: Path = tmp_path_factory.mktemp("plan")
    with backend_store(request.param, tmp) as url:
        ws = Workspace.create(tmp / "ws", store_url=url, archive=None)
        migrate(ws.store_url)
        with fl.open(ws.config_path) as ledger:
            src = ledger.add_source("s", key=["id"], timezone="UTC")
            for day in (1, 2, 3):
                src.ingest(_csv(day), published_at=f"2026-08-0{day}", name=f"d{day}.csv")
            ledger.source("s").add_gap("2026-08-05", "2026-08-06", "outage")
            yield ledger


def _plan(store: Any, sql: str, params: dict[str, Any]) -> str:
    raw = store.engine.raw_connection()
    try:
        cur = raw.cursor()
        if store.dialect == "sqlite":
            cur.execute("EXPLAIN QUERY PLAN " + sql, params)
            return "\n".join(str(r[-1]) for r in cur.fetchall())
        cur.execute("ANALYZE versions")
        cur.execute("EXPLAIN " + sql, params)
        return "\n".join(str(r[0]) for r in cur.fetchall())
    finally:
        raw.rollback()
        raw.close()


@pytest.mark.parametrize("known_at", [None, 1_900_000_000_000_000])
def test_the_entity_read_uses_the_indexes(led: Any, known_at: int | None) -> None:
    store = led.context.store
    params = entity_read.key_params("s", ['["17"]', "[17]"]) | {"known": known_at}
    versions, apps, gaps = entity_read.read_sql(
        store, 2, known_at=known_at, geo=False, context=True
    )
    plan = _plan(store, versions, params)
    assert "ix_versions_source_key" in plan, plan
    if store.dialect == "sqlite":
        assert "SCAN versions" not in plan, plan
        assert "ix_applications_source_seq" in _plan(store, apps, params)
        assert "ix_gaps_source_start" in _plan(store, gaps, params)
    else:
        assert "Seq Scan on versions" not in plan, plan


def test_the_read_answers_as_the_queries_it_replaced(led: Any) -> None:
    store = led.context.store
    for key in ('["7"]', '["10"]', '["2999"]'):
        for known in (None, 0, 1_900_000_000_000_000):
            for retracted in (False, True):
                want = queries.history(store, "s", key, known_at=known, include_retracted=retracted)
                got = entity_read.read(
                    store, "s", [key], known_at=known, include_retracted=retracted
                )
                assert got.key == key and got.versions == want
    found = entity_read.read(store, "s", ['["nobody"]'], context=True)
    assert found.key is None and found.versions == []
    assert found.first_recorded == queries.first_recorded(store, "s")
    assert len(found.observed or []) == 3 and [g.reason for g in found.gaps or []] == ["outage"]


@pytest.mark.parametrize("led", ["postgresql"], indirect=True)  # PostgreSQL's own reader
def test_a_postgresql_reading_connection_ended_by_the_server_is_replaced(led: Any) -> None:
    """The thread's own reading connection (ledger/readers/pg_pipeline.py), terminated by the
    server between two reads: the next read opens a new one and answers."""
    store = led.context.store
    assert store.dialect == "postgresql"
    from feedledger.ledger.readers import pg_pipeline

    before = entity_read.read(store, "s", ['["7"]']).versions
    conn = pg_pipeline._connections()[store]
    admin = store.engine.raw_connection()
    try:
        cur = admin.cursor()
        cur.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))
        admin.commit()
    finally:
        admin.close()
    # the client does not know yet: the read fails on it, drops it and reads again
    assert not conn.closed
    assert entity_read.read(store, "s", ['["7"]']).versions == before
    assert pg_pipeline._connections()[store] is not conn
