"""A source's first large payload on SQLite is written once, with a rollback journal
instead of the write-ahead log, when its transaction's connection is alone on the store
(ledger/staging.py `rollback_journal`): all or nothing still, a crash rolled back by
the next connection, the store back in WAL mode afterwards, and the log kept whenever
another connection has the file open or the source already has versions."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from feedledger import faults
from feedledger.config import Workspace, make_source
from feedledger.context import Context
from feedledger.ledger import bulk, staging
from feedledger.pipeline.intake.ingest import ingest
from helpers import migrate, write_csv

DAY1 = b"id,v\n" + b"".join(b"%d,a%d\n" % (i, i) for i in range(40))
DAY2 = b"id,v\n" + b"".join(b"%d,b%d\n" % (i, i) for i in range(20, 60))


def _workspace(tmp: Path) -> tuple[Workspace, Path]:
    db = tmp / "ledger.db"
    ws = Workspace.create(tmp / "ws", store_url=f"sqlite:///{db}", archive=None)
    migrate(ws.store_url)
    ws.add_source(make_source("s", key=("id",)))
    return ws, db


def _spy(monkeypatch: pytest.MonkeyPatch, db: Path) -> tuple[list[bool], list[tuple[bool, bool]]]:
    """What `rollback_journal` answered, and, at each payload's `mid_transaction`,
    whether the store had a rollback journal and a write-ahead log on disk."""
    taken: list[bool] = []
    files: list[tuple[bool, bool]] = []
    real_switch, real_point = staging.rollback_journal, faults.point

    def switch(raw: Any) -> bool:
        taken.append(real_switch(raw))
        return taken[-1]

    def point(name: str, count: int | None = None) -> None:
        if name == "mid_transaction":
            journal, wal = (Path(f"{db}-journal"), Path(f"{db}-wal"))
            files.append((journal.exists(), wal.exists() and wal.stat().st_size > 0))
        real_point(name, count)

    monkeypatch.setattr(staging, "rollback_journal", switch)
    monkeypatch.setattr(faults, "point", point)
    return taken, files


def _read(db: Path, sql: str) -> Any:
    conn = sqlite3.connect(db, timeout=60)
    try:
        return conn.execute(sql).fetchone()[0]
    finally:
        conn.close()


def test_a_first_staged_payload_is_written_without_the_log_and_the_store_stays_in_wal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bulk, "STAGE_MIN_ROWS", 1)
    monkeypatch.setattr(bulk, "VERSION_CHUNK_ROWS", 7)
    monkeypatch.setattr(staging, "FILE_ROWS", 9)  # several scratch files
    ws, db = _workspace(tmp_path)
    taken, files = _spy(monkeypatch, db)
    with Context(ws) as ctx:
        first = ingest(ctx, "s", DAY1, published_at="2026-08-01")
        second = ingest(ctx, "s", DAY2, published_at="2026-08-02")
    assert first.counts["added"] == 40 and second.counts["changed"] == 20
    # the first load: journaled, no log written; the next day (the source has versions
    # a reader may be reading): the log, as ever
    assert taken == [True]
    assert files == [(True, False), (False, True)]
    assert _read(db, "PRAGMA journal_mode") == "wal"
    assert _read(db, "PRAGMA integrity_check") == "ok"
    assert _read(db, "SELECT count(*) FROM versions") == 40 + 20 + 20 + 20
    assert not Path(f"{db}-journal").exists()
    assert list(tmp_path.rglob("*stage-*")) == []


def test_another_connection_on_the_store_keeps_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader with the store open (another process's, here a plain connection): the
    switch is refused at once, never waited for, and the payload goes through the log."""
    monkeypatch.setattr(bulk, "STAGE_MIN_ROWS", 1)
    ws, db = _workspace(tmp_path)
    taken, files = _spy(monkeypatch, db)
    reader = sqlite3.connect(db, timeout=60)
    try:
        assert reader.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        with Context(ws) as ctx:
            ingest(ctx, "s", DAY1, published_at="2026-08-01")
        assert reader.execute("SELECT count(*) FROM versions").fetchone()[0] == 40
    finally:
        reader.close()
    assert taken == [False]
    assert files == [(False, True)]
    assert _read(db, "PRAGMA journal_mode") == "wal"


