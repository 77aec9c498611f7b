"""An archived payload applied as a live run (`apply_archived`: under the source's
lease, each applied payload looked at again there, so a payload a rival applied first is
`already_applied`, never a failed run) and what an ingest answers (`IngestResult`).
`ingest.py` reads, archives and hands payloads here, whole or within a budget."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from feedledger.context import Context
from feedledger.model.payload import PayloadRef
from feedledger.model.source import SourceConfig
from feedledger.model.timeutil import iso
from feedledger.model.types import RunKind

if TYPE_CHECKING:
    from feedledger.formats import Observations
    from feedledger.ledger.records import Application
    from feedledger.pipeline.intake.apply import Ahead, Applied


@dataclass
class IngestResult:
    source: str
    payload: PayloadRef
    status: str  # "applied" | "already_applied"
    archived: bool  # True if these bytes were new to the archive
    run_id: str | None = None
    counts: dict[str, int] = field(default_factory=dict)
    changes: int = 0
    recorded_at: int | None = None
    applied_by: str | None = None
    held: bool = False
    # GIS sources: features with an invalid geometry (kept as stated); None otherwise
    invalid_geometries: int | None = None

    def to_json(self) -> dict[str, Any]:
        data = {
            "source": self.source,
            "status": self.status,
            "payload_id": self.payload.payload_id,
            "published_at": iso(self.payload.published_at),
            "sha256": self.payload.sha256,
            "archived": self.archived,
            "run_id": self.run_id,
            "applied_by_run": self.applied_by,
            "changes": self.changes,
            "recorded_at": iso(self.recorded_at),
            "held_for_review": self.held,
            **{k: v for k, v in self.counts.items()},
        }
        if self.invalid_geometries is not None:
            data["invalid_geometries"] = self.invalid_geometries
        return data


def _already_applied(
    src: SourceConfig, ref: PayloadRef, created: bool, done: Application
) -> IngestResult:
    return IngestResult(
        source=src.name,
        payload=ref,
        status="already_applied",
        archived=created,
        run_id=None,
        applied_by=done.run_id,
        recorded_at=done.recorded_at,
    )


def apply_archived(
    ctx: Context,
    src: SourceConfig,
    ref: PayloadRef,
    *,
    created: bool,
    obs: Observations,
    allow_mass_delete: bool = False,
    ahead: Ahead | None = None,
) -> IngestResult:
    from feedledger.ledger.runs import leases  # lazy: see warm_store
    from feedledger.pipeline.intake.apply import apply_observations, stale_error  # lazy: as above

    store = ctx.store
    done = store.application_of(ref.payload_id)
    if done is not None:
        return _already_applied(src, ref, created, done)
    wm = store.watermark(src.name)
    if wm is not None and wm.published_at is not None and ref.published_at <= wm.published_at:
        raise stale_error(src, ref, wm.published_at, wm.payload_id)

    # the diff computed ahead tells how many version ids the payload needs: reserved
    # in the lease's transaction (used if that diff is still current under the lease)
    reserve = ahead.diff.versions.height if ahead is not None else 0
    with leases.leased_run(store, src.name, RunKind.LIVE.value, reserve=reserve) as run:
        # looked at again under the lease: another worker may have applied this very
        # payload since (then this run leaves no record and says so)
        done = store.application_of(ref.payload_id)
        if done is not None:
            run.outcome = leases.NOTHING
            return _already_applied(src, ref, created, done)
        applied: Applied = apply_observations(
            ctx,
            src,
            ref,
            obs,
            run_id=run.run_id,
            holder=run.holder,
            allow_mass_delete=allow_mass_delete,
            hold_bursts=True,
            ahead=ahead,
            reserved=run.reserved,
        )
        if applied.held:
            run.outcome = "held"
    return IngestResult(
        source=src.name,
        payload=ref,
        status="applied",
        archived=created,
        run_id=run.run_id,
        counts=applied.counts,
        changes=applied.changes,
        recorded_at=applied.recorded_at,
        held=applied.held,
        invalid_geometries=applied.invalid_geometries,
    )
