"""A query's rows as Arrow record batches, fetched in bulk from the store's driver.

For reads of a whole source (a snapshot) the per-row path (SQLAlchemy rows, one
Python tuple each) costs more than everything after it. Here:

* SQLite (a file): the sqlite3 module -- the same SQLite library SQLAlchemy's
  connections use, never a second copy (see below) -- on a read-only connection of its
  own, so the pooled one keeps its page cache (the stream reads every page once: a
  small cache, STREAM_CACHE_KIB); `fetchmany` of `batch` rows, turned into Arrow
  columns in one call (`pa.array` of the row tuples as a struct: the transpose is
  Arrow's, in C);
* PostgreSQL: `COPY (...) TO STDOUT (FORMAT binary)` read by the ADBC PostgreSQL
  driver into Arrow in C (`ledger.readers.pg_copy`; the psycopg server-side cursor it replaced
  cost the client about twice the CPU: bench/README.md, "PostgreSQL bulk read");
* anything else (an in-memory SQLite, a small PostgreSQL store): the DB-API cursor,
  `fetchmany` of `batch` rows, converted the same way.

One SQLite library per process: the ADBC SQLite driver (which links a SQLite of its
own) read here once, and a process holding `ledger.db` open through two SQLite copies
corrupts it -- POSIX advisory locks are per process, so one copy's `close()` drops the
other's locks, and a copy that believes it holds the last connection checkpoints and
deletes the WAL under the other ("How To Corrupt An SQLite Database File", 2.2.1).
tests/ledger/test_sqlite_single_library.py checks that no second SQLite is ever loaded.

Every batch is cast to `schema` (SQLite has no column types: a boolean comes back as
an integer). The fetch runs in a thread of its own, PREFETCH batches ahead of the
reader (SQLite lets go of the GIL while it steps; `feedledger.ahead`), so the store's
work overlaps what the reader does with each batch; a reader that stops early stops it.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import quote

import pyarrow as pa

from feedledger.ahead import ahead
from feedledger.ledger import failures
from feedledger.ledger.readers import pg_copy
from feedledger.ledger.store import Store

__all__ = ["STREAM_CACHE_KIB", "batches", "threadable"]

# An SQLite connection's page cache while it streams a whole source: each page is read
# once, so a big cache would only fill with pages never read again.
STREAM_CACHE_KIB = 8192
PREFETCH = 2
_NAME = "feedledger-fetch"


def batches(
    store: Store, sql: str, params: Mapping[str, Any], schema: pa.Schema, *, batch: int
) -> Iterator[pa.RecordBatch]:
    """Stream the rows of `sql` (placeholders `:name`) as batches of `schema` (a
    driver's error as feedledger's: ledger/failures.py)."""
    place = failures.Place(store.url)
    path = _sqlite_file(store)
    if path is not None:
        found = failures.stream(place, _sqlite(path, sql, params, schema, batch))
        return ahead(found, depth=PREFETCH, name=_NAME)
    if store.dialect == "postgresql":
        if _versions_bytes(store) < COPY_FROM_BYTES:
            found = failures.stream(place, _dbapi(store, sql, params, schema, batch))
            return ahead(found, depth=PREFETCH, name=_NAME)
        found = failures.stream(place, pg_copy.batches(store, sql, params, schema, batch))
        return ahead(found, depth=PREFETCH, name=_NAME)
    # (an in-memory SQLite store is one per thread: read in the reader's own)
    return failures.stream(place, _dbapi(store, sql, params, schema, batch))


# PostgreSQL: COPY through the ADBC driver (ledger/readers/pg_copy.py) costs ~75 ms a read to
# set up (its own connection and the type catalogue) and saves ~0.7 client CPU s a
# million versions over the psycopg cursor: worth it once the versions table is big
# (~50k versions); a small store reads by the cursor, which starts at once
COPY_FROM_BYTES = 10 << 20


def _versions_bytes(store: Store) -> int:
    """The size of the store's versions table on disk (its main fork: one catalogue
    look-up, no statistics needed)."""
    with store.engine.connect() as conn:
        raw: Any = conn.connection.driver_connection
        found = raw.execute("SELECT pg_relation_size(to_regclass('versions'))").fetchone()
        conn.rollback()
    return int(found[0] or 0) if found else 0


def threadable(store: Store) -> bool:
    """Whether a reader of `store` may run in another thread than its caller's (not
    an in-memory SQLite store: one per thread)."""
    return store.dialect == "postgresql" or _sqlite_file(store) is not None


def _sqlite_file(store: Store) -> str | None:
    if store.dialect != "sqlite":
        return None
    db = store.engine.url.database
    if not db or db == ":memory:" or db.startswith("file:"):
        return None
    return db


def _positional(sql: str, params: Mapping[str, Any], mark: str) -> tuple[str, list[Any]]:
    """`:name` placeholders as positional ones (`?` or `%s`), values in their order."""
    values: list[Any] = []

    def one(found: re.Match[str]) -> str:
        values.append(params[found.group(1)])
        return mark

    return re.sub(r"(?<![:\w]):([A-Za-z_]\w*)", one, sql), values


def _fetch_type(schema: pa.Schema, sqlite: bool) -> pa.StructType:
    """The rows' struct as the driver gives them: on SQLite a boolean is an integer
    (cast back by `_to_batch`)."""
    if not sqlite:
        return pa.struct(list(schema))
    return pa.struct([pa.field(f.name, pa.int64()) if f.type == pa.bool_() else f for f in schema])


def _to_batch(rows: list[Any], schema: pa.Schema, fetched: pa.StructType) -> pa.RecordBatch:
    """Row tuples as a batch of `schema`: one conversion of the rows as a struct array
    (Arrow reads each tuple into its columns, in C), then the casts."""
    got = pa.RecordBatch.from_struct_array(pa.array(rows, fetched))
    cols = [
        got.column(i) if got.field(i).type == field.type else got.column(i).cast(field.type)
        for i, field in enumerate(schema)
    ]
    return pa.record_batch(cols, schema=schema)


def _rows(cur: Any, schema: pa.Schema, batch: int, *, sqlite: bool) -> Iterator[pa.RecordBatch]:
    fetched = _fetch_type(schema, sqlite)
    while True:
        rows = cur.fetchmany(batch)
        if not rows:
            return
        yield _to_batch(rows, schema, fetched)


def _sqlite(
    path: str, sql: str, params: Mapping[str, Any], schema: pa.Schema, batch: int
) -> Iterator[pa.RecordBatch]:
    query, values = _positional(sql, params, "?")
    # (opened in the fetch's thread, maybe closed in another when the reader stops)
    conn = sqlite3.connect(
        f"file:{quote(path)}?mode=ro",
        uri=True,
        timeout=60,
        isolation_level=None,
        check_same_thread=False,
    )
    try:
        conn.execute(f"PRAGMA cache_size=-{STREAM_CACHE_KIB}")
        cur = conn.cursor()
        try:
            cur.execute(query, values)
            yield from _rows(cur, schema, batch, sqlite=True)
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
            yield from _rows(cur, schema, batch, sqlite=not pg)
        finally:
            cur.close()
        if pg:
            conn.rollback()
