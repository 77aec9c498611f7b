"""What a backfill or replay did (`RunReport`), what it found nothing to do about
(`NothingToDo`), and the run's last transaction: gap records for the days the archive
lacks and ONE summary notification (`finish`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

from feedledger.context import Context
from feedledger.ledger import queries
from feedledger.ledger.runs import lookup
from feedledger.ledger.runs.backfills import close_run
from feedledger.ledger.runs.leases import LeasedRun
from feedledger.model.cadence import day_start_us, local_date, stretches
from feedledger.model.payload import PayloadRef
from feedledger.model.source import SourceConfig
from feedledger.model.timeutil import iso
from feedledger.model.types import RunKind


@dataclass
class NothingToDo:
    """A backfill or replay whose window holds nothing to apply: a success (exit 0), so
    that a retry loop around the command is safe."""

    source: str
    kind: str
    start: date
    end: date | None
    watermark_at: int | None
    reason: str
    late: list[PayloadRef] = field(default_factory=list)
    hint: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "status": "nothing_to_do",
            "source": self.source,
            "kind": self.kind,
            "from": self.start.isoformat(),
            "to": self.end.isoformat() if self.end is not None else None,
            "watermark_at": iso(self.watermark_at),
            "reason": self.reason,
            "late": [
                {"payload_id": p.payload_id, "published_at": iso(p.published_at)} for p in self.late
            ],
            "hint": self.hint,
        }


@dataclass
class Step:
    published_at: int
    payload_id: str
    changes: int
    # GIS sources: features of the payload with an invalid geometry (kept as stated);
    # None for other sources (and then not in the JSON)
    invalid_geometries: int | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "published_at": iso(self.published_at),
            "payload_id": self.payload_id,
            "changes": self.changes,
        }
        if self.invalid_geometries is not None:
            data["invalid_geometries"] = self.invalid_geometries
        return data


@dataclass
class RunReport:
    """What a backfill or replay did (`steps`: the payloads applied by THIS invocation;
    a resumed run's earlier ones are in `changes --run`)."""

    source: str
    kind: str
    run_id: str
    parent_run_id: str | None = None
    steps: list[Step] = field(default_factory=list)
    missing_dates: list[date] = field(default_factory=list)
    gaps_recorded: int = 0
    retracted_versions: int = 0
    retracted_payloads: int = 0
    retracted_runs: list[str] = field(default_factory=list)  # replay: the runs hit
    notifications_cancelled: int = 0  # replay: outbox rows not fanned out yet
    messages_cancelled: int = 0  # replay: fanned-out messages not delivered yet
    late: list[PayloadRef] = field(default_factory=list)  # in the window, behind the watermark
    summary: str = ""
    notify: bool = False
    resumed: int = 0  # how many times this run was interrupted and resumed
    fetched: list[PayloadRef] = field(default_factory=list)  # archived by this invocation

    @property
    def changes(self) -> int:
        return sum(s.changes for s in self.steps)

    @property
    def invalid_geometries(self) -> int | None:
        """Features with an invalid geometry across the payloads applied (GIS sources;
        None for others)."""
        found = [s.invalid_geometries for s in self.steps if s.invalid_geometries is not None]
        return sum(found) if found else None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "status": "applied",
            "run_id": self.run_id,
            "kind": self.kind,
            "source": self.source,
            "parent_run_id": self.parent_run_id,
            "resumed": self.resumed,
            "fetched": [
                {"payload_id": p.payload_id, "published_at": iso(p.published_at)}
                for p in self.fetched
            ],
            "steps": [s.to_json() for s in self.steps],
            "unrecoverable_days": len(self.missing_dates),
            "missing_dates": [d.isoformat() for d in self.missing_dates],
            "gaps_recorded": self.gaps_recorded,
            "late": [
                {"payload_id": p.payload_id, "published_at": iso(p.published_at)} for p in self.late
            ],
            "notified": self.notify,
            "summary": self.summary,
        }
        if self.invalid_geometries is not None:
            data["invalid_geometries"] = self.invalid_geometries
        if self.kind == RunKind.REPLAY.value:
            data["retracted_payloads"] = self.retracted_payloads
            data["retracted_versions"] = self.retracted_versions
            data["retracted_runs"] = self.retracted_runs
            data["notifications_cancelled"] = self.notifications_cancelled
            data["messages_cancelled"] = self.messages_cancelled
        return data


