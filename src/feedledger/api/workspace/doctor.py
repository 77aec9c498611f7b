"""`Ledger.doctor` (`feedledger doctor`): the workspace checked as a whole -- schema at
head, PostgreSQL's settings, disk free, each source's state cache against history, the
archive's objects read back, leases of gone holders, dead letters, destinations behind
or unreconciled, sources stale by cadence -- each problem a `Finding` saying what it
means and the command that fixes it (`pipeline/doctor/`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

from feedledger.api.times import instant_us
from feedledger.model.timeutil import iso, now_us

if TYPE_CHECKING:
    from feedledger.context import Context

# the checks in the order they run: pipeline/doctor/findings.CHECKS, said again here so
# that the CLI's --help imports no pipeline (a test keeps the two equal)
CHECK_NAMES = (
    "schema",
    "postgres_settings",
    "disk",
    "state_cache",
    "archive",
    "leases",
    "dead_letters",
    "destinations",
    "stale_sources",
)


@dataclass(frozen=True)
class Finding:
    """One problem: `code` (stable: schema_behind, schema_missing, schema_ahead,
    postgres_setting, disk_low, state_cache_mismatch, archive_object_bad, lease_orphaned,
    dead_letters, destination_behind, destination_rebuild_unfinished,
    destination_unreconciled, source_stale, publisher_date), `severity` (error: data is
    wrong or unreadable; warning: falling behind), `subject` (a source, destination,
    path or setting), `what` was found, `why` it matters, the `fix` command."""

    code: str
    severity: str
    subject: str
    what: str
    why: str
    fix: str

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class CheckRun:
    """One check as it ran: `status` ok, findings or skipped; `note` says how much it
    looked at (whole or sampled) or why it was skipped."""

    check: str
    status: str
    note: str
    findings: int

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class DoctorReport:
    """`ok` when no check found anything (`feedledger doctor` exits 0, else 1)."""

    at: datetime
    full: bool
    findings: list[Finding]
    checks: list[CheckRun]

    @property
    def ok(self) -> bool:
        return not self.findings

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "at": self.at.isoformat().replace("+00:00", "Z"),
            "full": self.full,
            "findings": [f.to_json() for f in self.findings],
            "checks": [c.to_json() for c in self.checks],
        }


def doctor(
    ctx: Context,
    *,
    full: bool = False,
    sample: int | None = None,
    skip: list[str] | None = None,
    at: date | datetime | None = None,
    min_free_bytes: int | None = None,
    destination_lag_s: float | None = None,
) -> DoctorReport:
    """The workspace checked (see `Ledger.doctor`). StoreUnavailableError when its store
    cannot be reached (nothing can be checked then), ConfigError for an unknown check."""
    from feedledger.pipeline.doctor import findings as f  # lazy: SQLAlchemy, Arrow
    from feedledger.pipeline.doctor.examine import examine  # lazy: likewise

    when = instant_us(at, "UTC", "at") if at is not None else now_us()
    extra: dict[str, Any] = {}
    if sample is not None:
        extra["sample"] = max(1, sample)
    if min_free_bytes is not None:
        extra["min_free_bytes"] = min_free_bytes
    if destination_lag_s is not None:
        extra["destination_lag_s"] = destination_lag_s
    opts = f.Options(now_us=when, full=full, skip=frozenset(skip or ()), **extra)
    checks = examine(ctx, opts)
    return DoctorReport(
        datetime.fromisoformat(iso(when) or ""),
        full,
        [Finding(**x.to_json()) for c in checks for x in c.findings],
        [CheckRun(**c.to_json()) for c in checks],
    )
