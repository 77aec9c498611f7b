"""The outcome ledger and the destination as the known-rows tests read them (sync/known.py):
a manifest's outcome rows by key, its scope id, one `sync` run's verdicts, a statement
run on the destination behind feedledger's back. Shared by test_known and
test_confirmed_batches.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import create_engine, text

import feedledger as fl
from helpers import Cli


def outcome_rows(cli: Cli, scope_name: str = "all") -> dict[str, tuple[Any, ...]]:
    """key -> (verdict, revision, content_hash, attempts) of the manifest's outcome rows."""
    with fl.open(cli.ws.config_path) as ledger:
        store = ledger.context.store
        scope = store_scope(store, scope_name)
        with store.engine.connect() as conn:
            got = conn.execute(
                text(
                    "SELECT key, verdict, revision, content_hash, attempts FROM sync_outcomes "
                    "WHERE destination = 'search' AND scope = :s"
                ),
                {"s": scope},
            ).all()
    return {json.loads(r[0])[0]: tuple(r[1:]) for r in got}


def store_scope(store: Any, name: str) -> str:
    with store.engine.connect() as conn:
        return str(
            conn.execute(
                text("SELECT manifest_id FROM manifests WHERE name = :n"), {"n": name}
            ).scalar_one()
        )


def run(cli: Cli) -> dict[str, int]:
    got = cli.json("sync", "search", "--manifest", "all", "--batch", "4")
    assert got["status"] == "finished"
    return {k: v for k, v in got["outcomes"].items() if v}


def destination_sql(place: tuple[str, str, str], sql: str) -> None:
    kind, url, table = place
    full = url.replace("postgresql://", "postgresql+psycopg://", 1) if kind == "postgres" else (
        f"sqlite:///{url}"
    )  # fmt: skip
    engine = create_engine(full)
    try:
        with engine.begin() as conn:
            conn.execute(text(sql.format(table=f'"{table}"')))
    finally:
        engine.dispose()
