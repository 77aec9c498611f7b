"""A query's rows as Arrow record batches, fetched in bulk from the store's driver.

For reads of a whole source (a snapshot) the per-row path (SQLAlchemy rows, one
Python tuple each) costs more than everything after it. Here:

* SQLite (a file): the ADBC SQLite driver runs the query and hands back Arrow batches
  built in C (`adbc.sqlite.query.batch_rows` rows each) -- no Python object per row;
  its own read-only connection, so the pooled one keeps its page cache (the stream
  reads every page once: a small cache, STREAM_CACHE_KIB);
* PostgreSQL: a server-side cursor of the psycopg connection, `fetchmany` of `batch`
  rows, each column turned into an Arrow array at once;
* anything else (an in-memory SQLite): the DB-API cursor the same way.

Every batch is cast to `schema` (the driver's own types vary: SQLite has none). The
fetch runs in a thread of its own, PREFETCH batches ahead of the reader (the driver
and Arrow let go of the GIL), so the store's work overlaps what the reader does with
each batch; a reader that stops early stops it.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa

from feedledger.ledger.store import Store

__all__ = ["STREAM_CACHE_KIB", "batches"]

# An SQLite connection's page cache while it streams a whole source: each page is read
# once, so a big cache would only fill with pages never read again.
STREAM_CACHE_KIB = 8192
PREFETCH = 2
_END = object()


def batches(
    store: Store, sql: str, params: Mapping[str, Any], schema: pa.Schema, *, batch: int
) -> Iterator[pa.RecordBatch]:
    """Stream the rows of `sql` (placeholders `:name`) as batches of `schema`."""
    path = _sqlite_file(store)
    if path is not None:
        return _ahead(_adbc(path, sql, params, schema, batch))
    found = _dbapi(store, sql, params, schema, batch)
    # (an in-memory SQLite store is one per thread: read in the reader's own)
    return _ahead(found) if store.dialect == "postgresql" else found


def _ahead(source: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """`source` run in a thread, up to PREFETCH batches ahead."""
    out: queue.Queue[object] = queue.Queue(maxsize=PREFETCH)
    stop = threading.Event()

    def put(item: object) -> bool:
        while not stop.is_set():
            try:
                out.put(item, timeout=0.2)
                return True
            except queue.Full:
                continue
        return False

    def run() -> None:
        try:
            for got in source:
                if not put(got):
                    return
        except BaseException as exc:  # handed to the reader, raised there
            put(exc)
            return
        finally:
            close = getattr(source, "close", None)
            if close is not None:
                close()
        put(_END)

    worker = threading.Thread(target=run, name="feedledger-fetch", daemon=True)
    worker.start()
    try:
        while True:
            item = out.get()
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            assert isinstance(item, pa.RecordBatch)
            yield item
    finally:
        stop.set()
        worker.join()


def _sqlite_file(store: Store) -> str | None:
    if store.dialect != "sqlite":
        return None
    db = store.engine.url.database
    if not db or db == ":memory:" or db.startswith("file:"):
        return None
    return db


def _positional(sql: str, params: Mapping[str, Any], mark: str) -> tuple[str, list[Any]]:
    """`:name` placeholders as positional ones (`?` or `%s`), values in their order."""
    import re

    values: list[Any] = []

    def one(found: re.Match[str]) -> str:
        values.append(params[found.group(1)])
        return mark

    return re.sub(r"(?<![:\w]):([A-Za-z_]\w*)", one, sql), values


def _cast(got: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    if got.schema.equals(schema):
        return got
    cols = [got.column(i).cast(field.type) for i, field in enumerate(schema)]
    return pa.record_batch(cols, schema=schema)


def _adbc(
    path: str, sql: str, params: Mapping[str, Any], schema: pa.Schema, batch: int
) -> Iterator[pa.RecordBatch]:
    import adbc_driver_sqlite.dbapi as adbc

    query, values = _positional(sql, params, "?")
    conn = adbc.connect(f"file:{path}?mode=ro", autocommit=True)
    try:
        cur = conn.cursor()
        try:
            cur.execute(f"PRAGMA cache_size=-{STREAM_CACHE_KIB}")
            cur.execute("PRAGMA busy_timeout=60000")
            cur.adbc_statement.set_options(**{"adbc.sqlite.query.batch_rows": str(batch)})
            cur.execute(query, values)
            reader = cur.fetch_record_batch()
            for got in reader:
                yield _cast(got, schema)
        finally:
            cur.close()
    finally:
        conn.close()


def _dbapi(
    store: Store, sql: str, params: Mapping[str, Any], schema: pa.Schema, batch: int
) -> Iterator[pa.RecordBatch]:
    pg = store.dialect == "postgresql"
    query, values = _positional(sql, params, "%s" if pg else "?")
    with store.engine.connect() as conn:
        raw: Any = conn.connection.driver_connection
        cur = raw.cursor("feedledger_snapshot") if pg else raw.cursor()
        try:
            if pg:
                cur.itersize = batch
            cur.execute(query, values)
            while True:
                rows = cur.fetchmany(batch)
                if not rows:
                    break
                cols = list(zip(*rows, strict=True))
                arrays = [
                    pa.array(col, field.type) for col, field in zip(cols, schema, strict=True)
                ]
                yield pa.record_batch(arrays, schema=schema)
        finally:
            cur.close()
        if pg:
            conn.rollback()
