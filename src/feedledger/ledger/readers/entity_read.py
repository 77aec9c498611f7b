"""One entity's read, the hot path of `history` and `asof` (the CLI, the Python API and
the HTTP server's entity routes): everything either answer needs, read in ONE pooled
connection with plain driver statements (no SQLAlchemy compile, cache key or result
rows: ~20x less CPU than a Core statement each).

- the entity's versions: `ix_versions_source_key` (source, key, valid_from), every
  candidate key text at once (`formats.keys.key_candidates`); the key is the first
  candidate with any version at all (as `pipeline.query.resolve_key`), its history the
  visible ones (`visibility.is_visible`) with `valid_to` derived;
- with `context` (what `asof` needs besides): the source's applications (publisher
  times observed as known at K, and when anything was first recorded) and its gap
  records visible at K (the rows `gaps.listing` reads).

SQLite: a pooled connection under a deferred `BEGIN` (a read snapshot, no write lock:
the engine's own `begin` hook takes `BEGIN IMMEDIATE`, which made concurrent readers
queue on the write lock). PostgreSQL: the statements pipelined in one round trip on
the thread's own reading connection (`readers.pg_pipeline`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from feedledger.ledger.encoding import decode_with
from feedledger.ledger.readers import pg_pipeline
from feedledger.ledger.records import Gap, Version
from feedledger.ledger.schema import CHANGE_NAMES
from feedledger.ledger.store import Store
from feedledger.ledger.visibility import is_visible, visible_sql

# a version's run and payload are its application's (same source and txn_seq), its
# attributes compact against its codebook (issue 17): both joined in the one statement
_COLS = (
    "v.version_id, v.key, v.valid_from, v.recorded_at, v.txn_seq, v.retracted_at, a.run_id, "
    "a.payload_id, v.backfill, v.deleted, v.change, v.revision, v.attributes"
)
_GAP_COLS = "gap_id, source, start_at, end_at, reason, run_id, recorded_at, retracted_at"


@dataclass(frozen=True, slots=True)
class EntityRead:
    key: str | None  # the canonical key text found; None: no version of any candidate
    versions: list[Version]  # valid-time order (with retracted ones if asked)
    # with `context` only (else None / empty):
    observed: list[int] | None = None  # publisher times applied and standing at K
    first_recorded: int | None = None  # the source's first application, ever
    gaps: list[Gap] | None = None  # gap records visible at K, by (start_at, gap_id)


def versions_sql(store: Store, candidates: int, *, geo: bool) -> str:
    """The statement reading every version of `candidates` key texts of a source, oldest
    first (named parameters: `source`, `k0`, `k1`...; `key_params` makes them)."""
    keys = ", ".join(store.param(f"k{i}") for i in range(candidates))
    cols = _COLS + (", v.geometry" if geo else ", NULL") + ", f.codebook"
    return (
        f"SELECT {cols} FROM versions v JOIN applications a "
        "ON a.source = v.source AND a.txn_seq = v.txn_seq "
        "LEFT JOIN field_lists f ON f.fields_id = v.fields_id "
        f"WHERE v.source = {store.param('source')} "
        f"AND v.key IN ({keys}) ORDER BY v.valid_from, v.txn_seq"
    )


def read_sql(
    store: Store, candidates: int, *, known_at: int | None, geo: bool, context: bool
) -> list[str]:
    """The statements of `read` (parameters: `key_params` and `known`): the versions,
    then with `context` the source's applications and its gaps visible at K."""
    out = [versions_sql(store, candidates, geo=geo)]
    if context:
        src = store.param("source")
        known = None if known_at is None else store.param("known")
        out += [
            "SELECT published_at, recorded_at, retracted_at FROM applications "
            f"WHERE source = {src}",
            f"SELECT {_GAP_COLS} FROM gaps WHERE source = {src} AND {visible_sql(known)} "
            "ORDER BY start_at, gap_id",
        ]
    return out


def key_params(source: str, candidates: Sequence[str]) -> dict[str, Any]:
    return {"source": source} | {f"k{i}": c for i, c in enumerate(candidates)}


def read(
    store: Store,
    source: str,
    candidates: Sequence[str],
    *,
    known_at: int | None = None,
    include_retracted: bool = False,
    geo: bool = False,
    context: bool = False,
) -> EntityRead:
    """The entity's versions (as `queries.history`) and, with `context`, the source's
    observations, first record and visible gaps, all in one connection."""
    params = key_params(source, candidates) | {"known": known_at}
    statements = read_sql(store, len(candidates), known_at=known_at, geo=geo, context=context)
    with store.translating():
        if store.dialect == "postgresql":
            results = pg_pipeline.fetch(store, statements, params)
        else:
            results = fetch_sqlite(store, statements, params)
    rows = results[0]
    key = _first_key(rows, candidates)
    found = _history([r for r in rows if r[1] == key], known_at, include_retracted, geo)
    if not context:
        return EntityRead(key, found)
    apps, gap_rows = results[1], results[2]
    observed = sorted({int(a[0]) for a in apps if is_visible(a[1], a[2], known_at)})
    first = min((int(a[1]) for a in apps), default=None)
    gaps = [
        Gap(
            gap_id=g[0],
            source=g[1],
            start_at=g[2],
            end_at=g[3],
            reason=g[4],
            run_id=g[5],
            recorded_at=g[6],
            retracted_at=g[7],
        )
        for g in gap_rows
    ]
    return EntityRead(key, found, observed, first, gaps)


def fetch_sqlite(store: Store, statements: list[str], params: dict[str, Any]) -> list[list[Any]]:
    """Each statement's rows, in one read transaction of a pooled connection."""
    raw = store.engine.raw_connection()
    try:
        cur = raw.cursor()
        try:
            cur.execute("BEGIN")
            out = []
            for sql in statements:
                cur.execute(sql, params)
                out.append(list(cur.fetchall()))
            return out
        finally:
            cur.close()
            raw.rollback()
    finally:
        raw.close()


def _first_key(rows: list[Any], candidates: Sequence[str]) -> str | None:
    present = {r[1] for r in rows}
    return next((c for c in candidates if c in present), None)


def _history(
    rows: list[Any], known_at: int | None, include_retracted: bool, geo: bool
) -> list[Version]:
    """The rules of `queries.history` over fetched rows: versions recorded by K, the
    visible ones chained for `valid_to`, the retracted ones shown only if asked."""
    if known_at is not None:
        rows = [r for r in rows if r[3] <= known_at]
    live = [r for r in rows if is_visible(r[3], r[5], known_at)]
    valid_to = {r[0]: live[i + 1][2] for i, r in enumerate(live[:-1])}
    shown = rows if include_retracted else live
    return [
        Version(
            version_id=r[0],
            key=r[1],
            valid_from=r[2],
            valid_to=valid_to.get(r[0]),
            recorded_at=r[3],
            txn_seq=r[4],
            retracted_at=r[5],
            run_id=r[6],
            payload_id=r[7],
            backfill=bool(r[8]),
            deleted=bool(r[9]),
            change=CHANGE_NAMES[r[10]],
            revision=r[11],
            attributes=decode_with(r[14], r[12]),
            geometry=r[13] if geo else None,
            geo=geo,
        )
        for r in shown
    ]
