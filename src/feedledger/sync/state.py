"""Bookkeeping of destination syncs in the ledger store: the outcome ledger (the
latest verdict per destination, scope and key -- a retry replaces, never adds) and the
rebuild checkpoints (attempted vs acknowledged)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from sqlalchemy import except_, func, insert, select, update

from feedledger.ledger.store import Store
from feedledger.sync.tables import (
    manifest_keys,
    sync_checkpoints,
    sync_outcomes,
    sync_reconciles,
)

VERDICTS = ("accepted", "already_current", "superseded", "rejected", "unresolved")


class Verdict(NamedTuple):
    key: str
    verdict: str
    revision: int | None
    generation: str | None
    content_hash: str | None
    reason: str | None = None
    evidence: dict[str, Any] | None = None


_OUTCOME_COLS = ("destination", "scope", "key", "verdict", "revision", "generation",
                 "content_hash", "reason", "evidence", "attempts", "at")  # fmt: skip
_OUTCOME_UPDATE = (
    "verdict = excluded.verdict, revision = excluded.revision, "
    "generation = excluded.generation, content_hash = excluded.content_hash, "
    "reason = excluded.reason, evidence = excluded.evidence, "
    "attempts = sync_outcomes.attempts + 1, at = excluded.at"
)


def _record_sql(dialect: str) -> str:
    mark = "%s" if dialect == "postgresql" else "?"
    return (
        f"INSERT INTO sync_outcomes ({', '.join(_OUTCOME_COLS)}) "
        f"VALUES ({', '.join([mark] * len(_OUTCOME_COLS))}) "
        f"ON CONFLICT (destination, scope, key) DO UPDATE SET {_OUTCOME_UPDATE}"
    )


def record(
    store: Store,
    destination: str,
    scope: str,
    verdicts: Sequence[Verdict],
    at: int,
    *,
    acknowledged: str | None = None,
) -> None:
    """Upsert the verdicts (one driver-level executemany of plain tuples: SQLAlchemy's
    per-row parameter processing cost more than the writes). With `acknowledged`, the
    rebuild checkpoint moves in the same transaction (one commit, one fsync)."""
    if not verdicts and acknowledged is None:
        return
    rows = [
        (destination, scope, v.key, v.verdict, v.revision, v.generation, v.content_hash,
         v.reason, json.dumps(v.evidence, sort_keys=True) if v.evidence else None, 1, at)
        for v in verdicts
    ]  # fmt: skip
    sql = _record_sql(store.dialect)
    with store.begin() as conn:
        for start in range(0, len(rows), 5000):
            conn.exec_driver_sql(sql, rows[start : start + 5000])
        if acknowledged is not None:
            c = sync_checkpoints
            conn.execute(
                update(c)
                .where(c.c.destination == destination, c.c.manifest_id == scope)
                .values(acknowledged_key=acknowledged, batches=c.c.batches + 1, updated_at=at)
            )


def counts(store: Store, destination: str, scope: str) -> dict[str, int]:
    o = sync_outcomes
    with store.engine.connect() as conn:
        got: dict[str, int] = dict(
            conn.execute(
                select(o.c.verdict, func.count())
                .where(o.c.destination == destination, o.c.scope == scope)
                .group_by(o.c.verdict)
            ).all()
        )
    return {v: int(got.get(v, 0)) for v in VERDICTS}


def of_verdict(store: Store, destination: str, scope: str, verdict: str) -> list[dict[str, Any]]:
    o = sync_outcomes
    with store.engine.connect() as conn:
        rows = conn.execute(
            select(o)
            .where(o.c.destination == destination, o.c.scope == scope, o.c.verdict == verdict)
            .order_by(o.c.key)
        ).all()
    return [
        {
            "key": json.loads(r.key),
            "revision": r.revision,
            "generation": r.generation,
            "reason": r.reason,
            "evidence": json.loads(r.evidence) if r.evidence else None,
        }
        for r in rows
    ]


def verdicts_for(store: Store, destination: str, keys: Sequence[str]) -> list[dict[str, Any]]:
    """Every scope's latest verdict for any of `keys` (canonical texts one typed KEY may
    mean) at this destination, newest first."""
    o = sync_outcomes
    with store.engine.connect() as conn:
        rows = conn.execute(
            select(o)
            .where(o.c.destination == destination, o.c.key.in_(list(keys)))
            .order_by(o.c.at.desc(), o.c.scope)
        ).all()
    return [
        {
            "scope": r.scope,
            "key": r.key,
            "verdict": r.verdict,
            "reason": r.reason,
            "revision": r.revision,
            "generation": r.generation,
            "content_hash": r.content_hash,
            "evidence": json.loads(r.evidence) if r.evidence else None,
            "attempts": int(r.attempts),
            "at": int(r.at),
        }
        for r in rows
    ]


def without_verdict(
    store: Store, destination: str, manifest_id: str, limit: int
) -> tuple[int, list[str]]:
    """The manifest's keys with no verdict recorded for this destination: how many, and
    the first `limit` of them in key order.

    A set difference (EXCEPT: the manifest's key range minus the scope's verdict range,
    each read once through its primary key, then hashed or sorted), not an anti-join:
    its plan does not hang on planner statistics. Right after a rebuild nothing has
    analysed `manifest_keys` or `sync_outcomes` (autovacuum runs late, or is off), and
    PostgreSQL planned the anti-join as a nested loop that compared every manifest key
    with every verdict: minutes at 120k keys."""
    o, mk = sync_outcomes, manifest_keys
    missing = except_(
        select(mk.c.key).where(mk.c.manifest_id == manifest_id),
        select(o.c.key).where(o.c.destination == destination, o.c.scope == manifest_id),
    ).subquery("missing")
    with store.engine.connect() as conn:
        total = int(conn.execute(select(func.count()).select_from(missing)).scalar_one())
        keys = (
            conn.execute(select(missing.c.key).order_by(missing.c.key).limit(limit)).scalars().all()
            if total
            else []
        )
    return total, list(keys)


@dataclass(frozen=True)
class Checkpoint:
    attempted_key: str | None
    acknowledged_key: str | None
    batches: int
    status: str

    def to_json(self) -> dict[str, Any]:
        return {
            "attempted_key": json.loads(self.attempted_key) if self.attempted_key else None,
            "acknowledged_key": json.loads(self.acknowledged_key)
            if self.acknowledged_key
            else None,
            "batches": self.batches,
            "status": self.status,
        }


def checkpoint(store: Store, destination: str, manifest_id: str) -> Checkpoint | None:
    c = sync_checkpoints
    with store.engine.connect() as conn:
        row = conn.execute(
            select(c).where(c.c.destination == destination, c.c.manifest_id == manifest_id)
        ).first()
    if row is None:
        return None
    return Checkpoint(row.attempted_key, row.acknowledged_key, row.batches, row.status)


def start(store: Store, destination: str, manifest_id: str, at: int) -> Checkpoint:
    c = sync_checkpoints
    with store.begin() as conn:
        row = conn.execute(
            select(c).where(c.c.destination == destination, c.c.manifest_id == manifest_id)
        ).first()
        if row is None:
            conn.execute(
                insert(c).values(
                    destination=destination,
                    manifest_id=manifest_id,
                    batches=0,
                    status="running",
                    started_at=at,
                    updated_at=at,
                )
            )
        elif row.status == "finished":  # a new sync of the same manifest: from the start
            conn.execute(
                update(c)
                .where(c.c.destination == destination, c.c.manifest_id == manifest_id)
                .values(
                    attempted_key=None,
                    acknowledged_key=None,
                    batches=0,
                    status="running",
                    started_at=at,
                    updated_at=at,
                )
            )
    got = checkpoint(store, destination, manifest_id)
    assert got is not None
    return got


def mark(
    store: Store,
    destination: str,
    manifest_id: str,
    at: int,
    *,
    attempted: str | None = None,
    finished: bool = False,
) -> None:
    """Move the checkpoint: a batch attempted, or the sync finished (acknowledging a
    batch goes with its verdicts, in `record`)."""
    c = sync_checkpoints
    values: dict[str, Any] = {"updated_at": at}
    if attempted is not None:
        values["attempted_key"] = attempted
    if finished:
        values["status"] = "finished"
    with store.begin() as conn:
        conn.execute(
            update(c)
            .where(c.c.destination == destination, c.c.manifest_id == manifest_id)
            .values(**values)
        )


def record_reconcile(
    store: Store, destination: str, manifest: str, at: int, report: dict[str, Any]
) -> None:
    """Keep a reconcile's report (its own transaction)."""
    with store.begin() as conn:
        conn.execute(
            insert(sync_reconciles).values(
                destination=destination,
                manifest=manifest,
                at=at,
                complete=bool(report.get("complete")),
                report=json.dumps(report, sort_keys=True, default=str),
            )
        )


def last_reconcile(store: Store, destination: str) -> tuple[int, dict[str, Any]] | None:
    """(when, report) of the destination's last reconcile; None if it never had one."""
    r = sync_reconciles
    with store.engine.connect() as conn:
        row = conn.execute(
            select(r.c.at, r.c.report)
            .where(r.c.destination == destination)
            .order_by(r.c.reconcile_id.desc())
            .limit(1)
        ).first()
    return None if row is None else (int(row.at), json.loads(row.report))
