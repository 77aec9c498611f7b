"""A destination's database refusing a statement reaches a library user as one
FeedledgerError naming the destination, never as a driver's error: a write its table
vetoes (a rebuild) and a read its table fails (reconcile)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

import feedledger as fl
from feedledger.config import Workspace
from helpers import write_csv

DRIVER_MODULES = ("sqlalchemy", "sqlite3", "psycopg", "adbc_driver_manager")


def _one_line(exc: BaseException) -> str:
    assert isinstance(exc, fl.FeedledgerError), type(exc)
    assert not any(type(exc).__module__.startswith(m) for m in DRIVER_MODULES)
    message = str(exc)
    assert message and "\n" not in message, message
    return message


def _dest_sql(path: Path, statement: str) -> None:
    engine = create_engine(f"sqlite:///{path}")
    with engine.begin() as conn:
        conn.execute(text(statement))
    engine.dispose()


def _synced(workspace: Workspace, make_source: Callable[..., object], tmp_path: Path) -> Path:
    make_source("larimer", "parcel_id")
    rows = [[f"P-{i}", f"owner {i}"] for i in range(20)]
    csv = write_csv(tmp_path / "larimer_2026-08-01.csv", ["parcel_id", "owner"], rows)
    dest = tmp_path / "dest.db"
    with fl.open(workspace.root) as led:
        led.source("larimer").ingest(csv, published_at=date(2026, 8, 1))
        led.add_destination("d", source="larimer", table="parcels", sqlite=str(dest))
        led.create_manifest("all", source="larimer")
        led.destination("d").rebuild("all")
    return dest


def test_a_destination_read_that_fails_is_one_feedledger_error(
    workspace: Workspace, make_source: Callable[..., object], tmp_path: Path
) -> None:
    dest = _synced(workspace, make_source, tmp_path)
    _dest_sql(dest, "ALTER TABLE parcels RENAME TO parcels_kept")
    # a table of the right columns whose every read fails (a damaged or foreign one)
    _dest_sql(
        dest,
        "CREATE VIEW parcels AS SELECT * FROM parcels_kept WHERE json_extract('{', '$')",
    )
    with fl.open(workspace.root) as led, pytest.raises(fl.StoreUnavailableError) as caught:
        led.destination("d").reconcile("all")
    message = _one_line(caught.value)
    assert message.startswith("destination d at ") and "refused a read" in message, message


def test_a_destination_write_its_table_vetoes_is_one_feedledger_error(
    workspace: Workspace, make_source: Callable[..., object], tmp_path: Path
) -> None:
    dest = _synced(workspace, make_source, tmp_path)
    _dest_sql(dest, "DELETE FROM parcels")
    _dest_sql(
        dest,
        "CREATE TRIGGER veto BEFORE INSERT ON parcels BEGIN SELECT RAISE(ABORT, 'vetoed'); END",
    )
    with fl.open(workspace.root) as led:
        led.create_manifest("again", source="larimer")
        with pytest.raises(fl.StoreUnavailableError) as caught:
            led.destination("d").rebuild("again")
    assert "refused the write: vetoed" in _one_line(caught.value)
