"""The ledger store: one interface over SQLite and PostgreSQL (SQLAlchemy Core).

Writes happen in `apply_payload`, ONE transaction per payload: versions, current
state, outcomes, the outbox row, the application record and the watermark advance
commit together or not at all (Invariant 2).
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import polars as pl
from sqlalchemy import Connection, Engine, and_, func, insert, select, update

from feedledger import faults, timing
from feedledger.diff import STATE_SCHEMA
from feedledger.ledger import bulk
from feedledger.ledger import engine as eng
from feedledger.ledger.records import Application, Watermark
from feedledger.ledger.schema import (
    applications,
    counters,
    outbox,
    payloads,
    runs,
    watermarks,
)
from feedledger.model.errors import (
    AmbiguousPayloadError,
    FeedledgerError,
    LeaseHeldError,
    NotFoundError,
)
from feedledger.model.payload import PayloadRef
from feedledger.model.timeutil import iso, now_us


class ConcurrentApplyError(FeedledgerError):
    """The source's watermark moved while this payload was being diffed."""


class Store:
    def __init__(self, url: str, *, check: bool = True) -> None:
        self.url = url
        self.engine: Engine = eng.make_engine(url)
        self.dialect = self.engine.dialect.name
        if check:
            eng.check_schema(self.engine, url)

    def close(self) -> None:
        self.checkpoint()
        self.engine.dispose()

    def checkpoint(self) -> None:
        """SQLite: copy the WAL into the database file (automatic checkpoints are off so
        that they never run inside a payload's commit). Long-running processes call this
        between runs; every process does it when it closes the store."""
        if self.dialect != "sqlite":
            return
        try:
            with self.engine.connect() as conn:
                conn.connection.driver_connection.execute(  # type: ignore[union-attr]
                    "PRAGMA wal_checkpoint(PASSIVE)"
                )
        except Exception:
            pass

    @contextmanager
    def begin(self) -> Iterator[Connection]:
        with self.engine.begin() as conn:
            yield conn

    def _for_update(self, stmt: Any) -> Any:
        return stmt.with_for_update() if self.dialect == "postgresql" else stmt

    def store_id(self) -> int:
        with self.engine.connect() as conn:
            value = conn.execute(
                select(counters.c.value).where(counters.c.name == "store_id")
            ).scalar_one()
        return int(value)

    # -- payload index ------------------------------------------------------------------
    def register_payload(self, ref: PayloadRef) -> bool:
        """Add `ref` to the payload index. Returns False if it was already there."""
        with self.begin() as conn:
            row = conn.execute(
                select(payloads.c.payload_id, payloads.c.sha256).where(
                    payloads.c.source == ref.source, payloads.c.published_at == ref.published_at
                )
            ).first()
            if row is not None:
                if row.sha256 == ref.sha256:
                    return False
                raise AmbiguousPayloadError(
                    f"payload {row.payload_id} already claims publisher timestamp "
                    f"{iso(ref.published_at)} with different bytes; refused as ambiguous",
                    source=ref.source,
                    payload=ref.label,
                    hint="two payloads of one source may share a publisher timestamp only "
                    "if their bytes are identical",
                )
            conn.execute(
                insert(payloads).values(
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
            )
            return True

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
            row = conn.execute(self._for_update(stmt)).first()
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
            applications.c.payload_id == payload_id, applications.c.retracted_at.is_(None)
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
    def read_state(self, source: str) -> tuple[pl.DataFrame, int]:
        """(diff state recomputed from history, the watermark txn_seq it reflects)."""
        with self.begin() as conn:
            wm = self.watermark(source, conn)
            seq = wm.txn_seq if wm else 0
            frame = bulk.read_state(conn, source)
        return frame.cast(STATE_SCHEMA), seq

    def allocate_version_ids(self, n: int) -> int:
        """Reserve `n` version ids in a short transaction of its own; returns the first.
        Ids of a transaction that later rolls back are simply skipped."""
        if n <= 0:
            return 0
        with self.begin() as conn:
            row = conn.execute(
                update(counters)
                .where(counters.c.name == "version_id")
                .values(value=counters.c.value + n)
                .returning(counters.c.value)
            ).scalar_one()
        return int(row) - n + 1

    # -- the payload transaction --------------------------------------------------------
    def apply_payload(
        self,
        *,
        ref: PayloadRef,
        run_id: str,
        holder: str,
        backfill: bool,
        versions_frame: pl.DataFrame,
        outcomes_frame: pl.DataFrame,
        counts: dict[str, int],
        expected_seq: int,
        outbox_status: str,
    ) -> tuple[int, int]:
        """Apply one payload atomically. Returns (txn_seq, recorded_at).

        `versions_frame`: version_id, key, change, deleted, hash, revision, attributes,
        prev_version_id. `outcomes_frame`: key, outcome, revision, current_revision, hash,
        attributes.
        """
        versions_frame = versions_frame.rename({"hash": "content_hash"})
        stage = self._stage_path() if versions_frame.height >= bulk.STAGE_MIN_ROWS else None
        if stage is not None:
            bulk.stage_sqlite(stage, versions_frame.select(bulk.VERSION_VARYING))
        try:
            with self._begin_attached(stage) as conn, timing.stage("txn_body"):
                result = self._apply_in_txn(
                    conn,
                    ref=ref,
                    run_id=run_id,
                    holder=holder,
                    backfill=backfill,
                    versions_frame=versions_frame,
                    outcomes_frame=outcomes_frame,
                    counts=counts,
                    expected_seq=expected_seq,
                    outbox_status=outbox_status,
                    staged=stage is not None,
                )
        finally:
            if stage is not None:
                stage.unlink(missing_ok=True)
        faults.point("after_commit")
        return result

    def _stage_path(self) -> Path | None:
        """A scratch file beside the SQLite database (None for PostgreSQL/:memory:)."""
        if self.dialect != "sqlite":
            return None
        db = self.engine.url.database
        if not db or db == ":memory:":
            return None
        path = Path(db)
        return path.with_name(f".{path.name}.stage-{os.getpid()}-{secrets.token_hex(4)}")

    @contextmanager
    def _begin_attached(self, stage: Path | None) -> Iterator[Connection]:
        if stage is None:
            with self.begin() as conn:
                yield conn
            return
        with self.engine.connect() as conn:
            raw = conn.connection.driver_connection
            assert raw is not None
            raw.execute("ATTACH DATABASE ? AS stage", (str(stage),))
            try:
                with conn.begin():
                    yield conn
            finally:
                raw.execute("DETACH DATABASE stage")

    def _apply_in_txn(
        self,
        conn: Connection,
        *,
        ref: PayloadRef,
        run_id: str,
        holder: str,
        backfill: bool,
        versions_frame: pl.DataFrame,
        outcomes_frame: pl.DataFrame,
        counts: dict[str, int],
        expected_seq: int,
        outbox_status: str,
        staged: bool,
    ) -> tuple[int, int]:
        from feedledger.ledger.leases import check_held

        source = ref.source
        wm = self.watermark(source, conn)
        check_held(conn, source, holder, run_id)
        seq = wm.txn_seq if wm else 0
        if seq != expected_seq:
            raise ConcurrentApplyError(
                "the source changed while this payload was being diffed "
                f"(commit sequence {expected_seq} -> {seq}); nothing was written",
                source=source,
                payload=ref.label,
                hint="run the command again",
            )
        txn_seq = seq + 1
        recorded_at = max(now_us(), (wm.recorded_at + 1) if wm else 0)
        n = versions_frame.height
        if n:
            constants = {
                "source": source,
                "valid_from": ref.published_at,
                "recorded_at": recorded_at,
                "txn_seq": txn_seq,
                "run_id": run_id,
                "payload_id": ref.payload_id,
                "backfill": backfill,
            }
            bulk.insert_versions(conn, versions_frame, constants, staged=staged)
        faults.point("mid_transaction")
        if outcomes_frame.height:
            of = outcomes_frame.select(
                pl.lit(run_id).alias("run_id"),
                pl.lit(ref.payload_id).alias("payload_id"),
                pl.lit(source).alias("source"),
                pl.col("key"),
                pl.col("outcome"),
                pl.col("revision"),
                pl.col("current_revision"),
                pl.col("hash").alias("content_hash"),
                pl.col("attributes"),
                pl.lit(recorded_at, dtype=pl.Int64).alias("recorded_at"),
            )
            bulk.insert_frame(conn, "outcomes", of)
        if n:
            conn.execute(
                insert(outbox).values(
                    source=source,
                    run_id=run_id,
                    payload_id=ref.payload_id,
                    topic="changes",
                    status=outbox_status,
                    idempotency_key=f"{source}:{ref.payload_id}:changes",
                    changes=n,
                    body=json.dumps({"counts": counts}),
                    created_at=recorded_at,
                )
            )
        conn.execute(
            insert(applications).values(
                payload_id=ref.payload_id,
                run_id=run_id,
                source=source,
                txn_seq=txn_seq,
                recorded_at=recorded_at,
                published_at=ref.published_at,
                changes=n,
                first_version_id=int(versions_frame["version_id"].min()) if n else None,  # type: ignore[arg-type]
                counts=json.dumps(counts, sort_keys=True),
                prev_payload_id=wm.payload_id if wm else None,
                prev_published_at=wm.published_at if wm else None,
            )
        )
        values = dict(
            published_at=ref.published_at,
            payload_id=ref.payload_id,
            txn_seq=txn_seq,
            recorded_at=recorded_at,
        )
        if wm is None:
            conn.execute(insert(watermarks).values(source=source, **values))
        else:
            conn.execute(update(watermarks).where(watermarks.c.source == source).values(**values))
        conn.execute(
            update(runs)
            .where(runs.c.run_id == run_id)
            .values(payloads=runs.c.payloads + 1, changes=runs.c.changes + n)
        )
        faults.point("before_commit")
        return txn_seq, recorded_at

    # -- runs ---------------------------------------------------------------------------
    def start_run(
        self, source: str, kind: str, holder: str, run_id: str, parent_run_id: str | None = None
    ) -> None:
        with self.begin() as conn:
            conn.execute(
                insert(runs).values(
                    run_id=run_id,
                    source=source,
                    kind=kind,
                    status="running",
                    started_at=now_us(),
                    holder=holder,
                    parent_run_id=parent_run_id,
                    payloads=0,
                    changes=0,
                )
            )

    def finish_run(self, run_id: str, status: str, error: str | None = None) -> None:
        with self.begin() as conn:
            conn.execute(
                update(runs)
                .where(runs.c.run_id == run_id)
                .values(status=status, finished_at=now_us(), error=error)
            )

    def abandon_runs(self, conn: Connection, source: str, holder: str) -> None:
        """Mark runs left `running` by a dead lease holder as abandoned."""
        conn.execute(
            update(runs)
            .where(
                and_(runs.c.source == source, runs.c.holder == holder, runs.c.status == "running")
            )
            .values(
                status="abandoned", finished_at=now_us(), error="the process holding the lease died"
            )
        )

    def run_source(self, run_id: str) -> str:
        with self.engine.connect() as conn:
            src = conn.execute(select(runs.c.source).where(runs.c.run_id == run_id)).scalar()
        if src is None:
            raise NotFoundError(f"unknown run id {run_id!r}")
        return str(src)

    def count(self, table: Any, **where: Any) -> int:
        stmt = select(func.count()).select_from(table)
        for col, value in where.items():
            stmt = stmt.where(table.c[col] == value)
        with self.engine.connect() as conn:
            return int(conn.execute(stmt).scalar_one())


__all__ = ["ConcurrentApplyError", "LeaseHeldError", "Store"]
