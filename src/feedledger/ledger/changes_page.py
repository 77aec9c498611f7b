"""A run's changes a page at a time (the HTTP API's `/api/runs/{id}/changes`): the
versions it wrote in (valid_from, key) order, then the per-key outcomes that did not
become versions in (published_at, key) order -- the order of `queries.changes` and
`queries.run_outcomes` -- each page after a keyset bound, so a page costs its own rows
whatever the run's size."""

from __future__ import annotations

from sqlalchemy import and_, func, or_, select, text

from feedledger.ledger.queries import KeyOutcome
from feedledger.ledger.records import Change, geometry_changed
from feedledger.ledger.schema import applications, outcomes, payloads
from feedledger.ledger.store import Store

Bound = tuple[int, str]  # (valid_from or published_at, key) of the last row of a page


def count(store: Store, run_id: str) -> tuple[int, int]:
    """(versions the run wrote, outcomes that did not become versions)."""
    a, o = applications, outcomes
    with store.engine.connect() as conn:
        changes = conn.execute(
            select(func.coalesce(func.sum(a.c.changes), 0)).where(a.c.run_id == run_id)
        ).scalar_one()
        held = conn.execute(select(func.count()).where(o.c.run_id == run_id)).scalar_one()
    return int(changes), int(held)


def changes(
    store: Store, run_id: str, after: Bound | None, limit: int, *, geo: bool = False
) -> list[Change]:
    """Up to `limit` changes of the run after `after`, as `queries.changes` gives them."""
    bound = "" if after is None else (
        "AND (v.valid_from > :vf OR (v.valid_from = :vf AND v.key > :k)) "
    )  # fmt: skip
    sql = text(
        "SELECT v.key, v.change, v.valid_from, p.attributes AS before, "
        "v.attributes AS after, v.payload_id, v.geometry_hash AS after_gh, "
        "p.geometry_hash AS before_gh "
        "FROM applications a JOIN versions v ON v.version_id >= a.first_version_id "
        "AND v.version_id < a.first_version_id + a.changes "
        "LEFT JOIN versions p ON p.version_id = v.prev_version_id "
        f"WHERE a.run_id = :run AND a.changes > 0 {bound}"
        "ORDER BY v.valid_from, v.key LIMIT :limit"
    )
    params: dict[str, object] = {"run": run_id, "limit": limit}
    if after is not None:
        params |= {"vf": after[0], "k": after[1]}
    with store.engine.connect() as conn:
        return [
            Change(
                key=r.key,
                change=r.change,
                valid_from=r.valid_from,
                before=r.before,
                after=r.after,
                payload_id=r.payload_id,
                geometry_changed=geometry_changed(r.before_gh, r.after_gh) if geo else None,
            )
            for r in conn.execute(sql, params)
        ]


def held(
    store: Store, run_id: str, after: Bound | None, limit: int, *, geo: bool = False
) -> list[KeyOutcome]:
    """Up to `limit` outcomes of the run after `after`, as `queries.run_outcomes`."""
    o, p = outcomes, payloads
    stmt = (
        select(o.c.key, o.c.outcome, p.c.published_at, o.c.revision, o.c.current_revision,
               o.c.attributes, o.c.payload_id, o.c.geometry)
        .select_from(o.join(p, p.c.payload_id == o.c.payload_id))
        .where(o.c.run_id == run_id)
        .order_by(p.c.published_at, o.c.key)
        .limit(limit)
    )  # fmt: skip
    if after is not None:
        stmt = stmt.where(
            or_(
                p.c.published_at > after[0],
                and_(p.c.published_at == after[0], o.c.key > after[1]),
            )
        )
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
