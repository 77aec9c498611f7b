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
from feedledger.ledger import gaps, notices, runs
from feedledger.ledger.records import Watermark
from feedledger.ledger.runs import leases, lookup
from feedledger.ledger.runs.retraction import Retracted, Scope, planned, retract_scope
from feedledger.ledger.store import Store, Transaction
from feedledger.model.errors import ConfigError, NotFoundError
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


def _standing_gaps(store: Store, source: str, run_id: str) -> int:
    return sum(1 for g in gaps.listing(store, source) if g.run_id == run_id)


def retract_run(ctx: Context, run_id: str, *, cascade: bool = False) -> RetractReport:
    store = ctx.store
    run = lookup.get_run(store, run_id)
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
    scope = Scope(run_id=run_id, cascade=cascade)
    # checked before taking the lease, so a refusal leaves no trace at all
    targets = planned(store, source, scope)
    if not targets and not _standing_gaps(store, source, run_id):
        raise ConfigError(
            f"run {run_id} ({run.kind}, {run.status}) has nothing standing to retract "
            "(it wrote nothing, or it was retracted already)",
            source=source,
        )
    kind = RunKind.RETRACTION.value
    retracted_meanwhile = False
    with leases.leased_run(store, source, kind, parent_run_id=run_id) as lease:
        rid = lease.run_id
        report = RetractReport(run_id=rid, source=source, target=run_id)

        def announce(conn: Transaction, done: Retracted) -> None:
            """In the retraction's transaction: count it on its run, cancel what the
            runs hit have not delivered yet, queue the retraction notice -- unless it
            found nothing standing: another retraction of the run committed between the
            look above and the lease (then no notice, and this run leaves no record)."""
            nonlocal retracted_meanwhile
            if not done.payloads and not done.gaps:
                retracted_meanwhile = True
                lease.outcome = leases.NOTHING
                return
            report.recorded_at = done.recorded_at
            report.retracted_runs = done.runs
            report.payloads = len(done.payloads)
            report.versions = done.versions
            report.gaps = done.gaps
            report.watermark = done.watermark
            runs.count(conn, rid, payloads=report.payloads, changes=report.versions)
            # Invariant 11: what was not delivered yet never will be (outbox rows first,
            # see notices.cancel_runs); the notice below goes to who heard of the runs
            report.notifications_cancelled = notices.cancel_runs(conn, done.runs)
            report.messages_cancelled = cancellations.cancel_runs(
                conn, done.runs, f"cancelled: run retracted by {rid}"
            )
            notices.queue(
                conn,
                source=source,
                run_id=rid,
                topic="retraction",
                payload_id=done.payloads[-1].payload_id if done.payloads else "",
                changes=report.versions,
                body={
                    "source": source,
                    "retraction_run_id": rid,
                    "retracted_runs": done.runs,
                    "versions": report.versions,
                    "payloads": report.payloads,
                    "gaps": report.gaps,
                    "watermark_at": iso(report.watermark.published_at)
                    if report.watermark
                    else None,
                },
                at_us=done.recorded_at,
            )

        retract_scope(store, source, scope, holder=lease.holder, by=rid, then=announce)
    if retracted_meanwhile:
        raise ConfigError(
            f"run {run_id} ({run.kind}) has nothing standing to retract: another retraction "
            "of it committed just now",
            source=source,
        )
    return report