def _missing_spans(src: SourceConfig, missing: list[date]) -> list[tuple[int, int]]:
    return [
        (day_start_us(a, src.timezone), day_start_us(b + timedelta(days=1), src.timezone))
        for a, b in stretches(missing)
    ]


def _summary(
    report: RunReport, src: SourceConfig, chain: list[tuple[str, int, int]], word: str
) -> str:
    days = sorted({local_date(at, src.timezone) for _r, at, _n in chain})
    total = sum(n for _r, _at, n in chain)
    span = f" ({days[0]} to {days[-1]})" if days else ""
    text = (
        f"{word} for {src.name}: {total} changes recovered across {len(days)} publication "
        f"day(s){span}. {len(report.missing_dates)} day(s) had no archived payload and were "
        f"not replayed. Change details are queryable by run_id {report.run_id}"
    )
    if report.resumed:
        text += f" (resumed after {report.resumed} interruption(s))"
    if report.parent_run_id:
        text += f" (resuming run {report.parent_run_id})"
    text += "."
    if report.retracted_payloads:
        text += (
            f" It first retracted {report.retracted_versions} version(s) of "
            f"{report.retracted_payloads} payload(s) applied before (runs "
            f"{', '.join(report.retracted_runs)}); whoever was told of them is sent a "
            "retraction notice."
        )
    if report.late:
        first = local_date(report.late[0].published_at, src.timezone)
        text += (
            f" {len(report.late)} archived payload(s) in the window are older than the "
            f"watermark and were not applied; `feedledger replay {src.name} --from {first}` "
            "folds them in."
        )
    return text


def chain_of(ctx: Context, run_id: str, parent_id: str | None, kind: str) -> list[str]:
    """The run and the earlier runs of its kind it continues (its parent `parent_id`,
    then theirs in turn): what its summary covers."""
    chain_ids = [run_id]
    while parent_id is not None:
        chain_ids.append(parent_id)
        earlier = lookup.get_run(ctx.store, parent_id)
        same_kind = earlier is not None and earlier.kind == kind
        parent_id = earlier.parent_run_id if earlier is not None and same_kind else None
    return chain_ids


def finish(
    ctx: Context,
    src: SourceConfig,
    report: RunReport,
    *,
    run: LeasedRun,
    reason: str,
    last_payload: str,
    word: str,
) -> None:
    """Last transaction of the run: gap records for the missing days and ONE summary
    notification (idempotent per run: a resumed run that queued it before it stopped
    does not queue it again)."""
    store = ctx.store
    chain_ids = chain_of(ctx, report.run_id, report.parent_run_id, report.kind)
    chain = queries.run_applications(store, chain_ids)
    report.summary = _summary(report, src, chain, word)
    total = sum(n for _r, _at, n in chain)
    body = {
        "text": report.summary,
        "source": src.name,
        "run_id": report.run_id,
        "parent_run_id": report.parent_run_id,
        "changes": total,
        "publication_days": len({local_date(a, src.timezone) for _r, a, _n in chain}),
        "first": iso(chain[0][1]) if chain else None,
        "last": iso(chain[-1][1]) if chain else None,
        "unrecoverable_days": len(report.missing_dates),
        "missing_dates": [d.isoformat() for d in report.missing_dates],
    }
    if report.kind == RunKind.REPLAY.value:
        body["retracted_runs"] = report.retracted_runs
        body["retracted_versions"] = report.retracted_versions
        body["retracted_payloads"] = report.retracted_payloads
    report.gaps_recorded = close_run(
        store,
        src.name,
        holder=run.holder,
        leased_run_id=run.run_id,
        run_id=report.run_id,
        spans=_missing_spans(src, report.missing_dates),
        reason=reason,
        summary=body,
        payload_id=last_payload,
        changes=total,
    )
