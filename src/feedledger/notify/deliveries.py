"""Deliveries: one row per (subscriber, message), written by the fan-out (fanout.py).

Statuses: pending -> delivered | failed (retried at `next_attempt_at`) -> dead (after
the last attempt; `retry` makes it pending again) | cancelled (subscriber removed, or
its run retracted before it was sent: `cancel_runs`, Invariant 11).

A dispatcher claims the due rows it is about to send (`claimed_by`, `claimed_until`),
in a write transaction (PostgreSQL: `FOR UPDATE SKIP LOCKED`, so claimers never wait
on each other; SQLite: BEGIN IMMEDIATE), so two dispatchers never send one message at
the same time. Recording an attempt clears the claim. A claim whose holder died (a
process gone from this host) is void at once; any other lapses at `claimed_until`, and
its messages are sent again with the same id -- at least once, never lost.

A retraction cancels its runs' undelivered messages in its own transaction but leaves
their claims (notify/cancellations.py): a dispatcher looks again just before sending
(`not_waiting`), so a claimed message not yet sent is never sent; one already on the
wire when the retraction committed is recorded `delivered` (it was).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, and_, bindparam, func, or_, select, update

from feedledger.ledger.runs.holders import holder_dead
from feedledger.ledger.schema import outbox
from feedledger.ledger.store import Store
from feedledger.notify.tables import deliveries, subscribers

WAITING = ("pending", "failed")
UNDELIVERED = ("pending", "failed", "dead")


@dataclass(frozen=True, slots=True)
class Due:
    delivery_id: int
    subscriber: str
    message_id: str
    body: str
    attempts: int
    created_at: int


def claim(
    store: Store,
    subscriber: str,
    holder: str,
    now_us: int,
    until_us: int,
    limit: int,
    after_id: int = 0,
) -> list[Due]:
    """Claim up to `limit` of the subscriber's due deliveries after `after_id` (a cursor),
    in id order, for `holder` until `until_us`; returns them."""
    d = deliveries
    waiting = d.c.status.in_(WAITING)
    with store.begin() as conn:
        others = conn.execute(
            select(d.c.claimed_by)
            .distinct()
            .where(
                d.c.claimed_by.is_not(None),
                d.c.claimed_by != holder,
                d.c.claimed_until > now_us,
                d.c.subscriber == subscriber,
                waiting,
            )
        ).scalars()
        dead = [h for h in others if holder_dead(h)]
        free = or_(d.c.claimed_by.is_(None), d.c.claimed_until <= now_us)
        if dead:
            free = or_(free, d.c.claimed_by.in_(dead))
        pick = (
            select(d.c.delivery_id)
            .where(
                d.c.subscriber == subscriber,
                waiting,
                d.c.next_attempt_at <= now_us,
                d.c.delivery_id > after_id,
                free,
            )
            .order_by(d.c.delivery_id)
            .limit(limit)
        )
        if store.dialect == "postgresql":
            pick = pick.with_for_update(skip_locked=True)
        rows = conn.execute(
            update(d)
            .where(d.c.delivery_id.in_(pick))
            .values(claimed_by=holder, claimed_until=until_us)
            .returning(d.c.delivery_id, d.c.message_id, d.c.body, d.c.attempts, d.c.created_at)
        ).all()
    rows = sorted(rows, key=lambda r: int(r.delivery_id))
    return [Due(r[0], subscriber, r[1], r[2], r[3], r[4]) for r in rows]


def count_due(store: Store, now_us: int) -> int:
    """Messages due now and claimed by no dispatcher (for a progress bar)."""
    d = deliveries
    stmt = select(func.count()).where(
        d.c.status.in_(WAITING),
        d.c.next_attempt_at <= now_us,
        or_(d.c.claimed_by.is_(None), d.c.claimed_until <= now_us),
    )
    with store.engine.connect() as conn:
        return int(conn.execute(stmt).scalar_one())


def release(store: Store, holder: str) -> int:
    """Give up the holder's remaining claims (those messages are due again at once)."""
    with store.begin() as conn:
        result = conn.execute(
            update(deliveries)
            .where(deliveries.c.claimed_by == holder)
            .values(claimed_by=None, claimed_until=None)
        )
    return int(result.rowcount or 0)


