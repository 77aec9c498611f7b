"""Schedulers race to create a new source's schedule row: the one that finds no row and
then meets another process's row at INSERT records its attempt all the same.

PostgreSQL only: SQLite serialises writers (BEGIN IMMEDIATE), so the second writer starts
only after the first committed and sees its row."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from sqlalchemy import insert, text

from feedledger.config import Workspace
from feedledger.ledger import schedule_state
from feedledger.ledger.schema import schedule_state as schedule_table
from feedledger.ledger.store import Store
from feedledger.model.timeutil import now_us

HANG_S = 60.0  # a generous deadline that only detects a hang


@pytest.fixture
def store(workspace: Workspace) -> Iterator[Store]:
    opened = Store(workspace.store_url)
    try:
        yield opened
    finally:
        opened.close()


def _waiting_on_a_lock(store: Store) -> bool:
    with store.engine.connect() as conn:
        return bool(
            conn.execute(
                text(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                    " AND query ILIKE '%schedule_state%' AND pid <> pg_backend_pid()"
                )
            ).scalar_one()
        )


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
def test_an_attempt_recorded_while_another_process_creates_the_row(store: Store) -> None:
    recorded: list[schedule_state.State] = []
    failed: list[BaseException] = []

    def record() -> None:
        try:
            recorded.append(
                schedule_state.attempted(
                    store, "alpha", at=now_us(), outcome="applied", success=True
                )
            )
        except BaseException as exc:
            failed.append(exc)

    with store.engine.connect() as other:
        other.begin()
        other.execute(insert(schedule_table).values(source="alpha", failures=0))
        # the other process's row is inserted, not yet committed: this attempt finds no
        # row, and its INSERT waits on the other's
        worker = threading.Thread(target=record, daemon=True)
        worker.start()
        deadline = time.monotonic() + HANG_S
        while not _waiting_on_a_lock(store):
            assert worker.is_alive() and time.monotonic() < deadline, failed
            time.sleep(0.01)
        other.commit()
    worker.join(HANG_S)
    assert not worker.is_alive() and not failed, failed
    assert recorded[0].last_outcome == "applied"
    assert schedule_state.get(store, "alpha").last_outcome == "applied"
