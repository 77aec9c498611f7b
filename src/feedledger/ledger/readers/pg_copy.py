"""A PostgreSQL query's rows as Arrow record batches, read in bulk by COPY (binary).

A snapshot reads a whole source's versions. Through psycopg (a server-side cursor,
`fetchmany`, one Python tuple a row, zipped into Arrow arrays) the client spends
1.6-2.8 CPU s a million rows; here the ADBC PostgreSQL driver runs the query as `COPY
(<query>) TO STDOUT (FORMAT binary)` and decodes the binary rows into Arrow arrays in
C -- no Python object per row, the GIL released while it reads (bench/README.md,
"PostgreSQL bulk read": the measured figures).

`batches` has the contract of `arrow_fetch`'s PostgreSQL path: the rows of `sql`
(placeholders `:name`, values in `params`) as record batches of `schema` (each column
cast to its type: int4 to int64 and so on), at most `batch` rows each (the driver's
own batches, sized for about `batch` rows, sliced without a copy), streamed: memory
stays bounded by a few of the driver's batches whatever the number of rows. A reader
that stops early (closing the generator) closes the driver's reader, statement and
connection at once: the connection is dropped mid-COPY, not drained, and the server
ends the statement.

The values: COPY takes no bind parameters, and the driver's own parameter binding (a
prepared statement) is not streamed -- libpq holds the whole result in memory
(measured: a peak RSS of 637 MiB reading 1M versions). So each `:name` is replaced by
psycopg's `sql.Literal` of its value, rendered against the store's own live
connection: psycopg's quoting of the typed value (a string as a quoted literal,
escaped with libpq's rules -- `E'...'` where it holds a backslash, so its meaning does
not hang on `standard_conforming_strings` --, an int as a number, None as NULL), never
the value's text pasted in. The ADBC connection goes to exactly where that pooled
connection went (its libpq parameters: host, database, user, the `options` that set
the search_path, the password if one was given), with `client_encoding=UTF8`, the
encoding the query text is sent in and Arrow's strings are read in. It is a connection
of its own, in autocommit: one statement, nothing to commit. (Its errors are the
driver's, `adbc_driver_manager.Error` subclasses, not psycopg's.)
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa

from feedledger.ledger.store import Store

__all__ = ["batches"]

# The driver's batches: ~ROW_BYTES a requested row (a hint: the driver estimates), at
# least MIN_BATCH_BYTES, at most MAX_BATCH_BYTES; each is then sliced to `batch` rows.
# The fetch's CPU is the same from 1 to 16 MiB (1M versions: 0.9-1.1 s) and the peak
# RSS grows with it (+13 MiB at 1 MiB, +60 MiB at 16 MiB over the process before the
# read), but a reader with a cost per batch (the snapshot export's columnar calls)
# wants its `batch` rows: a driver batch smaller than that gives it smaller ones.
ROW_BYTES = 512
MIN_BATCH_BYTES = 1 << 20
MAX_BATCH_BYTES = 32 << 20

# `:name` placeholders, not a `::type` cast (the same rule as arrow_fetch's)
_PLACEHOLDER = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


def batches(
    store: Store, sql: str, params: Mapping[str, Any], schema: pa.Schema, batch: int
) -> Iterator[pa.RecordBatch]:
    """Stream the rows of `sql` (placeholders `:name`) as batches of `schema`, at most
    `batch` rows each, read by COPY through the ADBC PostgreSQL driver."""
    if batch < 1:
        raise ValueError(f"batch must be at least 1, not {batch}")
    # (the driver's low-level API: its DB-API module imports pandas and pyarrow.dataset,
    # ~0.25 CPU s a process, for nothing used here)
    import adbc_driver_manager as adbc  # lazy: the ADBC driver only for a big snapshot
    import adbc_driver_postgresql as adbc_pg  # lazy: likewise

    query, conninfo = _bound(store, sql, params)
    db = adbc_pg.connect(conninfo)
    try:
        conn = adbc.AdbcConnection(db)  # (autocommit: an ADBC connection's default)
        try:
            stmt = adbc.AdbcStatement(conn)
            try:
                hint = min(max(batch * ROW_BYTES, MIN_BATCH_BYTES), MAX_BATCH_BYTES)
                stmt.set_options(**{"adbc.postgresql.batch_size_hint_bytes": str(hint)})
                stmt.set_sql_query(query)
                stream, _ = stmt.execute_query()
                reader = pa.RecordBatchReader.from_stream(stream)
                try:
                    for got in reader:
                        yield from _sliced(_cast(got, schema), batch)
                finally:
                    reader.close()
            finally:
                stmt.close()
        finally:
            conn.close()
    finally:
        db.close()


def _bound(store: Store, sql: str, params: Mapping[str, Any]) -> tuple[str, str]:
    """`sql` with each `:name` replaced by its value as a literal (psycopg's quoting,
    rendered against a live connection of the store), and the libpq connection
    string of that connection's server, database, user and options."""
    from psycopg import sql as pgsql  # lazy: as the driver above
    from psycopg.conninfo import make_conninfo  # lazy: likewise

    with store.engine.connect() as conn:
        raw: Any = conn.connection.driver_connection

        def literal(found: re.Match[str]) -> str:
            rendered: str = pgsql.Literal(params[found.group(1)]).as_string(raw)
            return rendered

        query = _PLACEHOLDER.sub(literal, sql)
        info = raw.info
        extra: dict[str, Any] = {"client_encoding": "UTF8"}
        if info.password:
            extra["password"] = info.password
        conninfo = make_conninfo(info.dsn, **extra)
        conn.rollback()
    return query, conninfo


def _cast(got: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    if got.num_columns != len(schema):
        raise ValueError(f"the query gave {got.num_columns} columns, the schema has {len(schema)}")
    # (the driver's schema carries its type names as field metadata: not kept)
    cols = [
        col if col.type == field.type else col.cast(field.type)
        for col, field in zip(got.columns, schema, strict=True)
    ]
    return pa.record_batch(cols, schema=schema)


def _sliced(got: pa.RecordBatch, batch: int) -> Iterator[pa.RecordBatch]:
    if got.num_rows <= batch:
        if got.num_rows:
            yield got
        return
    for start in range(0, got.num_rows, batch):
        yield got.slice(start, batch)
