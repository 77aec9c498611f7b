"""What the HTTP API's run page shows besides the run's row: the notices it queued
(summary, change set, correction...: outbox rows and their status). The runs that
retracted it come from ledger/runs/lookup.py (ledger/runs/ owns the runs table).

A run's changes a page at a time (the HTTP API's `/api/runs/{id}/changes`): the
versions it wrote in (valid_from, key) order, then the per-key outcomes that did not
become versions in (published_at, key) order -- `queries.changes` and
`queries.run_outcomes` given a keyset bound and a limit, so a page costs its own rows
whatever the run's size (`count`, `changes`, `held`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select

from feedledger.ledger import queries
from feedledger.ledger.queries import KeyOutcome
from feedledger.ledger.records import Change
from feedledger.ledger.schema import applications, outbox, outcomes
from feedledger.ledger.store import Store


@dataclass(frozen=True, slots=True)
class Notice:
    outbox_id: int
    topic: str
    status: str
    changes: int
    created_at: int
    body: dict[str, Any]


def notices(store: Store, run_id: str, *, limit: int = 200) -> list[Notice]:
    """The outbox rows of a run, oldest first (at most `limit`)."""
    stmt = select(outbox).where(outbox.c.run_id == run_id).order_by(outbox.c.outbox_id).limit(limit)
    with store.engine.connect() as conn:
        return [
            Notice(
                int(r.outbox_id), r.topic, r.status, int(r.changes), int(r.created_at),
                json.loads(r.body),
            )
            for r in conn.execute(stmt)
        ]  # fmt: skip


Bound = tuple[int, str]  # (valid_from or published_at, key) of the last row of a page


def count(store: Store, run_id: str) -> tuple[int, int]:
    """(versions the run wrote, outcomes that did not become versions)."""
    a, o = applications, outcomes
    with store.engine.connect() as conn:
        changes = conn.execute(
            select(func.coalesce(func.sum(a.c.changes), 0)).where(a.c.run_id == run_id)
        ).scalar_one()
        held = conn.execute(select(func.count()).where(o.c.run_id == run_id)).scalar_one()
    return int(changes), int(held)


def changes(
    store: Store, run_id: str, after: Bound | None, limit: int, *, geo: bool = False
) -> list[Change]:
    """Up to `limit` changes of the run after `after`, as `queries.changes` gives them."""
    return queries.changes(store, run_id, geo=geo, after=after, limit=limit)


def held(
    store: Store, run_id: str, after: Bound | None, limit: int, *, geo: bool = False
) -> list[KeyOutcome]:
    """Up to `limit` outcomes of the run after `after`, as `queries.run_outcomes`."""
    return queries.run_outcomes(store, run_id, geo=geo, after=after, limit=limit)
