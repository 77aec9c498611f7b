"""Typed results of the public API: frozen dataclasses over the enums of `model/types.py`.

Instants are aware UTC `datetime`s, dates are `date`s, attributes are decoded JSON.
Each result keeps the record the layer below returned and its `to_json()` is that
record's JSON: exactly what the CLI's `--json` prints for the same command (README,
"JSON output"), so the CLI can render these results without its JSON changing."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from feedledger.api.times import opt_dt
from feedledger.model.jsonout import RawJSON
from feedledger.model.timeutil import from_us
from feedledger.model.types import ChangeKind, IngestStatus, Outcome, Presence, RunKind, RunStatus


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
