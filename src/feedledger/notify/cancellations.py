"""Cancelling a retracted run's notifications (Invariant 11), in the retraction's
transaction, and what the retraction notice needs to know afterwards.

Claims on cancelled messages are left in place: a dispatcher that had one on the wire
records it `delivered` (deliveries.record), and the notice waits until no such claim is
live (`unsettled`) before learning who heard of the runs (`heard_of`). Every
cancellation moves the store's cancel epoch on (a `counters` row), which a dispatcher
reads before sending to know, with one indexed read, whether to look its claims up.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import Connection, exists, func, or_, select, update

from feedledger.ledger.notices import of_applications
from feedledger.ledger.runs.holders import holder_dead
from feedledger.ledger.schema import applications, counters, outbox
from feedledger.ledger.store import Store
from feedledger.notify.deliveries import UNDELIVERED
from feedledger.notify.tables import deliveries

DIGEST_SPAN_US = 86_400 * 1_000_000  # the longest digest window (daily)
EPOCH = "cancel_epoch"  # counters row: one more for every retraction that cancels


def cancel_epoch(store: Store) -> int:
    """How many times a retraction has cancelled messages (one indexed read): while it
    stays the same, nothing a dispatcher holds has been cancelled."""
    with store.engine.connect() as conn:
        value = conn.execute(select(counters.c.value).where(counters.c.name == EPOCH)).scalar()
    return int(value or 0)


def _bump_epoch(conn: Connection) -> None:
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as upsert  # lazy: the store's dialect
    else:
        from sqlalchemy.dialects.sqlite import insert as upsert  # type: ignore[assignment]
    stmt = upsert(counters).values(name=EPOCH, value=1)
    conn.execute(
        stmt.on_conflict_do_update(
            index_elements=[counters.c.name], set_={"value": counters.c.value + 1}
        )
    )


def _runs_rows(run_ids: Sequence[str]) -> Any:
    return select(outbox.c.outbox_id).where(outbox.c.run_id.in_(list(run_ids)))


def cancel_runs(conn: Connection, run_ids: Sequence[str], reason: str) -> int:
    """Cancel the runs' undelivered messages (pending, failed or dead; Invariant 11) in
    the caller's (the retraction's) transaction, and take their changes out of digests
    not sent yet; returns the messages cancelled. Claims are left: see `record`."""
    if not run_ids:
        return 0
    wanted = set(run_ids)
    return _cancel(conn, _runs_rows(run_ids), lambda c: c.get("run_id") in wanted, reason)


def cancel_applications(
    conn: Connection, applied: Sequence[tuple[str, str]], run_ids: Sequence[str], reason: str
) -> int:
    """`cancel_runs` for a replay's retraction, which may take back only part of a run:
    the undelivered messages of these applications ((run, payload): their changes, in
    digests too) and of the run-level notices of `run_ids` (notices.of_applications)."""
    if not applied and not run_ids:
        return 0
    wanted = set(applied)
    rows = select(outbox.c.outbox_id).where(of_applications(applied, run_ids))
    return _cancel(conn, rows, lambda c: (c.get("run_id"), c.get("payload_id")) in wanted, reason)


def _cancel(
    conn: Connection, rows: Any, in_digest: Callable[[dict[str, Any]], bool], reason: str
) -> int:
    """Cancel the undelivered messages of the outbox rows `rows` (a select of ids) and
    the digest items `in_digest` says are theirs; bump the cancel epoch if any."""
    d = deliveries
    result = conn.execute(
        update(d)
        .where(d.c.status.in_(UNDELIVERED), d.c.topic != "digest", d.c.outbox_id.in_(rows))
        .values(status="cancelled", last_error=reason)
    )
    count = int(result.rowcount or 0)
    digests = conn.execute(
        select(d.c.delivery_id, d.c.body).where(d.c.status.in_(UNDELIVERED), d.c.topic == "digest")
    ).all()
    for delivery_id, text in digests:
        body = json.loads(text)
        kept = [c for c in body["changes"] if not in_digest(c)]
        if len(kept) == len(body["changes"]):
            continue
        if kept:
            body.update(changes=kept, count=len(kept))
            values: dict[str, Any] = {"body": json.dumps(body, ensure_ascii=False)}
        else:
            values = {"status": "cancelled", "last_error": reason}
            count += 1
        conn.execute(update(d).where(d.c.delivery_id == delivery_id).values(**values))
    if count:
        _bump_epoch(conn)
    return count


def unsettled(conn: Connection, run_ids: Sequence[str], now_us: int) -> bool:
    """True while a live dispatcher still holds a claim on a message of these runs that
    a retraction cancelled: it may be on the wire (see `record`)."""
    d = deliveries
    holders = conn.execute(
        select(d.c.claimed_by)
        .distinct()
        .where(
            d.c.status == "cancelled",
            d.c.claimed_by.is_not(None),
            d.c.claimed_until > now_us,
            d.c.outbox_id.in_(_runs_rows(run_ids)),
        )
    ).scalars()
    return any(not holder_dead(h) for h in holders)


def heard_of(
    conn: Connection,
    run_ids: Sequence[str],
    names: Sequence[str],
    retracted_by: str | None = None,
) -> set[str]:
    """Which of these subscribers were delivered any message of these runs (one of
    their own, or a digest holding one of their changes). With `retracted_by` (the run
    whose retraction notice is being sent), only what that run took back counts: the
    change sets of the applications it retracted and the runs' own notices (summary,
    correction) -- a replay may take back only a run's later payloads, and who heard
    only of its earlier ones, still standing, has nothing to be told."""
    if not run_ids or not names:
        return set()
    d = deliveries
    rows = _runs_rows(run_ids)
    taken: set[tuple[str, str]] = set()
    if retracted_by is not None:
        a = applications
        retracted = (
            exists()
            .where(
                a.c.run_id == outbox.c.run_id,
                a.c.payload_id == outbox.c.payload_id,
                a.c.retracted_by == retracted_by,
            )
            .correlate(outbox)
        )
        rows = rows.where(or_(outbox.c.topic != "changes", retracted))
        taken = {
            (r, p)
            for r, p in conn.execute(
                select(a.c.run_id, a.c.payload_id).where(a.c.retracted_by == retracted_by)
            )
        }
    heard = set(
        conn.execute(
            select(d.c.subscriber)
            .distinct()
            .where(
                d.c.status == "delivered",
                d.c.subscriber.in_(list(names)),
                d.c.outbox_id.in_(rows),
            )
        ).scalars()
    )
    first = conn.execute(
        select(func.min(outbox.c.created_at)).where(outbox.c.run_id.in_(list(run_ids)))
    ).scalar()
    rest = [n for n in names if n not in heard]
    if first is None or not rest:
        return heard
    wanted = set(run_ids)

    def told(c: dict[str, Any]) -> bool:
        if retracted_by is not None:
            return (c.get("run_id"), c.get("payload_id")) in taken
        return c.get("run_id") in wanted

    digests = conn.execute(
        select(d.c.subscriber, d.c.body).where(
            d.c.status == "delivered",
            d.c.topic == "digest",
            d.c.subscriber.in_(rest),
            d.c.created_at >= int(first) - DIGEST_SPAN_US,
        )
    )
    for name, text in digests:
        if name not in heard and any(told(c) for c in json.loads(text)["changes"]):
            heard.add(name)
    return heard
