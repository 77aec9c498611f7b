"""Typed results of the public API: frozen dataclasses over the enums of `model/types.py`
(versions, runs, changes, gaps; runs over a window, retraction, health, freezes, archived
payloads, verify, destinations and their manifests).

Instants are aware UTC `datetime`s, dates are `date`s, attributes are decoded JSON.
Each result keeps the record the layer below returned and its `to_json()` is that
record's JSON: exactly what the CLI's `--json` prints for the same command (README,
"JSON output"), so the CLI can render these results without its JSON changing."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from feedledger.api.times import opt_dt
from feedledger.model.jsonout import RawJSON
from feedledger.model.timeutil import from_us
from feedledger.model.types import (
    ChangeKind,
    HealthStatus,
    IngestStatus,
    Outcome,
    Presence,
    RunKind,
    RunStatus,
    SyncStatus,
)


def plain(value: Any) -> Any:
    """`value` with every object that has `to_json` replaced by its JSON (RawJSON texts
    are kept: `model.jsonout.dumps` writes them verbatim, number literals intact)."""
    if isinstance(value, RawJSON):
        return value
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    to_json = getattr(value, "to_json", None)
    if callable(to_json):
        return plain(to_json())
    return value


def _decode(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _instant(text: str | None) -> datetime | None:
    """An instant of a record's JSON (ISO-8601 text, `model.timeutil.iso`) as a datetime."""
    return None if text is None else datetime.fromisoformat(text)


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


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
class Version:
    """One row of an entity's bitemporal history (a tombstone when `deleted`)."""

    key: Any  # the key values (a list: compound keys field by field)
    valid_from: datetime
    valid_to: datetime | None
    recorded_at: datetime
    retracted_at: datetime | None
    run_id: str
    payload_id: str
    backfill: bool
    deleted: bool
    change: ChangeKind
    revision: str | None
    attributes: dict[str, Any] | None  # the record as stated; None for a tombstone
    # GIS sources: the geometry as stated (a GeoJSON geometry object); None for a
    # tombstone, a feature without geometry, or a source that is not a GIS one
    geometry: dict[str, Any] | None = None
    _raw: Any = field(default=None, repr=False, compare=False)

    @classmethod
    def of(cls, v: Any) -> Version:
        return cls(
            key=_decode(v.key),
            valid_from=from_us(v.valid_from),
            valid_to=opt_dt(v.valid_to),
            recorded_at=from_us(v.recorded_at),
            retracted_at=opt_dt(v.retracted_at),
            run_id=v.run_id,
            payload_id=v.payload_id,
            backfill=bool(v.backfill),
            deleted=bool(v.deleted),
            change=ChangeKind(v.change),
            revision=v.revision,
            attributes=_decode(v.attributes),
            geometry=_decode(v.geometry),
            _raw=v,
        )

    def to_json(self) -> dict[str, Any]:
        return plain(self._raw)  # type: ignore[no-any-return]


def opt_version(v: Any) -> Version | None:
    return None if v is None else Version.of(v)


@dataclass(frozen=True)
class Gap:
    """A stretch [start, end) of valid time the source was not observed."""

    source: str
    start: datetime
    end: datetime  # exclusive
    reason: str
    run_id: str
    recorded_at: datetime
    retracted_at: datetime | None
    _raw: Any = field(repr=False, compare=False)

    @classmethod
    def of(cls, g: Any) -> Gap:
        return cls(
            source=g.source,
            start=from_us(g.start_at),
            end=from_us(g.end_at),
            reason=g.reason,
            run_id=g.run_id,
            recorded_at=from_us(g.recorded_at),
            retracted_at=opt_dt(g.retracted_at),
            _raw=g,
        )

    def to_json(self) -> dict[str, Any]:
        return plain(self._raw)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class AsOf:
    """What a key was at a valid time, as known at a transaction time."""

    status: Presence
    version: Version | None
    gap: Gap | None = None  # not_observed: the standing gap
    last_observed: Version | None = None
    next_observed: Version | None = None
    # publisher dates of the source's last observation before the gap and next after
    # it (not_observed); when anything of the source was first recorded (not_known)
    last_observed_at: datetime | None = None
    next_observed_at: datetime | None = None
    first_recorded_at: datetime | None = None
    _raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def of(cls, a: dict[str, Any]) -> AsOf:
        gap = a.get("gap")
        return cls(
            status=Presence(a["status"]),
            version=opt_version(a["version"]),
            gap=Gap.of(gap) if gap is not None else None,
            last_observed=opt_version(a.get("last_observed")),
            next_observed=opt_version(a.get("next_observed")),
            last_observed_at=_instant(a.get("last_observed_at")),
            next_observed_at=_instant(a.get("next_observed_at")),
            first_recorded_at=_instant(a.get("first_recorded_at")),
            _raw=a,
        )

    def to_json(self) -> dict[str, Any]:
        return plain(self._raw)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class SnapshotGap:
    """A snapshot's valid time inside a standing gap: the gap, and the publisher dates
    of the source's last observation before it and next after it (None: none)."""

    gap: Gap
    last_observed_at: datetime | None
    next_observed_at: datetime | None

    def to_json(self) -> dict[str, Any]:
        return {
            "gap": self.gap.to_json(),
            "last_observed_at": _iso(self.last_observed_at),
            "next_observed_at": _iso(self.next_observed_at),
        }