def _cli(ws: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("FEEDLEDGER_FAULT")}
    return subprocess.run(
        [sys.executable, "-m", "feedledger", *args],
        cwd=ws,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=600,
    )


def _cli_workspace(tmp_path: Path) -> tuple[Path, Path, tuple[str, ...], int]:
    rows = bulk.STAGE_MIN_ROWS + 10
    payload = write_csv(tmp_path / "big.csv", ["id", "v"], [[str(i), "x"] for i in range(rows)])
    ws = tmp_path / "ws"
    ws.mkdir()
    assert _cli(ws, "init").returncode == 0
    assert _cli(ws, "source", "add", "big", "--key", "id").returncode == 0
    args = ("ingest", "big", str(payload), "--published-at", "2026-08-01", "--json")
    return ws, ws / ".feedledger" / "ledger.db", args, rows


def test_a_first_load_killed_mid_transaction_is_rolled_back_by_the_next_connection(
    tmp_path: Path,
) -> None:
    """kill -9 inside the journaled transaction: the hot journal it leaves is rolled
    back by whoever opens the store next (nothing of the payload, an intact file); the
    rerun applies the payload whole and leaves the store in WAL mode."""
    ws, db, args, rows = _cli_workspace(tmp_path)
    killed = _cli(ws, *args, FEEDLEDGER_FAULT="mid_transaction:kill")
    assert killed.returncode == -9, killed.stderr
    assert Path(f"{db}-journal").exists(), "the transaction should have had a rollback journal"
    assert _read(db, "SELECT count(*) FROM versions") == 0
    assert _read(db, "PRAGMA integrity_check") == "ok"
    done = _cli(ws, *args)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["added"] == rows
    assert _read(db, "SELECT count(*) FROM versions") == rows
    assert _read(db, "PRAGMA journal_mode") == "wal"
    assert not Path(f"{db}-journal").exists()


def test_a_store_connection_opened_during_the_first_load_waits_for_all_of_it(
    tmp_path: Path,
) -> None:
    """A connection of the store opened while the journaled first load is under way
    opens (its set-up cannot take WAL mode from under the transaction, and does not
    fail for it), its transaction waits for the load's commit and sees all of it, never
    part; afterwards the store is in WAL mode and that connection reads it there."""
    from feedledger.ledger.store import Store

    ws, db, args, rows = _cli_workspace(tmp_path)
    env = {"FEEDLEDGER_FAULT": "mid_transaction:pause", "FEEDLEDGER_FAULT_PAUSE_S": "2"}
    seen: list[int] = []
    with subprocess.Popen(
        [sys.executable, "-m", "feedledger", *args],
        cwd=ws,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as loading:
        deadline = time.monotonic() + 300
        while not Path(f"{db}-journal").exists():
            assert loading.poll() is None, loading.communicate()
            assert time.monotonic() < deadline, "the first load never opened its journal"
            time.sleep(0.01)

        store = Store(f"sqlite:///{db}")

        def count() -> None:
            with store.begin() as conn:
                seen.append(conn.exec_driver_sql("SELECT count(*) FROM versions").scalar())

        try:
            reader = threading.Thread(target=count)
            reader.start()
            out, err = loading.communicate(timeout=600)
            reader.join(timeout=600)
            assert loading.returncode == 0, err
            assert json.loads(out)["added"] == rows
            count()
            with store.begin() as conn:
                assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        finally:
            store.close()
    assert seen == [rows, rows]
    assert _read(db, "PRAGMA journal_mode") == "wal"
