"""Retract a run by its id (Invariant 6): its versions, applications and gap records are
marked retracted -- nothing is deleted -- in ONE transaction of a new run of kind
`retraction`, and the source's watermark moves back to the last application still
standing. The runs' notifications not delivered yet are cancelled in the same
transaction (Invariant 11); the retraction notice goes only to subscribers that were
delivered any of them (notify/fanout.py). Runs applied after it were diffed on top of
what is being removed: they are listed and the retraction refused, unless `cascade`
retracts them too (newest first).
Past belief stays queryable with `--known-at` a time before the retraction.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from feedledger.context import Context
from feedledger.ledger import gaps, leases, notices, runs
from feedledger.ledger.records import Watermark
from feedledger.ledger.retraction import (
    AppliedPayload,
    commit_time,
    retract,
    rewind_watermark,
    standing,
)
from feedledger.ledger.store import Store
from feedledger.model.errors import ConfigError, NotFoundError, RetractConflictError
from feedledger.model.timeutil import iso
from feedledger.model.types import RunKind
from feedledger.notify import cancellations


@dataclass
class RetractReport:
    run_id: str  # the retraction run
    source: str
    target: str
    retracted_runs: list[str] = field(default_factory=list)  # newest first
    payloads: int = 0
    versions: int = 0
    gaps: int = 0
    watermark: Watermark | None = None
    recorded_at: int = 0
    notifications_cancelled: int = 0  # outbox rows not fanned out yet
    messages_cancelled: int = 0  # fanned-out messages not delivered yet

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "source": self.source,
            "retracted_runs": self.retracted_runs,
            "payloads": self.payloads,
            "versions": self.versions,
            "gaps": self.gaps,
            "notifications_cancelled": self.notifications_cancelled,
            "messages_cancelled": self.messages_cancelled,
            "retracted_at": iso(self.recorded_at),
            "watermark": {
                "published_at": iso(self.watermark.published_at) if self.watermark else None,
                "payload_id": self.watermark.payload_id if self.watermark else None,
            },
        }


def _plan(
    apps: list[AppliedPayload], target: str, cascade: bool, source: str
) -> list[AppliedPayload]:
    """The applications to retract: the target's, plus (with cascade) every later one."""
    mine = [a for a in apps if a.run_id == target]
    if not mine:
        return []
    first = min(a.txn_seq for a in mine)
    later = [a for a in apps if a.txn_seq > first and a.run_id != target]
    if later and not cascade:
        names = list(dict.fromkeys(a.run_id for a in reversed(later)))
        raise RetractConflictError(
            f"run {target} has {len(names)} later run(s) whose changes were computed on "
            f"top of it: {', '.join(names)}; nothing was retracted",
            source=source,
            hint="retract with --cascade to retract them too (newest first), or replay the "
            "source from the first affected date",
        )
    return [a for a in apps if a.txn_seq >= first]


def _standing_gaps(store: Store, source: str, run_id: str) -> int:
    return sum(1 for g in gaps.listing(store, source) if g.run_id == run_id)


def retract_run(ctx: Context, run_id: str, *, cascade: bool = False) -> RetractReport:
    store = ctx.store
    run = runs.get_run(store, run_id)
    if run is None:
        raise NotFoundError(
            f"unknown run id {run_id!r}", hint="list runs with `feedledger runs SOURCE`"
        )
    if run.kind == RunKind.RETRACTION.value:
        raise ConfigError(
            f"run {run_id} is a retraction; a retraction cannot be retracted",
            source=run.source,
            hint="to restore what it removed, replay the source from the first affected date",
        )
    source = run.source
    # checked before taking the lease, so a refusal leaves no trace at all
    with store.engine.connect() as conn:
        targets = _plan(standing(conn, source), run_id, cascade, source)
    if not targets and not _standing_gaps(store, source, run_id):
        raise ConfigError(
            f"run {run_id} ({run.kind}, {run.status}) has nothing standing to retract "
            "(it wrote nothing, or it was retracted already)",
            source=source,
        )
    kind = RunKind.RETRACTION.value
    with leases.leased_run(store, source, kind, parent_run_id=run_id) as lease:
        rid = lease.run_id
        report = RetractReport(run_id=rid, source=source, target=run_id)
        with store.begin() as conn:
            leases.check_held(conn, source, lease.holder, rid)
            wm, at = commit_time(store, conn, source)
            targets = _plan(standing(conn, source), run_id, cascade, source)
            runs_hit = list(dict.fromkeys([a.run_id for a in reversed(targets)] or [run_id]))
            report.recorded_at = at
            report.retracted_runs = runs_hit
            report.payloads = len(targets)
            report.versions = retract(conn, targets, by=rid, at_us=at)
            report.gaps = gaps.retract_by_runs(conn, runs_hit, by=rid, at_us=at)
            report.watermark = rewind_watermark(conn, source, wm, at_us=at) if targets else wm
            runs.count(conn, rid, payloads=report.payloads, changes=report.versions)
            # Invariant 11: what was not delivered yet never will be (outbox rows first,
            # see notices.cancel_runs); the notice below goes to who heard of the runs
            report.notifications_cancelled = notices.cancel_runs(conn, runs_hit)
            report.messages_cancelled = cancellations.cancel_runs(
                conn, runs_hit, f"cancelled: run retracted by {rid}"
            )
            notices.queue(
                conn,
                source=source,
                run_id=rid,
                topic="retraction",
                payload_id=targets[-1].payload_id if targets else "",
                changes=report.versions,
                body={
                    "source": source,
                    "retraction_run_id": rid,
                    "retracted_runs": runs_hit,
                    "versions": report.versions,
                    "payloads": report.payloads,
                    "gaps": report.gaps,
                    "watermark_at": iso(report.watermark.published_at)
                    if report.watermark
                    else None,
                },
                at_us=at,
            )
    return report
