"""The destinations feature's reads of the ledger's versions (its only SQL over
`versions`): each key's latest version for the live route and the rebuild, the keys
present at a transaction time for a manifest, and the current state a reconcile
expects. Every read applies the ledger's two rules as `ledger/visibility.py` writes
them: "known at K" (`visible_sql`) and "latest version per key" (the greatest
`LATEST_ORDER`: versions are read each key's oldest first and the last one read wins).

Rows come back as plain driver tuples: on the rebuild's hot path SQLAlchemy's Row
objects cost more than the query.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from operator import eq
from typing import Any, NamedTuple

from sqlalchemy import Connection

from feedledger.ledger.encoding import Decoder
from feedledger.ledger.store import Store
from feedledger.ledger.visibility import LATEST_ORDER, visible_sql

# a key's versions oldest first: the last one read is its latest
_OLDEST_FIRST = ", ".join(f"v.{c}" for c in ("key", *LATEST_ORDER))
LOOKUP_CHUNK = 500  # scattered keys looked up per query


class VersionRow(NamedTuple):
    key: str
    attributes: str | None
    revision: str | None
    deleted: bool
    version_id: int
    valid_from: int
    geometry: str | None = None  # GIS sources: GeoJSON text as stated (None: no geometry)


def fetch_all(conn: Connection, sql: str, params: dict[str, Any]) -> list[Any]:
    """All rows of `sql` (the driver's own parameter style) as the driver's tuples,
    through its own cursor: on the rebuild's hot path SQLAlchemy's Row objects cost
    more than the query."""
    cur = conn.connection.cursor()
    try:
        cur.execute(sql, params)
        return list(cur.fetchall())
    finally:
        cur.close()


def _versions_sql(store: Store, known_at: int | None, keys: int = 0, geo: bool = False) -> str:
    """Versions of a key range (or of `keys` listed keys) visible at `known_at`, each
    key's oldest first, in the driver's own parameter style (`geo`: with the geometry)."""
    p = store.param
    visible = visible_sql(None if known_at is None else p("k"), "v")
    where = (
        f"v.key IN ({', '.join(p(f'k{i}') for i in range(keys))})"
        if keys
        else f"v.key >= {p('lo')} AND v.key <= {p('hi')}"
    )
    return (
        "SELECT v.key, v.attributes, v.revision, v.deleted, v.version_id, v.valid_from, "
        "v.fields_id"
        + (", v.geometry " if geo else " ")
        + f"FROM versions v WHERE v.source = {p('s')} AND {where} AND {visible} "
        f"ORDER BY {_OLDEST_FIRST}"
    )


def latest(
    store: Store,
    source: str,
    keys: Sequence[str],
    known_at: int | None,
    *,
    dense: bool = False,
    geo: bool = False,
) -> dict[str, Any]:
    """The latest version of each key visible at `known_at` (None: now), as
    (key, attributes, revision, deleted, version_id, valid_from) tuples -- `geo` (a GIS
    source): with its geometry (GeoJSON text, None for none) as a seventh; keys must be
    sorted. `dense`: the keys are (nearly) every key of their range -- a manifest's
    batch -- so one range scan reads them; otherwise (the live route's scattered keys)
    they are looked up."""
    if not keys:
        return {}
    wanted = set(keys)
    out: dict[str, Any] = {}
    if dense:
        parts = [(_versions_sql(store, known_at, geo=geo), {"lo": keys[0], "hi": keys[-1]})]
    else:
        parts = [
            (
                _versions_sql(store, known_at, len(chunk), geo),
                {f"k{i}": k for i, k in enumerate(chunk)},
            )
            for chunk in (keys[i : i + LOOKUP_CHUNK] for i in range(0, len(keys), LOOKUP_CHUNK))
        ]
    with store.engine.connect() as conn:
        for sql, params in parts:
            # oldest first: the last one wins
            out.update(
                {r[0]: r for r in fetch_all(conn, sql, {"s": source, "k": known_at, **params})}
            )
        if len(out) != len(wanted) or not out.keys() <= wanted:  # a range's other keys
            for key in out.keys() - wanted:
                del out[key]
        rows = list(out.values())
        texts = Decoder(conn).texts([r[6] for r in rows], [r[1] for r in rows])
    if geo:
        return {r[0]: (r[0], t, *r[2:6], r[7]) for r, t in zip(rows, texts, strict=True)}
    return {r[0]: (r[0], t, *r[2:6]) for r, t in zip(rows, texts, strict=True)}


def latest_texts(
    store: Store, source: str, keys: Sequence[str], known_at: int | None
) -> tuple[list[Any], list[str | None]] | None:
    """`latest` of a manifest's batch (`keys` sorted, nearly every key of their range),
    as the rebuild's default documents want it: the latest versions as fetched (key,
    stored attributes, revision, deleted, version_id, valid_from, fields_id), in the
    order of `keys`, and their canonical attribute texts -- no tuple rebuilt per row.
    None when a key has no version visible at `known_at` (read it with `latest`)."""
    if not keys:
        return [], []
    sql = _versions_sql(store, known_at)
    with store.engine.connect() as conn:
        got = fetch_all(conn, sql, {"s": source, "k": known_at, "lo": keys[0], "hi": keys[-1]})
        last = {r[0]: r for r in got}  # oldest first: the last one wins
        if len(last) == len(keys) and all(map(eq, last, keys)):
            rows = list(last.values())
        else:  # the range holds other keys too (deleted before the manifest, ...)
            rows = [last.get(k) for k in keys]
            if any(r is None for r in rows):
                return None
        texts = Decoder(conn).texts([r[6] for r in rows], [r[1] for r in rows])
    return rows, texts


def _state_sql(store: Store, columns: Sequence[str], known_at: int | None) -> str:
    """`columns` of every version of the source visible at `known_at`, each key's oldest
    first (its latest read last). An ordered scan and a dict, not `latest_per_key_sql`:
    on SQLite its ROW_NUMBER() form took twice as long over the whole source (see the
    report of issue 14), and the reconcile reads the whole source."""
    p = store.param
    visible = visible_sql(None if known_at is None else p("k"), "v")
    cols = ", ".join(f"v.{c}" for c in columns)
    return (
        f"SELECT {cols} FROM versions v WHERE v.source = {p('s')} AND {visible} "
        f"ORDER BY {_OLDEST_FIRST}"
    )


def live_keys(store: Store, source: str, at: int | None) -> set[str]:
    """Keys present (their latest version not a delete) in the source's state visible
    at `at` (None: now)."""
    state: dict[str, bool] = {}
    with store.engine.connect() as conn:
        for key, deleted in conn.exec_driver_sql(
            _state_sql(store, ("key", "deleted"), at), {"s": source, "k": at}
        ):
            state[key] = bool(deleted)  # oldest first: the last one wins
    return {k for k, deleted in state.items() if not deleted}


def current_state(store: Store, source: str) -> list[Any]:
    """(key, revision, deleted, version_id) of each key's latest version as the ledger
    believes now (fetched at once, as tuples), in key order."""
    sql = _state_sql(store, ("key", "revision", "deleted", "version_id"), None)
    with store.engine.connect() as conn:
        # oldest first: the last version of a key wins
        return list({r[0]: r for r in conn.exec_driver_sql(sql, {"s": source}).all()}.values())


_GEOMETRY_TYPE = re.compile(
    r'"type"\s*:\s*"(Point|LineString|Polygon|MultiPoint|MultiLineString|MultiPolygon|'
    r'GeometryCollection)"'
)


_NUMBER = r"\s*-?[0-9.]+(?:[eE][-+]?[0-9]+)?\s*"
_XYZ = re.compile(rf"\[{_NUMBER},{_NUMBER},{_NUMBER}\]")


def geometry_types(store: Store, source: str) -> set[str]:
    """The GeoJSON geometry types of the source's current state (each key's latest
    version, tombstones and features without geometry left out), `Polygon Z` for one
    with a third coordinate, read from the stored texts without parsing them: a
    GeometryCollection names its parts' types too."""
    sql = _state_sql(store, ("key", "deleted", "geometry"), None)
    latest_type: dict[str, frozenset[str]] = {}
    none: frozenset[str] = frozenset()
    with store.engine.connect() as conn:
        for key, deleted, geometry in conn.exec_driver_sql(sql, {"s": source}):
            # oldest first: the last version of a key wins
            if deleted or not geometry:
                found = none
            else:
                names = _GEOMETRY_TYPE.findall(geometry)
                z = " Z" if _XYZ.search(geometry) else ""
                found = frozenset(n + z for n in names)
            latest_type[key] = found
    return set().union(*latest_type.values()) if latest_type else set()


def attribute_sample(store: Store, source: str, limit: int = 2000) -> list[tuple[str, str]]:
    """(key, canonical attribute text) of up to `limit` present versions of the source,
    newest belief (not retracted): what a destination that types its columns from the
    source's members (sync/kinds/postgis.py) looks at when it creates its table."""
    p = store.param
    sql = (
        "SELECT v.key, v.attributes, v.fields_id FROM versions v WHERE v.source = "
        f"{p('s')} AND {visible_sql(None, 'v')} AND NOT v.deleted AND v.attributes IS NOT NULL "
        f"ORDER BY v.version_id DESC LIMIT {int(limit)}"
    )
    with store.engine.connect() as conn:
        rows = fetch_all(conn, sql, {"s": source})
        texts = Decoder(conn).texts([r[2] for r in rows], [r[1] for r in rows])
    return [(r[0], t) for r, t in zip(rows, texts, strict=True) if t is not None]
