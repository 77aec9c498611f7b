"""A destination table and its guarded write. The guard is IN the destination: every
write is one conditional upsert (`INSERT ... ON CONFLICT (key) DO UPDATE ... WHERE`),
so it holds against any writer that uses it, in any process.

A deletion is an event in the revision order: a tombstone at revision r (the revision
of the record it deletes, or its delete marker's) sorts just AFTER the document at r. So
the guard compares positions p = (revision, deleted), deleted after live: a deletion
wins over the state it deletes even when the publisher gave the deleted record no new
revision, and only a strictly newer revision brings the record back.

Per incoming (key, position p, content hash h, generation g) against the row held
(p0, h0, g0), exactly one verdict:

    no row                                  accepted
    p > p0 and g >= g0                      accepted
    p = p0 and g > g0                       accepted  (a rebuild with a newer transform)
    p < p0                                  superseded (fresher source data, or a
                                                        deletion after r, kept)
    g < g0 (p >= p0)                        rejected   (newer representation kept)
    p = p0, g = g0, h = h0                  already_current (not written)
    p = p0, g = g0, h != h0                 unresolved (untouched; both kept as evidence)

A delete is a tombstone row (deleted, revision, generation) that is never removed, so a
delayed older write -- the deleted record's own revision included -- cannot resurrect
the record. A record the transform leaves out ("not in this destination") is a
tombstone too, but not a deletion: its content hash says which (model/destination.py),
and it keeps the position of its revision, so a newer generation may bring it back.

A GIS source's table has one more column, `geometry_wkb` (BLOB / bytea: the version's
geometry as ISO WKB, NULL for none and for a tombstone), added to an older table that
lacks it; the document carries the same geometry as GeoJSON (sync/transform.py).

PostgreSQL: the batch is COPYed into a temporary table and ONE statement upserts it
(sync/pg_batch.py); a resync's batch is first probed by key, position, generation and
content hash only, and only its documents not already current are sent whole. SQLite:
the batch is classified against the rows held and upserted with the same guard, in one
BEGIN IMMEDIATE transaction.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from sqlalchemy import Engine, create_engine, event, inspect, text

from feedledger import faults
from feedledger.ledger import failures
from feedledger.ledger.engine import normalise_url
from feedledger.model.destination import Destination
from feedledger.model.errors import ConfigError, FeedledgerError, StoreUnavailableError
from feedledger.sync.guard import GUARD, judge
from feedledger.sync.guard import evidence as guard_evidence
from feedledger.sync.pg_batch import Batches, Build
from feedledger.sync.state import Outcome, Verdict
from feedledger.sync.transform import Doc

COLUMNS = ("key", "revision", "generation", "generation_rank", "content_hash", "deleted", "doc")
GEOMETRY = "geometry_wkb"  # a GIS source's table only


class Target:
    def __init__(self, dest: Destination, *, geo: bool = False) -> None:
        self.dest = dest
        self.table = dest.table
        self.ident = ident(dest.table)  # in every statement: MyTable, select, order work
        self.engine = _engine(dest)
        self.postgres = dest.kind in ("postgres", "postgis")
        self.geo = geo  # a GIS source: the geometry_wkb column is written too
        self.columns = (*COLUMNS, GEOMETRY) if geo else COLUMNS
        self.batches = (
            Batches(self.engine, self.ident, self.columns, self._upsert_sql)
            if self.postgres
            else None
        )
        # PostgreSQL: IN_FLIGHT batches on their own connections (sync/rebuild.py)
        self.writers = 2 if self.postgres else 1
        self._tickets = itertools.count(1)  # SQLite's batches, counted for the fault points

    def close(self) -> None:
        self.engine.dispose()

    # -- the table ----------------------------------------------------------------------
    def ensure(self) -> None:
        """Create the table (and its search index) if absent; refuse an incompatible one."""
        try:
            insp = inspect(self.engine)
            exists = insp.has_table(self.table)
            found = (
                {c["name"]: str(c["type"]).lower() for c in insp.get_columns(self.table)}
                if exists
                else {}
            )
        except Exception as exc:
            text_ = str(getattr(exc, "orig", None) or exc).strip()
            reason = text_.splitlines()[0] if text_ else type(exc).__name__
            raise StoreUnavailableError(
                f"cannot reach destination {self.dest.name}: {reason}"
            ) from None
        if exists:
            missing = [c for c in (*COLUMNS, "written_at") if c not in found]
            if missing:
                raise ConfigError(
                    f"destination table {self.table} exists with an incompatible schema: no "
                    f"column(s) {', '.join(missing)} (found: {', '.join(sorted(found))})",
                    hint="choose another --table, or drop that table",
                )
            if self.geo and GEOMETRY not in found:  # a table made before geometry travelled
                kind = "bytea" if self.postgres else "BLOB"
                with self._mapped(), self.engine.begin() as conn:
                    conn.exec_driver_sql(f"ALTER TABLE {self.ident} ADD COLUMN {GEOMETRY} {kind}")
            return
        with self._mapped(), self.engine.begin() as conn:
            for stmt in self._ddl():
                conn.exec_driver_sql(stmt)

    def _ddl(self) -> list[str]:
        t = self.ident
        if not self.postgres:
            return [
                f"CREATE TABLE {t} (key TEXT PRIMARY KEY, revision INTEGER NOT NULL, "
                "generation TEXT NOT NULL, generation_rank INTEGER NOT NULL, "
                "content_hash TEXT NOT NULL, deleted INTEGER NOT NULL DEFAULT 0, doc TEXT, "
                + (f"{GEOMETRY} BLOB, " if self.geo else "")
                + "written_at INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * "
                "86400000000 AS INTEGER)))"
            ]
        fields = self.dest.text_fields
        text_expr = (
            " || ' ' || ".join(f"coalesce(doc->>{literal(f)}, '')" for f in fields)
            if fields
            else "coalesce(doc::text, '')"
        )
        return [
            f"CREATE TABLE {t} (key text PRIMARY KEY, revision bigint NOT NULL, "
            "generation text NOT NULL, generation_rank bigint NOT NULL, "
            "content_hash text NOT NULL, deleted boolean NOT NULL DEFAULT false, doc jsonb, "
            + (f"{GEOMETRY} bytea, " if self.geo else "")
            + f"search tsvector GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, "
            f"{text_expr})) STORED, "
            "written_at bigint NOT NULL DEFAULT (extract(epoch from clock_timestamp()) * "
            "1000000)::bigint)",
            f"CREATE INDEX {ident(self.table + '_search')} ON {t} USING gin (search)",
        ]

    # -- the guarded write ----------------------------------------------------------------
    def write(self, docs: Sequence[Doc]) -> list[Verdict]:
        """Write a batch (unique keys) through the guard; one verdict per doc, in the
        docs' order. Returns only once the destination committed (acknowledged)."""
        by_key = {v.key: v for v in self.write_batch(docs)}
        return [by_key[d.key] for d in docs]

    def ticket(self) -> int:
        """The next batch's number (the fault point `destination_staged` counts batches
        in the order their tickets were taken)."""
        return next(self.batches.tickets if self.batches is not None else self._tickets)

    def probing(self) -> bool:
        """PostgreSQL, while batches are mostly already current (a resync): probes first
        (sync/pg_batch.py); SQLite never."""
        return self.batches is not None and not self.batches.writing

    def finish(self) -> None:
        """A table is rebuilt in place: nothing to do."""

    def live(self) -> Target:
        """A table is rebuilt in place: the live route writes it too."""
        return self

    def write_batch(
        self, docs: Sequence[Doc], ticket: int | None = None, build: Build | None = None
    ) -> Outcome:
        """`write`, its verdicts as an Outcome (sync/state.py): the documents with one
        plain verdict as groups -- a whole batch accepted, or already current, is one
        group, with no per-document work. `ticket`: from `ticket()`, taken when the
        batch was handed to a writer thread; `build`: builds the documents of the batch
        not built yet (sync/known.py), where they are sent whole."""
        if not docs:
            return Outcome()
        try:
            if self.batches is not None:
                rows, default, listed, docs = self.batches.write(docs, ticket, build)
                got = ({r[0]: _Held(*r[1:]) for r in rows}, default, listed)
            else:
                if build is not None:
                    docs = build(docs)
                got = self._write_sqlite(docs, next(self._tickets) if ticket is None else ticket)
        except FeedledgerError:
            raise
        except Exception as exc:
            failure = self.failure(exc)
            if failure is None:
                raise
            raise failure from exc
        # held: the rows judged here; every other doc's verdict is `default`, but for
        # those in `listed`: `other`
        held, default, listed = got
        other = "already_current" if default == "accepted" else "accepted"
        if not held and not listed:  # the common case: one verdict for the batch
            return Outcome([(default, docs)])
        plain: dict[str, list[Doc]] = {default: [], other: []}
        judged: list[Verdict] = []
        for d in docs:
            row = held.get(d.key, _ACCEPTED)
            if row is _ACCEPTED:
                plain[other if d.key in listed else default].append(d)
                continue
            verdict, reason = judge(d, row)
            evidence = guard_evidence(d, row) if verdict == "unresolved" else None
            judged.append(
                Verdict(d.key, verdict, d.revision, d.generation, d.content_hash, reason, evidence)
            )
        return Outcome([(v, got_) for v, got_ in plain.items() if got_], judged)

    def _upsert_sql(self, source: str) -> str:
        cols = ", ".join(self.columns)
        sets = ", ".join(f"{c} = excluded.{c}" for c in self.columns[1:])
        now = (
            "(extract(epoch from clock_timestamp()) * 1000000)::bigint"
            if self.postgres
            else "CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)"
        )
        return (
            f"INSERT INTO {self.ident} AS t ({cols}) {source} "
            f"ON CONFLICT (key) DO UPDATE SET {sets}, written_at = {now} WHERE {GUARD}"
        )

    def _write_sqlite(
        self, docs: Sequence[Doc], ticket: int
    ) -> tuple[dict[str, Any], str, set[str]]:
        keys = [d.key for d in docs]
        held: dict[str, Any] = {}
        with self.engine.begin() as conn:
            for start in range(0, len(keys), 500):
                part = keys[start : start + 500]
                marks = ", ".join("?" * len(part))
                for r in conn.exec_driver_sql(
                    "SELECT key, revision, generation, generation_rank, content_hash, deleted, "
                    f"doc FROM {self.ident} WHERE key IN ({marks})",
                    tuple(part),
                ):
                    held[r[0]] = _Held(*r[1:])
            write = [d for d in docs if d.key not in held or judge(d, held[d.key])[0] == "accepted"]
            if write:
                conn.exec_driver_sql(
                    self._upsert_sql(f"VALUES ({', '.join('?' * len(self.columns))})"),
                    [
                        (
                            d.key,
                            d.revision,
                            d.generation,
                            d.rank,
                            d.content_hash,
                            int(d.deleted),
                            d.doc,
                            *((d.wkb,) if self.geo else ()),
                        )
                        for d in write
                    ],
                )
            faults.point("destination_staged", ticket)  # written, not committed
        for d in write:
            held.pop(d.key, None)
        return held, "accepted", set()

    def failure(self, exc: BaseException) -> FeedledgerError | None:
        """A driver's error under a write as one line naming the destination (exit 8):
        its connection lost (the batch not acknowledged: a rebuild run again resumes
        after its last acknowledged batch, the guard making a repeat harmless), or the
        statement refused; None for anything else (ledger/failures.py's table)."""
        return failures.translate(exc, failures.Place(self.dest.url, destination=self.dest.name))

    def _mapped(self, *, reading: bool = False) -> AbstractContextManager[None]:
        """A driver's error under the block as one line naming the destination."""
        place = failures.Place(self.dest.url, destination=self.dest.name, reading=reading)
        return failures.translating(place)

    # -- reading back (reconcile) -----------------------------------------------------------
    def rows(self, lo: str | None = None, hi: str | None = None) -> list[tuple[Any, ...]]:
        """(key, revision, generation, generation_rank, deleted, content_hash) in key order,
        optionally lo <= key <= hi."""
        sql = (
            f"SELECT key, revision, generation, generation_rank, deleted, content_hash "
            f"FROM {self.ident}"
        )
        params: dict[str, Any] = {}
        if lo is not None and hi is not None:
            sql += " WHERE key >= :lo AND key <= :hi"
            params = {"lo": lo, "hi": hi}
        with self._mapped(reading=True), self.engine.connect() as conn:
            return [tuple(r) for r in conn.execute(text(sql + " ORDER BY key"), params)]

    def held(self, keys: Sequence[str]) -> tuple[Any, ...] | None:
        """The row held for the first of `keys` present: (key, revision, generation,
        generation_rank, deleted, content_hash, written_at), or None."""
        with self._mapped(reading=True), self.engine.connect() as conn:
            for key in keys:
                row = conn.execute(
                    text(
                        "SELECT key, revision, generation, generation_rank, deleted, "
                        f"content_hash, written_at FROM {self.ident} WHERE key = :k"
                    ),
                    {"k": key},
                ).first()
                if row is not None:
                    return tuple(row)
        return None

    def bucket_sums(self, bounds: Sequence[tuple[str, str]]) -> list[tuple[int, int, int, int]]:
        """Per key range: (rows, sum of revisions mod 2^61, sum of generation ranks,
        tombstones) -- a checksum computed in the destination."""
        out = []
        with self._mapped(reading=True), self.engine.connect() as conn:
            for lo, hi in bounds:
                r = conn.execute(
                    text(
                        f"SELECT count(*), coalesce(sum(revision % 2305843009213693951), 0), "
                        f"coalesce(sum(generation_rank), 0), "
                        f"coalesce(sum(CASE WHEN deleted THEN 1 ELSE 0 END), 0) "
                        f"FROM {self.ident} WHERE key >= :lo AND key <= :hi"
                    ),
                    {"lo": lo, "hi": hi},
                ).one()
                out.append((int(r[0]), int(r[1]), int(r[2]), int(r[3])))
        return out


