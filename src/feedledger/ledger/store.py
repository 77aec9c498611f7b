"""The ledger store: one interface over SQLite and PostgreSQL (SQLAlchemy Core).

Engines, the payload index, watermarks, applications and run bookkeeping. The payload
transaction itself is in ledger/payload_txn.py.

The CRS a GIS source's ledger is stated in (`payload_crs`): the CRS recorded
(`payloads.crs`) for the payload at its watermark -- the last one applied and standing.
A payload stating another CRS is refused whole, never reprojected (`crs_refusal`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import polars as pl
from sqlalchemy import Connection, Engine, select, update

from feedledger.diff import STATE_SCHEMA
from feedledger.ledger import bulk, failures
from feedledger.ledger import engine as eng
from feedledger.ledger.records import Application, Watermark
from feedledger.ledger.schema import (
    applications,
    counters,
    payloads,
    watermarks,
)
from feedledger.ledger.visibility import visible
from feedledger.model.errors import (
    AmbiguousPayloadError,
    BadPayloadError,
    LeaseHeldError,
)
from feedledger.model.payload import PayloadRef
from feedledger.model.timeutil import iso, now_us

# An SQLite write-ahead log larger than this is checkpointed when the store closes even
# if the process is about to end (a daily payload's log is a few tens of MB).
WAL_LEAVE_MAX = 128 << 20

# An open transaction, as storage functions take it. Code above the storage layer names
# it by this alias and never imports SQLAlchemy (the `storage` import contract).
Transaction = Connection


class Store:
    def __init__(self, url: str, *, check: bool = True, create: bool | None = None) -> None:
        """`check`: refuse a store whose schema is not this version's. `create`: an
        SQLite store may be created where none exists (default: only when not checking,
        i.e. set-up code; commands never create a store by opening it)."""
        self.url = url
        self.engine: Engine = eng.make_engine(url, create=not check if create is None else create)
        self.dialect = self.engine.dialect.name
        # what `close` calls first: the readers' own connections register here
        self.closers: list[Callable[[Store], None]] = []
        if check:
            eng.check_schema(self.engine, url)

    def close(self, *, leave_wal: bool = False) -> None:
        """Release the store. SQLite: the write-ahead log is copied into the database
        file (checkpoint) and the connections closed. With `leave_wal` -- the process
        ends right after (the CLI) -- a log of at most WAL_LEAVE_MAX bytes stays for the
        next writer, which checkpoints it while it parses its payload (`checkpoint` in
        the ingest's warm-up), and the connection is left open, as SQLite's last close
        would checkpoint. Committed transactions are durable in the log either way
        (synchronous=FULL): a log left behind is what any crash leaves, and SQLite
        recovers it on the next open."""
        if self.dialect == "sqlite":
            if leave_wal and self.wal_bytes() <= WAL_LEAVE_MAX:
                return
            self.checkpoint()
        else:
            for release in self.closers:
                release(self)
        self.engine.dispose()

    def wal_bytes(self) -> int:
        """Size of an SQLite store's write-ahead log (0 if none, or not SQLite)."""
        db = self.engine.url.database
        if self.dialect != "sqlite" or not db or db == ":memory:":
            return 0
        try:
            return os.path.getsize(db + "-wal")
        except OSError:
            return 0

    def checkpoint(self) -> None:
        """SQLite: copy the WAL into the database file (automatic checkpoints are off so
        that they never run inside a payload's commit). Writers call this before their
        transaction, on another thread while they parse (`pipeline.intake.ingest`); closing
        the store does it too unless the log is left for the next writer."""
        if self.dialect != "sqlite" or not self.wal_bytes():
            return
        try:
            with self.engine.connect() as conn:
                conn.connection.driver_connection.execute(  # type: ignore[union-attr]
                    "PRAGMA wal_checkpoint(PASSIVE)"
                )
        except Exception:
            pass

    def refresh_statistics(self, written: int, live_before: int) -> bool:
        """PostgreSQL: re-sample the versions table's planner statistics (`ANALYZE
        versions`) when a payload's transaction wrote more than a tenth of the source's
        live rows (a first load, a big restatement) -- what autovacuum's analyse would do
        by its default threshold, had it run (it runs late, or not at all where it is
        off): a never-analysed table is planned blind, and a snapshot's key-ordered scan
        then sorts every version instead of reading the index. SQLite plans from its
        indexes alone. True when it ran."""
        if self.dialect != "postgresql" or written < 1000 or written * 10 < live_before:
            return False
        with self.begin() as conn:
            conn.exec_driver_sql("ANALYZE versions")
        return True

    @contextmanager
    def begin(self) -> Iterator[Connection]:
        with self.translating(), self.engine.begin() as conn:
            yield conn

    @contextmanager
    def translating(self) -> Iterator[None]:
        """A database's error under the block (a full disk, a read-only file system, the
        server ending the connection, a refused statement...), raw drivers' included,
        becomes feedledger's error naming the store and the fix (ledger/failures.py's
        table; the engine's own statements are mapped by its guard already)."""
        with failures.translating(failures.Place(self.url)):
            yield

    def param(self, name: str) -> str:
        """A named placeholder in the driver's own style, for `exec_driver_sql` on hot
        paths (plain tuples back, no SQLAlchemy rows): `%(name)s` (psycopg), `:name`."""
        return f"%({name})s" if self.dialect == "postgresql" else f":{name}"

    def for_update(self, stmt: Any) -> Any:
        return stmt.with_for_update() if self.dialect == "postgresql" else stmt

    def store_id(self) -> int:
        with self.engine.connect() as conn:
            value = conn.execute(
                select(counters.c.value).where(counters.c.name == "store_id")
            ).scalar_one()
        return int(value)

    # -- payload index ------------------------------------------------------------------
    def register_payload(self, ref: PayloadRef) -> bool:
        """Add `ref` to the payload index. Returns False if it was already there.

        Safe against another process indexing the same payload at the same moment (a
        live run registering what it just archived while a backfill indexes the
        archive): the insert skips a row that appeared since the look, and the look is
        then repeated (on PostgreSQL a new statement sees the other's commit)."""
        with self.begin() as conn:
            if self._indexed(conn, ref):
                return False
            stmt = self._insert_new(payloads).values(
                payload_id=ref.payload_id,
                source=ref.source,
                sha256=ref.sha256,
                published_at=ref.published_at,
                fetched_at=ref.fetched_at,
                size=ref.size,
                original_name=ref.original_name,
                content_type=ref.content_type,
                indexed_at=now_us(),
            )
            if conn.execute(stmt.returning(payloads.c.payload_id)).first() is not None:
                return True
            if self._indexed(conn, ref):
                return False
        raise AmbiguousPayloadError(  # the conflict was on a row that the look cannot see
            f"payload {ref.payload_id} could not be indexed: another payload holds its id",
            source=ref.source,
            payload=ref.label,
        )

    def _insert_new(self, table: Any) -> Any:
        """INSERT that does nothing where a row would break a unique constraint."""
        if self.dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as pg_insert  # lazy: one backend's

            return pg_insert(table).on_conflict_do_nothing()
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert  # lazy: one backend's

        return sqlite_insert(table).on_conflict_do_nothing()

    def _indexed(self, conn: Connection, ref: PayloadRef) -> bool:
        """True if `ref` is already indexed; AmbiguousPayloadError if another payload
        claims its publisher timestamp."""
        row = conn.execute(
            select(payloads.c.payload_id, payloads.c.sha256).where(
                payloads.c.source == ref.source, payloads.c.published_at == ref.published_at
            )
        ).first()
        if row is None:
            return False
        if row.sha256 == ref.sha256:
            return True
        raise AmbiguousPayloadError(
            f"payload {row.payload_id} already claims publisher timestamp "
            f"{iso(ref.published_at)} with different bytes; refused as ambiguous",
            source=ref.source,
            payload=ref.label,
            hint="two payloads of one source may share a publisher timestamp only "
            "if their bytes are identical",
        )

    def list_payloads(
        self, source: str, start: int | None = None, end: int | None = None
    ) -> list[PayloadRef]:
        stmt = select(payloads).where(payloads.c.source == source)
        if start is not None:
            stmt = stmt.where(payloads.c.published_at >= start)
        if end is not None:
            stmt = stmt.where(payloads.c.published_at <= end)
        stmt = stmt.order_by(payloads.c.published_at, payloads.c.payload_id)
        with self.engine.connect() as conn:
            return [
                PayloadRef(
                    payload_id=r.payload_id,
                    source=r.source,
                    sha256=r.sha256,
                    published_at=r.published_at,
                    fetched_at=r.fetched_at,
                    size=r.size,
                    original_name=r.original_name,
                    content_type=r.content_type,
                )
                for r in conn.execute(stmt)
            ]

    # -- watermark & applications -------------------------------------------------------
    def watermark(self, source: str, conn: Connection | None = None) -> Watermark | None:
        stmt = select(watermarks).where(watermarks.c.source == source)
        if conn is None:
            with self.engine.connect() as c:
                row = c.execute(stmt).first()
        else:
            row = conn.execute(self.for_update(stmt)).first()
        if row is None:
            return None
        return Watermark(
            source=row.source,
            published_at=row.published_at,
            payload_id=row.payload_id,
            txn_seq=row.txn_seq,
            recorded_at=row.recorded_at,
        )

    def application_of(self, payload_id: str) -> Application | None:
        stmt = select(applications).where(
            applications.c.payload_id == payload_id, visible(applications, None)
        )
        with self.engine.connect() as conn:
            row = conn.execute(stmt).first()
        if row is None:
            return None
        return Application(
            payload_id=row.payload_id,
            run_id=row.run_id,
            txn_seq=row.txn_seq,
            recorded_at=row.recorded_at,
            published_at=row.published_at,
            changes=row.changes,
        )

    # -- state --------------------------------------------------------------------------
    def read_state(self, source: str) -> tuple[pl.DataFrame, Watermark | None]:
        """(diff state recomputed from history, the watermark it reflects), read together."""
        with self.begin() as conn:
            wm = self.watermark(source, conn)
            frame = bulk.read_state(conn, source)
        return frame.cast(STATE_SCHEMA), wm

    def allocate_version_ids(self, n: int) -> int:
        """Reserve `n` version ids in a short transaction of its own; returns the first.
        Ids of a transaction that later rolls back are simply skipped."""
        if n <= 0:
            return 0
        with self.begin() as conn:
            return reserve_version_ids(conn, n)


def reserve_version_ids(conn: Connection, n: int) -> int:
    """Reserve `n` (> 0) version ids in the caller's transaction; returns the first
    (`Store.allocate_version_ids` in one of its own; a live run's lease, ledger/runs/leases.py,
    in the lease's, when its diff is known before it)."""
    row = conn.execute(
        update(counters)
        .where(counters.c.name == "version_id")
        .values(value=counters.c.value + n)
        .returning(counters.c.value)
    ).scalar_one()
    return int(row) - n + 1


__all__ = ["LeaseHeldError", "Store", "reserve_version_ids"]


NONE_STATED = "(none stated)"


def payload_crs(store: Store, payload_id: str) -> str | None:
    """The CRS recorded for an applied payload of a GIS source (None: it stated none)."""
    with store.engine.connect() as conn:
        value = conn.execute(
            select(payloads.c.crs).where(payloads.c.payload_id == payload_id)
        ).scalar_one_or_none()
    return str(value) if value is not None else None


def crs_refusal(
    source: str, label: str, stated: str | None, recorded: str | None
) -> BadPayloadError | None:
    """The error refusing a payload whose layer CRS `stated` differs from the source's
    `recorded` one (a missing CRS differs from any stated one); None when they agree."""
    if stated == recorded:
        return None
    return BadPayloadError(
        f"layer CRS {stated or NONE_STATED} differs from this source's "
        f"{recorded or NONE_STATED} (reprojection is never silent): the payload was "
        "refused and nothing changed",
        source=source,
        payload=label,
        hint=(
            f"convert the layer to {recorded} first, e.g. with ogr2ogr -t_srs {recorded}, or "
            if recorded is not None
            else ""
        )
        + "declare a new source for the layer in its new CRS",
    )
