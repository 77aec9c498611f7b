"""Runs and who may start one (ledger/runs/): here, the `runs` table's writes -- a run
from its start to its end; `lookup` reads the table (this package is its one owner);
`leases` (one run per source at a time, and claims), `holders` (the processes holding
them), `freezes`, `backfills` (resuming an unfinished backfill, its last transaction),
`retraction` (by run id; itself a run).

A run is one unit of work on one source with one run id (`live`, `backfill`,
`replay`, `retraction`, `sync`). It is started with the source's lease (`start`,
or `reopen` for a resumed backfill), counts what its payload transactions applied
(`count`), and is finished with the lease's release (`finish`), or marked
`abandoned` when its holder died (`abandon`). Functions taking a `Connection` run
inside the caller's transaction; the others open their own.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from sqlalchemy import Connection, delete, exists, insert, or_, select, update

from feedledger.ledger.schema import applications, gaps, outbox, outcomes, runs, write_audit
from feedledger.model.errors import LeaseHeldError
from feedledger.model.timeutil import now_us

if TYPE_CHECKING:
    from feedledger.ledger.store import Store

UNFINISHED = ("failed", "interrupted", "abandoned", "running")
RESUMABLE = ("failed", "interrupted", "abandoned")


def start(
    conn: Connection,
    *,
    run_id: str,
    source: str,
    kind: str,
    holder: str,
    started_at: int,
    parent_run_id: str | None = None,
    window: tuple[int, int] | None = None,
) -> None:
    """Record a new run, `running` under `holder`."""
    conn.execute(
        insert(runs).values(
            run_id=run_id,
            source=source,
            kind=kind,
            status="running",
            started_at=started_at,
            holder=holder,
            parent_run_id=parent_run_id,
            payloads=0,
            changes=0,
            window_start=window[0] if window else None,
            window_end=window[1] if window else None,
        )
    )


def reopen(conn: Connection, source: str, run_id: str, holder: str, now: int) -> None:
    """Make the unfinished run `run_id` running again under `holder`, appending the
    interruption to its `resumptions`. Refused if the run is not (or no longer)
    resumable."""
    row = conn.execute(select(runs).where(runs.c.run_id == run_id)).first()
    if row is None or row.source != source or row.status not in RESUMABLE:
        status = row.status if row is not None else "gone"
        raise LeaseHeldError(
            f"run {run_id} cannot be resumed: it is {status}",
            source=source,
            hint="run the command again",
        )
    done = json.loads(row.resumptions) if row.resumptions else []
    done.append(
        {
            "status": row.status,
            "error": row.error,
            "interrupted_at": row.finished_at,
            "resumed_at": now,
        }
    )
    conn.execute(
        update(runs)
        .where(runs.c.run_id == run_id)
        .values(
            status="running",
            holder=holder,
            finished_at=None,
            error=None,
            resumptions=json.dumps(done),
        )
    )


def count(conn: Connection, run_id: str, *, payloads: int, changes: int) -> None:
    """Add to a run's payload and change counters."""
    conn.execute(
        update(runs)
        .where(runs.c.run_id == run_id)
        .values(payloads=runs.c.payloads + payloads, changes=runs.c.changes + changes)
    )


def set_status(conn: Connection, run_id: str, status: str, *, only_from: str | None = None) -> bool:
    """Set the run's status; with `only_from`, only if it is that now (decided again in
    the caller's transaction). Returns whether the run was changed."""
    stmt = update(runs).where(runs.c.run_id == run_id)
    if only_from is not None:
        stmt = stmt.where(runs.c.status == only_from)
    return bool(conn.execute(stmt.values(status=status)).rowcount)


def finish(
    conn: Connection, run_id: str, status: str, error: str | None = None, *, holder: str
) -> bool:
    """A run's final status, finish time and error, set by the run's holder only: a
    holder whose lease was taken over (it stalled past the lease's expiry) leaves alone
    the run its successor resumed under a new holder (`reopen`), or abandoned. Returns
    whether the run was changed."""
    result = conn.execute(
        update(runs)
        .where(runs.c.run_id == run_id, runs.c.holder == holder, runs.c.status == "running")
        .values(status=status, finished_at=now_us(), error=error)
    )
    return bool(result.rowcount)


def discard(conn: Connection, run_id: str, holder: str) -> bool:
    """Remove the run `run_id` if it did nothing at all: a run started under the lease of
    `holder` (still `running`, never resumed) that found under the lease that
    another run had done its work already. Nothing may name it: no application, outcome,
    outbox row, gap, write audit or child run, and its counters are zero. Returns False
    (and removes nothing) otherwise; the caller then finishes it as usual."""
    child = runs.alias("child")
    named = or_(
        *(
            exists().where(column == run_id)
            for column in (
                applications.c.run_id,
                applications.c.retracted_by,
                outcomes.c.run_id,
                outbox.c.run_id,
                gaps.c.run_id,
                write_audit.c.run_id,
                child.c.parent_run_id,
            )
        )
    )
    result = conn.execute(
        delete(runs).where(
            runs.c.run_id == run_id,
            runs.c.holder == holder,
            runs.c.status == "running",
            runs.c.payloads == 0,
            runs.c.changes == 0,
            runs.c.resumptions.is_(None),
            ~named,
        )
    )
    return bool(result.rowcount)


def set_parent(store: Store, run_id: str, parent_run_id: str) -> None:
    """Link a run to the one it continues (its own transaction)."""
    with store.begin() as conn:
        conn.execute(
            update(runs).where(runs.c.run_id == run_id).values(parent_run_id=parent_run_id)
        )


def abandon(
    conn: Connection, source: str, holder: str, why: str = "the process holding the lease died"
) -> None:
    """Mark runs left `running` by a lease holder that is gone (or whose lease expired
    unrenewed) as abandoned, `why` as their error."""
    conn.execute(
        update(runs)
        .where(runs.c.source == source, runs.c.holder == holder, runs.c.status == "running")
        .values(status="abandoned", finished_at=now_us(), error=why)
    )
