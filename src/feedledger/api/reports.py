"""Typed results of the API's operations (runs over a window, retraction, health,
freezes, archive, verify, destinations). As in `results.py`, `to_json()` is exactly the
CLI's `--json` for the same command."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from feedledger.api.results import plain
from feedledger.api.times import opt_dt
from feedledger.model.timeutil import from_us
from feedledger.model.types import HealthStatus, Outcome, RunKind, SyncStatus


class _Raw:
    """`to_json()` of the record the layer below returned."""

    _raw: Any

    def to_json(self) -> dict[str, Any]:
        return plain(self._raw)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class Payload(_Raw):
    """An archived publication (`created`: its bytes were new to the archive)."""

    payload_id: str
    source: str
    sha256: str
    published_at: datetime
    fetched_at: datetime
    size: int
    original_name: str | None
    content_type: str | None
    created: bool | None = None
    _raw: Any = field(default=None, repr=False, compare=False)

    @classmethod
    def of(cls, ref: Any, created: bool | None = None) -> Payload:
        return cls(
            ref.payload_id,
            ref.source,
            ref.sha256,
            from_us(ref.published_at),
            from_us(ref.fetched_at),
            ref.size,
            ref.original_name,
            ref.content_type,
            created,
            ref,
        )

    def to_json(self) -> dict[str, Any]:
        data = plain(self._raw)
        if self.created is not None:  # `archive add`: the list item plus "created"
            data["created"] = self.created
        return data  # type: ignore[no-any-return]


@dataclass(frozen=True)
class FreezeState:
    source: str
    frozen: bool
    changed: bool  # False: it already was (frozen) / was not (thawed)
    frozen_at: datetime | None = None
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        if not self.frozen:
            return {"source": self.source, "frozen": False, "changed": self.changed}
        return {
            "source": self.source,
            "frozen": True,
            "frozen_at": self.frozen_at.isoformat() if self.frozen_at else None,
            "reason": self.reason,
            "changed": self.changed,
        }


@dataclass(frozen=True)
class Step:
    published_at: datetime
    payload_id: str
    changes: int
    invalid_geometries: int | None = None  # GIS sources: kept as stated, counted


@dataclass(frozen=True)
class WindowRun(_Raw):
    """A backfill or replay that applied payloads, as ONE run."""

    source: str
    kind: RunKind
    run_id: str
    parent_run_id: str | None
    steps: list[Step]  # applied by this call
    changes: int
    missing_dates: list[date]
    gaps_recorded: int
    resumed: int
    summary: str
    _raw: Any = field(repr=False, compare=False)
    fetched: int = 0  # payloads archived first by this call (backfill)
    retracted_payloads: int = 0  # replay: retracted first
    retracted_versions: int = 0
    retracted_runs: list[str] = field(default_factory=list)  # replay: the runs it hit
    notifications_cancelled: int = 0  # replay: their outbox rows not fanned out yet
    messages_cancelled: int = 0  # replay: their messages not delivered yet
    notify: bool = False  # per-payload notifications queued (else one summary only)
    invalid_geometries: int | None = None  # GIS sources: across the payloads applied

    @classmethod
    def of(cls, r: Any) -> WindowRun:
        return cls(
            r.source,
            RunKind(r.kind),
            r.run_id,
            r.parent_run_id,
            [
                Step(from_us(s.published_at), s.payload_id, s.changes, s.invalid_geometries)
                for s in r.steps
            ],
            r.changes,
            list(r.missing_dates),
            r.gaps_recorded,
            r.resumed,
            r.summary,
            r,
            fetched=len(r.fetched),
            retracted_payloads=r.retracted_payloads,
            retracted_versions=r.retracted_versions,
            retracted_runs=list(r.retracted_runs),
            notifications_cancelled=r.notifications_cancelled,
            messages_cancelled=r.messages_cancelled,
            notify=r.notify,
            invalid_geometries=r.invalid_geometries,
        )


@dataclass(frozen=True)
class NothingToDo(_Raw):
    """A backfill, replay or `run` with nothing to apply: a success."""

    source: str
    reason: str
    kind: RunKind | None = None
    _raw: Any = field(default=None, repr=False, compare=False)
    hint: str | None = None  # e.g. late payloads a replay would fold in


@dataclass(frozen=True)
class NotModified:
    """`run`: the publisher answered 'not modified' (HTTP 304)."""

    source: str

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "status": "not_modified"}


@dataclass(frozen=True)
class Recovered:
    """`run` found several publications waiting and applied them as one backfill."""

    source: str
    missed_dates: list[date]
    archived_now: int
    backfill: WindowRun

    def to_json(self) -> dict[str, Any]:
        b = self.backfill
        return {
            "source": self.source,
            "status": "recovered",
            "run_id": b.run_id,
            "kind": b.kind.value,
            "changes": b.changes,
            "payloads": len(b.steps),
            "missed_dates": [d.isoformat() for d in self.missed_dates],
            "archived_now": self.archived_now,
            "gaps_recorded": b.gaps_recorded,
            "backfill": b.to_json(),
        }


@dataclass(frozen=True)
class Retraction(_Raw):
    run_id: str  # the retraction run
    source: str
    retracted_runs: list[str]  # newest first
    payloads: int
    versions: int
    gaps: int
    notifications_cancelled: int
    messages_cancelled: int
    retracted_at: datetime
    _raw: Any = field(repr=False, compare=False)

    @classmethod
    def of(cls, r: Any) -> Retraction:
        return cls(
            r.run_id,
            r.source,
            list(r.retracted_runs),
            r.payloads,
            r.versions,
            r.gaps,
            r.notifications_cancelled,
            r.messages_cancelled,
            from_us(r.recorded_at),
            r,
        )


@dataclass(frozen=True)
class SourceHealth(_Raw):
    source: str
    status: HealthStatus
    stale: bool
    frozen: bool
    missed_publications: int
    missed_dates: list[date]
    last_publisher_date: datetime | None
    last_successful_fetch: datetime | None
    held_runs: int
    _raw: Any = field(repr=False, compare=False)
    # one line while the publisher's date is ahead of the clock or went back before the
    # watermark with other content; `health` fails while it stands
    publisher_date_problem: str | None = None
    last_observed_at: datetime | None = None  # the last successful fetch, new or not

    @property
    def failing(self) -> bool:
        """Whether `health` fails for this source (stale, or its publisher date)."""
        return self.stale or self.publisher_date_problem is not None

    @classmethod
    def of(cls, h: Any) -> SourceHealth:
        status = HealthStatus(h.status)
        return cls(
            h.source,
            status,
            h.stale,
            h.frozen,
            h.missed,
            list(h.missed_dates),
            opt_dt(h.last_publisher_at),
            opt_dt(h.last_success_at),
            h.held_runs,
            h,
            h.publisher_date_problem,
            opt_dt(h.last_observed_at),
        )


@dataclass(frozen=True)
class Assessment(_Raw):
    """What a window holds: replayable and late payloads, missing dates (fetchable or
    unrecoverable)."""

    source: str
    start: date
    end: date
    replayable: list[str]  # payload ids, publisher order
    late: list[str]
    missing_dates: list[date]
    fetchable_dates: list[date]
    unrecoverable_dates: list[date]
    _raw: Any = field(repr=False, compare=False)
    # served but not after the watermark: `backfill` archives them, `replay` applies them
    fetchable_late_dates: list[date] = field(default_factory=list)

    @classmethod
    def of(cls, a: Any) -> Assessment:
        return cls(
            a.source,
            a.start,
            a.end,
            [p.payload_id for p in a.replayable],
            [p.payload_id for p in a.late],
            list(a.missing_dates),
            a.fetchable_dates,
            a.unrecoverable_dates,
            a,
            a.fetchable_late_dates,
        )


@dataclass(frozen=True)
class Check:
    """One `verify` comparison (`store_state` or `cache`) against the state recomputed
    from history: rows found, and the first keys missing, extra or different."""

    name: str
    rows: int
    missing: list[Any]
    extra: list[Any]
    different: list[Any]
    ok: bool

    @classmethod
    def of(cls, c: dict[str, Any]) -> Check:
        return cls(
            c["name"], c["rows"], list(c["missing"]), list(c["extra"]), list(c["different"]),
            c["ok"],
        )  # fmt: skip


@dataclass(frozen=True)
class Verification:
    """`verify`: the diff state (store read and local cache) against history."""

    source: str
    ok: bool
    entities: int
    live: int
    checks: list[Check]
    _raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def of(cls, r: dict[str, Any]) -> Verification:
        checks = [Check.of(c) for c in r["checks"]]
        return cls(r["source"], r["ok"], r["entities"], r["live"], checks, r)

    def to_json(self) -> dict[str, Any]:
        return plain(self._raw)  # type: ignore[no-any-return]


def _outcomes(counts: dict[str, int]) -> dict[Outcome, int]:
    return {Outcome(k): int(v) for k, v in counts.items()}


@dataclass(frozen=True)
class SyncReport(_Raw):
    destination: str
    manifest: str | None
    status: SyncStatus
    outcomes: dict[Outcome, int]  # the guard's verdicts
    live_written: int
    _raw: Any = field(repr=False, compare=False)

    @classmethod
    def of(cls, r: Any) -> SyncReport:
        return cls(
            r.destination, r.manifest, SyncStatus(r.status), _outcomes(r.outcomes),
            r.live_written, r,
        )  # fmt: skip

    @property
    def resumed(self) -> dict[str, Any] | None:
        """A rebuild that resumed an interrupted one: {"manifest", "batch", "batches",
        "keys_done", "population"} (where it resumed); None otherwise."""
        got: dict[str, Any] | None = self._raw.resumed
        return got


@dataclass(frozen=True)
class Reconciliation(_Raw):
    destination: str
    manifest: str
    complete: bool
    population: int
    outcomes: dict[Outcome, int]
    _raw: Any = field(repr=False, compare=False)

    @classmethod
    def of(cls, r: Any) -> Reconciliation:
        return cls(r.destination, r.manifest, r.complete, r.population, _outcomes(r.outcomes), r)
