"""Bulk reads and writes, per backend: executemany on SQLite, COPY on PostgreSQL (a
payload's versions in COPY's binary format, built column by column in Arrow, and a first
load's indexes built after it: `pg_copy`, loaded only by a PostgreSQL store).

These run on the DBAPI connection underneath an open SQLAlchemy transaction, so they
commit or roll back with it. Everything is driven from Polars frames: no per-row
Python on the PostgreSQL path and only the driver's own loop on SQLite.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import polars as pl
from sqlalchemy import Connection

from feedledger import faults
from feedledger.diff import STATE_SCHEMA
from feedledger.ledger.schema import CHANGE_CODES
from feedledger.ledger.staging import Stager
from feedledger.ledger.visibility import latest_per_key_sql, visible_sql


def dbapi(conn: Connection) -> Any:
    """The driver's own connection under an open SQLAlchemy one."""
    return conn.connection.driver_connection


def _is_sqlite(conn: Connection) -> bool:
    return conn.dialect.name == "sqlite"


CHUNK_ROWS = 200_000  # bounded memory: large frames are encoded and sent in slices
T = TypeVar("T")


def _copy_in(
    conn: Connection, table: str, columns: list[str], parts: Iterable[pl.DataFrame]
) -> None:
    cols = ", ".join(columns)
    with (
        dbapi(conn).cursor() as cur,
        cur.copy(f"COPY {table} ({cols}) FROM STDIN WITH (FORMAT csv)") as copy,
    ):
        for part in parts:
            copy.write(part.select(columns).write_csv(include_header=False, null_value=""))
            faults.point("mid_copy", backend_pid=cur.connection.info.backend_pid)


def slices(frame: pl.DataFrame, rows: int = CHUNK_ROWS) -> Iterator[pl.DataFrame]:
    for start in range(0, frame.height, rows):
        yield frame.slice(start, rows)


