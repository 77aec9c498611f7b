"""Read-side queries: history, as-of, changes, consistency check (the
snapshot export reads through `ledger.readers.snapshot_rows`).

Visibility as known at transaction time K and the latest version per key are the
rules of `ledger.visibility`. `valid_to` is derived: the next visible version's
`valid_from` for the same key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl
from sqlalchemy import Connection, and_, func, or_, select, text

from feedledger.ledger.encoding import Decoder
from feedledger.ledger.records import Change, Version, geometry_changed
from feedledger.ledger.schema import CHANGE_NAMES, applications, outcomes, payloads, versions
from feedledger.ledger.store import Store
from feedledger.ledger.visibility import (
    is_visible,
    latest_per_key,
    visible,
)
from feedledger.model.jsonout import RawJSON
from feedledger.model.timeutil import iso


def _version(row: Any, valid_to: int | None, geo: bool, attributes: str | None) -> Version:
    return Version(
        version_id=row.version_id,
        key=row.key,
        valid_from=row.valid_from,
        valid_to=valid_to,
        recorded_at=row.recorded_at,
        txn_seq=row.txn_seq,
        retracted_at=row.retracted_at,
        run_id=row.run_id,
        payload_id=row.payload_id,
        backfill=bool(row.backfill),
        deleted=bool(row.deleted),
        change=CHANGE_NAMES[row.change],
        revision=row.revision,
        attributes=attributes,
        geometry=row.geometry if geo else None,
        geo=geo,
    )


def history(
    store: Store,
    source: str,
    key: str,
    *,
    include_retracted: bool = False,
    known_at: int | None = None,
    geo: bool = False,
) -> list[Version]:
    """The key's versions in valid-time order (`geo`: a GIS source, its versions carry
    their geometry)."""
    v, a = versions, applications
    # a version's run and payload are its application's (same source and txn_seq)
    stmt = (
        select(v, a.c.run_id, a.c.payload_id)
        .select_from(v.join(a, and_(a.c.source == v.c.source, a.c.txn_seq == v.c.txn_seq)))
        .where(v.c.source == source, v.c.key == key)
    )
    if known_at is not None:
        stmt = stmt.where(v.c.recorded_at <= known_at)
    stmt = stmt.order_by(v.c.valid_from, v.c.txn_seq)
    with store.engine.connect() as conn:
        rows = list(conn.execute(stmt))
        live = [r for r in rows if is_visible(r.recorded_at, r.retracted_at, known_at)]
        valid_to = {
            r.version_id: (live[i + 1].valid_from if i + 1 < len(live) else None)
            for i, r in enumerate(live)
        }
        shown = rows if include_retracted else live
        decode = Decoder(conn)
        return [_version(r, valid_to.get(r.version_id), geo, decode.row(r)) for r in shown]


def asof(
    store: Store,
    source: str,
    key: str,
    valid_at: int,
    known_at: int | None = None,
    *,
    geo: bool = False,
) -> Version | None:
    """The version in force at valid time `valid_at`, as known at `known_at`."""
    found = history(store, source, key, known_at=known_at, geo=geo)
    chain = [v for v in found if v.valid_from <= valid_at]
    return chain[-1] if chain else None


def key_exists(store: Store, source: str, key: str) -> bool:
    with store.engine.connect() as conn:
        row = conn.execute(
            select(versions.c.version_id)
            .where(versions.c.source == source, versions.c.key == key)
            .limit(1)
        ).first()
    return row is not None


def first_observation(
    store: Store, source: str, lo: int, hi: int, known_at: int | None = None
) -> int | None:
    """The earliest publisher time in [lo, hi] of a payload of `source` applied (and not
    retracted) as known at `known_at`: the source was observed then."""
    a = applications
    stmt = select(a.c.published_at).where(
        a.c.source == source, a.c.published_at >= lo, a.c.published_at <= hi
    )
    stmt = stmt.where(visible(a, known_at))
    with store.engine.connect() as conn:
        row = conn.execute(stmt.order_by(a.c.published_at).limit(1)).first()
    return int(row.published_at) if row is not None else None


def first_recorded(store: Store, source: str) -> int | None:
    """When the ledger first recorded anything of `source` (its first applied payload's
    commit), retracted or not; None if never."""
    a = applications
    with store.engine.connect() as conn:
        value = conn.execute(select(func.min(a.c.recorded_at)).where(a.c.source == source))
        first = value.scalar_one()
    return int(first) if first is not None else None


def run_applications(store: Store, run_ids: list[str]) -> list[tuple[str, int, int]]:
    """(run_id, published_at, changes) of the runs' applications, in commit order."""
    if not run_ids:
        return []
    stmt = (
        select(applications.c.run_id, applications.c.published_at, applications.c.changes)
        .where(applications.c.run_id.in_(run_ids))
        .order_by(applications.c.txn_seq)
    )
    with store.engine.connect() as conn:
        return [(r.run_id, r.published_at, r.changes) for r in conn.execute(stmt)]


