"""A backfill's or replay's last transaction: gap records for the days the archive
lacks and ONE summary notification, idempotent per run (a resumed run that queued its
summary before it stopped does not queue it again)."""

from __future__ import annotations

from typing import Any

from feedledger.ledger import gaps, notices
from feedledger.ledger.leases import check_held
from feedledger.ledger.resumes import notice_queued
from feedledger.ledger.retraction import commit_time
from feedledger.ledger.store import Store


def close_run(
    store: Store,
    source: str,
    *,
    holder: str,
    leased_run_id: str,
    run_id: str,
    spans: list[tuple[int, int]],
    reason: str,
    summary: dict[str, Any],
    payload_id: str,
    changes: int,
) -> int:
    """In one transaction (the lease of `holder`/`leased_run_id` checked): record the
    gap `spans` of run `run_id` and queue its `summary` notice unless it is queued
    already. Returns the number of gap records written."""
    with store.begin() as conn:
        check_held(conn, source, holder, leased_run_id)
        _wm, at = commit_time(store, conn, source)
        recorded = gaps.record(conn, source, spans, reason=reason, run_id=run_id, recorded_at=at)
        if not notice_queued(conn, source, run_id, "summary"):
            notices.queue(
                conn,
                source=source,
                run_id=run_id,
                topic="summary",
                payload_id=payload_id,
                changes=changes,
                body=summary,
                at_us=at,
            )
    return recorded
