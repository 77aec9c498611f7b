"""The Delta Lake export's table (migration 0016): per Delta table and source, how far
the export has gone (`known_at`: the transaction instant the table reflects), the Delta
version that got it there, and whether the scheduler follows every run of the source
with an export to that table (`follow`).

The Delta table is the authority on its own position (each commit carries the source's
`known_at` as an app transaction, `lake/target.py`); this row is the store's copy,
written after the commit, for `export delta --status`, health and the scheduler. A
process killed between the two leaves this row behind; the next export reads the
table's own position and puts this row right.

Declared on the ledger's one `MetaData`; the ledger never imports this module (the
Alembic environment does, as it does notify's and sync's tables).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import BigInteger, Boolean, Column, String, Table, Text, delete, select, update

from feedledger.ledger.schema import metadata
from feedledger.ledger.store import Store

__all__ = ["Position", "delta_exports", "followed", "positions", "save", "set_follow"]

delta_exports = Table(
    "delta_exports",
    metadata,
    Column("target", Text, primary_key=True),  # the table's URI as given (normalised)
    Column("source", String(64), primary_key=True),
    Column("known_at", BigInteger, nullable=False),
    Column("delta_version", BigInteger, nullable=False),
    Column("exported_at", BigInteger, nullable=False),
    Column("follow", Boolean, nullable=False, server_default="0"),
)


@dataclass(frozen=True, slots=True)
class Position:
    target: str
    source: str
    known_at: int
    delta_version: int
    exported_at: int
    follow: bool


def _of(row: object) -> Position:
    return Position(
        target=str(row.target),  # type: ignore[attr-defined]
        source=str(row.source),  # type: ignore[attr-defined]
        known_at=int(row.known_at),  # type: ignore[attr-defined]
        delta_version=int(row.delta_version),  # type: ignore[attr-defined]
        exported_at=int(row.exported_at),  # type: ignore[attr-defined]
        follow=bool(row.follow),  # type: ignore[attr-defined]
    )


def positions(store: Store, target: str | None = None) -> list[Position]:
    """Every export position (of one target), by target and source."""
    t = delta_exports
    stmt = select(t).order_by(t.c.target, t.c.source)
    if target is not None:
        stmt = stmt.where(t.c.target == target)
    with store.engine.connect() as conn:
        return [_of(r) for r in conn.execute(stmt)]


def followed(store: Store, source: str) -> list[str]:
    """The targets whose export follows every run of `source`."""
    t = delta_exports
    stmt = select(t.c.target).where(t.c.source == source, t.c.follow.is_(True))
    with store.engine.connect() as conn:
        return sorted(str(r.target) for r in conn.execute(stmt))


def save(
    store: Store, target: str, source: str, *, known_at: int, delta_version: int, at: int
) -> None:
    """Record that `target` holds `source` as known at `known_at` (its `follow` kept)."""
    t = delta_exports
    with store.begin() as conn:
        done = conn.execute(
            update(t)
            .where(t.c.target == target, t.c.source == source)
            .values(known_at=known_at, delta_version=delta_version, exported_at=at)
        )
        if not done.rowcount:
            conn.execute(
                t.insert().values(
                    target=target,
                    source=source,
                    known_at=known_at,
                    delta_version=delta_version,
                    exported_at=at,
                    follow=False,
                )
            )


def set_follow(store: Store, target: str, sources: list[str], follow: bool) -> None:
    """Turn following on or off for these sources' rows of `target` (rows exist once a
    first export ran)."""
    t = delta_exports
    with store.begin() as conn:
        conn.execute(
            update(t).where(t.c.target == target, t.c.source.in_(sources)).values(follow=follow)
        )


def forget(store: Store, target: str) -> int:
    """Drop every position of `target` (the table was removed); returns how many."""
    t = delta_exports
    with store.begin() as conn:
        return int(conn.execute(delete(t).where(t.c.target == target)).rowcount or 0)
