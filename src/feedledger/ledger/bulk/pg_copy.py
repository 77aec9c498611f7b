"""A payload's versions into PostgreSQL: one binary COPY, and a first load's indexes
built after it (`ledger/bulk` calls `copy_versions_binary` for a PostgreSQL store).

The server's COPY is the payload transaction's critical path on PostgreSQL (one
backend, one core); binary rows spare it the CSV parse (~20 % of its CPU, 1M versions)
and the per-payload constants are encoded once, not once a row. Column -> its type's
binary form, exactly the table's (ledger/schema.py): a binary COPY is not converted.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import polars as pl
from sqlalchemy import Connection

from feedledger import faults
from feedledger.ledger.bulk import VERSION_CHUNK_ROWS, VERSION_CONSTANT, ahead, dbapi


def copy_versions_binary(
    conn: Connection,
    varying: list[str],
    constants: dict[str, Any],
    parts: Iterable[pl.DataFrame],
    rows: int,
    chunk_rows: int | None = None,
) -> None:
    """COPY the version `parts` (the `varying` columns) in binary, the constants' bytes
    appended to every row, as one COPY in the open transaction."""
    from feedledger.ledger.encoding.pg_binary import (  # lazy: its package imports the store
        PG_SIGNATURE,
        PG_TRAILER,
        VERSION_PG_TYPES,
        binary_rows,
        encode_values,
    )

    columns = varying + VERSION_CONSTANT
    kinds = [VERSION_PG_TYPES[c] for c in varying]
    tail = encode_values(
        [constants[c] for c in VERSION_CONSTANT], [VERSION_PG_TYPES[c] for c in VERSION_CONSTANT]
    )
    stmt = f"COPY versions ({', '.join(columns)}) FROM STDIN WITH (FORMAT binary)"
    with dbapi(conn).cursor() as cur:
        deferred = defer_indexes(cur) if rows >= DEFER_INDEX_MIN_ROWS else []
        # each chunk's binary rows built on a helper thread while the one before is sent
        encoded = (binary_rows(part, kinds, tail, fields=len(columns)) for part in parts)
        with cur.copy(stmt) as copy:
            copy.write(PG_SIGNATURE)
            for data in ahead(encoded) if rows > (chunk_rows or VERSION_CHUNK_ROWS) else encoded:
                copy.write(data)
                faults.point("mid_copy", backend_pid=cur.connection.info.backend_pid)
            copy.write(PG_TRAILER)
        for definition in deferred:
            cur.execute(definition)


# A first load into an EMPTY versions table (a new store's first payload) builds the
# table's indexes after its COPY instead of maintaining them row by row (1M versions:
# the COPY's upkeep of the secondary index is ~1.1 s of the server's one core, and of
# the primary key's, checked unique row by row, ~0.7 s; each build sorts once, on
# parallel workers). The primary key is dropped as a constraint and added again under
# the same name, so it is exactly what it was, and a duplicate version id fails the
# payload's transaction as it did, only at the end of the COPY rather than at its row.
# Same transaction: the drops, the COPY and the builds commit together or not at all.
# The drops lock the table (ACCESS EXCLUSIVE) until the commit, so they are only taken
# when nobody else holds any lock on the table (NOWAIT), and only kept when the table
# is still empty under that lock: then nobody's history is kept from readers (they wait
# for the commit), and the builds cost no more than this payload's own rows. A table
# with rows, or a lock not free, takes the plain COPY.
DEFER_INDEX_MIN_ROWS = 100_000
_SECONDARY_INDEXES = """
SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid)
FROM pg_index i WHERE i.indrelid = 'versions'::regclass
AND NOT i.indisprimary AND NOT i.indisunique AND NOT i.indisexclusion
ORDER BY 1
"""
# the table's primary key as a constraint (its name, its definition), when it has one
_PRIMARY_KEY = """
SELECT quote_ident(conname), pg_get_constraintdef(oid)
FROM pg_constraint WHERE conrelid = 'versions'::regclass AND contype = 'p'
"""


def defer_indexes(cur: Any) -> list[str]:
    """Drop the versions table's secondary indexes and primary key when it is empty
    and free (see above); the statements that build them again (none: nothing was
    dropped)."""
    from psycopg import errors  # lazy: an SQLite store never loads psycopg

    cur.execute("SELECT EXISTS (SELECT 1 FROM versions)")
    if cur.fetchone()[0]:
        return []
    cur.execute("SAVEPOINT defer_indexes")
    try:
        cur.execute("LOCK TABLE versions IN ACCESS EXCLUSIVE MODE NOWAIT")
    except errors.LockNotAvailable:
        cur.execute("ROLLBACK TO SAVEPOINT defer_indexes")
        return []
    cur.execute("SELECT EXISTS (SELECT 1 FROM versions)")
    indexes = [] if cur.fetchone()[0] else cur.execute(_SECONDARY_INDEXES).fetchall()
    if not indexes:  # rows committed since the first look: let go of the lock
        cur.execute("ROLLBACK TO SAVEPOINT defer_indexes")
        return []
    rebuild = []
    for name, definition in indexes:
        cur.execute(f"DROP INDEX {name}")
        rebuild.append(definition)
    for name, definition in cur.execute(_PRIMARY_KEY).fetchall():
        cur.execute(f"ALTER TABLE versions DROP CONSTRAINT {name}")
        # built first: a duplicate version id fails before the other builds are paid for
        rebuild.insert(0, f"ALTER TABLE versions ADD CONSTRAINT {name} {definition}")
    cur.execute("RELEASE SAVEPOINT defer_indexes")
    return rebuild
