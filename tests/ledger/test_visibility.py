"""The "known at K" rule and the "latest version per key" rule are
written once (ledger/visibility.py); their SQLAlchemy-expression, SQL-text and Python
forms agree on a small ledger with retractions, on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Table, select, text

from feedledger.config import Workspace
from feedledger.ledger.schema import applications, gaps, versions
from feedledger.ledger.store import Store
from feedledger.ledger.visibility import (
    LATEST_ORDER,
    is_visible,
    latest_per_key,
    latest_per_key_sql,
    visible,
    visible_sql,
)
from helpers import Cli
from ledger.retracted_ledger import ledger_with_retractions, visibility_instants
from pipeline.backfill_scenario import SRC


def _ids(conn: Any, stmt: Any, params: dict[str, Any] | None = None) -> set[Any]:
    return {tuple(r) for r in conn.execute(stmt, params or {})}


def test_known_at_forms_agree(cli: Cli, workspace: Workspace, tmp_path: Path) -> None:
    ledger_with_retractions(cli, tmp_path)
    store = Store(workspace.store_url)
    try:
        with store.engine.connect() as conn:
            tables: list[tuple[Table, str]] = [
                (versions, "version_id"),
                (applications, "payload_id"),
                (gaps, "gap_id"),
            ]
            for table, pk in tables:
                rows = list(conn.execute(select(table).where(table.c.source == SRC)))
                assert any(r.retracted_at is not None for r in rows), table.name
                for k in visibility_instants(rows):
                    by_python = {
                        (r._mapping[pk],)
                        for r in rows
                        if is_visible(r.recorded_at, r.retracted_at, k)
                    }
                    by_expr = _ids(
                        conn, select(table.c[pk]).where(table.c.source == SRC, visible(table, k))
                    )
                    placeholder = ":k" if k is not None else None
                    sql = (
                        f"SELECT t.{pk} FROM {table.name} t "
                        f"WHERE t.source = :s AND {visible_sql(placeholder, 't')}"
                    )
                    by_text = _ids(conn, text(sql), {"s": SRC, "k": k})
                    assert by_python == by_expr == by_text, (table.name, k)
    finally:
        store.engine.dispose()


def test_latest_per_key_forms_agree(cli: Cli, workspace: Workspace, tmp_path: Path) -> None:
    ledger_with_retractions(cli, tmp_path)
    cols = ["key", "version_id", "deleted"]
    store = Store(workspace.store_url)
    try:
        with store.engine.connect() as conn:
            rows = list(conn.execute(select(versions).where(versions.c.source == SRC)))
            for k in visibility_instants(rows):
                latest: dict[str, Any] = {}
                for r in rows:
                    if not is_visible(r.recorded_at, r.retracted_at, k):
                        continue
                    rank = tuple(r._mapping[c] for c in LATEST_ORDER)
                    if r.key not in latest or rank > latest[r.key][0]:
                        latest[r.key] = (rank, (r.key, r.version_id, bool(r.deleted)))
                by_python = {v for _, v in latest.values()}

                def norm(found: set[Any]) -> set[Any]:
                    return {(key, vid, bool(deleted)) for key, vid, deleted in found}

                by_expr = norm(
                    _ids(
                        conn,
                        latest_per_key(cols, versions.c.source == SRC, visible(versions, k)),
                    )
                )
                placeholder = ":k" if k is not None else None
                where = f"source = :s AND {visible_sql(placeholder)}"
                params = {"s": SRC, "k": k}
                by_text = norm(_ids(conn, text(latest_per_key_sql(cols, where)), params))
                assert by_python == by_expr == by_text, k
                if store.dialect == "postgresql":
                    on = latest_per_key_sql(cols, where, distinct_on=True)
                    assert norm(_ids(conn, text(on), params)) == by_python, k
            assert by_python  # the last instant sees every key
    finally:
        store.engine.dispose()
