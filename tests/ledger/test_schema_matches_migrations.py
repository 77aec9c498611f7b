"""The database the Alembic migrations build (`engine.upgrade`) is
exactly what the SQLAlchemy metadata declares -- tables, columns (name, type family,
nullability), primary keys, indexes (name, columns, uniqueness) -- on SQLite and
PostgreSQL. Features keep their tables on the same MetaData in their own modules
(notify/tables.py, sync/tables.py); they are imported first when they exist."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from feedledger.ledger import engine as eng

FEATURE_TABLE_MODULES = ("feedledger.notify.tables", "feedledger.sync.tables")
ALEMBIC_TABLE = "alembic_version"


def declared_metadata() -> sa.MetaData:
    for name in FEATURE_TABLE_MODULES:
        if importlib.util.find_spec(name) is not None:
            importlib.import_module(name)
    from feedledger.ledger.schema import metadata

    return metadata


def family(type_: Any) -> str:
    """A column type's family, as both backends report it back."""
    if isinstance(type_, sa.Boolean):
        return "boolean"  # before Integer: SQLite reports BOOLEAN back as Boolean
    if isinstance(type_, sa.Integer):
        return "integer"
    if isinstance(type_, sa.Float | sa.Numeric):
        return "number"
    if isinstance(type_, sa.LargeBinary):
        return "binary"
    if isinstance(type_, sa.JSON):
        return "json"
    if isinstance(type_, sa.String):  # Text, VARCHAR, ...
        return "text"
    if isinstance(type_, sa.DateTime | sa.Date):
        return "datetime"
    return type(type_).__name__.lower()


def declared(metadata: sa.MetaData) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for table in metadata.sorted_tables:
        indexes = {
            (ix.name, tuple(c.name for c in ix.columns), bool(ix.unique)) for ix in table.indexes
        }
        # a unique=True column or UniqueConstraint is a unique index/constraint too
        uniques = {
            tuple(c.name for c in con.columns)
            for con in table.constraints
            if isinstance(con, sa.UniqueConstraint)
        }
        out[table.name] = {
            "columns": {
                c.name: (family(c.type), bool(c.nullable) and not c.primary_key)
                for c in table.columns
            },
            "primary_key": tuple(c.name for c in table.primary_key.columns),
            "indexes": indexes,
            "uniques": uniques,
        }
    return out


def built(engine: Engine) -> dict[str, dict[str, Any]]:
    insp = sa.inspect(engine)
    out: dict[str, dict[str, Any]] = {}
    for name in insp.get_table_names():
        if name == ALEMBIC_TABLE:
            continue
        columns = {
            c["name"]: (family(c["type"]), bool(c["nullable"])) for c in insp.get_columns(name)
        }
        pk = tuple(insp.get_pk_constraint(name)["constrained_columns"])
        for col in pk:  # SQLite reports a primary key column as nullable
            columns[col] = (columns[col][0], False)
        indexes = {
            (ix["name"], tuple(str(c) for c in ix["column_names"]), bool(ix["unique"]))
            for ix in insp.get_indexes(name)
        }
        uniques = {tuple(u["column_names"]) for u in insp.get_unique_constraints(name)}
        # PostgreSQL lists a unique constraint's backing index among the indexes too
        names = {u["name"] for u in insp.get_unique_constraints(name)}
        indexes = {ix for ix in indexes if ix[0] not in names}
        out[name] = {
            "columns": columns,
            "primary_key": pk,
            "indexes": indexes,
            "uniques": uniques,
        }
    return out


def test_migrations_build_exactly_what_the_metadata_declares(store_url: str) -> None:
    metadata = declared_metadata()
    engine = eng.make_engine(store_url)
    try:
        eng.upgrade(engine)
        got = built(engine)
    finally:
        engine.dispose()
    want = declared(metadata)
    assert sorted(got) == sorted(want), "tables differ"
    problems = []
    for table, spec in sorted(want.items()):
        for part in ("columns", "primary_key", "indexes", "uniques"):
            if got[table][part] != spec[part]:
                problems.append(
                    f"{table}.{part}: migrations {got[table][part]!r}, metadata {spec[part]!r}"
                )
    assert problems == [], "\n".join(problems)


def test_the_comparison_sees_a_drift(tmp_path: Path) -> None:
    """The check is not vacuous: an index the migrations did not build, or a column of
    another nullability, shows up as a difference."""
    engine = eng.make_engine(f"sqlite:///{tmp_path / 'drift.db'}")
    try:
        eng.upgrade(engine)
        with engine.begin() as conn:
            conn.execute(sa.text("DROP INDEX ix_versions_source_key"))
        got = built(engine)
    finally:
        engine.dispose()
    want = declared(declared_metadata())
    assert got["versions"]["indexes"] == set()
    assert want["versions"]["indexes"] != got["versions"]["indexes"]
    assert all(got[t]["columns"] == want[t]["columns"] for t in want)
