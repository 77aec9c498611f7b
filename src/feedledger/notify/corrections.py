"""Correction notices: one outbox row naming a run whose notifications went out wrongly,
queued in its own transaction at the source's commit time (after its last commit), at
most once per (run, message text)."""

from __future__ import annotations

import hashlib

from feedledger.ledger import notices
from feedledger.ledger.runs.retraction import commit_time
from feedledger.ledger.store import Store

__all__ = ["queue_correction"]


def queue_correction(store: Store, *, source: str, run_id: str, run_kind: str, text: str) -> bool:
    """Queue the correction unless the same one is already queued; True if queued now."""
    tag = hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]
    key = f"{source}:{run_id}:correction:{tag}"
    body = {"text": text, "corrects_run_id": run_id, "run_kind": run_kind}
    with store.begin() as conn:
        if notices.exists(conn, key):
            return False
        _wm, at = commit_time(store, conn, source)
        notices.queue(
            conn,
            source=source,
            run_id=run_id,
            topic="correction",
            key=key,
            payload_id="",
            changes=0,
            body=body,
            at_us=at,
        )
    return True
