"""Migration 0014 (the indexes of `health`'s fleet-wide reads) over a store at 0013
with rows in it, and back: the three indexes appear, the rows stay, the downgrade drops
exactly them, and the upgrade runs again -- on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from feedledger.ledger import engine as eng
from helpers import BACKENDS, backend_store

NEW = {
    ("runs", "ix_runs_status_source", ("status", "source")),
    ("payloads", "ix_payloads_source_fetched", ("source", "fetched_at")),
    ("gaps", "ix_gaps_end", ("end_at",)),
}


def _alembic(url: str, target: str, down: bool = False) -> None:
    from alembic import command

    engine = eng.make_engine(url)
    try:
        with engine.begin() as conn:
            (command.downgrade if down else command.upgrade)(eng._config(conn), target)
    finally:
        engine.dispose()


def _state(url: str) -> tuple[set[tuple[str, str, tuple[str, ...]]], list[tuple[object, ...]]]:
    engine = eng.make_engine(url)
    try:
        insp = sa.inspect(engine)
        indexes = {
            (t, str(ix["name"]), tuple(str(c) for c in ix["column_names"]))
            for t in ("runs", "payloads", "gaps")
            for ix in insp.get_indexes(t)
        }
        with engine.connect() as conn:
            rows = [
                *conn.execute(sa.text("SELECT run_id, status FROM runs ORDER BY run_id")),
                *conn.execute(sa.text("SELECT payload_id, fetched_at FROM payloads")),
                *conn.execute(sa.text("SELECT source, end_at FROM gaps")),
            ]
        return indexes, [tuple(r) for r in rows]
    finally:
        engine.dispose()


@pytest.mark.parametrize("backend", BACKENDS)
def test_migration_0014_adds_the_health_indexes_and_takes_them_back(
    backend: str, tmp_path: Path
) -> None:
    with backend_store(backend, tmp_path) as url:
        _alembic(url, "0013_observations")
        engine = eng.make_engine(url)
        try:
            with engine.begin() as conn:
                conn.execute(
                    sa.text(
                        "INSERT INTO runs (run_id, source, kind, status, started_at, holder)"
                        " VALUES ('r1', 's', 'live', 'held', 1, 'h'),"
                        " ('r2', 's', 'live', 'succeeded', 2, 'h')"
                    )
                )
                conn.execute(
                    sa.text(
                        "INSERT INTO payloads (payload_id, source, sha256, published_at,"
                        " fetched_at, size, indexed_at) VALUES ('p1', 's', 'x', 1, 5, 1, 1)"
                    )
                )
                conn.execute(
                    sa.text(
                        "INSERT INTO gaps (source, start_at, end_at, reason, run_id, recorded_at)"
                        " VALUES ('s', 1, 9, 'outage', 'g1', 1)"
                    )
                )
        finally:
            engine.dispose()
        before, rows = _state(url)
        assert not NEW & before and len(rows) == 4
        _alembic(url, "0014_health_indexes")
        after, rows_after = _state(url)
        assert after == before | NEW and rows_after == rows
        _alembic(url, "0013_observations", down=True)
        assert _state(url) == (before, rows)
        _alembic(url, "head")
        assert _state(url)[0] >= NEW