def changes(
    store: Store,
    run_id: str,
    *,
    geo: bool = False,
    after: tuple[int, str] | None = None,
    limit: int | None = None,
) -> list[Change]:
    """What a run changed, key by key in publisher order (`geo`: a GIS source, each
    change says whether its geometry changed); a page of them with `after` (the
    (valid_from, key) of the previous page's last row) and `limit`."""
    # A payload's versions have contiguous ids (recorded on its application row), so a
    # run's changes are primary-key ranges: no index on run_id is needed.
    bound = "" if after is None else (
        "AND (v.valid_from > :vf OR (v.valid_from = :vf AND v.key > :k)) "
    )  # fmt: skip
    sql = text(
        "SELECT v.key, v.change, v.valid_from, p.attributes AS before_attributes, "
        "p.fields_id AS before_fields_id, v.attributes AS after_attributes, "
        "v.fields_id AS after_fields_id, a.payload_id, v.geometry_hash AS after_gh, "
        "p.geometry_hash AS before_gh "
        "FROM applications a JOIN versions v ON v.version_id >= a.first_version_id "
        "AND v.version_id < a.first_version_id + a.changes "
        "LEFT JOIN versions p ON p.version_id = v.prev_version_id "
        f"WHERE a.run_id = :run AND a.changes > 0 {bound}ORDER BY v.valid_from, v.key"
        + ("" if limit is None else " LIMIT :limit")
    )
    params: dict[str, object] = {"run": run_id}
    if after is not None:
        params |= {"vf": after[0], "k": after[1]}
    if limit is not None:
        params["limit"] = limit
    with store.engine.connect() as conn:
        decode = Decoder(conn)
        return [
            Change(
                key=r.key,
                change=CHANGE_NAMES[r.change],
                valid_from=r.valid_from,
                before=decode.row(r, "before_"),
                after=decode.row(r, "after_"),
                payload_id=r.payload_id,
                geometry_changed=geometry_changed(r.before_gh, r.after_gh) if geo else None,
            )
            for r in conn.execute(sql, params)
        ]


@dataclass(frozen=True, slots=True)
class KeyOutcome:
    """A key a run's payload stated but did not turn into a version: `unresolved` (held:
    same revision, different content) or `superseded` (older revision than held)."""

    key: str
    outcome: str
    valid_from: int
    revision: str | None
    current_revision: str | None
    attributes: str | None
    payload_id: str
    geo: bool = False  # a GIS source: `geometry_changed` is null, like `change`
    geometry: str | None = None  # the geometry the record stated (GIS sources)

    def to_json(self) -> dict[str, Any]:
        # shaped like a change item (`change` null) so `changes --json` stays one list
        data = {
            "key": RawJSON(self.key),
            "change": None,
            "outcome": self.outcome,
            "valid_from": iso(self.valid_from),
            "before": None,
            "after": RawJSON(self.attributes) if self.attributes is not None else None,
            "payload_id": self.payload_id,
            "revision": self.revision,
            "current_revision": self.current_revision,
        }
        if self.geo:
            data["geometry_changed"] = None
        return data