def ident(name: str) -> str:
    """A table or index name as a quoted SQL identifier (the same on PostgreSQL and
    SQLite): its case kept, a reserved word usable. Every statement goes through it."""
    return '"' + name.replace('"', '""') + '"'


def literal(value: str) -> str:
    """A string as an SQL literal (DDL cannot take parameters)."""
    return "'" + value.replace("'", "''") + "'"


class _Held:
    __slots__ = ("content_hash", "deleted", "doc", "generation", "generation_rank", "revision")

    def __init__(
        self, revision: Any, generation: Any, rank: Any, chash: Any, deleted: Any, doc: Any
    ):
        self.revision, self.generation, self.generation_rank = revision, generation, rank
        self.content_hash, self.deleted, self.doc = chash, deleted, doc


_ACCEPTED = object()


def _engine(dest: Destination) -> Engine:
    if dest.kind in ("postgres", "postgis"):
        return create_engine(normalise_url(dest.url), pool_pre_ping=True)
    engine = create_engine(f"sqlite:///{dest.url}", connect_args={"timeout": 60})

    def pragmas(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=FULL")
        cur.close()

    event.listen(engine, "connect", pragmas)
    event.listen(engine, "begin", lambda conn: conn.exec_driver_sql("BEGIN IMMEDIATE"))
    return engine