@dataclass(frozen=True)
class Watermark:
    """The source's last applied payload (None values: nothing applied yet)."""

    source: str
    published_at: datetime | None
    payload_id: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "published_at": self.published_at.isoformat() if self.published_at else None,
            "payload_id": self.payload_id,
        }


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
class Change:
    """What a run did to one key: a change (`change` set), or a record it did not apply
    (`change` None, `outcome` unresolved or superseded)."""

    key: Any
    change: ChangeKind | None
    valid_from: datetime
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    payload_id: str
    outcome: Outcome | None = None
    revision: str | None = None
    current_revision: str | None = None
    # GIS sources: whether the change moved the geometry (canonical form); None for
    # other sources and for records not applied
    geometry_changed: bool | None = None
    _raw: Any = field(default=None, repr=False, compare=False)

    @classmethod
    def of(cls, c: Any) -> Change:
        return cls(
            key=_decode(c.key),
            change=ChangeKind(c.change),
            valid_from=from_us(c.valid_from),
            before=_decode(c.before),
            after=_decode(c.after),
            payload_id=c.payload_id,
            geometry_changed=c.geometry_changed,
            _raw=c,
        )

    @classmethod
    def held(cls, o: Any) -> Change:
        return cls(
            key=_decode(o.key),
            change=None,
            valid_from=from_us(o.valid_from),
            before=None,
            after=_decode(o.attributes),
            payload_id=o.payload_id,
            outcome=Outcome(o.outcome),
            revision=o.revision,
            current_revision=o.current_revision,
            _raw=o,
        )

    def to_json(self) -> dict[str, Any]:
        return plain(self._raw)  # type: ignore[no-any-return]


class Raw:
    """`to_json()` of the record the layer below returned."""

    _raw: Any

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


@dataclass(frozen=True)
class SourceHealth(Raw):
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
class Assessment(Raw):
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
class SyncReport(Raw):
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
class Reconciliation(Raw):
    destination: str
    manifest: str
    complete: bool
    population: int
    outcomes: dict[Outcome, int]
    _raw: Any = field(repr=False, compare=False)

    @classmethod
    def of(cls, r: Any) -> Reconciliation:
        return cls(r.destination, r.manifest, r.complete, r.population, _outcomes(r.outcomes), r)


@dataclass(frozen=True)
class Manifest(Raw):
    """A frozen population for rebuilds: its keys (`population`), the source boundary
    (watermark, payload, commit sequence, `created_at` as the transaction time) and the
    transform generation; `reconstructible`: its snapshot can be rebuilt exactly."""

    manifest_id: str
    name: str
    source: str
    created_at: datetime
    generation: str
    population: int
    reconstructible: bool
    keys_from: str | None
    _raw: Any = field(repr=False, compare=False)

    @classmethod
    def of(cls, m: Any) -> Manifest:
        return cls(
            m.manifest_id,
            m.name,
            m.source,
            from_us(m.created_at),
            m.generation,
            m.population,
            m.reconstructible,
            m.keys_from,
            m,
        )


@dataclass(frozen=True)
class DestinationLag:
    """How far a destination's live route is behind its source (`health`)."""

    destination: str
    source: str
    paused: bool
    cursor: int
    messages_behind: int
    changes_behind: int
    oldest_pending_at: datetime | None
    lag_s: float
    # rebuilds begun and not finished (running, or interrupted: a rerun resumes there):
    # {"manifest", "batch", "batches", "keys_done", "population"} each
    unfinished_rebuilds: list[dict[str, Any]]
    _raw: dict[str, Any] = field(repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        return self._raw

    @classmethod
    def of(cls, d: dict[str, Any]) -> DestinationLag:
        oldest = d["oldest_pending_at"]
        return cls(
            d["destination"],
            d["source"],
            d["paused"],
            d["cursor"],
            d["messages_behind"],
            d["changes_behind"],
            None if oldest is None else datetime.fromisoformat(oldest),
            d["lag_s"],
            d.get("unfinished_rebuilds", []),
            d,
        )
