"""The write audit: each write made over the HTTP API (`feedledger serve`) -- who (a
token's label), when, what, on which run or source -- recorded and listed."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from feedledger.context import Context
from feedledger.model.timeutil import from_us


@dataclass(frozen=True)
class AuditEntry:
    """One write: `actor` is the label of the token used; `detail` what was asked and
    what came of it (decoded JSON, or None)."""

    audit_id: int
    at: datetime
    actor: str
    action: str
    source: str | None
    run_id: str | None
    detail: Any

    @classmethod
    def of(cls, e: Any) -> AuditEntry:
        detail = None if e.detail is None else json.loads(e.detail)
        return cls(e.audit_id, from_us(e.at), e.actor, e.action, e.source, e.run_id, detail)

    def to_json(self) -> dict[str, Any]:
        return {
            "audit_id": self.audit_id,
            "at": self.at.isoformat(),
            "actor": self.actor,
            "action": self.action,
            "source": self.source,
            "run_id": self.run_id,
            "detail": self.detail,
        }


def record(
    ctx: Context,
    *,
    actor: str,
    action: str,
    source: str | None = None,
    run_id: str | None = None,
    detail: Any = None,
) -> AuditEntry:
    """`Ledger.record_write`: append an entry to the audit (its own transaction)."""
    from feedledger.ledger import audit  # lazy: SQLAlchemy, Arrow

    text = None if detail is None else json.dumps(detail, sort_keys=True, default=str)
    entry = audit.record(
        ctx.store, actor=actor, action=action, source=source, run_id=run_id, detail=text
    )
    return AuditEntry.of(entry)


def entries(
    ctx: Context, *, run_id: str | None = None, source: str | None = None
) -> list[AuditEntry]:
    """`Ledger.audit_entries`: the entries about a run or a source (either matches),
    oldest first."""
    from feedledger.ledger import audit  # lazy: SQLAlchemy, Arrow

    found = audit.entries(ctx.store, run_id=run_id, source=source)
    return [AuditEntry.of(e) for e in found]
