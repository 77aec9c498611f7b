"""Per-source leases stored in the ledger (Invariant 7: at most one run per source).

A lease row names its holder (`host:pid:token:start`, `new_holder`), the run and
an expiry. It is taken in a write transaction (SQLite: BEGIN IMMEDIATE; PostgreSQL:
SELECT ... FOR UPDATE), checked again inside every payload transaction (a fencing
check: a holder that lost its lease cannot commit), and released at the end. A lease
whose expiry has passed, or whose holder is a dead process on this same host, may be
taken over; the runs it left `running` are marked `abandoned`.

Holders are processes (`holders.py`: `new_holder`, `holder_dead`); a lease whose holder
is dead may be taken over at once.

Rolling upgrades: every lease is taken after `engine.refuse_newer` (the store's floor is
a schema this release knows), and names the holder's schema (`holder_schema`, migration
0015), which `db upgrade` reads (`engine.older_holders`; docs/upgrading.md).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import Connection, insert, select, update

from feedledger.ledger import runs
from feedledger.ledger.engine import HEAD, refuse_newer
from feedledger.ledger.runs.freezes import frozen
from feedledger.ledger.runs.holders import holder_dead, new_holder
from feedledger.ledger.schema import leases
from feedledger.model.errors import LeaseHeldError, SourceFrozenError
from feedledger.model.timeutil import iso, now_us
from feedledger.timing import stage

if TYPE_CHECKING:
    from feedledger.ledger.store import Store

DEFAULT_TTL_S = 600
# A leased run's outcome when, re-checked under the lease, its work turned out done
# already (another worker did it between the caller's look and the lease): the run
# leaves no record, rather than a "succeeded" run that did nothing.
NOTHING = "nothing_to_do"
_ttl_s = DEFAULT_TTL_S  # this process's lease time-to-live (the scheduler shortens it)
_active: dict[str, str] = {}  # holder -> source: leases this process holds now
_active_lock = threading.Lock()
# source -> holder: the sources this thread of work has claimed (`claimed`); a leased run
# of one of them goes on under the claim's holder instead of taking the lease anew
_claims: ContextVar[dict[str, str] | None] = ContextVar("feedledger_lease_claims", default=None)


def set_ttl(seconds: int) -> None:
    """The time-to-live of the leases this process takes from now on. A process that
    sets a short one keeps its leases alive with `Heartbeat`."""
    global _ttl_s
    _ttl_s = max(1, int(seconds))


def acquire(
    store: Store,
    source: str,
    holder: str,
    run_id: str | None,
    *,
    run_kind: str | None = None,
    parent_run_id: str | None = None,
    window: tuple[int, int] | None = None,
    reserve: int = 0,
) -> int:
    """Take the source's lease; with `run_kind`, also start the new run `run_id` (same
    transaction; which unfinished run it goes on with is decided under the lease:
    `continue_run`); `run_id` None: a claim, no run (`claimed`). `holder` may take again a
    lease it holds (a run under its claim). `window`: a backfill's requested window, kept
    on the run.
    `reserve`: as many version ids reserved in the same transaction (a live run whose
    diff was computed before it took the lease: one fsync'd transaction fewer); returns
    the first (0: none reserved). Ids of a run that writes none are simply skipped.
    On PostgreSQL the lease row is locked with `FOR UPDATE SKIP LOCKED`: a worker that
    finds another taking the same lease at this moment is refused at once instead of
    queueing behind it (SQLite serialises writers with BEGIN IMMEDIATE)."""
    now = now_us()
    ttl = _ttl_s
    with store.begin() as conn:
        if store.dialect == "postgresql":
            conn.exec_driver_sql(
                "INSERT INTO leases (source) VALUES (%(s)s) ON CONFLICT DO NOTHING",
                {"s": source},
            )
        stmt = select(leases).where(leases.c.source == source)
        if store.dialect == "postgresql":
            row = conn.execute(stmt.with_for_update(skip_locked=True)).first()
            if row is None:
                raise LeaseHeldError(
                    "another run holds this source's lease (another worker is taking it right now)",
                    source=source,
                    hint="one run per source at a time; wait for it to finish",
                )
        else:
            row = conn.execute(stmt).first()
        refuse_newer(conn)  # the store's schema still one this release may run on
        if row is None:
            conn.execute(insert(leases).values(source=source))
        elif row.holder and row.holder != holder:
            expired = row.expires_at is not None and row.expires_at < now
            if not expired and not holder_dead(row.holder):
                who = f"another run ({row.run_id})" if row.run_id else "another worker's attempt"
                raise LeaseHeldError(
                    f"{who} holds this source's lease "
                    f"(holder {row.holder}, until {iso(row.expires_at)})",
                    source=source,
                    hint="one run per source at a time; wait for it to finish",
                )
            why = (
                f"its lease expired at {iso(row.expires_at)} unrenewed (holder {row.holder}"
                " stopped or stalled)"
                if expired
                else f"the process holding the lease ({row.holder}) is gone"
            )
            runs.abandon(conn, source, row.holder, why)
        conn.execute(
            update(leases)
            .where(leases.c.source == source)
            .values(
                holder=holder,
                run_id=run_id,
                acquired_at=now,
                expires_at=now + ttl * 1_000_000,
                heartbeat_at=now,
                holder_schema=f"{HEAD} {holder}",
            )
        )
        if run_kind == "live":
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
            assert run_id is not None
            runs.start(
                conn,
                run_id=run_id,
                source=source,
                kind=run_kind,
                holder=holder,
                started_at=now,
                parent_run_id=parent_run_id,
                window=window,
            )
        if reserve > 0:
            from feedledger.ledger.store import reserve_version_ids  # lazy: store imports polars

            return reserve_version_ids(conn, reserve)
    return 0


@dataclass(frozen=True, slots=True)
class LeaseState:
    """Who holds a source's lease now (all None: free)."""

    holder: str | None
    run_id: str | None
    expires_at: int | None
    heartbeat_at: int | None


def current(conn: Connection, source: str) -> LeaseState | None:
    """The source's lease row, if it has one."""
    row = conn.execute(select(leases).where(leases.c.source == source)).first()
    if row is None:
        return None
    return LeaseState(row.holder, row.run_id, row.expires_at, row.heartbeat_at)


def check_held(conn: Connection, source: str, holder: str, run_id: str) -> None:
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
        .values(expires_at=now_us() + _ttl_s * 1_000_000)
    )


