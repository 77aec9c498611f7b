"""Results about a source's history: versions, gaps, an entity as of a time, a snapshot's
gap, the watermark, a run's changes."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from feedledger.api.results.common import decoded, instant_of, iso_of, plain
from feedledger.api.times import opt_dt
from feedledger.model.timeutil import from_us
from feedledger.model.types import (
    ChangeKind,
    Outcome,
    Presence,
)


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
            key=decoded(v.key),
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
            attributes=decoded(v.attributes),
            geometry=decoded(v.geometry),
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
            last_observed_at=instant_of(a.get("last_observed_at")),
            next_observed_at=instant_of(a.get("next_observed_at")),
            first_recorded_at=instant_of(a.get("first_recorded_at")),
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
            "last_observed_at": iso_of(self.last_observed_at),
            "next_observed_at": iso_of(self.next_observed_at),
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
            key=decoded(c.key),
            change=ChangeKind(c.change),
            valid_from=from_us(c.valid_from),
            before=decoded(c.before),
            after=decoded(c.after),
            payload_id=c.payload_id,
            geometry_changed=c.geometry_changed,
            _raw=c,
        )

    @classmethod
    def held(cls, o: Any) -> Change:
        return cls(
            key=decoded(o.key),
            change=None,
            valid_from=from_us(o.valid_from),
            before=None,
            after=decoded(o.attributes),
            payload_id=o.payload_id,
            outcome=Outcome(o.outcome),
            revision=o.revision,
            current_revision=o.current_revision,
            _raw=o,
        )

    def to_json(self) -> dict[str, Any]:
        return plain(self._raw)  # type: ignore[no-any-return]
