"""A gap recorded by hand (`gap add`): refused where the source was observed or an
identical gap stands; recorded as a run of kind `manual` in one transaction."""

from __future__ import annotations

from sqlalchemy import Connection

from feedledger.ledger import gaps
from feedledger.ledger.runs.leases import check_held
from feedledger.ledger.runs.retraction import commit_time, standing
from feedledger.ledger.store import Store
from feedledger.model.cadence import local_date
from feedledger.model.errors import ConfigError


def check_unobserved(
    conn: Connection, source: str, tz: str, start_us: int, end_us: int, label: str
) -> None:
    """Refuse a gap [start_us, end_us) over days with an applied payload, or one that
    is recorded already (ConfigError)."""
    inside = [a for a in standing(conn, source) if start_us <= a.published_at < end_us]
    if inside:
        days = sorted({local_date(a.published_at, tz) for a in inside})
        raise ConfigError(
            f"payloads published on {', '.join(map(str, days))} were applied inside "
            f"{label}: those days were observed; nothing was recorded",
            source=source,
            hint="a gap covers only days with no applied payload",
        )
    if gaps.covering(conn, source, start_us, end_us):
        raise ConfigError(f"a gap for {label} is already recorded; nothing changed", source=source)


def precheck(store: Store, source: str, tz: str, start_us: int, end_us: int, label: str) -> None:
    """`check_unobserved` without a lease (a refusal leaves no trace)."""
    with store.engine.connect() as conn:
        check_unobserved(conn, source, tz, start_us, end_us, label)


def record_by_hand(
    store: Store,
    source: str,
    tz: str,
    start_us: int,
    end_us: int,
    label: str,
    *,
    reason: str,
    holder: str,
    run_id: str,
) -> None:
    """Record the gap as run `run_id` (holding the source's lease), checked again in
    the same transaction."""
    with store.begin() as conn:
        check_held(conn, source, holder, run_id)
        check_unobserved(conn, source, tz, start_us, end_us, label)
        _wm, at = commit_time(store, conn, source)
        gaps.record(
            conn, source, [(start_us, end_us)], reason=reason, run_id=run_id, recorded_at=at
        )
