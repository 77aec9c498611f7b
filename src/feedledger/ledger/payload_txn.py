"""The payload transaction (Invariant 2): ONE transaction per payload in which its
versions, outcomes, outbox row, application record, watermark advance and run counters
commit together or not at all.

Large version sets on SQLite are staged into scratch files on a writer
thread while the transaction copies each complete one (see ledger/staging.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import polars as pl
from sqlalchemy import Connection, insert, update

from feedledger import faults, timing
from feedledger.ledger import bulk, encoding, notices, runs, staging
from feedledger.ledger.engine import CACHE_KIB
from feedledger.ledger.runs.leases import check_held
from feedledger.ledger.schema import applications, payloads, watermarks
from feedledger.ledger.store import Store
from feedledger.model.errors import FeedledgerError
from feedledger.model.payload import PayloadRef
from feedledger.model.timeutil import now_us


class ConcurrentApplyError(FeedledgerError):
    """The source's watermark moved while this payload was being diffed."""


@dataclass(frozen=True)
class PayloadWrite:
    """Everything one payload's transaction writes.

    `versions`: version_id, key, change, deleted, hash, revision, idx,
    prev_version_id (ids contiguous); `encode` gives the attribute texts of observation
    indexes (`idx`), called a chunk at a time while the rows are written, so that a large
    payload's texts never all exist at once. `outcomes`: key, outcome, revision,
    current_revision, hash, attributes (and geometry, GIS sources). `expected_seq` is
    the watermark's commit sequence the diff was computed against.

    GIS sources: `geometries` gives the `geometry`/`geometry_hash` columns of
    observation indexes, written beside the attribute texts, a chunk at a time; `crs`
    is recorded on the payload's index row. `fields` (the payload's field names as
    stated), when known, is recorded there too. Other sources leave these at None and
    write exactly what they wrote before.

    `fields_id`: the codebook the attribute texts are written against (set by
    `apply_payload`, ledger/encoding/codebooks.py; None: stored as canonical JSON).
    """

    ref: PayloadRef
    run_id: str
    holder: str
    backfill: bool
    versions: pl.DataFrame
    encode: bulk.Encoder
    outcomes: pl.DataFrame
    counts: dict[str, int]
    expected_seq: int
    outbox_status: str
    geometries: bulk.Geometries | None = None
    crs: str | None = None
    fields: list[str] | None = None
    fields_id: int | None = None
    # the string columns `encode`'s texts are made of, where they are (a CSV payload):
    # the compact texts are then made from them (ledger/encoding/encode.py)
    rows: Callable[[pl.Series], pl.DataFrame | None] | None = None
    # the version rows encoded and written at a time (None: bulk.VERSION_CHUNK_ROWS;
    # fewer within a source's memory budget, pipeline/intake/bounded.py)
    chunk_rows: int | None = None

    @property
    def geo(self) -> bool:
        return self.geometries is not None


def apply_payload(store: Store, write: PayloadWrite) -> tuple[int, int]:
    """Apply one payload atomically. Returns (txn_seq, recorded_at)."""
    versions = write.versions.rename({"hash": "content_hash"})
    with timing.stage("codebook"):
        write = _compact(store, write)
    base = (
        staging.scratch_base(store.engine.url.database)
        if store.dialect == "sqlite" and versions.height >= bulk.STAGE_MIN_ROWS
        else None
    )
    if base is None:
        with store.begin() as conn, timing.stage("txn_body"):
            result = _write(store, conn, write, versions)
    else:
        with store.translating():  # a full disk under the scratch files too
            result = _apply_staged(store, write, versions, base)
    faults.point("after_commit")
    return result


def _apply_staged(
    store: Store, write: PayloadWrite, versions: pl.DataFrame, base: Path
) -> tuple[int, int]:
    """The transaction of a large SQLite payload, its versions staged in scratch files."""
    overlapped = staging.attach_in_transaction()
    parts = bulk.staged_parts(versions, write.encode, write.geometries, write.chunk_rows)
    # a source's first payload (nothing of it for a reader to miss) written once, with a
    # rollback journal instead of the log, where the store allows it (ledger/staging.py)
    direct = write.expected_seq == 0 and versions.height <= staging.DIRECT_MAX_ROWS
    with (
        timing.stage("txn_staged"),
        staging.Stager(base, parts, versions.height, overlapped=overlapped) as stager,
        _begin_staged(store, stager, attach_first=not overlapped, direct=direct) as conn,
    ):
        return _write(store, conn, write, versions, stager=stager)


def _compact(store: Store, write: PayloadWrite) -> PayloadWrite:
    """`write` with its attribute texts encoded against the source's codebook chosen
    from a sample of them (ledger/encoding/codebooks.py)."""
    idx = write.versions.get_column("idx").drop_nulls()
    if idx.is_empty():
        return write
    sample = encoding.sample_of(write.encode(encoding.spread(idx)))
    fields_id, book = encoding.choose(store, write.ref.source, sample)
    if fields_id is None:
        return write
    encode, rows = write.encode, write.rows

    def compact(part: pl.Series) -> pl.Series:
        columns = rows(part) if rows is not None else None
        if columns is not None:
            return encoding.encode_rows(book, columns).alias("attributes")
        return book.encode_series(encode(part))

    return replace(write, encode=compact, fields_id=fields_id)


