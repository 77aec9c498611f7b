"""A lease taken over from a holder that stalled past its expiry (alive, its heartbeats
missed): the successor goes on with the stalled holder's run under its own holder
(`leases.continue_run`, decided under the lease), and the stalled holder, when it
wakes, finishes nothing -- neither the run its successor holds now nor the one it
finished. SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import update

from feedledger.ledger.runs import leases, lookup
from feedledger.ledger.schema import leases as lease_table
from feedledger.ledger.store import Store
from feedledger.model.errors import LeaseHeldError
from feedledger.model.timeutil import now_us
from helpers import Cli

SRC = "alpha"


@pytest.fixture
def store(cli: Cli) -> Iterator[Store]:
    cli("source", "add", SRC, "--key", "id")
    opened = Store(cli.ws.store_url)
    try:
        yield opened
    finally:
        opened.close()


def expire(store: Store) -> None:
    """The holder's heartbeats missed: its lease is past its expiry."""
    with store.begin() as conn:
        conn.execute(
            update(lease_table).where(lease_table.c.source == SRC).values(expires_at=now_us() - 1)
        )


def status(store: Store, run_id: str) -> str | None:
    run = lookup.get_run(store, run_id)
    return run.status if run is not None else None


@pytest.mark.parametrize("wakes", ["while_the_successor_holds_it", "after_the_successor"])
def test_a_stalled_holder_finishes_nothing_its_successor_went_on_with(
    store: Store, wakes: str
) -> None:
    stalled = leases.leased_run(store, SRC, "backfill")
    first = stalled.__enter__()
    expire(store)
    with leases.leased_run(store, SRC, "backfill") as successor:
        fresh = successor.run_id
        assert status(store, first.run_id) == "abandoned"  # taken over
        leases.continue_run(store, successor, first.run_id)
        assert successor.run_id == first.run_id and status(store, fresh) is None
        assert status(store, first.run_id) == "running"
        if wakes == "while_the_successor_holds_it":  # its block ends in its fencing error
            refused = LeaseHeldError("this run no longer holds the source's lease")
            assert stalled.__exit__(LeaseHeldError, refused, None) is False  # re-raised
            assert status(store, first.run_id) == "running"
    if wakes == "after_the_successor":
        assert stalled.__exit__(None, None, None) is False  # its block ends as if it succeeded
    run = lookup.get_run(store, first.run_id)
    assert run is not None and (run.status, run.holder) == ("succeeded", successor.holder)
    assert [r["status"] for r in run.resumed] == ["abandoned"]


def test_going_on_with_a_run_needs_the_lease(store: Store) -> None:
    with leases.leased_run(store, SRC, "backfill") as earlier:
        earlier.outcome = "failed"
    taken = leases.leased_run(store, SRC, "backfill")
    late = taken.__enter__()
    expire(store)
    with leases.leased_run(store, SRC, "backfill"), pytest.raises(LeaseHeldError):
        leases.continue_run(store, late, earlier.run_id)
    assert taken.__exit__(None, None, None) is False
    assert status(store, earlier.run_id) == "failed"  # as it was
    assert status(store, late.run_id) == "abandoned"


def test_a_run_taken_over_from_a_live_holder_says_its_lease_expired(store: Store) -> None:
    """The holder (this very process) is alive: its run is abandoned because its lease
    went unrenewed, and says so -- not that its process died."""
    stalled = leases.leased_run(store, SRC, "backfill")
    first = stalled.__enter__()
    expire(store)
    with leases.leased_run(store, SRC, "backfill"):
        run = lookup.get_run(store, first.run_id)
        assert run is not None and run.status == "abandoned"
        assert run.error is not None and "expired" in run.error and "died" not in run.error
        assert first.holder in run.error
    assert stalled.__exit__(LeaseHeldError, LeaseHeldError("fenced"), None) is False
