"""What a replay's retraction tells subscribers, in the retraction's own transaction
(`retract_scope(..., then=...)`), as `feedledger retract` does (pipeline/retract.py):

* what it retracted and nobody has been delivered yet is cancelled, never sent
  (Invariant 11): the change sets of the applications retracted -- a run retracted only
  in part (its payloads published from the replay's day on) keeps its earlier change
  sets -- and the run-level notices (summary, correction) of every run hit, whose text
  counts what is no longer standing;
* ONE retraction notice names the runs hit; the fan-out sends it only to subscribers
  that were delivered any message of those runs (notify/fanout.py), the correction the
  seed asks for ("notifications cannot be recalled and are corrected with one message").

The replay's summary, queued when the run ends (pipeline/catchup/report.py), goes to every
subscriber and says what was retracted first.
"""

from __future__ import annotations

from dataclasses import dataclass

from feedledger import faults
from feedledger.ledger import notices
from feedledger.ledger.runs.retraction import Retracted
from feedledger.ledger.store import Transaction
from feedledger.model.timeutil import iso
from feedledger.notify import cancellations


@dataclass(frozen=True, slots=True)
class Withdrawn:
    notifications_cancelled: int  # outbox rows not fanned out yet
    messages_cancelled: int  # fanned-out messages not delivered yet


def withdraw(
    conn: Transaction, done: Retracted, *, source: str, run_id: str, published_from: int
) -> Withdrawn:
    """In the replay's retraction transaction: cancel what `done` retracted and was not
    delivered yet, and queue the retraction notice (if anything was retracted)."""
    faults.point("replay_before_cancel")  # retracted, not committed: a crash undoes both
    if not done.payloads:
        return Withdrawn(0, 0)
    applied = [(a.run_id, a.payload_id) for a in done.payloads]
    # outbox rows first, as retract does (notices.cancel_runs: a fan-out holding them
    # finishes first on PostgreSQL, and its messages are then cancelled below)
    rows = notices.cancel_applications(conn, applied, done.runs)
    messages = cancellations.cancel_applications(
        conn, applied, done.runs, f"cancelled: retracted by replay {run_id}"
    )
    notices.queue(
        conn,
        source=source,
        run_id=run_id,
        topic="retraction",
        payload_id=done.payloads[-1].payload_id,
        changes=done.versions,
        body={
            "source": source,
            "retraction_run_id": run_id,
            "retracted_runs": done.runs,
            "versions": done.versions,
            "payloads": len(done.payloads),
            "gaps": done.gaps,
            "watermark_at": iso(done.watermark.published_at) if done.watermark else None,
            "replay_from": iso(published_from),
        },
        at_us=done.recorded_at,
    )
    return Withdrawn(rows, messages)
