"""How the messages of a run's notices stand (the HTTP API's run page): per outbox row,
per subscriber, the number of messages in each delivery status."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import func, select

from feedledger.ledger.store import Store
from feedledger.notify.tables import deliveries


def by_notice(store: Store, outbox_ids: Sequence[int]) -> dict[int, dict[str, dict[str, int]]]:
    """{outbox id: {subscriber: {status: messages}}} for the given outbox rows (rows not
    fanned out yet are absent)."""
    if not outbox_ids:
        return {}
    d = deliveries
    stmt = (
        select(d.c.outbox_id, d.c.subscriber, d.c.status, func.count())
        .where(d.c.outbox_id.in_(list(outbox_ids)))
        .group_by(d.c.outbox_id, d.c.subscriber, d.c.status)
    )
    found: dict[int, dict[str, dict[str, int]]] = {}
    with store.engine.connect() as conn:
        for outbox_id, subscriber, status, n in conn.execute(stmt):
            found.setdefault(int(outbox_id), {}).setdefault(subscriber, {})[status] = int(n)
    return found
