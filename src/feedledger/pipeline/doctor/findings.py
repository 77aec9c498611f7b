"""What `doctor` says: findings (one problem each: what, what it means, the command that
fixes it), the record of each check (ran, found, skipped: why), and the options and
thresholds it judges by (each with the reason for its default)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Severities: `error` -- data the ledger stands on is wrong or unreadable (a state cache
# that disagrees with history, an archive object that does not decode, a schema the
# code cannot use); `warning` -- the workspace works but is falling behind or will
# (stale, dead letters, a lagging destination, a gone holder's lease, low disk, a
# PostgreSQL setting too small for this load). Either makes `doctor` exit 1.
ERROR = "error"
WARNING = "warning"

# A source's state cache is checked whole below this many keys; above it, a sample of
# keys (`KEY_SAMPLE`) plus the count of keys. Checked whole, `verify` recomputes every
# key's latest version from history: ~1 s of CPU per 100k keys (a 1M-key source: 10.5 s
# whole, 2.0 s sampled, the whole `doctor` process; bench/README.md), so a 20k-parcel
# source costs ~0.2 s and a 1M one is sampled unless `--full`.
FULL_VERIFY_BELOW = 100_000
KEY_SAMPLE = 2_000
# Archive objects read back per source unless `--full` (the newest always among them:
# its chain goes back to the last keyframe, so a broken link anywhere in the chain of
# the current payloads shows there).
ARCHIVE_SAMPLE = 5
# Disk free under the store (SQLite) and the archive (local): below either bound is a
# finding. 2 GiB holds a few days of a 300-source workspace's growth (bench/README.md:
# ~80-200 MB of store per million versions); 5 % keeps the file system out of the
# fragmentation and reserved-block zone.
MIN_FREE_BYTES = 2 << 30
MIN_FREE_FRACTION = 0.05
# A destination whose oldest undelivered change is older than this is behind (a live
# route syncs after each run; an hour is several scheduler ticks missed).
DESTINATION_LAG_S = 3600.0

# The checks, in the order they run (`--skip NAME` leaves one out).
CHECKS = (
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
    """One problem: `code` (stable, for scripts), `severity`, `subject` (the source,
    destination, path or setting), `what` (found), `why` (what it means), `fix` (the
    command that fixes it)."""

    code: str
    severity: str
    subject: str
    what: str
    why: str
    fix: str

    def to_json(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "severity": self.severity,
            "subject": self.subject,
            "what": self.what,
            "why": self.why,
            "fix": self.fix,
        }


@dataclass
class Check:
    """One check as it ran: `status` `ok`, `findings` or `skipped` (`note` says why, or
    how much was looked at: sampled or whole)."""

    name: str
    status: str = "ok"
    note: str = ""
    findings: list[Finding] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "check": self.name,
            "status": self.status,
            "note": self.note,
            "findings": len(self.findings),
        }


@dataclass(frozen=True)
class Options:
    """How `doctor` looks: `full` checks every state cache and archive object whole;
    `sample` archive objects per source otherwise; `skip` names checks left out;
    `now_us` the instant staleness and lag are judged at; the thresholds above."""

    now_us: int
    full: bool = False
    sample: int = ARCHIVE_SAMPLE
    skip: frozenset[str] = frozenset()
    full_verify_below: int = FULL_VERIFY_BELOW
    key_sample: int = KEY_SAMPLE
    min_free_bytes: int = MIN_FREE_BYTES
    min_free_fraction: float = MIN_FREE_FRACTION
    destination_lag_s: float = DESTINATION_LAG_S
