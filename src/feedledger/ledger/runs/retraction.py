"""Retraction (Invariant 6): versions, applications and gap records are never deleted,
only marked `retracted_at`/`retracted_by`; the watermark moves back to the last
application still standing, with a new commit sequence (so every cached diff state is
invalidated).

One retraction is ONE transaction, `retract_scope`, for both its callers: `retract`
(a run, with `cascade` every later one too) and `replay` (everything published from a
day on). The caller adds its own steps to that transaction with `then` (a retraction
cancels its runs' undelivered notifications and queues its notice: notify/ storage
the ledger must not import). The other functions run inside the caller's
transaction."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Connection, select, update

from feedledger.ledger import gaps
from feedledger.ledger.records import Watermark
from feedledger.ledger.runs.leases import check_held
from feedledger.ledger.schema import applications, versions, watermarks
from feedledger.ledger.store import Store
from feedledger.ledger.visibility import visible
from feedledger.model.errors import RetractConflictError
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


def stands(store: Store, source: str, run_id: str) -> bool:
    """Whether any application of run `run_id` is still standing."""
    with store.engine.connect() as conn:
        return any(a.run_id == run_id for a in standing(conn, source))


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


@dataclass(frozen=True, slots=True)
class Scope:
    """What a retraction takes back: the standing applications of run `run_id` (with
    `cascade`, every later one too) and the gap records of the runs hit; or, for a
    replay, every standing application published at or after `published_from` and the
    gaps ending after it (`gaps.retract_from`)."""

    run_id: str | None = None
    cascade: bool = False
    published_from: int | None = None


@dataclass(frozen=True, slots=True)
class Retracted:
    """What one retraction transaction did."""

    recorded_at: int
    payloads: list[AppliedPayload]
    runs: list[str]  # the runs hit, newest first
    versions: int
    gaps: int
    watermark: Watermark | None


def plan(apps: list[AppliedPayload], scope: Scope, source: str) -> list[AppliedPayload]:
    """The applications of `apps` (standing, commit order) that `scope` retracts. A
    run with later runs and no `cascade` is refused (RetractConflictError)."""
    if scope.published_from is not None:
        return [a for a in apps if a.published_at >= scope.published_from]
    target = scope.run_id
    mine = [a for a in apps if a.run_id == target]
    if not mine:
        return []
    first = min(a.txn_seq for a in mine)
    later = [a for a in apps if a.txn_seq > first and a.run_id != target]
    if later and not scope.cascade:
        names = list(dict.fromkeys(a.run_id for a in reversed(later)))
        raise RetractConflictError(
            f"run {target} has {len(names)} later run(s) whose changes were computed on "
            f"top of it: {', '.join(names)}; nothing was retracted",
            source=source,
            hint="retract with --cascade to retract them too (newest first), or replay the "
            "source from the first affected date",
        )
    return [a for a in apps if a.txn_seq >= first]


def planned(store: Store, source: str, scope: Scope) -> list[AppliedPayload]:
    """`plan` over what stands now, read without a lease (a refusal leaves no trace)."""
    with store.engine.connect() as conn:
        return plan(standing(conn, source), scope, source)


def retract_scope(
    store: Store,
    source: str,
    scope: Scope,
    *,
    holder: str,
    by: str,
    then: Callable[[Connection, Retracted], None] | None = None,
) -> Retracted:
    """Retract `scope` of `source` as run `by` (holding the source's lease as `holder`)
    in one transaction: the applications and their versions, the gap records, and the
    watermark moved back; then `then(conn, retracted)` in the same transaction."""
    with store.begin() as conn:
        check_held(conn, source, holder, by)
        wm, at = commit_time(store, conn, source)
        targets = plan(standing(conn, source), scope, source)
        hit = list(dict.fromkeys(a.run_id for a in reversed(targets)))
        versions_n = retract(conn, targets, by=by, at_us=at)
        if scope.published_from is not None:
            gaps_n = gaps.retract_from(conn, source, scope.published_from, by=by, at_us=at)
            watermark = rewind_watermark(conn, source, wm, at_us=at)
        else:
            hit = hit or [str(scope.run_id)]
            gaps_n = gaps.retract_by_runs(conn, hit, by=by, at_us=at)
            watermark = rewind_watermark(conn, source, wm, at_us=at) if targets else wm
        done = Retracted(at, targets, hit, versions_n, gaps_n, watermark)
        if then is not None:
            then(conn, done)
    return done