def release(
    store: Store,
    source: str,
    holder: str,
    *,
    run_id: str | None = None,
    status: str | None = None,
    error: str | None = None,
    keep: bool = False,
) -> None:
    """Release the lease; with `run_id` and `status`, also finish the run (same txn),
    if `holder` still holds it (`runs.finish`). Status `NOTHING`: the run found nothing
    to do once it held the lease, and is removed if it wrote nothing (`runs.discard`),
    else finished `succeeded`. `keep`: the run ends but `holder` keeps the lease (its
    claim: `claimed`), naming no run."""
    with store.begin() as conn:
        if run_id is not None and status == NOTHING:
            if not runs.discard(conn, run_id, holder):
                runs.finish(conn, run_id, "succeeded", error, holder=holder)
        elif run_id is not None and status is not None:
            runs.finish(conn, run_id, status, error, holder=holder)
        mine = update(leases).where(leases.c.source == source, leases.c.holder == holder)
        if keep:
            conn.execute(mine.values(run_id=None))
        else:
            conn.execute(
                mine.values(
                    holder=None,
                    run_id=None,
                    expires_at=None,
                    heartbeat_at=None,
                    holder_schema=None,
                )
            )


@contextmanager
def claimed(store: Store, source: str) -> Iterator[str]:
    """Hold the source's lease, with no run, for the block, and yield the holder: what a
    scheduler's attempt takes BEFORE it fetches, reads or diffs anything, so that a
    worker of another process finds the source taken (LeaseHeldError, at the cost of
    one statement) instead of doing the same work to lose the lease at the end. A run
    the block starts on `source` (`leased_run`, on this thread) goes on under the
    claim's holder and leaves the lease claimed when it ends; the block's end releases
    it. Kept alive by `Heartbeat`; a claim whose process died is taken over like any
    lease (it has no run to abandon)."""
    holder = new_holder()
    with stage("claim"):
        acquire(store, source, holder, None)
    token = _claims.set({**(_claims.get() or {}), source: holder})
    with _active_lock:
        _active[holder] = source
    try:
        yield holder
    finally:
        _claims.reset(token)
        with _active_lock:
            _active.pop(holder, None)
        release(store, source, holder)


