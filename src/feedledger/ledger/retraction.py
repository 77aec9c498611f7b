"""Retraction (Invariant 6): versions, applications and gap records are never deleted,
only marked `retracted_at`/`retracted_by`; the watermark moves back to the last
application still standing, with a new commit sequence (so every cached diff state is
invalidated). Everything here runs inside the caller's transaction."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, select, update

from feedledger.ledger.records import Watermark
from feedledger.ledger.schema import applications, versions, watermarks
from feedledger.ledger.store import Store
from feedledger.ledger.visibility import visible
from feedledger.model.timeutil import now_us


@dataclass(frozen=True, slots=True)
class AppliedPayload:
    """One standing application: what a payload wrote, and where."""

    payload_id: str
    run_id: str
    txn_seq: int
    published_at: int
    first_version_id: int | None
    changes: int


def standing(conn: Connection, source: str) -> list[AppliedPayload]:
    """The source's applications that are not retracted, in commit order."""
    rows = conn.execute(
        select(applications)
        .where(applications.c.source == source, visible(applications, None))
        .order_by(applications.c.txn_seq)
    )
    return [
        AppliedPayload(
            payload_id=r.payload_id,
            run_id=r.run_id,
            txn_seq=r.txn_seq,
            published_at=r.published_at,
            first_version_id=r.first_version_id,
            changes=r.changes,
        )
        for r in rows
    ]


def commit_time(store: Store, conn: Connection, source: str) -> tuple[Watermark | None, int]:
    """(the source's watermark, locked; a commit timestamp after its last commit)."""
    wm = store.watermark(source, conn)
    return wm, max(now_us(), (wm.recorded_at + 1) if wm else 0)


def retract(conn: Connection, apps: list[AppliedPayload], *, by: str, at_us: int) -> int:
    """Mark the applications and every version they wrote retracted; returns the number
    of versions. (A payload's versions have contiguous ids, see payload_txn.)"""
    count = 0
    for a in apps:
        if a.changes and a.first_version_id is not None:
            result = conn.execute(
                update(versions)
                .where(
                    versions.c.version_id >= a.first_version_id,
                    versions.c.version_id < a.first_version_id + a.changes,
                    versions.c.retracted_at.is_(None),
                )
                .values(retracted_at=at_us, retracted_by=by)
            )
            count += int(result.rowcount or 0)
        conn.execute(
            update(applications)
            .where(
                applications.c.payload_id == a.payload_id,
                applications.c.run_id == a.run_id,
                applications.c.retracted_at.is_(None),
            )
            .values(retracted_at=at_us, retracted_by=by)
        )
    return count


def rewind_watermark(
    conn: Connection, source: str, wm: Watermark | None, *, at_us: int
) -> Watermark | None:
    """Point the watermark at the last standing application (or nothing) with the next
    commit sequence."""
    if wm is None:
        return None
    rest = standing(conn, source)
    last = rest[-1] if rest else None
    values = {
        "published_at": last.published_at if last else None,
        "payload_id": last.payload_id if last else None,
        "txn_seq": wm.txn_seq + 1,
        "recorded_at": at_us,
    }
    conn.execute(update(watermarks).where(watermarks.c.source == source).values(**values))
    return Watermark(source=source, **values)  # type: ignore[arg-type]