def run_outcomes(
    store: Store,
    run_id: str,
    *,
    geo: bool = False,
    after: tuple[int, str] | None = None,
    limit: int | None = None,
) -> list[KeyOutcome]:
    """The per-key outcomes of a run that did not become versions, in publisher order;
    a page of them with `after` (the (published_at, key) of the previous page's last
    row) and `limit`."""
    o, p = outcomes, payloads
    stmt = (
        select(
            o.c.key,
            o.c.outcome,
            p.c.published_at,
            o.c.revision,
            o.c.current_revision,
            o.c.attributes,
            o.c.payload_id,
            o.c.geometry,
        )
        .select_from(o.join(p, p.c.payload_id == o.c.payload_id))
        .where(o.c.run_id == run_id)
        .order_by(p.c.published_at, o.c.key)
    )
    if after is not None:
        stmt = stmt.where(
            or_(
                p.c.published_at > after[0],
                and_(p.c.published_at == after[0], o.c.key > after[1]),
            )
        )
    if limit is not None:
        stmt = stmt.limit(limit)
    with store.engine.connect() as conn:
        return [
            KeyOutcome(
                key=r.key,
                outcome=r.outcome,
                valid_from=int(r.published_at),
                revision=r.revision,
                current_revision=r.current_revision,
                attributes=r.attributes,
                payload_id=r.payload_id,
                geo=geo,
                geometry=r.geometry if geo else None,
            )
            for r in conn.execute(stmt)
        ]


def recompute_state(store: Store, source: str, keys: list[str] | None = None) -> pl.DataFrame:
    """Current state recomputed from history alone (for `verify`); of `keys` only when
    given (a sampled check: `doctor`)."""
    where = [versions.c.source == source, visible(versions, None)]
    if keys is not None:
        where.append(versions.c.key.in_(keys))
    stmt = latest_per_key(["key", "version_id", "content_hash", "revision", "deleted"], *where)
    with store.begin() as conn:
        rows = conn.execute(stmt).all()
    return pl.DataFrame(
        [tuple(r) for r in rows],
        schema={
            "key": pl.String,
            "version_id": pl.Int64,
            "hash": pl.Int64,
            "revision": pl.String,
            "deleted": pl.Boolean,
        },
        orient="row",
    )


def count_keys(store: Store, source: str) -> int:
    """How many keys the source's current state holds (tombstones included): the height
    `recompute_state` would have, counted without reading the rows."""
    stmt = select(func.count(func.distinct(versions.c.key))).where(
        versions.c.source == source, visible(versions, None)
    )
    with store.begin() as conn:
        return int(conn.execute(stmt).scalar_one())


def changed_keys(store: Store, applied: set[tuple[str, str]]) -> list[str]:
    """The keys whose versions these applications (run_id, payload_id) wrote, sorted;
    one query (each application's versions are its contiguous id range)."""
    if not applied:
        return []
    stmt = (
        select(versions.c.key, applications.c.run_id, applications.c.payload_id)
        .select_from(
            applications.join(
                versions,
                and_(
                    versions.c.version_id >= applications.c.first_version_id,
                    versions.c.version_id
                    < applications.c.first_version_id + applications.c.changes,
                ),
            )
        )
        .where(
            applications.c.payload_id.in_(sorted({p for _, p in applied})),
            applications.c.changes > 0,
        )
    )
    with store.engine.connect() as conn:
        rows = conn.execute(stmt).all()
    return sorted({key for key, run_id, payload_id in rows if (run_id, payload_id) in applied})


def last_fetched_at(conn: Connection, source: str) -> int | None:
    """When a payload of `source` was last fetched (archived), if ever."""
    value = conn.execute(
        select(func.max(payloads.c.fetched_at)).where(payloads.c.source == source)
    ).scalar_one()
    return int(value) if value is not None else None


def applied_ids(store: Store, source: str) -> set[str]:
    """Payload ids of the source with a standing (non-retracted) application."""
    stmt = select(applications.c.payload_id).where(
        applications.c.source == source, visible(applications, None)
    )
    with store.engine.connect() as conn:
        return {r.payload_id for r in conn.execute(stmt)}
