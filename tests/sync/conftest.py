"""Fixtures of the sync tests: a fresh destination table on SQLite and on PostgreSQL."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from sync.guard_destinations import PG_ENV


@pytest.fixture(params=["sqlite", "postgres"])
def dest_kind(request: pytest.FixtureRequest) -> str:
    if request.param == "postgres" and not os.environ.get(PG_ENV):
        pytest.skip(f"PostgreSQL destination not tested: set {PG_ENV}")
    return str(request.param)


@pytest.fixture
def place(dest_kind: str, tmp_path: Path) -> Iterator[tuple[str, str, str]]:
    """(kind, url or path, table) for a fresh destination table, dropped afterwards."""
    table = f"t_{uuid.uuid4().hex[:12]}"
    if dest_kind == "sqlite":
        yield "sqlite", str(tmp_path / "dest.db"), table
        return
    url = os.environ[PG_ENV]
    yield "postgres", url, table
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.begin() as conn:
        conn.execute(text(f"DROP TABLE IF EXISTS {table}"))
    engine.dispose()


@pytest.fixture(params=["sqlite", "postgres", "gpkg", "tantivy", "postgis"])
def kind_place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str, str]]:
    """(kind, URL or file, table or layer) of a fresh destination of every kind
    (sync/destination_kinds.py), dropped afterwards: fed from a GIS source."""
    yield from _fresh_place(str(request.param), tmp_path)


@pytest.fixture(params=["sqlite", "postgres", "gpkg", "tantivy"])
def record_place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str, str]]:
    """`kind_place` for the guard's tests, fed from a source of plain records: every
    kind but PostGIS, which is a GIS source's layer only (it refuses a source without
    geometry; its guarded statement is the PostgreSQL table's, tested here)."""
    yield from _fresh_place(str(request.param), tmp_path)


def _fresh_place(kind: str, tmp_path: Path) -> Iterator[tuple[str, str, str]]:
    table = f"k_{uuid.uuid4().hex[:12]}"
    if kind == "gpkg":
        yield "gpkg", str(tmp_path / "parcels.gpkg"), "parcels"
        return
    if kind == "tantivy":
        yield "tantivy", str(tmp_path / "index"), "documents"
        return
    if kind == "sqlite":
        yield "sqlite", str(tmp_path / "dest.db"), table
        return
    if not os.environ.get(PG_ENV):
        pytest.skip(f"PostgreSQL destination not tested: set {PG_ENV}")
    url = os.environ[PG_ENV]
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    if kind == "postgis":
        with engine.begin() as conn:
            conn.execute(text("CREATE EXTENSION IF NOT EXISTS postgis"))
    yield kind, url, table
    with engine.begin() as conn:
        conn.execute(text(f"DROP TABLE IF EXISTS {table}"))
    engine.dispose()
