"""Results about runs: an ingest and its counts, a run, archived payloads, a freeze, a
window's run (backfill, replay), nothing to do, a recovery, a retraction."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from feedledger.api.results.common import Raw, plain
from feedledger.api.times import opt_dt
from feedledger.model.timeutil import from_us
from feedledger.model.types import (
    ChangeKind,
    IngestStatus,
    Outcome,
    RunKind,
    RunStatus,
)


@dataclass(frozen=True)
class Counts:
    """What one payload did to the source's entities."""

    added: int = 0
    changed: int = 0
    deleted: int = 0
    unchanged: int = 0
    superseded: int = 0
    unresolved: int = 0
    observations: int = 0
    live_before: int = 0

    @classmethod
    def of(cls, counts: Mapping[str, int]) -> Counts:
        """From the diff's tally, keyed by `ChangeKind` / `Outcome` values and the
        `unchanged`, `observations` and `live_before` totals."""
        names = cls.__dataclass_fields__
        return cls(**{str(k): int(v) for k, v in counts.items() if k in names})

    @property
    def by_change(self) -> dict[ChangeKind, int]:
        """The changes by kind (`ChangeKind` keys)."""
        return {kind: getattr(self, kind.value) for kind in ChangeKind}

    @property
    def held_back(self) -> dict[Outcome, int]:
        """The records not applied, by verdict (`Outcome.SUPERSEDED`, `.UNRESOLVED`)."""
        return {o: getattr(self, o.value) for o in (Outcome.SUPERSEDED, Outcome.UNRESOLVED)}


@dataclass(frozen=True)
class Ingested:
    """A live run's result (`ingest`, or `run` when one publication was waiting)."""

    source: str
    status: IngestStatus
    payload_id: str
    published_at: datetime
    sha256: str
    archived: bool  # the bytes were new to the archive
    run_id: str | None
    applied_by_run: str | None  # already applied: by this run
    changes: int
    recorded_at: datetime | None
    held_for_review: bool
    counts: Counts
    _raw: Any = field(repr=False, compare=False)
    # GIS sources: features with an invalid geometry (kept as stated); None otherwise
    invalid_geometries: int | None = None

    @classmethod
    def of(cls, r: Any) -> Ingested:
        return cls(
            source=r.source,
            status=IngestStatus(r.status),
            payload_id=r.payload.payload_id,
            published_at=from_us(r.payload.published_at),
            sha256=r.payload.sha256,
            archived=r.archived,
            run_id=r.run_id,
            applied_by_run=r.applied_by,
            changes=r.changes,
            recorded_at=opt_dt(r.recorded_at),
            held_for_review=r.held,
            counts=Counts.of(r.counts),
            _raw=r,
            invalid_geometries=r.invalid_geometries,
        )

    def to_json(self) -> dict[str, Any]:
        return plain(self._raw)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class Resumption:
    """An unfinished run taken up again: the status and error it was left with, when it
    stopped (None: not recorded) and when it was resumed."""

    status: RunStatus
    error: str | None
    interrupted_at: datetime | None
    resumed_at: datetime

    @classmethod
    def of(cls, r: dict[str, Any]) -> Resumption:
        return cls(
            RunStatus(r["status"]), r["error"], opt_dt(r["interrupted_at"]),
            from_us(r["resumed_at"]),
        )  # fmt: skip


@dataclass(frozen=True)
class Run:
    run_id: str
    source: str
    kind: RunKind
    status: RunStatus
    started_at: datetime
    finished_at: datetime | None
    payloads: int
    changes: int
    parent_run_id: str | None
    error: str | None
    resumed: list[Resumption]  # each interruption and its resumption, oldest first
    _raw: Any = field(repr=False, compare=False)
    # when everything the run wrote was retracted (None: some of it stands, or it wrote
    # nothing), and the runs that retracted any of it (a replay may retract only part)
    retracted_at: datetime | None = None
    retracted_by: list[str] = field(default_factory=list)

    @property
    def retracted(self) -> bool:
        """Everything the run wrote was retracted (its status says how it ended)."""
        return self.retracted_at is not None or self.status is RunStatus.RETRACTED

    @classmethod
    def of(cls, r: Any) -> Run:
        return cls(
            run_id=r.run_id,
            source=r.source,
            kind=RunKind(r.kind),
            status=RunStatus(r.status),
            started_at=from_us(r.started_at),
            finished_at=opt_dt(r.finished_at),
            payloads=r.payloads,
            changes=r.changes,
            parent_run_id=r.parent_run_id,
            error=r.error,
            resumed=[Resumption.of(x) for x in r.resumed],
            _raw=r,
            retracted_at=opt_dt(r.retracted_at),
            retracted_by=list(r.retracted_by),
        )

    def to_json(self) -> dict[str, Any]:
        return plain(self._raw)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class Payload(Raw):
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
class Publication:
    """`peek`: the newest publication as the publisher states it now, nothing archived
    or applied. `version` changes exactly when the publication does (an ETag, a portal's
    edit date, the newest dated file, or the newest payload's hash); `via` says how it
    was asked: `metadata` (a connector), `listing` (a folder), `head` (HTTP), `fetched`."""

    source: str
    published_at: datetime | None  # None: the payload states it (a field)
    version: str
    etag: str | None
    via: str

    @classmethod
    def of(cls, p: Any) -> Publication:
        return cls(p.source, opt_dt(p.published_at), p.version, p.etag, p.via)

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "published_at": None if self.published_at is None else self.published_at.isoformat(),
            "version": self.version,
            "etag": self.etag,
            "via": self.via,
        }


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
class WindowRun(Raw):
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
class NothingToDo(Raw):
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
class Retraction(Raw):
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
