"""The destination registry (`destinations` table): declared once, shared by every
worker using the store. Also the live route's cursor over the outbox and the
maintenance pause."""

from __future__ import annotations

from typing import Any, NamedTuple

from sqlalchemy import delete, func, insert, select, update

from feedledger.ledger.schema import outbox
from feedledger.ledger.store import Store
from feedledger.model.destination import Destination
from feedledger.model.errors import ConfigError, NotFoundError
from feedledger.sync.tables import destinations, sync_cursors


def _row(r: Any) -> Destination:
    return Destination(
        name=r.name,
        source=r.source,
        kind=r.kind,
        url=r.url,
        table=r.table_name,
        text_fields=tuple(f for f in (r.text_fields or "").split(",") if f),
        transform=r.transform,
        generation=r.generation,
        created_at=r.created_at,
        paused_at=r.paused_at,
    )


def add(store: Store, d: Destination) -> None:
    """Register `d`, with its live cursor at the source's newest outbox row in the same
    transaction: the live route starts from now (what the ledger holds already is a
    rebuild's work), and no crash can leave a destination without a cursor."""
    with store.begin() as conn:
        if conn.execute(select(destinations.c.name).where(destinations.c.name == d.name)).first():
            raise ConfigError(
                f"destination {d.name!r} already exists",
                hint="remove it first with `feedledger destination remove`",
            )
        conn.execute(
            insert(destinations).values(
                name=d.name,
                source=d.source,
                kind=d.kind,
                url=d.url,
                table_name=d.table,
                text_fields=",".join(d.text_fields) or None,
                transform=d.transform,
                generation=d.generation,
                created_at=d.created_at,
            )
        )
        last = conn.execute(
            select(func.max(outbox.c.outbox_id)).where(outbox.c.source == d.source)
        ).scalar()
        conn.execute(
            insert(sync_cursors).values(
                destination=d.name, outbox_id=int(last or 0), updated_at=d.created_at
            )
        )


def get(store: Store, name: str) -> Destination:
    with store.engine.connect() as conn:
        row = conn.execute(select(destinations).where(destinations.c.name == name)).first()
        if row is None:
            known = [r.name for r in conn.execute(select(destinations.c.name))]
            raise NotFoundError(
                f"no destination named {name!r}",
                hint=f"known: {', '.join(sorted(known)) or 'none'}; "
                "declare one with `feedledger destination add`",
            )
    return _row(row)


def listing(store: Store, source: str | None = None) -> list[Destination]:
    stmt = select(destinations).order_by(destinations.c.name)
    if source is not None:
        stmt = stmt.where(destinations.c.source == source)
    with store.engine.connect() as conn:
        return [_row(r) for r in conn.execute(stmt)]


def remove(store: Store, name: str) -> None:
    get(store, name)
    with store.begin() as conn:
        conn.execute(delete(destinations).where(destinations.c.name == name))
        conn.execute(delete(sync_cursors).where(sync_cursors.c.destination == name))


def set_paused(store: Store, name: str, at: int | None) -> None:
    with store.begin() as conn:
        conn.execute(update(destinations).where(destinations.c.name == name).values(paused_at=at))


def cursor(store: Store, name: str) -> int:
    with store.engine.connect() as conn:
        value = conn.execute(
            select(sync_cursors.c.outbox_id).where(sync_cursors.c.destination == name)
        ).scalar()
    return int(value or 0)


def pending(store: Store, source: str, after: int, limit: int) -> list[Any]:
    """The next `limit` change announcements (outbox rows of topic `changes`) of `source`
    after the outbox id `after`, oldest first: (outbox_id, run_id, payload_id) rows."""
    with store.engine.connect() as conn:
        return list(
            conn.execute(
                select(outbox.c.outbox_id, outbox.c.run_id, outbox.c.payload_id)
                .where(
                    outbox.c.source == source,
                    outbox.c.topic == "changes",
                    outbox.c.outbox_id > after,
                )
                .order_by(outbox.c.outbox_id)
                .limit(limit)
            ).all()
        )


class Lag(NamedTuple):
    """How far a destination's live route is behind its source's outbox."""

    cursor: int  # the last outbox row it has had
    messages: int  # outbox rows (one per applied payload) after the cursor
    changes: int  # the changes they announce
    oldest_at: int | None  # the oldest of them's commit time


def lag(store: Store, name: str, source: str) -> Lag:
    at = cursor(store, name)
    with store.engine.connect() as conn:
        n, changes, oldest = conn.execute(
            select(
                func.count(),
                func.coalesce(func.sum(outbox.c.changes), 0),
                func.min(outbox.c.created_at),
            ).where(outbox.c.source == source, outbox.c.topic == "changes", outbox.c.outbox_id > at)
        ).one()
    return Lag(at, int(n), int(changes), None if oldest is None else int(oldest))


def advance(store: Store, name: str, outbox_id: int, at: int) -> None:
    with store.begin() as conn:
        done = conn.execute(
            update(sync_cursors)
            .where(sync_cursors.c.destination == name, sync_cursors.c.outbox_id < outbox_id)
            .values(outbox_id=outbox_id, updated_at=at)
        ).rowcount
        if (
            not done
            and not conn.execute(
                select(sync_cursors.c.destination).where(sync_cursors.c.destination == name)
            ).first()
        ):
            conn.execute(
                insert(sync_cursors).values(destination=name, outbox_id=outbox_id, updated_at=at)
            )
