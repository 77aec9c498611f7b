"""The library never lets a database driver's error out: a statement the store refuses
(a trigger's veto, a revoked privilege, a table the schema no longer has) reaches a
library user as a FeedledgerError with a one-line message, on every backend, whether
the statement went through SQLAlchemy or a raw driver (the snapshot's streamed read, the
entity read, PostgreSQL's COPY)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

import feedledger as fl
from feedledger.config import Workspace
from helpers import PG_ENV, write_csv

# what a library user may meet: never sqlalchemy.exc.*, sqlite3.Error, psycopg.Error
DRIVER_MODULES = ("sqlalchemy", "sqlite3", "psycopg", "adbc_driver_manager")


def _exec(url: str, *statements: str) -> None:
    real = url.replace("postgresql://", "postgresql+psycopg://", 1)
    engine = create_engine(real)
    with engine.begin() as conn:
        for statement in statements:
            conn.execute(text(statement))
    engine.dispose()


def _one_line(exc: BaseException) -> str:
    assert isinstance(exc, fl.FeedledgerError), type(exc)
    assert not any(type(exc).__module__.startswith(m) for m in DRIVER_MODULES)
    message = str(exc)
    assert "\n" not in message and message, message
    return message


def _csv(tmp_path: Path, rows: int, name: str = "larimer_2026-08-01.csv") -> Path:
    return write_csv(
        tmp_path / name, ["parcel_id", "owner"], [[f"P-{i}", f"owner {i}"] for i in range(rows)]
    )


def _refuse_inserts(url: str) -> None:
    """A trigger that vetoes every new version (what a policy or a full quota answers)."""
    if url.startswith("sqlite"):
        _exec(
            url,
            "CREATE TRIGGER refuse BEFORE INSERT ON versions "
            "BEGIN SELECT RAISE(ABORT, 'refused by policy'); END",
        )
        return
    _exec(
        url,
        "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS "
        "$$BEGIN RAISE EXCEPTION 'refused by policy'; END$$",
        "CREATE TRIGGER refuse BEFORE INSERT ON versions FOR EACH ROW EXECUTE FUNCTION refuse()",
    )


def test_an_ingest_whose_insert_the_store_refuses_is_one_feedledger_error(
    workspace: Workspace, make_source: object, tmp_path: Path
) -> None:
    make_source("larimer", "parcel_id")  # type: ignore[operator]
    _refuse_inserts(workspace.store_url)
    with fl.open(workspace.root) as led, pytest.raises(fl.StoreUnavailableError) as caught:
        led.source("larimer").ingest(_csv(tmp_path, 5), published_at=date(2026, 8, 1))
    assert "refused by policy" in _one_line(caught.value)


def test_a_big_ingest_whose_insert_the_store_refuses_is_one_feedledger_error(
    workspace: Workspace, make_source: object, tmp_path: Path
) -> None:
    """Enough rows for the bulk paths: SQLite's staged scratch files, PostgreSQL's COPY
    (raw driver connections under the transaction)."""
    make_source("larimer", "parcel_id")  # type: ignore[operator]
    _refuse_inserts(workspace.store_url)
    with fl.open(workspace.root) as led, pytest.raises(fl.StoreUnavailableError) as caught:
        led.source("larimer").ingest(_csv(tmp_path, 30_000), published_at=date(2026, 8, 1))
    assert "refused by policy" in _one_line(caught.value)


def test_reads_of_a_table_the_store_no_longer_has_are_one_feedledger_error(
    workspace: Workspace, make_source: object, tmp_path: Path
) -> None:
    """The snapshot's streamed read (a raw driver connection of its own), the entity
    read and an ordinary query, after the versions table went away under the ledger."""
    make_source("larimer", "parcel_id")  # type: ignore[operator]
    with fl.open(workspace.root) as led:
        led.source("larimer").ingest(_csv(tmp_path, 5), published_at=date(2026, 8, 1))
    _exec(workspace.store_url, "ALTER TABLE versions RENAME TO versions_gone")
    with fl.open(workspace.root) as led:
        src = led.source("larimer")
        reads = [
            lambda: src.snapshot(valid=date(2026, 8, 2)),
            lambda: src.asof("P-1", valid=date(2026, 8, 2)),
            lambda: src.history("P-1"),
        ]
        for read in reads:
            with pytest.raises(fl.StoreUnavailableError) as caught:
                read()
            assert "versions" in _one_line(caught.value)


@pytest.fixture
def pg_role() -> Iterator[str]:
    """A PostgreSQL role of its own (dropped afterwards): its name."""
    url = os.environ[PG_ENV]  # the store_url fixture skipped already without it
    role = f"fl_role_{uuid.uuid4().hex[:10]}"
    _exec(url, f"CREATE ROLE {role} NOLOGIN")
    yield role
    _exec(url, f"DROP OWNED BY {role}", f"DROP ROLE {role}")


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
def test_a_postgresql_role_without_write_privilege_gets_one_feedledger_error(
    workspace: Workspace, make_source: object, tmp_path: Path, pg_role: str
) -> None:
    """The store's tables readable but not writable by the connecting role (REVOKE'd):
    the ingest's first write is refused, as one FeedledgerError naming the refusal."""
    make_source("larimer", "parcel_id")  # type: ignore[operator]
    schema = workspace.store_url.rsplit("search_path%3D", 1)[-1].split("&")[0]
    _exec(
        workspace.store_url,
        f"GRANT USAGE ON SCHEMA {schema} TO {pg_role}",
        f"GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {pg_role}",
    )
    limited = workspace.store_url.replace("search_path%3D", f"role%3D{pg_role}%20-csearch_path%3D")
    with (
        fl.open(store=limited, archive=tmp_path / "archive", root=workspace.root) as led,
        pytest.raises(fl.StoreUnavailableError) as caught,
    ):
        led.add_source("larimer", key=("parcel_id",))
        led.source("larimer").ingest(_csv(tmp_path, 5), published_at=date(2026, 8, 1))
    assert "permission denied" in _one_line(caught.value)


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
def test_a_postgresql_statement_that_waits_past_its_lock_timeout_is_one_feedledger_error(
    workspace: Workspace, make_source: object, tmp_path: Path
) -> None:
    """Another session holds the versions table locked; the store URL's lock_timeout
    ends the ingest's wait: one FeedledgerError naming the timeout, nothing applied."""
    make_source("larimer", "parcel_id")  # type: ignore[operator]
    impatient = workspace.store_url.replace(
        "search_path%3D", "lock_timeout%3D200%20-csearch_path%3D"
    )
    holder = create_engine(workspace.store_url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        with holder.connect() as conn, conn.begin():
            conn.execute(text("LOCK TABLE versions IN ACCESS EXCLUSIVE MODE"))
            with (
                fl.open(store=impatient, archive=tmp_path / "archive", root=workspace.root) as led,
                pytest.raises(fl.StoreUnavailableError) as caught,
            ):
                led.add_source("larimer", key=("parcel_id",))
                led.source("larimer").ingest(_csv(tmp_path, 5), published_at=date(2026, 8, 1))
    finally:
        holder.dispose()
    assert "lock timeout" in _one_line(caught.value)


def test_the_table_maps_database_errors_only() -> None:
    """A driver's error (raw or wrapped by SQLAlchemy) is mapped; SQLAlchemy's own
    errors of misuse and any other exception are not (they are bugs, not the store)."""
    import sqlite3

    from sqlalchemy.exc import DBAPIError, InvalidRequestError

    from feedledger.ledger.failures import Place, translate

    place = Place("sqlite:///ledger.db")
    raw = sqlite3.OperationalError("no such table: versions")
    wrapped = DBAPIError.instance("SELECT 1", {}, raw, sqlite3.Error)
    for exc in (raw, wrapped):
        failure = translate(exc, place)
        assert isinstance(failure, fl.StoreUnavailableError)
        assert "no such table: versions" in _one_line(failure)
    for other in (InvalidRequestError("this transaction is inactive"), ValueError("x")):
        assert translate(other, place) is None
