"""What the HTTP API's run page shows besides the run's row: the notices it queued
(summary, change set, correction...: outbox rows and their status). The runs that
retracted it come from ledger/runs.py, which owns the runs table."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from feedledger.ledger.schema import outbox
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
