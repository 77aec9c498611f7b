"""Source freezes (`freeze`, `thaw`, `frozen`): while a source is frozen its live runs are
refused (checked when a live run takes the source's lease); backfill, replay and
retraction are allowed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import Connection, delete, insert, select

from feedledger.ledger.schema import freezes
from feedledger.model.timeutil import now_us

if TYPE_CHECKING:
    from feedledger.ledger.store import Store


@dataclass(frozen=True, slots=True)
class Freeze:
    source: str
    frozen_at: int
    reason: str | None


def freeze(store: Store, source: str, reason: str | None) -> tuple[Freeze, bool]:
    """Freeze `source`; returns (the freeze, whether it is new). Idempotent."""
    with store.begin() as conn:
        current = frozen(conn, source)
        if current is not None:
            return current, False
        at = now_us()
        conn.execute(insert(freezes).values(source=source, frozen_at=at, reason=reason))
        return Freeze(source, at, reason), True


def thaw(store: Store, source: str) -> bool:
    """Lift the freeze; returns whether there was one."""
    with store.begin() as conn:
        result = conn.execute(delete(freezes).where(freezes.c.source == source))
        return bool(result.rowcount)


def frozen(conn: Connection, source: str) -> Freeze | None:
    row = conn.execute(select(freezes).where(freezes.c.source == source)).first()
    return Freeze(row.source, row.frozen_at, row.reason) if row is not None else None


def is_frozen(store: Store, source: str) -> bool:
    with store.engine.connect() as conn:
        return frozen(conn, source) is not None
