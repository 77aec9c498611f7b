"""A payload that writes more than a tenth of a source's live rows (a first load, a big
restatement) re-samples PostgreSQL's planner statistics of `versions`
(`Store.refresh_statistics`): autovacuum may run late or be off, and a never-analysed
versions table is planned blind (a snapshot's key-ordered scan then sorts every version
instead of reading the index). A small daily payload does not. SQLite: nothing to do."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import feedledger as fl
from feedledger.config import Workspace
from helpers import BACKENDS, backend_store, migrate

N = 3000


def _csv(day: int, changed: int) -> bytes:
    rows = "".join(f"{i},{f'v{day}' if i < changed else 'v'}\n" for i in range(N))
    return f"id,v\n{rows}".encode()


def _reltuples(store: Any) -> float:
    with store.engine.connect() as conn:
        found = conn.exec_driver_sql(
            "SELECT c.reltuples FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.relname = 'versions' AND n.nspname = current_schema()"
        ).scalar_one()
    return float(found)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_big_payload_refreshes_the_planner_statistics(backend: str, tmp_path: Path) -> None:
    with backend_store(backend, tmp_path) as url:
        ws = Workspace.create(tmp_path / "ws", store_url=url, archive=None)
        migrate(ws.store_url)
        with fl.open(ws.config_path) as ledger:
            store = ledger.context.store
            pg = store.dialect == "postgresql"
            if pg:
                assert _reltuples(store) < 0  # never analysed (PostgreSQL >= 14)
            src = ledger.add_source("s", key=["id"], timezone="UTC")
            src.ingest(_csv(1, 0), published_at="2026-08-01", name="d1.csv")
            if pg:
                assert _reltuples(store) == N  # the first load: analysed
                # a small day (1 %) leaves the statistics alone
                src.ingest(_csv(2, 30), published_at="2026-08-02", name="d2.csv")
                assert _reltuples(store) == N
                # a restatement of every row (N more versions): analysed again
                src.ingest(_csv(3, N), published_at="2026-08-03", name="d3.csv")
                assert _reltuples(store) == 2 * N + 30
            assert store.refresh_statistics(N, 0) is pg
