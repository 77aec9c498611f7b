"""Manifests: a named, frozen population for a destination rebuild -- the exact keys,
the source boundary (watermark, its payload, the transaction sequence and time at
creation) and the transform generation."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, insert, select

from feedledger.ledger.store import Store
from feedledger.model.errors import ConfigError, NotFoundError
from feedledger.model.timeutil import iso
from feedledger.sync.tables import manifest_keys, manifests
from feedledger.sync.versions import fetch_all

BATCH = 10_000


@dataclass(frozen=True)
class Manifest:
    manifest_id: str
    name: str
    source: str
    created_at: int
    boundary_published_at: int | None
    boundary_payload_id: str | None
    boundary_txn_seq: int | None
    generation: str
    reconstructible: bool
    population: int
    keys_from: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "manifest_id": self.manifest_id,
            "name": self.name,
            "source": self.source,
            "created_at": iso(self.created_at),
            "source_boundary": {
                "watermark_published_at": iso(self.boundary_published_at),
                "payload_id": self.boundary_payload_id,
                "txn_seq": self.boundary_txn_seq,
                "known_at": iso(self.created_at),
            },
            "transform_generation": self.generation,
            "population": self.population,
            "reconstructible": self.reconstructible,
            "kind": "reconstructible snapshot"
            if self.reconstructible
            else "population of keys only",
            "keys_from": self.keys_from,
        }


def _manifest(r: Any) -> Manifest:
    return Manifest(**{c.name: getattr(r, c.name) for c in manifests.columns})


def create(
    store: Store,
    *,
    name: str,
    source: str,
    created_at: int,
    boundary: tuple[int | None, str | None, int | None],
    generation: str,
    reconstructible: bool,
    keys: Sequence[str],
    keys_from: str | None,
) -> Manifest:
    mid = uuid.uuid4().hex[:16]
    with store.begin() as conn:
        if conn.execute(select(manifests.c.name).where(manifests.c.name == name)).first():
            raise ConfigError(f"manifest {name!r} already exists; manifests are frozen")
        conn.execute(
            insert(manifests).values(
                manifest_id=mid,
                name=name,
                source=source,
                created_at=created_at,
                boundary_published_at=boundary[0],
                boundary_payload_id=boundary[1],
                boundary_txn_seq=boundary[2],
                generation=generation,
                reconstructible=reconstructible,
                population=len(keys),
                keys_from=keys_from,
            )
        )
        for start in range(0, len(keys), BATCH):
            conn.execute(
                insert(manifest_keys),
                [{"manifest_id": mid, "key": k} for k in keys[start : start + BATCH]],
            )
    return get(store, name)


def get(store: Store, name: str) -> Manifest:
    with store.engine.connect() as conn:
        row = conn.execute(select(manifests).where(manifests.c.name == name)).first()
        if row is None:
            raise NotFoundError(
                f"no manifest named {name!r}",
                hint="create one with `feedledger manifest create NAME --source S`",
            )
    return _manifest(row)


def listing(store: Store) -> list[Manifest]:
    with store.engine.connect() as conn:
        return [_manifest(r) for r in conn.execute(select(manifests).order_by(manifests.c.name))]


def keys(store: Store, manifest_id: str, after: str | None = None, limit: int = BATCH) -> list[str]:
    """The manifest's keys after `after`, in key order (plain driver rows: the rebuild
    reads a million of them)."""
    sql = f"SELECT key FROM manifest_keys WHERE manifest_id = {store.param('m')}"
    if after is not None:
        sql += f" AND key > {store.param('a')}"
    sql += f" ORDER BY key LIMIT {int(limit)}"
    with store.engine.connect() as conn:
        return [r[0] for r in fetch_all(conn, sql, {"m": manifest_id, "a": after})]


def all_keys(store: Store, manifest_id: str) -> list[str]:
    """Every key of the manifest, in one query."""
    with store.engine.connect() as conn:
        return list(
            conn.execute(
                select(manifest_keys.c.key).where(manifest_keys.c.manifest_id == manifest_id)
            )
            .scalars()
            .all()
        )


def count(store: Store, manifest_id: str, *, upto: str | None = None) -> int:
    """How many keys the manifest has (up to and including `upto`)."""
    stmt = select(func.count()).where(manifest_keys.c.manifest_id == manifest_id)
    if upto is not None:
        stmt = stmt.where(manifest_keys.c.key <= upto)
    with store.engine.connect() as conn:
        return int(conn.execute(stmt).scalar_one())
