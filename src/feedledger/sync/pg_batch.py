"""A PostgreSQL destination's guarded batch (sync/target.py's write there).

Three ways to send a batch, each chosen by what the previous batch turned out to be (a
batch is most likely its predecessor's kind), all in ONE transaction per batch:

* hash first (the previous batch mostly not written: a resync; and the first batch):
  only each document's key, position, generation and content hash are COPYed (~40
  bytes a record) and ONE statement answers the keys whose held row is not already
  current (an index probe per key, no lock, no document parsed, no tsvector built).
  The documents of those keys only are then sent whole, the classified way below; every
  other key's verdict is already_current (its held row was current when probed).
* classified (the documents of a hash-first batch not current): the batch is COPYed
  (binary; the documents as text, parsed into jsonb only for the rows written) into a
  temporary table, then ONE statement classifies each row against the row held (an
  index probe per key, no lock), upserts only those the guard may accept and answers
  only the minority: the keys written or the keys already current, whichever are fewer,
  and the keys neither (their held rows are then read for `judge`).
* upsert first (the previous batch mostly written: a rebuild into an empty table): the
  staged batch is upserted with no probe besides the upsert's own, and only the keys
  not written are judged.

Whichever way, the upsert keeps the guard in its WHERE: what decides a write is the
row held when the upsert meets it, in any process.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any

from sqlalchemy import Engine

from feedledger import faults
from feedledger.sync.guard import current_sql, guard_sql
from feedledger.sync.transform import Doc

# the binary COPY's types of fl_stage's columns, in sync/target.py's COLUMNS order (and
# a GIS source's geometry_wkb)
STAGE_TYPES = ["text", "int8", "text", "int8", "text", "bool", "text", "bytea"]
# a hash-first probe's row: a Doc's key, revision, rank, content hash and tombstone flag
PROBE_TYPES = ["text", "int8", "int8", "text", "bool"]
_PROBE = itemgetter(0, 1, 3, 4, 5)
# builds a batch's documents not built yet (the others as they are)
Build = Callable[[Sequence[Doc]], list[Doc]]


class Batches:
    """Guarded batches into one PostgreSQL table, through `engine`: `upsert_sql(source)`
    is the table's conditional upsert of the rows `source` selects. `prepare(cursor)`:
    called once a batch is staged whole, before its upsert, in its transaction (a kind
    whose table follows the documents' members: sync/kinds/postgis.py); `doc_sql`: the
    held row's document as text, for an unresolved verdict's evidence."""

    def __init__(
        self,
        engine: Engine,
        ident: str,
        columns: Sequence[str],
        upsert_sql: Callable[[str], str],
        prepare: Callable[[Any], None] | None = None,
        doc_sql: str = "doc::text",
    ) -> None:
        self.engine, self.ident, self.columns = engine, ident, tuple(columns)
        self.upsert_sql, self.prepare, self.doc_sql = upsert_sql, prepare, doc_sql
        # batches numbered in the order they were handed over (the fault point's count:
        # the rebuild numbers a batch when it submits it, so two writer threads staging
        # at once do not change which batch is "the second")
        self.tickets = itertools.count(1)
        # the last batch wrote most of its rows (a rebuild into an empty table): the
        # next one is upserted first, and classified after; else it is probed hash first
        self.writing = False
        # documents probed by key and hash only, and documents sent whole (so far)
        self.probed = 0
        self.whole = 0

    def write(
        self, docs: Sequence[Doc], ticket: int | None = None, build: Build | None = None
    ) -> tuple[list[Any], str, set[str], Sequence[Doc]]:
        """Write a batch (`ticket`: its number, taken from `self.tickets` when it was
        handed to a writer thread; None: taken here); returns the rows held for the
        keys to judge (key, revision, generation, generation_rank, content_hash,
        deleted, doc text), the verdict of every other key but the listed ones, the
        listed keys (the other verdict) and the documents as sent. `build`: the batch
        holds documents not built yet (sync/known.py: a key, its revision and content
        hash, the document not read), built by it where they must be sent whole."""
        raw = self.engine.raw_connection()
        try:
            cur = raw.cursor()
            cur.execute(
                # the document as text: parsed into jsonb only for the rows written
                "CREATE TEMP TABLE IF NOT EXISTS fl_stage (key text, revision bigint, "
                "generation text, generation_rank bigint, content_hash text, deleted boolean, "
                "doc text, geometry_wkb bytea) ON COMMIT DELETE ROWS; "
                # a hash-first probe's rows
                "CREATE TEMP TABLE IF NOT EXISTS fl_probe (key text, revision bigint, "
                "generation_rank bigint, content_hash text, deleted boolean) "
                "ON COMMIT DELETE ROWS; "
                # the classification's rows, and the hashed NOT IN of the keys written
                "SET LOCAL work_mem = '64MB'"
            )
            n = next(self.tickets) if ticket is None else ticket
            if self.writing:
                if build is not None:
                    docs = build(docs)
                held, default, listed = self._send(cur, docs, n, first=True)
            else:
                held, default, listed, docs = self._hash_first(cur, docs, n, build)
            # the next batch is likely this one's kind: most of it written, or not
            written = len(listed)
            if default == "accepted":
                written = len(docs) - written - len(held)
            self.writing = 2 * written > len(docs)
            raw.commit()
            return held, default, listed, docs
        except BaseException:
            try:
                raw.rollback()
            except Exception:
                # the connection is gone (its server ended it): out of the pool, so no
                # reset of it is tried (and logged) when it is returned
                raw.invalidate()
            raise
        finally:
            raw.close()

    def _hash_first(
        self, cur: Any, docs: Sequence[Doc], ticket: int, build: Build | None
    ) -> tuple[list[Any], str, set[str], Sequence[Doc]]:
        """Probe the batch by key and content hash (see the module); send whole only the
        documents whose held row is not current (built first by `build`), and answer
        for the whole batch: already_current by default, the keys written listed; and
        the documents as sent."""
        probe = "COPY fl_probe (key, revision, generation_rank, content_hash, deleted) FROM STDIN"
        text = getattr(docs, "probe_csv", None)  # rows as the outcome ledger wrote them
        if text is not None:
            with cur.copy(probe + " (FORMAT CSV)") as copy:
                copy.write(text)
        else:
            with cur.copy(probe + " (FORMAT BINARY)") as copy:
                copy.set_types(PROBE_TYPES)
                for d in docs:
                    copy.write_row(_PROBE(d))
        self.probed += len(docs)
        held_sql = (
            "SELECT revision, generation_rank, content_hash, deleted FROM "
            f"{self.ident} WHERE key = s.key LIMIT 1"
        )
        cur.execute(
            f"SELECT s.key FROM fl_probe s LEFT JOIN LATERAL ({held_sql}) h ON true "
            f"WHERE NOT coalesce({current_sql('s', 'h')}, false)"
        )
        stale = {r[0] for r in cur.fetchall()}
        if not stale:  # a resync's batch: nothing sent whole, nothing written
            faults.point("destination_staged", ticket, backend_pid=cur.connection.info.backend_pid)
            return [], "already_current", set(), docs
        rest = [d for d in docs if d.key in stale]
        if build is not None:
            rest = build(rest)
            made = {d.key: d for d in rest}
            docs = [made.get(d.key, d) for d in docs]
        held, default, listed = self._send(cur, rest, ticket, first=False)
        if default == "already_current":  # the listed keys were written
            return held, "already_current", listed, docs
        judged = {r[0] for r in held}
        return held, "already_current", {d.key for d in rest} - listed - judged, docs

    def _send(
        self, cur: Any, docs: Sequence[Doc], ticket: int, *, first: bool
    ) -> tuple[list[Any], str, set[str]]:
        """Stage `docs` whole and upsert them (`first`: upserted first, else classified);
        returns the rows held for the keys to judge (key, revision, generation,
        generation_rank, content_hash, deleted, doc text), the verdict of every other
        key but the listed ones, and the listed keys (the other verdict)."""
        cols = ", ".join(self.columns)
        with cur.copy(f"COPY fl_stage ({cols}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(STAGE_TYPES[: len(self.columns)])
            # a Doc's fields are the columns in order (its wkb last, a GIS source's
            # column): each row is the Doc's first fields; psycopg's C adaptation
            # does the rest
            width = len(self.columns)
            for d in docs:
                copy.write_row(d[:width])
        self.whole += len(docs)
        if self.prepare is not None:
            self.prepare(cur)
        faults.point("destination_staged", ticket, backend_pid=cur.connection.info.backend_pid)
        judged: list[str] = []
        listed: set[str] = set()
        default = "accepted"
        if first:  # every key written but the judged ones
            judged = self._upsert_first(cur, len(docs))
        else:
            cur.execute(self._classified_upsert())
            for key, code in cur.fetchall():
                if key is None:  # the header: which keys are listed
                    default = "already_current" if code == "W" else "accepted"
                elif code == "j":
                    judged.append(key)
                else:
                    listed.add(key)
        held: list[Any] = []
        if judged:
            # not written, not current: the rows held now (what the upsert met), the
            # document as text (evidence only where unresolved)
            cur.execute(
                "SELECT key, revision, generation, generation_rank, content_hash, "
                f"deleted, {self.doc_sql} FROM {self.ident} WHERE key = ANY(%s)",
                (judged,),
            )
            held = list(cur.fetchall())
        return held, default, listed

    def _upsert_first(self, cur: Any, n: int) -> list[str]:
        """Upsert the `n` staged rows as they are (the guard in its WHERE), with no probe
        of the rows held besides the upsert's own and nothing returned; the keys not
        written (none in a rebuild into an empty table: the upsert's row count is `n`)
        are those whose held row this transaction did not write (its xmin is another
        transaction's: a row the upsert inserted or updated carries this one's)."""
        values = ", ".join("doc::jsonb" if c == "doc" else c for c in self.columns)
        cur.execute(self.upsert_sql(f"SELECT {values} FROM fl_stage"))
        if cur.rowcount == n:
            return []
        cur.execute(
            # an index probe per key (LATERAL: whatever the planner knows of a table
            # growing under a rebuild)
            "SELECT s.key FROM fl_stage s, LATERAL (SELECT xmin FROM "
            f"{self.ident} WHERE key = s.key LIMIT 1) h "
            "WHERE h.xmin::text::bigint <> txid_current() % 4294967296"
        )
        return [r[0] for r in cur.fetchall()]

    def _classified_upsert(self) -> str:
        """The one statement of a PostgreSQL batch (see the module): `c` classifies each
        staged row against the row held (a LATERAL probe by key: a nested loop on the
        primary key whatever the statistics of a table growing under a rebuild), `up`
        upserts those the guard may accept, and the answer is a header row (NULL, 'W':
        the keys written are listed, every other one is already current; 'C': the keys
        already current are listed, every other one was written) with the listed keys,
        and (key, 'j') for each key neither written nor current."""
        staged = ", ".join(f"s.{c}" for c in self.columns)
        values = ", ".join("doc::jsonb" if c == "doc" else c for c in self.columns)
        held = (
            f"SELECT revision, generation_rank, content_hash, deleted FROM {self.ident} "
            "WHERE key = s.key LIMIT 1"
        )
        upsert = self.upsert_sql(f"SELECT {values} FROM c WHERE newer")
        return (
            f"WITH c AS MATERIALIZED (SELECT {staged}, "
            f"coalesce({guard_sql('s', 'h')}, true) AS newer, "
            f"coalesce({current_sql('s', 'h')}, false) AS cur "
            f"FROM fl_stage s LEFT JOIN LATERAL ({held}) h ON true), "
            f"up AS ({upsert} RETURNING t.key), "
            "n AS (SELECT (SELECT count(*) FROM up) <= (SELECT count(*) FROM c WHERE cur) AS w) "
            "SELECT NULL, CASE WHEN n.w THEN 'W' ELSE 'C' END FROM n "
            "UNION ALL SELECT up.key, 'w' FROM up, n WHERE n.w "
            "UNION ALL SELECT c.key, 'c' FROM c, n WHERE c.cur AND NOT n.w "
            "UNION ALL SELECT c.key, 'j' FROM c WHERE NOT c.cur "
            "AND c.key NOT IN (SELECT key FROM up)"
        )
