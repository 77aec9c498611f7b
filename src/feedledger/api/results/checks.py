"""Results of checks and of destinations: health, a window's assessment, verify, a sync, a
reconciliation, a manifest, a destination's lag."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from feedledger.api.results.common import Raw, plain
from feedledger.api.times import opt_dt
from feedledger.model.timeutil import from_us
from feedledger.model.types import (
    HealthStatus,
    Outcome,
    SyncStatus,
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
class WarmState:
    """One source's diff state a resident process holds in memory: the commit sequence
    it was taken at, and whether it is still current (a state that is not is reloaded
    before its next use, never used)."""

    source: str
    commit_seq: int
    rows: int
    bytes: int
    current: bool


@dataclass(frozen=True)
class ResidentProcess(Raw):
    """A scheduler process of this workspace (on this host) and the diff states it keeps
    warm: at most `max_warm_sources`, `bytes_held` in all; its resident set after its
    last attempt (`rss_bytes`) and the most it ever held (`peak_rss_bytes`), where the
    platform says (None: not known)."""

    holder: str
    pid: int
    updated_at: str | None
    max_warm_sources: int
    bytes_held: int
    states: list[WarmState]
    _raw: Any = field(repr=False, compare=False)
    rss_bytes: int | None = None
    peak_rss_bytes: int | None = None

    @classmethod
    def of(cls, r: dict[str, Any]) -> ResidentProcess:
        states = [
            WarmState(s["source"], s["commit_seq"], s["rows"], s["bytes"], s["current"])
            for s in r.get("sources", [])
        ]
        return cls(
            r["holder"], r["pid"], r.get("updated_at"), r["max_warm_sources"],
            r["bytes_held"], states, r, r.get("rss_bytes"), r.get("peak_rss_bytes"),
        )  # fmt: skip


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
