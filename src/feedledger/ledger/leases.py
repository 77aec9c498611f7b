"""Per-source leases stored in the ledger (Invariant 7: at most one run per source).

A lease row names its holder (`host:pid:token`), the run and an expiry. It is taken
in a write transaction (SQLite: BEGIN IMMEDIATE; PostgreSQL: SELECT ... FOR UPDATE),
checked again inside every payload transaction (a fencing check: a holder that lost
its lease cannot commit), and released at the end. A lease whose expiry has passed,
or whose holder is a dead process on this same host, may be taken over; the runs it
left `running` are marked `abandoned`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import Connection, insert, select, update

from feedledger.ledger.holders import holder_dead
from feedledger.ledger.holders import new_holder as new_holder
from feedledger.ledger.schema import leases, runs
from feedledger.model.errors import LeaseHeldError, SourceFrozenError
from feedledger.model.timeutil import iso, now_us

if TYPE_CHECKING:
    from feedledger.ledger.store import Store

DEFAULT_TTL_S = 600


def acquire(
    store: Store,
    source: str,
    holder: str,
    run_id: str,
    ttl_s: int = DEFAULT_TTL_S,
    *,
    run_kind: str | None = None,
    parent_run_id: str | None = None,
) -> None:
    """Take the source's lease; with `run_kind`, also start the run (same transaction)."""
    now = now_us()
    with store.begin() as conn:
        if store.dialect == "postgresql":
            conn.exec_driver_sql(
                "INSERT INTO leases (source) VALUES (%(s)s) ON CONFLICT DO NOTHING",
                {"s": source},
            )
        stmt = select(leases).where(leases.c.source == source)
        row = conn.execute(store.for_update(stmt)).first()
        if row is None:
            conn.execute(insert(leases).values(source=source))
        elif row.holder and row.holder != holder:
            expired = row.expires_at is not None and row.expires_at < now
            if not expired and not holder_dead(row.holder):
                raise LeaseHeldError(
                    f"another run ({row.run_id}) holds this source's lease "
                    f"(holder {row.holder}, until {iso(row.expires_at)})",
                    source=source,
                    hint="one run per source at a time; wait for it to finish",
                )
            store.abandon_runs(conn, source, row.holder)
        conn.execute(
            update(leases)
            .where(leases.c.source == source)
            .values(
                holder=holder,
                run_id=run_id,
                acquired_at=now,
                expires_at=now + ttl_s * 1_000_000,
            )
        )
        if run_kind == "live":
            from feedledger.ledger.freezes import frozen

            ice = frozen(conn, source)
            if ice is not None:
                raise SourceFrozenError(
                    f"the source is frozen (since {iso(ice.frozen_at)}"
                    + (f": {ice.reason}" if ice.reason else "")
                    + "); live runs are refused while it is, nothing changed",
                    source=source,
                    hint="backfill, replay and retract still work; "
                    f"`feedledger thaw {source}` resumes live runs",
                )
        if run_kind is not None:
            conn.execute(
                insert(runs).values(
                    run_id=run_id,
                    source=source,
                    kind=run_kind,
                    status="running",
                    started_at=now,
                    holder=holder,
                    parent_run_id=parent_run_id,
                    payloads=0,
                    changes=0,
                )
            )


def check_held(
    conn: Connection, source: str, holder: str, run_id: str, ttl_s: int = DEFAULT_TTL_S
) -> None:
    """Fencing check inside a payload transaction; also extends the lease."""
    row = conn.execute(select(leases).where(leases.c.source == source)).first()
    if row is None or row.holder != holder or row.run_id != run_id:
        raise LeaseHeldError(
            "this run no longer holds the source's lease; nothing was written",
            source=source,
        )
    conn.execute(
        update(leases)
        .where(leases.c.source == source)
        .values(expires_at=now_us() + ttl_s * 1_000_000)
    )


def release(
    store: Store,
    source: str,
    holder: str,
    *,
    run_id: str | None = None,
    status: str | None = None,
    error: str | None = None,
) -> None:
    """Release the lease; with `run_id` and `status`, also finish the run (same txn)."""
    with store.begin() as conn:
        if run_id is not None and status is not None:
            conn.execute(
                update(runs)
                .where(runs.c.run_id == run_id)
                .values(status=status, finished_at=now_us(), error=error)
            )
        conn.execute(
            update(leases)
            .where(leases.c.source == source, leases.c.holder == holder)
            .values(holder=None, run_id=None, expires_at=None)
        )


@dataclass(slots=True)
class LeasedRun:
    """A run in progress: its id and the lease holder token that fences its writes.
    `outcome` is the status it finishes with if the block succeeds (`held` for a live
    run held for review)."""

    run_id: str
    holder: str
    source: str
    outcome: str = "succeeded"


@contextmanager
def leased_run(
    store: Store, source: str, kind: str, *, parent_run_id: str | None = None
) -> Iterator[LeasedRun]:
    """Start a run of `kind` on `source` under the source's lease (refused with
    LeaseHeldError if another live run holds it; SourceFrozenError for a live run of a
    frozen source), and finish it -- `succeeded`, or `failed` with the error -- releasing
    the lease, however the block ends."""
    run = LeasedRun(run_id=str(uuid.uuid4()), holder=new_holder(), source=source)
    from feedledger.timing import stage

    with stage("lease"):
        acquire(store, source, run.holder, run.run_id, run_kind=kind, parent_run_id=parent_run_id)
    status, error = "failed", None
    try:
        yield run
        status = run.outcome
    except BaseException as exc:
        error = str(exc) or type(exc).__name__
        raise
    finally:
        with stage("release"):
            release(store, source, run.holder, run_id=run.run_id, status=status, error=error)
