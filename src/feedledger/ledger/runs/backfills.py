"""Resuming an unfinished backfill under the run id it started with (issue 13, item 3).

A backfill run records the window it was asked for (`window_start`, `window_end`, the
first instant of its first day and the last instant of its last day). A later backfill
request of the same source RESUMES it -- continues under its run id instead of starting
a new run -- when that run is:

* the source's latest run of the same kind,
* unfinished: `failed` (an error), `interrupted` (stopped between two payloads),
  `abandoned` (its process died), or `running` with a dead holder (taking the lease
  marks it `abandoned` first; a live holder keeps the lease and refuses us),
* with no retracted application (a retracted run is never continued), and
* its window covers the new request's window.

Each resumption appends `{"status", "error", "interrupted_at", "resumed_at"}` (what the
run was when it stopped, and when it went on) to the run's `resumptions`.

A backfill's or replay's last transaction (`close_run`): gap records for the days the
archive lacks and ONE summary notification, idempotent per run (a resumed run that
queued its summary before it stopped does not queue it again).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, and_, select

from feedledger.ledger import gaps, notices
from feedledger.ledger.records import Run
from feedledger.ledger.runs import UNFINISHED
from feedledger.ledger.runs.leases import check_held
from feedledger.ledger.runs.lookup import list_runs
from feedledger.ledger.runs.retraction import commit_time
from feedledger.ledger.schema import applications, outbox

if TYPE_CHECKING:
    from feedledger.ledger.store import Store


def resumable(
    store: Store, source: str, kind: str, start: int, end: int, *, besides: str | None = None
) -> Run | None:
    """The unfinished run of `kind` that a request for [start, end] continues, if any.
    `besides`: the run the caller has just started under the lease (not a candidate)."""
    earlier = [r for r in list_runs(store, source) if r.kind == kind and r.run_id != besides]
    if not earlier:
        return None
    last = earlier[-1]
    if last.status not in UNFINISHED or last.window_start is None or last.window_end is None:
        return None
    if not (last.window_start <= start and end <= last.window_end):
        return None
    with store.engine.connect() as conn:
        retracted = conn.execute(
            select(applications.c.payload_id)
            .where(applications.c.run_id == last.run_id, applications.c.retracted_at.is_not(None))
            .limit(1)
        ).first()
    return None if retracted is not None else last


def notice_queued(conn: Connection, source: str, run_id: str, topic: str) -> bool:
    """Whether the run's one notice of `topic` is already in the outbox (a resumed run
    that had queued its summary before it stopped does not queue it twice)."""
    row = conn.execute(
        select(outbox.c.outbox_id)
        .where(and_(outbox.c.source == source, outbox.c.run_id == run_id, outbox.c.topic == topic))
        .limit(1)
    ).first()
    return row is not None


def summarised(store: Store, source: str, run_id: str) -> bool:
    """Whether the run's summary is queued: its last transaction committed."""
    with store.engine.connect() as conn:
        return notice_queued(conn, source, run_id, "summary")


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