STAGED_CACHE_KIB = 16384


@contextmanager
def _begin_staged(
    store: Store, stager: staging.Stager, *, attach_first: bool, direct: bool = False
) -> Iterator[Connection]:
    """The staged payload's transaction on a connection of its own; `direct`: with a
    rollback journal if the store allows it (`staging.rollback_journal`)."""
    with store.engine.connect() as conn:
        raw = conn.connection.driver_connection
        assert raw is not None
        # a bulk copy gains nothing from a big page cache (dirty pages spill to the WAL
        # either way), and its pages would only add to the payload's peak memory
        raw.execute(f"PRAGMA cache_size=-{STAGED_CACHE_KIB}")
        with timing.stage("txn_journal"):
            journal = direct and staging.rollback_journal(raw)
        try:
            if attach_first:
                stager.attach_all(raw)
            with conn.begin() as txn:
                yield conn
                with timing.stage("txn_commit"):
                    txn.commit()
        finally:
            try:
                stager.detach_all(raw)
                raw.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
                if journal:
                    staging.back_to_wal(raw)
            except Exception:
                # never hand the pool a connection with a scratch file still attached, or
                # still on a rollback journal (nor mask the transaction's own error):
                # discard it instead (a new connection takes the log again on opening)
                conn.invalidate()


def _write(
    store: Store,
    conn: Connection,
    w: PayloadWrite,
    versions: pl.DataFrame,
    *,
    stager: staging.Stager | None = None,
) -> tuple[int, int]:
    ref, source = w.ref, w.ref.source
    wm = store.watermark(source, conn)
    check_held(conn, source, w.holder, w.run_id)
    seq = wm.txn_seq if wm else 0
    if seq != w.expected_seq:
        raise ConcurrentApplyError(
            "the source changed while this payload was being diffed "
            f"(commit sequence {w.expected_seq} -> {seq}); nothing was written",
            source=source,
            payload=ref.label,
            hint="run the command again",
        )
    txn_seq = seq + 1
    recorded_at = max(now_us(), (wm.recorded_at + 1) if wm else 0)
    n = versions.height
    if n:
        constants = {
            "source": source,
            "valid_from": ref.published_at,
            "recorded_at": recorded_at,
            "txn_seq": txn_seq,
            "backfill": w.backfill,
            "fields_id": w.fields_id,
        }
        bulk.insert_versions(
            conn,
            versions,
            w.encode,
            constants,
            geometries=w.geometries,
            stager=stager,
            chunk_rows=w.chunk_rows,
        )
    faults.point("mid_transaction")
    if w.outcomes.height:
        of = w.outcomes.select(
            pl.lit(w.run_id).alias("run_id"),
            pl.lit(ref.payload_id).alias("payload_id"),
            pl.lit(source).alias("source"),
            pl.col("key"),
            pl.col("outcome"),
            pl.col("revision"),
            pl.col("current_revision"),
            pl.col("hash").alias("content_hash"),
            pl.col("attributes"),
            *([pl.col("geometry")] if w.geo else []),
            pl.lit(recorded_at, dtype=pl.Int64).alias("recorded_at"),
        )
        bulk.insert_frame(conn, "outcomes", of)
    if n:
        notices.queue(
            conn,
            source=source,
            run_id=w.run_id,
            topic="changes",
            payload_id=ref.payload_id,
            changes=n,
            # `geo`: the change messages fanned out of this row say `geometry_changed`
            body={"counts": w.counts, **({"geo": True} if w.geo else {})},
            at_us=recorded_at,
            status=w.outbox_status,
            # one announcement per application: a replay re-applies the payload in
            # another run, and that is another change set
            key=f"{source}:{w.run_id}:{ref.payload_id}:changes",
        )
    _describe_payload(conn, w)
    first_id = versions.get_column("version_id").min() if n else None
    conn.execute(
        insert(applications).values(
            payload_id=ref.payload_id,
            run_id=w.run_id,
            source=source,
            txn_seq=txn_seq,
            recorded_at=recorded_at,
            published_at=ref.published_at,
            changes=n,
            first_version_id=first_id,
            counts=json.dumps(w.counts, sort_keys=True),
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
    runs.count(conn, w.run_id, payloads=1, changes=n)
    faults.point("before_commit")
    return txn_seq, recorded_at


def _describe_payload(conn: Connection, w: PayloadWrite) -> None:
    """Record what the payload states about itself on its index row (a GIS layer's CRS,
    None when it states none; the field names in stated order), in its transaction."""
    if not w.geo and w.fields is None:
        return
    values: dict[str, str | None] = {}
    if w.geo:
        values["crs"] = w.crs
    if w.fields is not None:
        values["fields"] = json.dumps(w.fields, ensure_ascii=False)
    conn.execute(update(payloads).where(payloads.c.payload_id == w.ref.payload_id).values(**values))