def continue_run(store: Store, run: LeasedRun, run_id: str) -> None:
    """Under the lease `run` holds, go on with the unfinished run `run_id` (decided under
    the lease: ledger/runs/backfills.py `resumable`) instead of the fresh run the lease was
    taken with. In one transaction, the lease still checked: the fresh run, which did
    nothing, is removed, `run_id` is reopened under the same holder and named on the
    lease. `run.run_id` becomes `run_id` (its writes and its finish are fenced by it)."""
    with store.begin() as conn:
        check_held(conn, run.source, run.holder, run.run_id)
        if not runs.discard(conn, run.run_id, run.holder):
            raise LeaseHeldError(
                f"run {run.run_id} wrote already, so it cannot become run {run_id}",
                source=run.source,
            )
        runs.reopen(conn, run.source, run_id, run.holder, now_us())
        conn.execute(
            update(leases)
            .where(leases.c.source == run.source, leases.c.holder == run.holder)
            .values(run_id=run_id)
        )
    run.run_id = run_id


@dataclass(slots=True)
class LeasedRun:
    """A run in progress: its id and the lease holder token that fences its writes.
    `outcome` is the status it finishes with if the block succeeds (`held` for a live
    run held for review; `NOTHING`: it found nothing to do under the lease, and its run
    row is removed). `reserved`: version ids reserved with the lease, if any."""

    run_id: str
    holder: str
    source: str
    outcome: str = "succeeded"
    # (first version id, how many) reserved with the lease (`leased_run(reserve=)`)
    reserved: tuple[int, int] | None = None


@contextmanager
def leased_run(
    store: Store,
    source: str,
    kind: str,
    *,
    parent_run_id: str | None = None,
    window: tuple[int, int] | None = None,
    reserve: int = 0,
) -> Iterator[LeasedRun]:
    """Start a run of `kind` on `source` under the source's lease (refused with
    LeaseHeldError if another live run holds it; SourceFrozenError for a live run of a
    frozen source) and finish it -- `succeeded` (or the block's `run.outcome`), or
    `failed` with the error -- releasing the lease, however the block ends (a holder
    whose lease was taken over meanwhile finishes nothing: `runs.finish`). A caller that
    decided there was work before it held the lease must decide again under it, from
    the ledger, and set `run.outcome = NOTHING` when another run did the work in
    between; an unfinished run it is to go on with is named under it (`continue_run`).
    `reserve`: version ids reserved with the lease (`acquire`), the first kept in
    `run.reserved`. Under this thread's claim of `source` (`claimed`), the run takes the
    lease with the claim's holder and hands it back to the claim at its end."""
    run_id = str(uuid.uuid4())
    claim = (_claims.get() or {}).get(source)
    run = LeasedRun(run_id=run_id, holder=claim or new_holder(), source=source)
    with stage("lease"):
        first = acquire(
            store,
            source,
            run.holder,
            run.run_id,
            run_kind=kind,
            parent_run_id=parent_run_id,
            window=window,
            reserve=reserve,
        )
    if first:
        run.reserved = (first, reserve)
    if claim is None:
        with _active_lock:
            _active[run.holder] = source
    status, error = "failed", None
    try:
        yield run
        status = run.outcome
    except BaseException as exc:
        error = str(exc) or type(exc).__name__
        raise
    finally:
        if claim is None:
            with _active_lock:
                _active.pop(run.holder, None)
        with stage("release"):
            release(
                store,
                source,
                run.holder,
                run_id=run.run_id,
                status=status,
                error=error,
                keep=claim is not None,
            )


def renew(store: Store) -> int:
    """Extend every lease this process holds now (heartbeat); returns how many were
    still ours. A lease found taken over is left alone: its run's next fencing check
    stops it."""
    with _active_lock:
        held = list(_active.items())
    kept = 0
    now = now_us()
    for holder, source in held:
        with store.begin() as conn:
            result = conn.execute(
                update(leases)
                .where(leases.c.source == source, leases.c.holder == holder)
                .values(expires_at=now + _ttl_s * 1_000_000, heartbeat_at=now)
            )
            kept += int(result.rowcount or 0)
    return kept


class Heartbeat:
    """A thread renewing this process's leases every third of their time-to-live, so a
    short TTL (a dead worker's sources are taken over soon) never expires a live run."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lease-heartbeat", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(max(0.2, _ttl_s / 3)):
            try:
                renew(self.store)
            except Exception:  # the store is down: the next beat tries again
                continue