@dataclass(frozen=True, slots=True)
class Outcome:
    delivery_id: int
    ok: bool
    status_code: int | None
    error: str | None
    next_attempt_at: int  # for a failure
    dead: bool
    skipped: bool = False  # cancelled since it was claimed: not sent, only unclaimed


def record(store: Store, holder: str, outcomes: Sequence[Outcome], now_us: int) -> None:
    """Mark a batch of attempts in one transaction and clear their claims: delivered ones
    by id lists (grouped by answer code), failures with one executemany. Only rows still
    waiting are touched, and a failure only while `holder` still holds the claim (a
    lapsed claim may be another dispatcher's by now). A message cancelled by a retraction
    while this holder had it on the wire is marked delivered (it went out); the claims
    of the other cancelled ones are cleared."""
    if not outcomes:
        return
    d = deliveries
    waiting = or_(d.c.status == "pending", d.c.status == "failed")
    sent_anyway = and_(d.c.status == "cancelled", d.c.claimed_by == holder)
    by_code: dict[int | None, list[int]] = {}
    for o in outcomes:
        if o.ok:
            by_code.setdefault(o.status_code, []).append(o.delivery_id)
    failed = [o for o in outcomes if not o.ok and not o.skipped]
    with store.begin() as conn:
        for code, ids in by_code.items():
            for start in range(0, len(ids), 500):
                conn.execute(
                    update(d)
                    .where(d.c.delivery_id.in_(ids[start : start + 500]), or_(waiting, sent_anyway))
                    .values(
                        status="delivered",
                        delivered_at=now_us,
                        attempts=d.c.attempts + 1,
                        last_status=code,
                        last_error=None,
                        claimed_by=None,
                        claimed_until=None,
                    )
                )
        if failed:
            stmt = (
                update(d)
                .where(d.c.delivery_id == bindparam("b_id"), waiting, d.c.claimed_by == holder)
                .values(
                    status=bindparam("b_status"),
                    next_attempt_at=bindparam("b_next"),
                    last_status=bindparam("b_code"),
                    last_error=bindparam("b_error"),
                    attempts=d.c.attempts + 1,
                    claimed_by=None,
                    claimed_until=None,
                )
            )
            conn.execute(
                stmt,
                [
                    {
                        "b_id": o.delivery_id,
                        "b_status": "dead" if o.dead else "failed",
                        "b_next": o.next_attempt_at,
                        "b_code": o.status_code,
                        "b_error": o.error,
                    }
                    for o in failed
                ],
            )
        unsent = [o.delivery_id for o in outcomes if not o.ok]
        for start in range(0, len(unsent), 500):
            conn.execute(
                update(d)
                .where(d.c.delivery_id.in_(unsent[start : start + 500]), sent_anyway)
                .values(claimed_by=None, claimed_until=None)
            )


def not_waiting(store: Store, ids: Sequence[int]) -> set[int]:
    """Of these (claimed) deliveries, those no longer waiting to be sent: cancelled by a
    retraction since they were claimed (or settled by another dispatcher)."""
    d = deliveries
    gone: set[int] = set()
    with store.engine.connect() as conn:
        for start in range(0, len(ids), 500):
            chunk = list(ids[start : start + 500])
            stmt = select(d.c.delivery_id).where(
                d.c.delivery_id.in_(chunk), d.c.status.not_in(WAITING)
            )
            gone.update(int(i) for i in conn.execute(stmt).scalars())
    return gone


def retry_dead(store: Store, subscriber: str | None) -> int:
    """Dead messages pending again, due at once (same ids)."""
    d = deliveries
    cond = d.c.status == "dead"
    if subscriber is not None:
        cond = and_(cond, d.c.subscriber == subscriber)
    with store.begin() as conn:
        result = conn.execute(
            update(d)
            .where(cond)
            .values(
                status="pending",
                attempts=0,
                next_attempt_at=0,  # due at once, whatever the clock says
                claimed_by=None,
                claimed_until=None,
            )
        )
    return int(result.rowcount or 0)


