"""The suite's recycled PostgreSQL schemas (tests/pg_schemas.py) are indistinguishable
from freshly migrated ones: after a test wrote rows, moved the seed rows and sequences
and had PostgreSQL analyse its tables, the next test's schema has Alembic's catalog,
the migrations' seed rows only, sequences at their start and never-analysed tables. A
test that changed the definition gets its schema dropped, never recycled."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest

import pg_schemas
from helpers import _PG_CATALOG, PG_ENV, PG_SKIP, _pg_catalog, backend_store, migrate


def _base() -> str:
    base = os.environ.get(PG_ENV)
    if not base:
        pytest.skip(PG_SKIP)
    return base


def _schema(url: str) -> str:
    return url.rsplit("%3D", 1)[1]


def _dirty(url: str, schema: str) -> None:
    with psycopg.connect(_base(), options=f"-csearch_path={schema}") as conn:
        conn.execute("INSERT INTO counters (name, value) VALUES ('extra', 7)")
        conn.execute("UPDATE counters SET value = value + 5 WHERE name = 'version_id'")
        conn.execute("UPDATE schema_floor SET floor = 'elsewhere'")
        conn.execute(
            "INSERT INTO gaps (source, start_at, end_at, reason, run_id, recorded_at)"
            " SELECT 's', g, g + 1, 'r', 'run', 1 FROM generate_series(1, 500) g"
        )
        conn.execute("ANALYZE gaps")
        conn.execute("ANALYZE counters")


def _snapshot(schema: str) -> dict[str, Any]:
    from sqlalchemy import create_engine

    with psycopg.connect(_base(), options=f"-csearch_path={schema}") as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT relname FROM pg_class WHERE relnamespace = %s::regnamespace"
                " AND relkind = 'r' ORDER BY 1",
                (schema,),
            )
        ]
        rows = {t: sorted(conn.execute(f'SELECT * FROM "{t}"').fetchall()) for t in tables}
        stats = conn.execute(
            "SELECT c.relname, c.reltuples, c.relpages, pg_total_relation_size(c.oid),"
            " EXISTS (SELECT 1 FROM pg_statistic s WHERE s.starelid = c.oid)"
            " FROM pg_class c WHERE c.relnamespace = %s::regnamespace AND c.relkind = 'r'"
            " ORDER BY 1",
            (schema,),
        ).fetchall()
        seqs = conn.execute(
            "SELECT c.relname, nextval(c.oid) FROM pg_class c"
            " WHERE c.relnamespace = %s::regnamespace AND c.relkind = 'S' ORDER BY 1",
            (schema,),
        ).fetchall()
        conn.rollback()  # (nextval is not undone: this schema is not reused as is)
    engine = create_engine(
        "postgresql+psycopg://",
        creator=lambda: psycopg.connect(_base(), options=f"-csearch_path={schema}"),
    )
    try:
        with engine.connect() as sa:
            catalog = _pg_catalog(sa)
    finally:
        engine.dispose()
    return {"rows": rows, "stats": stats, "seqs": seqs, "catalog": catalog}


def test_a_recycled_schema_is_a_fresh_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _base()
    fresh: dict[str, Any] = {}
    taken = pg_schemas.COUNTS["taken"]
    for round_ in range(5):
        with backend_store("postgresql", tmp_path / str(round_)) as url:
            with monkeypatch.context() as patch:
                if round_ == 0:  # the reference: the migrations replayed, no pooled schema
                    patch.setattr(pg_schemas, "take", lambda _conn, _schema: False)
                migrate(url)
            schema = _schema(url)
            seen = _snapshot(schema)
            if not fresh:
                fresh = seen
            assert seen == fresh, f"round {round_}"
            if _PG_CATALOG:
                assert seen["catalog"] == _PG_CATALOG[0]
            _dirty(url, schema)
    # (a new process: Alembic itself, then the replay, then pooled schemas)
    assert pg_schemas.COUNTS["taken"] - taken >= 2


def test_a_changed_definition_is_dropped_not_recycled(tmp_path: Path) -> None:
    base = _base()
    for round_ in range(2):  # the first builds the pool
        with backend_store("postgresql", tmp_path / f"w{round_}") as url:
            migrate(url)
    changes = [
        "ALTER TABLE gaps ADD COLUMN extra integer",
        "CREATE INDEX ix_extra ON runs (source)",
        "CREATE TABLE extra (id integer)",
        "GRANT SELECT ON gaps TO PUBLIC",
        "ALTER TABLE counters ALTER COLUMN value SET DEFAULT 3",
        "CREATE FUNCTION extra() RETURNS integer LANGUAGE sql AS 'SELECT 1'",
    ]
    for change in changes:
        with backend_store("postgresql", tmp_path / uuid.uuid4().hex) as url:
            migrate(url)
            schema = _schema(url)
            with psycopg.connect(base, options=f"-csearch_path={schema}") as conn:
                conn.execute(change)
            dropped = pg_schemas.COUNTS["dropped"]
        assert pg_schemas.COUNTS["dropped"] == dropped + 1, f"{change}: recycled"
        with psycopg.connect(base) as conn:
            left = conn.execute(
                "SELECT count(*) FROM pg_namespace WHERE nspname = %s", (schema,)
            ).fetchone()
        assert left == (0,), change