def ahead(parts: Iterator[T]) -> Iterator[T]:
    """`parts`, each one produced on a helper thread while the caller consumes the one
    before (encoding a chunk overlaps writing the previous one; Polars
    and SQLite release the GIL)."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        pending = pool.submit(next, parts, None)
        while True:
            part = pending.result()
            if part is None:
                return
            pending = pool.submit(next, parts, None)
            yield part


def insert_frame(conn: Connection, table: str, frame: pl.DataFrame) -> None:
    """INSERT every row of `frame` (column names = table columns)."""
    if frame.is_empty():
        return
    columns = list(frame.columns)
    if _is_sqlite(conn):
        bound, values = _sqlite_binding(frame)
        cur = dbapi(conn).cursor()
        try:
            cur.executemany(
                f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join(values)})",
                bound.iter_rows(),
            )
        finally:
            cur.close()
    else:
        _copy_in(conn, table, columns, slices(frame))


def _sqlite_binding(frame: pl.DataFrame) -> tuple[pl.DataFrame, list[str]]:
    """The columns of `frame` to bind per row, and each column's VALUES term: a column
    with no value at all is written as the literal NULL, not bound, and a Boolean one
    is bound as the integer SQLite stores for it. The sqlite3 module binds `int`, `str`,
    `float` and `bytes` directly, but looks every `None` and `bool` up as a candidate
    for adaptation first (~1 us each against ~0.1: a daily's `versions` rows carry two
    Booleans and a null revision each, bench/README.md "The daily, stop 41")."""
    values: list[str] = []
    keep: list[pl.Expr] = []
    for name, dtype in frame.schema.items():
        if frame.get_column(name).null_count() == frame.height:
            values.append("NULL")
            continue
        values.append("?")
        keep.append(pl.col(name).cast(pl.Int8) if dtype == pl.Boolean else pl.col(name))
    if not keep:  # (no column to bind would bind no row)
        return frame, ["?"] * frame.width
    return frame.select(keep), values


# Large frames on SQLite are staged (encoded and bound on a writer thread) into scratch
# database files, each copied by an `INSERT ... SELECT` inside the payload's transaction
# while the next is written (ledger/staging.py).
STAGE_MIN_ROWS = 50_000
VERSION_VARYING = [
    "version_id",
    "key",
    "deleted",
    "change",
    "prev_version_id",
    "content_hash",
    "revision",
    "attributes",
]
# GIS sources only (pipeline/intake/apply.py passes `geometries`): the geometry as stated and
# the hash of its canonical form; other sources never carry or encode these columns
GEOMETRY_COLUMNS = ["geometry", "geometry_hash"]
# (a version's run and payload are its application's: same source and txn_seq)
VERSION_CONSTANT = [
    "source",
    "valid_from",
    "recorded_at",
    "txn_seq",
    "backfill",
    "fields_id",
]


Encoder = Callable[[pl.Series], pl.Series]
# observation indexes -> their `geometry` and `geometry_hash` columns, in that order
Geometries = Callable[[pl.Series], pl.DataFrame]
# rows per encoded chunk of version texts: two chunks exist at once (one encoded ahead)
VERSION_CHUNK_ROWS = 50_000


def version_columns(geo: bool) -> list[str]:
    """The varying version columns written (GEOMETRY_COLUMNS only for a GIS source)."""
    return VERSION_VARYING + GEOMETRY_COLUMNS if geo else VERSION_VARYING


def version_parts(
    frame: pl.DataFrame,
    encode: Encoder,
    geometries: Geometries | None = None,
    chunk_rows: int | None = None,
) -> Iterator[pl.DataFrame]:
    """The varying version columns, `chunk_rows` (default VERSION_CHUNK_ROWS; fewer
    within a source's memory budget: pipeline/intake/bounded.py) rows at a time, each chunk's
    attribute texts (and, for a GIS source, its geometry columns from `geometries`)
    encoded only when it is reached (`encode`: observation indexes -> texts), on a
    helper thread one chunk ahead of the writer when there is more than one chunk.
    Peak memory holds two chunks' texts, never the whole payload's."""
    columns = version_columns(geometries is not None)
    rows = chunk_rows or VERSION_CHUNK_ROWS

    def encoded() -> Iterator[pl.DataFrame]:
        for part in slices(frame, rows):
            idx = part.get_column("idx")
            texts = encode(idx).alias("attributes")
            shapes = geometries(idx).get_columns() if geometries is not None else []
            code = pl.col("change").replace_strict(CHANGE_CODES, return_dtype=pl.Int16)
            yield part.with_columns(texts, *shapes, code).select(columns)

    return ahead(encoded()) if frame.height > rows else encoded()


# version columns a large payload (a first load) often holds one value for: bound once
# in the staged copy instead of written row by row (`stage_layout`)
FOLDABLE = ["deleted", "change", "prev_version_id", "revision"]


@dataclass(frozen=True)
class StageLayout:
    """What the scratch files hold of a payload's version rows (ledger/staging.py).

    `staged`: the columns written row by row; `fixed`: the columns holding one value for
    every row, bound once in the copy; `first_id`: the payload's first version id when
    the ids are contiguous in row order (the copy's `first_id + row number`, never
    staged), else None."""

    staged: list[str]
    fixed: dict[str, Any]
    first_id: int | None


def stage_layout(frame: pl.DataFrame, geo: bool) -> StageLayout:
    """The layout staging `frame` (version rows as `insert_versions` takes them) with."""
    fixed: dict[str, Any] = {}
    for name in FOLDABLE:
        column = frame.get_column(name)
        one = _single_value(column)
        if one is not None:
            fixed[name] = CHANGE_CODES[one[0]] if name == "change" else one[0]
    ids = frame.get_column("version_id")
    contiguous = (
        not ids.is_empty() and ids.null_count() == 0 and bool((ids.diff().fill_null(1) == 1).all())
    )
    first_id = int(ids[0]) if contiguous else None
    skip = set(fixed) | ({"version_id"} if contiguous else set())
    staged = [c for c in version_columns(geo) if c not in skip]
    return StageLayout(staged, fixed, first_id)


def _single_value(column: pl.Series) -> tuple[Any] | None:
    """(the value,) when every element of `column` is that one value (or null), else None."""
    if column.is_empty():
        return None
    nulls = column.null_count()
    if nulls == column.len():
        return (None,)
    if nulls:
        return None
    first = column[0]
    return (first,) if bool((column == first).all()) else None


def staged_parts(
    frame: pl.DataFrame,
    encode: Encoder,
    geometries: Geometries | None = None,
    chunk_rows: int | None = None,
) -> Iterator[pl.DataFrame]:
    """`version_parts` reduced to the columns `stage_layout` stages."""
    staged = stage_layout(frame, geometries is not None).staged
    parts = version_parts(frame, encode, geometries, chunk_rows)
    return (part.select(staged) for part in parts)


def insert_versions(
    conn: Connection,
    frame: pl.DataFrame,
    encode: Encoder,
    constants: dict[str, Any],
    *,
    geometries: Geometries | None = None,
    stager: Stager | None = None,
    chunk_rows: int | None = None,
) -> None:
    """Insert version rows: the varying columns from `frame` with their attribute texts
    from `encode` and, for a GIS source, geometry columns from `geometries` (or all of
    them from `stager`'s scratch files, SQLite), the per-payload constants bound once."""
    varying = version_columns(geometries is not None)
    if stager is not None:
        layout = stage_layout(frame, geometries is not None)
        fixed = {**layout.fixed, **{c: constants[c] for c in VERSION_CONSTANT}}
        columns = layout.staged + list(fixed)
        select = ", ".join(layout.staged + ["?"] * len(fixed))
        if layout.first_id is not None:
            columns.append("version_id")
            select += ", ? + rowid"  # a scratch file's rowids are 1, 2, ... in row order

        def statement(schema: str, before: int) -> tuple[str, tuple[Any, ...]]:
            params = tuple(fixed.values())
            if layout.first_id is not None:
                params += (layout.first_id + before - 1,)
            sql = f"INSERT INTO versions ({', '.join(columns)}) SELECT {select} FROM {schema}.batch"
            return sql, params

        stager.copy_into_versions(dbapi(conn), statement)
        return
    lits = [pl.lit(constants[c]).alias(c) for c in VERSION_CONSTANT]
    parts = (
        part.with_columns(lits) for part in version_parts(frame, encode, geometries, chunk_rows)
    )
    if _is_sqlite(conn):
        for part in parts:
            insert_frame(conn, "versions", part)
    else:  # binary, the constants encoded once (`parts` above is never started)
        from feedledger.ledger.bulk.pg_copy import copy_versions_binary  # lazy: PostgreSQL only

        raw = version_parts(frame, encode, geometries, chunk_rows)
        copy_versions_binary(conn, varying, constants, raw, frame.height, chunk_rows)


_LATEST_COLUMNS = ["key", "version_id", "content_hash", "revision", "deleted"]
_LATEST_SQLITE = latest_per_key_sql(_LATEST_COLUMNS, f"source = ? AND {visible_sql(None)}")
_LATEST_PG = latest_per_key_sql(
    _LATEST_COLUMNS, f"source = {{}} AND {visible_sql(None)}", distinct_on=True
)


def read_state(conn: Connection, source: str) -> pl.DataFrame:
    """The diff state of one source (latest non-retracted version per key, tombstones
    included), recomputed from history in one columnar read."""
    if _is_sqlite(conn):
        cur = dbapi(conn).cursor()
        try:
            rows = cur.execute(_LATEST_SQLITE, (source,)).fetchall()
        finally:
            cur.close()
        frame = pl.DataFrame(
            rows,
            schema={
                "key": pl.String,
                "version_id": pl.Int64,
                "hash": pl.Int64,
                "revision": pl.String,
                "deleted": pl.Int8,
            },
            orient="row",
        )
        return frame.with_columns(pl.col("deleted").cast(pl.Boolean))
    from psycopg import sql  # lazy: an SQLite store never loads psycopg

    stmt = sql.SQL("COPY ({}) TO STDOUT WITH (FORMAT csv)").format(
        sql.SQL(_LATEST_PG).format(sql.Literal(source))
    )
    chunks: list[bytes] = []
    with dbapi(conn).cursor() as cur, cur.copy(stmt) as copy:
        for chunk in copy:
            chunks.append(bytes(chunk))
    data = b"".join(chunks)
    if not data:
        return pl.DataFrame(schema=STATE_SCHEMA)
    frame = pl.read_csv(
        data,
        has_header=False,
        new_columns=["key", "version_id", "hash", "revision", "deleted"],
        infer_schema=False,
    )
    return frame.with_columns(
        pl.col("version_id").cast(pl.Int64),
        pl.col("hash").cast(pl.Int64),
        (pl.col("deleted") == "t").alias("deleted"),
    )
