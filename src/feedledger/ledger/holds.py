"""A live run held for review (an unusual burst of changes): its notifications wait in
the outbox as `held` until the run is released or retracted. Settling the hold moves
them and sets the run's status in one transaction."""

from __future__ import annotations

from feedledger.ledger import notices, runs
from feedledger.ledger.store import Store


def settle(store: Store, run_id: str, *, notifications_to: str, run_status: str) -> int:
    """Move the run's held notifications to `notifications_to` and set its status to
    `run_status`; returns how many notifications moved."""
    with store.begin() as conn:
        n = notices.move(conn, run_id, from_status="held", to_status=notifications_to)
        runs.set_status(conn, run_id, run_status)
    return n
