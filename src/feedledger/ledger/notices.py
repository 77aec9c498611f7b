"""Outbox rows -- a payload's change set, a backfill's summary, a retraction's notice --
written in the transaction of the work they announce; fanned out and delivered later by
the notification layer (notify/).

A live run held for review (an unusual burst of changes): its notifications wait in
the outbox as `held` until the run is released or retracted. Settling the hold
(`settle`) moves them and sets the run's status in one transaction."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import ColumnElement, Connection, and_, false, insert, or_, select, update

from feedledger.ledger import runs
from feedledger.ledger.schema import outbox
from feedledger.ledger.store import Store


def queue(
    conn: Connection,
    *,
    source: str,
    run_id: str,
    topic: str,
    payload_id: str,
    changes: int,
    body: dict[str, Any],
    at_us: int,
    key: str | None = None,
    status: str = "pending",
) -> None:
    """One pending notice per (source, run, topic) -- or per `key` -- as the outbox's
    unique idempotency key enforces."""
    conn.execute(
        insert(outbox).values(
            source=source,
            run_id=run_id,
            payload_id=payload_id,
            topic=topic,
            status=status,
            idempotency_key=key or f"{source}:{run_id}:{topic}",
            changes=changes,
            body=json.dumps(body, sort_keys=True),
            created_at=at_us,
        )
    )


def move(conn: Connection, run_id: str, *, from_status: str, to_status: str) -> int:
    """Move a run's outbox rows from one status to another (e.g. held -> pending)."""
    result = conn.execute(
        update(outbox)
        .where(outbox.c.run_id == run_id, outbox.c.status == from_status)
        .values(status=to_status)
    )
    return int(result.rowcount or 0)


CANCELLABLE = ("pending", "held")  # not fanned out yet


def cancel_runs(conn: Connection, run_ids: list[str]) -> int:
    """Cancel the runs' outbox rows not fanned out yet (Invariant 11), in the caller's
    (the retraction's) transaction; returns how many. Run first, before the runs'
    deliveries are cancelled: on PostgreSQL it waits for a fan-out holding these rows,
    whose messages the next statement then sees."""
    if not run_ids:
        return 0
    result = conn.execute(
        update(outbox)
        .where(outbox.c.run_id.in_(run_ids), outbox.c.status.in_(CANCELLABLE))
        .values(status="cancelled")
    )
    return int(result.rowcount or 0)


def of_applications(
    applied: Sequence[tuple[str, str]], run_ids: Sequence[str]
) -> ColumnElement[bool]:
    """The outbox rows announcing these applications ((run, payload): their change
    sets) and the run-level notices (summary, correction) of the runs `run_ids`: what a
    replay's retraction takes back from subscribers, when it retracts only part of a run
    (its payloads published from a day on) -- a change set of the run's earlier payloads
    still stands and is still announced."""
    by_run: dict[str, list[str]] = {}
    for run_id, payload_id in applied:
        by_run.setdefault(run_id, []).append(payload_id)
    changes = [
        and_(outbox.c.run_id == run_id, outbox.c.payload_id.in_(payload_ids))
        for run_id, payload_ids in by_run.items()
    ]
    clauses: list[ColumnElement[bool]] = []
    if changes:
        clauses.append(and_(outbox.c.topic == "changes", or_(*changes)))
    if run_ids:
        clauses.append(and_(outbox.c.topic != "changes", outbox.c.run_id.in_(list(run_ids))))
    return or_(*clauses) if clauses else false()


def cancel_applications(
    conn: Connection, applied: Sequence[tuple[str, str]], run_ids: Sequence[str]
) -> int:
    """`cancel_runs` for a replay's retraction: the outbox rows `of_applications` not
    fanned out yet are cancelled (Invariant 11); returns how many. Run it first, as
    `cancel_runs`."""
    if not applied and not run_ids:
        return 0
    result = conn.execute(
        update(outbox)
        .where(of_applications(applied, run_ids), outbox.c.status.in_(CANCELLABLE))
        .values(status="cancelled")
    )
    return int(result.rowcount or 0)


def exists(conn: Connection, key: str) -> bool:
    row = conn.execute(select(outbox.c.outbox_id).where(outbox.c.idempotency_key == key))
    return row.first() is not None


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
        return move(conn, run_id, from_status="held", to_status=notifications_to)
