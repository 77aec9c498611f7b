"""A page of a layer's features: the entities of a few keys as they stood at a valid
time (as known at K), with the source's state token read in the same snapshot.

An OGC API items page (`api.features`) names its keys from a spatial index of the
layer (`api._source.feature_index`, built once per state from
`snapshot_rows.layer_rows`), then reads just those keys here: every version of each
key (`entity_read.versions_sql`: the index `ix_versions_source_key`, the codebook
joined), the visible one in force at `valid_at` kept (`visibility.is_visible`, the
latest by `LATEST_ORDER`), a deleted one dropped. The state token comes from the same
read (one SQLite read transaction; one PostgreSQL pipelined round trip,
`pg_pipeline`), so the caller can tell whether the index it chose the keys from still
describes the state these rows were read at.

The state token (`token`) is what any change of a layer's answers moves: the
watermark's `txn_seq` (a payload applied, a retraction, a replay) and the source's gap
records (how many, the last recorded and retracted: a gap added or retracted by hand
moves no watermark).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from feedledger.ledger.encoding import decode_with
from feedledger.ledger.readers import entity_read, pg_pipeline
from feedledger.ledger.store import Store
from feedledger.ledger.visibility import is_visible

__all__ = ["FeatureRow", "Token", "read", "token"]

Token = tuple[int | None, int, int | None, int | None]

# the columns of entity_read.versions_sql, by position
_VALID_FROM, _RECORDED, _TXN, _RETRACTED, _DELETED = 2, 3, 4, 5, 9
_ATTRS, _GEOM, _BOOK = 12, 13, 14


@dataclass(frozen=True, slots=True)
class FeatureRow:
    key: str
    valid_from: int
    attributes: str  # canonical JSON
    geometry: str | None  # GeoJSON text as stated; None without one


def read(
    store: Store,
    source: str,
    keys: Sequence[str],
    valid_at: int,
    known_at: int | None,
    *,
    geo: bool,
) -> tuple[Token, list[FeatureRow]]:
    """(the source's state token, the present entities of `keys` at `valid_at`
    as known at `known_at`, in the order of `keys`)."""
    statements = [_token_sql(store)]
    if keys:
        statements.append(entity_read.versions_sql(store, len(keys), geo=geo))
    params = entity_read.key_params(source, keys)
    with store.translating():
        if store.dialect == "postgresql":
            results = pg_pipeline.fetch(store, statements, params)
        else:
            results = entity_read.fetch_sqlite(store, statements, params)
    seq = _token(results[0])
    if not keys:
        return seq, []
    latest: dict[str, Any] = {}
    for row in results[1]:  # oldest first: (valid_from, txn_seq)
        if row[_VALID_FROM] > valid_at or not is_visible(row[_RECORDED], row[_RETRACTED], known_at):
            continue
        if known_at is not None and row[_RECORDED] > known_at:
            continue
        held = latest.get(row[1])
        if held is None or (row[_VALID_FROM], row[_TXN]) >= (held[_VALID_FROM], held[_TXN]):
            latest[row[1]] = row
    out = []
    for key in keys:
        row = latest.get(key)
        if row is None or row[_DELETED]:
            continue
        out.append(
            FeatureRow(
                key=key,
                valid_from=int(row[_VALID_FROM]),
                attributes=_decoded(row[_BOOK], row[_ATTRS]),
                geometry=row[_GEOM] if geo and row[_GEOM] else None,
            )
        )
    return seq, out


def _decoded(codebook: str | None, stored: str | None) -> str:
    return decode_with(codebook, stored) or "{}"


def token(store: Store, source: str) -> Token:
    """The source's state token (see the module's text), in one statement."""
    return read(store, source, [], 0, None, geo=False)[0]


def _token_sql(store: Store) -> str:
    src = store.param("source")
    return (
        f"SELECT (SELECT txn_seq FROM watermarks WHERE source = {src}), "
        "COUNT(*), MAX(recorded_at), MAX(retracted_at) "
        f"FROM gaps WHERE source = {src}"
    )


def _token(rows: list[Any]) -> Token:
    seq, count, recorded, retracted = rows[0]
    return (
        None if seq is None else int(seq),
        int(count),
        None if recorded is None else int(recorded),
        None if retracted is None else int(retracted),
    )