def status(store: Store, now_us: int) -> dict[str, Any]:
    d = deliveries
    stmt = (
        select(d.c.subscriber, d.c.status, func.count(), func.min(d.c.created_at))
        .group_by(d.c.subscriber, d.c.status)
        .order_by(d.c.subscriber)
    )
    sending = (
        select(d.c.subscriber, func.count())
        .where(d.c.claimed_by.is_not(None), d.c.claimed_until > now_us, d.c.status.in_(WAITING))
        .group_by(d.c.subscriber)
    )
    per: dict[str, dict[str, Any]] = {}
    with store.engine.connect() as conn:
        names = [r.name for r in conn.execute(select(subscribers.c.name))]
        for name in names:
            per[name] = _empty(name)
        for name, st, count, oldest in conn.execute(stmt):
            entry = per.setdefault(name, _empty(name))
            entry[st] = int(count)
            if st in WAITING and oldest is not None:
                age = (now_us - int(oldest)) / 1e6
                entry["oldest_pending_age_s"] = max(entry["oldest_pending_age_s"] or 0.0, age)
        for name, count in conn.execute(sending):
            per.setdefault(name, _empty(name))["claimed"] = int(count)
        _count_unfanned_cancellations(conn, per)
        waiting = conn.execute(
            select(outbox.c.status, func.count()).group_by(outbox.c.status)
        ).all()
    return {
        "subscribers": [
            {**v, "oldest_pending_age_s": _round(v["oldest_pending_age_s"])} for v in per.values()
        ],
        "outbox": {st: int(n) for st, n in waiting},
    }


def _count_unfanned_cancellations(conn: Connection, per: dict[str, dict[str, Any]]) -> None:
    """Add to each subscriber's `cancelled` the messages it would have been sent from
    outbox rows cancelled before their fan-out (a run retracted before dispatch): one
    per change of a `changes` row, one per notice, for rows written after it was added
    and of a source it wants."""
    rows = conn.execute(
        select(outbox.c.source, outbox.c.topic, outbox.c.changes, outbox.c.created_at).where(
            outbox.c.status == "cancelled"
        )
    ).all()
    if not rows:
        return
    subs = conn.execute(
        select(subscribers.c.name, subscribers.c.sources, subscribers.c.created_at)
    ).all()
    for name, sources, created_at in subs:
        wanted = set(sources.split(",")) if sources else None
        n = sum(
            int(changes) if topic == "changes" else 1
            for source, topic, changes, at in rows
            if (wanted is None or source in wanted) and int(at) >= int(created_at)
        )
        per.setdefault(name, _empty(name))["cancelled"] += n


def _empty(name: str) -> dict[str, Any]:
    return {
        "subscriber": name,
        "pending": 0,
        "failed": 0,
        "delivered": 0,
        "dead": 0,
        "cancelled": 0,
        "claimed": 0,
        "oldest_pending_age_s": None,
    }


def _round(value: float | None) -> float | None:
    return round(value, 3) if value is not None else None


def waiting_counts(store: Store, source: str) -> dict[str, int]:
    """The source's messages not delivered yet, by status (pending, failed, dead)."""
    with store.engine.connect() as conn:
        rows = conn.execute(
            select(deliveries.c.status, func.count())
            .where(
                deliveries.c.source == source,
                deliveries.c.status.in_(("pending", "failed", "dead")),
            )
            .group_by(deliveries.c.status)
        ).all()
    return {str(status): int(n) for status, n in rows}


def waiting_counts_by_source(store: Store, sources: list[str]) -> dict[str, dict[str, int]]:
    """`waiting_counts` of each of `sources` in one statement (a source with no waiting
    message is left out)."""
    got: dict[str, dict[str, int]] = {}
    if not sources:
        return got
    with store.engine.connect() as conn:
        rows = conn.execute(
            select(deliveries.c.source, deliveries.c.status, func.count())
            .where(
                deliveries.c.source.in_(sources),
                deliveries.c.status.in_(("pending", "failed", "dead")),
            )
            .group_by(deliveries.c.source, deliveries.c.status)
        ).all()
    for source, status, n in rows:
        got.setdefault(str(source), {})[str(status)] = int(n)
    return got
