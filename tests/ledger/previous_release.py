"""The store the previous release left (the fixture `make_store.py` wrote, at migration
0009) and the canonical JSON of a record: shared by the compact-versions, codebook and
changes-view tests.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from feedledger.ledger import engine as eng

FIXTURE = Path(__file__).parent / "fixtures" / "previous_release_store"


def canonical(record: dict[str, Any]) -> str:
    return json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def load_previous_release(url: str) -> None:
    """The store at 0009 with the rows `make_store.py` left (previous release's code)."""
    from alembic import command

    engine = eng.make_engine(url, create=True)
    try:
        with engine.begin() as conn:
            command.upgrade(eng._config(conn), "0009")
        meta = sa.MetaData()
        meta.reflect(engine)
        data = json.loads((FIXTURE / "rows.json").read_text(encoding="utf-8"))
        with engine.begin() as conn:
            for name, table in data.items():
                t = meta.tables[name]
                rows = [dict(zip(table["columns"], r, strict=True)) for r in table["rows"]]
                for row in rows:
                    for col, value in row.items():
                        if isinstance(t.c[col].type, sa.Boolean) and value is not None:
                            row[col] = bool(value)
                conn.execute(t.delete())
                conn.execute(t.insert(), rows)
                if conn.dialect.name == "postgresql":  # rows came with their serial ids
                    for col in t.primary_key.columns:
                        seq = conn.execute(
                            sa.text("SELECT pg_get_serial_sequence(:t, :c)"),
                            {"t": name, "c": col.name},
                        ).scalar_one()
                        if seq:
                            conn.execute(
                                sa.text(
                                    f"SELECT setval('{seq}', (SELECT max({col.name}) FROM {name}))"
                                )
                            )
    finally:
        engine.dispose()
