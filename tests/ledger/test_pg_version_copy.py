"""PostgreSQL writes a payload's versions by binary COPY (`ledger/bulk/pg_copy.py`): every
column type of the versions table, NULLs, extreme numbers and any text (quotes, commas,
newlines, backslashes, non-ASCII, empty) arrive exactly as given.

A first load into an empty versions table builds the table's secondary indexes and its
primary key after its COPY, in the payload's transaction: afterwards the same indexes
and constraint exist (rebuilt, a duplicate version id still refused), a crash during
the COPY leaves the empty table with its indexes, and a table that already
holds rows, or that another transaction is using, is written with its indexes in place
(never rebuilt, never waited for). SQLite (its own path, nothing to defer) stores the
same values."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import polars as pl
import psycopg
import pytest

import feedledger as fl
from feedledger import faults
from feedledger.config import Workspace
from feedledger.ledger import bulk
from feedledger.ledger.bulk import pg_copy
from feedledger.ledger.store import Store
from feedledger.model.errors import StoreUnavailableError
from helpers import BACKENDS, Cli, backend_store, migrate

TEXTS = ['say "hi", then\nleave', "back\\slash\ttab", "ünïcödé ✓ 𝄞", "", "NULL", "\\N"]
INT64 = [-(2**63), 2**63 - 1, 0, -1, 1, 2**40]


@contextmanager
def pg_ledger(tmp_path: Path, backend: str = "postgresql") -> Iterator[tuple[Any, str]]:
    """An empty ledger on a PostgreSQL schema of its own (or `backend`), and its URL."""
    with backend_store(backend, tmp_path) as url:
        ws = Workspace.create(tmp_path / "ws", store_url=url, archive=None)
        migrate(ws.store_url)
        with fl.open(ws.config_path) as ledger:
            yield ledger, url


def _frame(n: int) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "version_id": list(range(1, n + 1)),
            "key": [TEXTS[i % len(TEXTS)] + str(i) for i in range(n)],
            "deleted": [i % 3 == 0 for i in range(n)],
            "change": [("added", "changed", "deleted")[i % 3] for i in range(n)],
            "prev_version_id": [None if i % 2 else 10**12 + i for i in range(n)],
            "content_hash": [INT64[i % len(INT64)] for i in range(n)],
            "revision": [None if i % 4 == 0 else TEXTS[i % len(TEXTS)] for i in range(n)],
            "idx": list(range(n)),
        },
        schema_overrides={"prev_version_id": pl.Int64, "content_hash": pl.Int64},
    )


def _texts(idx: pl.Series) -> pl.Series:
    return pl.Series(
        "attributes", [None if i % 5 == 4 else TEXTS[i % len(TEXTS)] * (i % 3) for i in idx]
    )


def _write(store: Store, frame: pl.DataFrame, constants: dict[str, Any]) -> None:
    with store.begin() as conn:
        bulk.insert_versions(conn, frame, _texts, constants)


def _read(store: Store) -> list[tuple[Any, ...]]:
    with store.engine.connect() as conn:
        rows = conn.exec_driver_sql(
            "SELECT version_id, key, deleted, change, prev_version_id, content_hash, revision,"
            " attributes, source, valid_from, recorded_at, txn_seq, backfill, fields_id,"
            " retracted_at, geometry FROM versions ORDER BY version_id"
        ).fetchall()
    return [tuple(row) for row in rows]


def _expected(frame: pl.DataFrame, constants: dict[str, Any]) -> list[tuple[Any, ...]]:
    texts = _texts(frame.get_column("idx")).to_list()
    tail = tuple(constants[c] for c in bulk.VERSION_CONSTANT)
    changes = ("added", "changed", "deleted")
    rows = frame.iter_rows(named=True)
    return [
        (
            r["version_id"],
            r["key"],
            r["deleted"],
            changes.index(r["change"]),
            r["prev_version_id"],
            r["content_hash"],
            r["revision"],
            texts[i],
            *tail,
            None,
            None,
        )
        for i, r in enumerate(rows)
    ]


CONSTANTS = {
    "source": "s-ü",
    "valid_from": -(2**62),
    "recorded_at": 2**62,
    "txn_seq": 7,
    "backfill": True,
    "fields_id": None,
}


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_version_column_arrives_as_given(backend: str, tmp_path: Path) -> None:
    frame = _frame(1000)
    with pg_ledger(tmp_path, backend) as (ledger, _):
        store = ledger.context.store
        _write(store, frame, CONSTANTS)
        assert _read(store) == _expected(frame, CONSTANTS)
        # and with a codebook id and a chunked payload (more rows than one encoded chunk)
        more = _frame(bulk.VERSION_CHUNK_ROWS + 7).with_columns(pl.col("version_id") + 1000)
        constants = {**CONSTANTS, "fields_id": 2**31 - 1, "backfill": False, "txn_seq": 8}
        _write(store, more, constants)
        assert _read(store)[1000:] == _expected(more, constants)


def _index_oids(store: Store) -> dict[str, tuple[int, str]]:
    with store.engine.connect() as conn:
        rows = conn.exec_driver_sql(
            "SELECT c.relname, c.oid, pg_get_indexdef(c.oid) FROM pg_index i"
            " JOIN pg_class c ON c.oid = i.indexrelid"
            " WHERE i.indrelid = 'versions'::regclass"
        ).fetchall()
    return {name: (int(oid), definition) for name, oid, definition in rows}


def _count(store: Store, source: str) -> int:
    with store.engine.connect() as conn:
        found = conn.exec_driver_sql(
            "SELECT count(*) FROM versions WHERE source = %(s)s", {"s": source}
        ).scalar_one()
    return int(found)


def _day(n: int, day: int) -> bytes:
    return ("id,v\n" + "".join(f"{i},v{day}\n" for i in range(n))).encode()


def test_a_first_load_into_an_empty_table_builds_the_indexes_after_the_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pg_copy, "DEFER_INDEX_MIN_ROWS", 100)
    with pg_ledger(tmp_path) as (ledger, _):
        store = ledger.context.store
        before = _index_oids(store)
        assert "ix_versions_source_key" in before
        a = ledger.add_source("a", key=["id"], timezone="UTC")
        a.ingest(_day(500, 1), published_at="2026-08-01", name="a1.csv")
        rebuilt = _index_oids(store)
        # the same indexes, each built anew, the primary key too (the same constraint)
        assert {k: d for k, (_, d) in rebuilt.items()} == {k: d for k, (_, d) in before.items()}
        assert rebuilt["ix_versions_source_key"][0] != before["ix_versions_source_key"][0]
        assert rebuilt["versions_pkey"][0] != before["versions_pkey"][0]
        assert _primary_key(store) == ("versions_pkey", "PRIMARY KEY (version_id)")
        # a table with rows: another source's first load keeps the indexes as they are
        b = ledger.add_source("b", key=["id"], timezone="UTC")
        b.ingest(_day(500, 1), published_at="2026-08-01", name="b1.csv")
        assert _index_oids(store) == rebuilt
        assert _count(store, "a") == _count(store, "b") == 500


def _primary_key(store: Store) -> tuple[str, str]:
    with store.engine.connect() as conn:
        row = conn.exec_driver_sql(
            "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint"
            " WHERE conrelid = 'versions'::regclass AND contype = 'p'"
        ).one()
    return str(row[0]), str(row[1])


def test_a_first_load_with_a_duplicate_version_id_is_refused_and_leaves_the_table_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pg_copy, "DEFER_INDEX_MIN_ROWS", 100)
    with pg_ledger(tmp_path) as (ledger, _):
        store = ledger.context.store
        before = _index_oids(store)
        frame = _frame(500).with_columns(
            pl.when(pl.col("version_id") == 500)
            .then(1)
            .otherwise(pl.col("version_id"))
            .alias("version_id")
        )
        with pytest.raises(StoreUnavailableError, match="versions_pkey"):
            _write(store, frame, CONSTANTS)
        # rolled back: the empty table, its indexes and its primary key as they were
        assert _index_oids(store) == before
        assert _primary_key(store) == ("versions_pkey", "PRIMARY KEY (version_id)")
        assert _read(store) == []
        # and the primary key still refuses a duplicate afterwards
        _write(store, _frame(500), CONSTANTS)
        with pytest.raises(StoreUnavailableError, match="versions_pkey"):
            _write(store, _frame(1), CONSTANTS)
        assert len(_read(store)) == 500


def test_a_crash_during_the_copy_leaves_the_empty_table_and_its_indexes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pg_copy, "DEFER_INDEX_MIN_ROWS", 100)
    with pg_ledger(tmp_path) as (ledger, _):
        store = ledger.context.store
        before = _index_oids(store)
        src = ledger.add_source("s", key=["id"], timezone="UTC")
        monkeypatch.setenv(faults.ENV, "mid_copy")
        with pytest.raises(faults.InjectedFailure):
            src.ingest(_day(500, 1), published_at="2026-08-01", name="d1.csv")
        monkeypatch.delenv(faults.ENV)
        assert _index_oids(store) == before
        assert _read(store) == []
        src.ingest(_day(500, 1), published_at="2026-08-01", name="d1.csv")
        assert _count(store, "s") == 500


def test_a_process_killed_during_the_copy_leaves_the_empty_table_and_its_indexes(
    tmp_path: Path,
) -> None:
    # a real process and a real first load (DEFER_INDEX_MIN_ROWS rows: the keys dropped)
    n = pg_copy.DEFER_INDEX_MIN_ROWS
    with pg_ledger(tmp_path) as (ledger, _):
        store = ledger.context.store
        before = _index_oids(store)
        ledger.add_source("s", key=["id"], timezone="UTC")
        payload = tmp_path / "s1.csv"
        payload.write_bytes(_day(n, 1))
        cli = Cli(ledger.context.workspace)
        args = ("ingest", "s", str(payload), "--published-at", "2026-08-01")
        killed = cli.proc(*args, env={faults.ENV: "mid_copy:kill"})
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        # the server rolled the transaction back: the keys and indexes as they were
        assert _index_oids(store) == before
        assert _primary_key(store) == ("versions_pkey", "PRIMARY KEY (version_id)")
        assert _count(store, "s") == 0
        # the next run takes the dead one's lease over and loads it all
        assert cli.proc(*args, timeout=120).returncode == 0
        assert _count(store, "s") == n
        rebuilt = _index_oids(store)
        assert {k: d for k, (_, d) in rebuilt.items()} == {k: d for k, (_, d) in before.items()}


def test_a_table_in_use_is_written_with_its_indexes_without_waiting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pg_copy, "DEFER_INDEX_MIN_ROWS", 100)
    with pg_ledger(tmp_path) as (ledger, url):
        store = ledger.context.store
        before = _index_oids(store)
        src = ledger.add_source("s", key=["id"], timezone="UTC")
        with psycopg.connect(url) as reader:  # a reader's open transaction: a shared lock
            assert reader.execute("SELECT count(*) FROM versions").fetchone() == (0,)
            src.ingest(_day(500, 1), published_at="2026-08-01", name="d1.csv")
        assert _index_oids(store) == before
        assert _count(store, "s") == 500
