"""A source's applications over a window of publisher time, retracted ones included,
each with its run's kind and status: what the dashboard's publication calendar draws
(api/calendar.py)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select

from feedledger.ledger.runs.lookup import kinds_and_statuses
from feedledger.ledger.schema import applications
from feedledger.ledger.store import Store


@dataclass(frozen=True, slots=True)
class AppliedPayload:
    payload_id: str
    run_id: str
    kind: str  # the run's kind (live, backfill, replay, ...)
    status: str  # the run's status (succeeded, held, retracted, ...)
    published_at: int
    recorded_at: int
    retracted_at: int | None


def applied_payloads(store: Store, source: str, start: int, end: int) -> list[AppliedPayload]:
    """Every application of `source` whose publisher instant is in [start, end], in
    commit order (a payload applied, retracted and applied again appears twice)."""
    stmt = (
        select(
            applications.c.payload_id,
            applications.c.run_id,
            applications.c.published_at,
            applications.c.recorded_at,
            applications.c.retracted_at,
        )
        .where(
            applications.c.source == source,
            applications.c.published_at >= start,
            applications.c.published_at <= end,
        )
        .order_by(applications.c.txn_seq)
    )
    with store.engine.connect() as conn:
        rows = list(conn.execute(stmt))
        # the runs' kind and status from ledger/runs/ (the one package on that table)
        kinds = kinds_and_statuses(conn, sorted({r.run_id for r in rows}))
    return [
        AppliedPayload(
            r.payload_id, r.run_id, *kinds[r.run_id], r.published_at, r.recorded_at,
            r.retracted_at,
        )
        for r in rows
    ]  # fmt: skip
