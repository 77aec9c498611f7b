"""The write audit (migration 0009): each write made over the HTTP API -- who (a
token's label), when, what, on which run or source -- kept for the run's page."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import insert, or_, select

from feedledger.ledger.schema import write_audit
from feedledger.ledger.store import Store
from feedledger.model.timeutil import now_us


@dataclass(frozen=True, slots=True)
class AuditEntry:
    audit_id: int
    at: int
    actor: str
    action: str
    source: str | None
    run_id: str | None
    detail: str | None


def record(
    store: Store,
    *,
    actor: str,
    action: str,
    source: str | None,
    run_id: str | None,
    detail: str | None,
) -> AuditEntry:
    """Append one entry (its own transaction)."""
    at = now_us()
    with store.begin() as conn:
        found = conn.execute(
            insert(write_audit)
            .values(at=at, actor=actor, action=action, source=source, run_id=run_id, detail=detail)
            .returning(write_audit.c.audit_id)
        ).scalar_one()
    return AuditEntry(int(found), at, actor, action, source, run_id, detail)


def entries(
    store: Store, *, run_id: str | None = None, source: str | None = None, limit: int = 1000
) -> list[AuditEntry]:
    """Entries about a run and/or a source (either matches), oldest first."""
    stmt = select(write_audit).order_by(write_audit.c.audit_id).limit(limit)
    terms = []
    if run_id is not None:
        terms.append(write_audit.c.run_id == run_id)
    if source is not None:
        terms.append(write_audit.c.source == source)
    if terms:
        stmt = stmt.where(or_(*terms))
    with store.engine.connect() as conn:
        return [
            AuditEntry(r.audit_id, r.at, r.actor, r.action, r.source, r.run_id, r.detail)
            for r in conn.execute(stmt)
        ]
