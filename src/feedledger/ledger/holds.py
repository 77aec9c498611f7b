"""A live run held for review (an unusual burst of changes): its notifications wait in
the outbox as `held` until the run is released or retracted. Settling the hold moves
them and sets the run's status in one transaction."""

from __future__ import annotations

from feedledger.ledger import notices, runs
from feedledger.ledger.store import Store


def settle(
    store: Store, run_id: str, *, notifications_to: str, run_status: str, still_held: bool = False
) -> int | None:
    """Move the run's held notifications to `notifications_to` and set its status to
    `run_status`; returns how many notifications moved. With `still_held`, only if the
    run is still held in this transaction (None, nothing changed, if it is not: another
    reviewer settled it since the caller looked)."""
    with store.begin() as conn:
        only_from = "held" if still_held else None
        if not runs.set_status(conn, run_id, run_status, only_from=only_from):
            return None
        return notices.move(conn, run_id, from_status="held", to_status=notifications_to)
