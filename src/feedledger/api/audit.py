"""Deprecated aliases (they go in the next release, docs/api.md): the module-level
calls of the write audit, now `Ledger`'s methods. What the audit is: `api/runs/audit.py`."""

from __future__ import annotations

from typing import Any

from feedledger.api._deprecated import deprecated
from feedledger.api.runs.audit import AuditEntry


# -- deprecated: the Ledger's methods (`led` typed loosely so that this module does not
# import the one that imports it) -----------------------------------------------------
def record_write(
    led: Any,
    *,
    actor: str,
    action: str,
    source: str | None = None,
    run_id: str | None = None,
    detail: Any = None,
) -> AuditEntry:
    """Deprecated: `led.record_write(actor=, action=, ...)`."""
    deprecated("feedledger.api.audit.record_write(led, ...)", "led.record_write(...)")
    found: AuditEntry = led.record_write(
        actor=actor, action=action, source=source, run_id=run_id, detail=detail
    )
    return found


def audit_entries(
    led: Any, *, run_id: str | None = None, source: str | None = None
) -> list[AuditEntry]:
    """Deprecated: `led.audit_entries(run_id=, source=)`."""
    deprecated("feedledger.api.audit.audit_entries(led, ...)", "led.audit_entries(...)")
    found: list[AuditEntry] = led.audit_entries(run_id=run_id, source=source)
    return found
