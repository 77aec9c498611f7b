"""The bitemporal core's two rules, written once.

Known at K: a row of a transaction-timed table (`versions`, `applications`, `gaps`)
is visible at transaction time K when it was recorded by then and not retracted by
then: `recorded_at <= K AND (retracted_at IS NULL OR retracted_at > K)`. Without K
(None) the latest belief: `retracted_at IS NULL`.

Latest version per key: of a key's visible versions, the one with the greatest
(`valid_from`, `txn_seq`) -- the newest in valid time, ties broken by commit order.

Each rule has one SQLAlchemy-expression form (`visible`, `latest_rank`,
`latest_per_key`), one SQL-text form for the hot paths that hand raw text to the
driver (COPY, `exec_driver_sql`: `visible_sql`, `latest_per_key_sql`) and, for the
known-at rule, a Python predicate over fetched rows (`is_visible`); all are derived
from the definitions below and tested to agree (tests/ledger/test_visibility.py).

The latest-per-key rule has a streamed form too, for reading a whole source (a
snapshot): `key_ordered_sql` scans the versions in the index's order (source, key,
valid_from) -- no sort, no window, linear -- and `latest_of_ordered` keeps, of each
key's rows in an Arrow table so ordered, the greatest (`valid_from`, `txn_seq`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from sqlalchemy import ColumnElement, Select, and_, func, or_, select

from feedledger.ledger.schema import versions

#: Newest-last order of a key's versions: the latest is the greatest of these.
LATEST_ORDER: tuple[str, ...] = ("valid_from", "txn_seq")


def is_visible(recorded_at: int, retracted_at: int | None, known_at: int | None) -> bool:
    """The known-at rule over one fetched row's `recorded_at` and `retracted_at`."""
    if known_at is None:
        return retracted_at is None
    return recorded_at <= known_at and (retracted_at is None or retracted_at > known_at)


def visible(table: Any, known_at: int | None) -> ColumnElement[bool]:
    """The known-at rule as a SQLAlchemy condition on `table` (any table or alias with
    `recorded_at` and `retracted_at` columns)."""
    if known_at is None:
        latest_belief: ColumnElement[bool] = table.c.retracted_at.is_(None)
        return latest_belief
    return and_(
        table.c.recorded_at <= known_at,
        or_(table.c.retracted_at.is_(None), table.c.retracted_at > known_at),
    )


def visible_sql(known: str | None, alias: str | None = None) -> str:
    """The known-at rule as SQL text. `known`: the rendered placeholder (or literal) of
    K -- `:k`, `%(k)s` -- or None for the latest belief; `alias`: the table's alias."""
    c = f"{alias}." if alias else ""
    if known is None:
        return f"{c}retracted_at IS NULL"
    return f"{c}recorded_at <= {known} AND ({c}retracted_at IS NULL OR {c}retracted_at > {known})"


def latest_rank(table: Any = versions) -> Any:
    """ROW_NUMBER() over a key's versions, 1 for the latest (see LATEST_ORDER)."""
    return (
        func.row_number()
        .over(partition_by=table.c.key, order_by=[table.c[c].desc() for c in LATEST_ORDER])
        .label("rn")
    )


def latest_per_key(columns: Sequence[str], *where: Any) -> Select[Any]:
    """SELECT `columns` of the latest version per key among the versions matching
    `where` (e.g. `versions.c.source == s, visible(versions, k)`)."""
    inner = select(*(versions.c[c] for c in columns), latest_rank()).where(*where).subquery()
    return select(*(inner.c[c] for c in columns)).where(inner.c.rn == 1)


def latest_per_key_sql(columns: Sequence[str], where: str, *, distinct_on: bool = False) -> str:
    """SQL text selecting `columns` of the latest version per key among the versions
    matching the SQL condition `where`. `distinct_on`: PostgreSQL's DISTINCT ON form
    (rows in key order), otherwise the portable ROW_NUMBER() form (no order)."""
    cols = ", ".join(columns)
    newest_first = ", ".join(f"{c} DESC" for c in LATEST_ORDER)
    if distinct_on:
        return (
            f"SELECT DISTINCT ON (key) {cols} FROM versions WHERE {where} "
            f"ORDER BY key, {newest_first}"
        )
    return (
        f"SELECT {cols} FROM ("
        f" SELECT {cols}, ROW_NUMBER() OVER ("
        f"  PARTITION BY key ORDER BY {newest_first}) AS rn"
        f" FROM versions WHERE {where}) latest WHERE rn = 1"
    )


def key_ordered_sql(columns: Sequence[str], where: str) -> str:
    """SQL text selecting `columns` of the versions matching `where`, in key order and
    each key's versions oldest first in valid time (ties in any order): the order of
    the index (source, key, valid_from), so a whole source streams without a sort.
    `latest_of_ordered` then keeps each key's latest."""
    return f"SELECT {', '.join(columns)} FROM versions WHERE {where} ORDER BY key, valid_from"


def latest_of_ordered(rows: pa.Table) -> pa.Table:
    """Of `rows` (with `key`, `valid_from`, `txn_seq`; in `key_ordered_sql`'s order and
    holding every row of each key it has), each key's latest row, in key order."""
    # imported here: an ingest imports this module (ledger/bulk) and never calls this
    import pyarrow.compute as pc  # lazy: an ingest loads this module and never needs it

    n = rows.num_rows
    if n < 2:
        return rows
    rows = rows.combine_chunks()
    keys = rows.column("key").chunk(0)
    same_key = pc.equal(keys.slice(0, n - 1), keys.slice(1))
    froms = rows.column("valid_from").chunk(0)
    tied = pc.and_(same_key, pc.equal(froms.slice(0, n - 1), froms.slice(1)))
    if pc.any(tied).as_py():
        # a key's versions at one valid time: commit order decides. The keys keep the
        # store's order (its collation): each run of one key is numbered and sorted
        # within by the full LATEST_ORDER.
        starts = pc.cast(pc.invert(same_key), pa.int64())
        group = pc.cumulative_sum(pa.concat_arrays([pa.array([0], pa.int64()), starts]))
        ranked = rows.append_column("_group", group)
        by = [("_group", "ascending"), *((c, "ascending") for c in LATEST_ORDER)]
        rows = rows.take(pc.sort_indices(ranked, by))
        keys = rows.column("key").combine_chunks()
        same_key = pc.equal(keys.slice(0, n - 1), keys.slice(1))
    last = pa.concat_arrays([pc.invert(same_key), pa.array([True])])
    return rows.filter(last)
