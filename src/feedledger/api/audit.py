"""The write audit: each write made over the HTTP API (`feedledger serve`) -- who (a
token's label), when, what, on which run or source -- recorded and listed."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from feedledger.model.timeutil import from_us

if TYPE_CHECKING:
    from feedledger.api.ledger import Ledger


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


def record_write(
    led: Ledger,
    *,
    actor: str,
    action: str,
    source: str | None = None,
    run_id: str | None = None,
    detail: Any = None,
) -> AuditEntry:
    """Append an entry to the audit (its own transaction)."""
    from feedledger.ledger import audit

    text = None if detail is None else json.dumps(detail, sort_keys=True, default=str)
    entry = audit.record(
        led.context.store, actor=actor, action=action, source=source, run_id=run_id, detail=text
    )
    return AuditEntry.of(entry)


def audit_entries(
    led: Ledger, *, run_id: str | None = None, source: str | None = None
) -> list[AuditEntry]:
    """The entries about a run or a source (either matches), oldest first."""
    from feedledger.ledger import audit

    found = audit.entries(led.context.store, run_id=run_id, source=source)
    return [AuditEntry.of(e) for e in found]
