"""The outcome ledger as what a rebuild already knows of its documents. A manifest's
versions are fixed at its boundary, so the verdicts earlier rebuilds of the same
manifest into the same destination recorded (a resync; a rebuild after the table was
lost) name each key's revision, generation and content hash:

* a key whose recorded verdict is `accepted` or `already_current` at the manifest's
  generation has, from a source without a revision field or a transform (the default
  document: a function of the version alone, which the recorded revision -- its
  version id -- names), the document it had then. A batch likely not written (a
  resync into PostgreSQL: sync/rebuild.py) is made of those rows (`docs`) and probed by
  their hashes (sync/pg_batch.py): no version read, decoded or hashed; only the keys
  with no such row, and those the destination does not hold as current, are read from
  the ledger and built (live.py's `Builder.built`);
* a verdict that confirms its row (the same verdict kind, revision, generation and
  content hash: a resync's `already_current`, a repeated rebuild's `accepted`) is
  recorded by ONE range update of the batch's rows (verdict, attempts and time), not a
  parameter per key (state.py's `record`, with the rows read in its transaction). The
  update comes first in the batch's transaction, every other verdict of the batch
  after it, so a row it touched that is not confirmed is then written with its own
  verdict: every key ends with its own row, verdict, attempts and time, as key by key.

Both are done a batch at a time as the store writes the rows, not a Python object per
key, when every key of the batch is confirmed: a resync's batch is the next `limit`
confirming rows, read as one CSV text that is COPYed into the probe as it is
(`next_batch`, `Confirmed`: the manifest's key count over their range proves they are
the batch), and the recorder compares a batch's documents with its range's rows as one
text of `key,revision,hash` lines (`read` with docs) before reading them key by key.

Only rows recorded since the destination was declared count (`since`: a destination
removed and declared again under the same name, maybe with a transform, starts
afresh). Assumed: the source's revision field and format are those it had when the
rows were recorded (a revision field added to `feedledger.toml` later wants a new
manifest).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, overload

from feedledger.ledger.store import Store
from feedledger.model.destination import TOMBSTONE_HASH
from feedledger.sync.transform import Doc

# the verdicts whose row says "the destination took, or held, exactly this document"
CONFIRMING = ("accepted", "already_current")


@dataclass
class Known:
    """A batch's recorded verdicts that confirm a document, for the key range lo..hi of
    (destination, scope) at `generation`, recorded at or after `since`: `rows` (key ->
    revision, content hash), or `docs` (those rows as documents not built yet)."""

    destination: str
    scope: str
    generation: str
    since: int
    lo: str
    hi: str
    rows: dict[str, tuple[int, str]] = field(default_factory=dict)
    docs: Sequence[Doc] | None = None

    def table(self) -> dict[str, tuple[int, str]]:
        if self.docs is not None and not self.rows:
            self.rows = {d.key: (d.revision, d.content_hash) for d in self.docs}
        return self.rows


def join_sql(store: Store, key: str, o: str = "o.") -> str:
    """The condition on the outcome row (columns prefixed `o`) that confirms `key`'s
    document, with the named parameters k_dest, k_scope, k_gen, k_since."""
    p = store.param
    return (
        f"{o}destination = {p('k_dest')} AND {o}scope = {p('k_scope')} AND {o}key = {key} "
        f"AND {o}generation = {p('k_gen')} AND {o}at >= {p('k_since')} "
        f"AND {o}verdict IN ({', '.join(repr(v) for v in CONFIRMING)})"
    )


def params(k: Known) -> dict[str, Any]:
    return {"k_dest": k.destination, "k_scope": k.scope, "k_gen": k.generation,
            "k_since": k.since}  # fmt: skip


def _select(store: Store, columns: str) -> str:
    p = store.param
    return (
        f"SELECT {columns} FROM sync_outcomes o WHERE {join_sql(store, 'o.key')} "
        f"AND o.key >= {p('lo')} AND o.key <= {p('hi')}"
    )


def _fetch(store: Store, sql: str, args: dict[str, Any], conn: Any = None) -> list[Any]:
    if conn is None:
        with store.engine.connect() as own:
            return _fetch(store, sql, args, own)
    cur = conn.connection.cursor()
    try:
        cur.execute(sql, args)
        return list(cur.fetchall())
    finally:
        cur.close()


def _lines(docs: Sequence[Doc]) -> str | None:
    """`docs` as `digest` writes the rows that confirm them (None: a key holds a line
    break -- not canonical JSON -- and the text could not be compared)."""
    text = "\n".join([f"{d.key},{d.revision},{d.content_hash}" for d in docs])
    return text if text.count("\n") == len(docs) - 1 else None


def read(store: Store, k: Known, conn: Any = None, docs: Sequence[Doc] | None = None) -> Known:
    """`k` with the `rows` of its range (a batch of a manifest's keys: every key of the
    manifest between the first and the last), read through `conn` if given (the
    recording transaction's: what it reads is what it updates). `docs` (a batch's
    documents with a confirming verdict): first compared with the range's rows as ONE
    text the store writes (a line of key, revision and content hash per row, in key
    order) -- when they are the same, they are `k.docs` (the rows, no Python object
    per row); else the rows are read one by one."""
    if docs:
        line = "o.key || ',' || o.revision || ',' || o.content_hash"
        inner = _select(store, f"o.key, {line} AS line") + " ORDER BY o.key"
        joined = (
            "string_agg(b.line, chr(10) ORDER BY b.key)"
            if store.dialect == "postgresql"
            else "group_concat(b.line, char(10))"
        )
        sql = f"SELECT count(*), count(b.line), {joined} FROM ({inner}) b"
        n, lines, text = _fetch(store, sql, {**params(k), "lo": k.lo, "hi": k.hi}, conn)[0]
        if n == lines == len(docs) and text == _lines(docs):
            k.docs, k.rows = docs, {}
            return k
    sql = _select(store, "o.key, o.revision, o.content_hash")
    got = _fetch(store, sql, {**params(k), "lo": k.lo, "hi": k.hi}, conn)
    k.rows = {r[0]: (r[1], r[2]) for r in got}
    return k


def docs(store: Store, k: Known, rank: int) -> list[Doc]:
    """The documents the rows of `k`'s range confirm, not built (see the module: from
    a source without a revision field or a transform): each a Doc of the row's key,
    revision, generation and content hash, a tombstone by its hash, its `doc` None;
    they are `k.docs` too."""
    p = store.param
    columns = (
        f"o.key, o.revision, o.generation, {p('rank')}, o.content_hash, "
        f"o.content_hash = {p('tomb')}, NULL, NULL"
    )
    args = {**params(k), "lo": k.lo, "hi": k.hi, "rank": rank, "tomb": TOMBSTONE_HASH}
    got = _fetch(store, _select(store, columns), args)
    # each row is a Doc's fields in order: made a Doc in C, no Python call per row
    k.docs = list(map(partial(tuple.__new__, Doc), got))
    return k.docs


def confirmed(k: Known, docs: Sequence[Doc]) -> tuple[Sequence[Doc], list[Doc]]:
    """`docs` split: those whose row in `k` is theirs (same revision and content hash),
    and the others."""
    if docs is k.docs:  # the documents it gave, as they are
        return docs, []
    rows = k.table()
    same = [d for d in docs if rows.get(d.key) == (d.revision, d.content_hash)]
    if len(same) == len(docs):
        return same, []
    mine = {d.key for d in same}
    return same, [d for d in docs if d.key not in mine]


def record_range(
    conn: Any, store: Store, k: Known, verdict: str, at: int, same: Sequence[Doc]
) -> None:
    """Record `verdict` for `same` (documents `confirmed` by `k`) by one update of the
    batch's range, first in the batch's transaction (see the module); the rows of `k`
    not in `same` are left to the verdicts written after it."""
    p = store.param
    sql = (
        f"UPDATE sync_outcomes SET verdict = {p('verdict')}, attempts = attempts + 1, "
        f"at = {p('at')}, reason = NULL, evidence = NULL WHERE key >= {p('lo')} "
        f"AND key <= {p('hi')} AND {join_sql(store, 'key', '')}"
    )
    args = {**params(k), "verdict": verdict, "at": at, "lo": k.lo, "hi": k.hi}
    if same is k.docs:  # every row of the range, as read: nothing to leave out
        conn.exec_driver_sql(sql, args)
        return
    rows = k.table()
    if len(same) != len(rows):
        mine = {d.key for d in same}
        args["skip"] = [key for key in rows if key not in mine]
        if store.dialect == "postgresql":
            sql += f" AND NOT (key = ANY({p('skip')}))"
        else:
            sql += f" AND key NOT IN (SELECT value FROM json_each({p('skip')}))"
            args["skip"] = json.dumps(args["skip"])
    conn.exec_driver_sql(sql, args)


class Confirmed(Sequence[Doc]):
    """A batch made of the confirming rows of one key range (`next_batch`), as the
    store wrote them: the hash-first probe's rows as CSV text (key, revision,
    generation rank, content hash, tombstone flag), COPYed as they are
    (sync/pg_batch.py). No Python object per row unless one is asked for: the Docs
    (as `docs` makes them, the document not built) are made from that text on first
    use -- a resync's batch the destination holds as current never needs them."""

    def __init__(self, text: str, n: int, generation: str) -> None:
        self.probe_csv, self.n, self.generation = text, n, generation
        self._docs: list[Doc] | None = None

    def made(self) -> list[Doc]:
        if self._docs is None:
            gen, rows = self.generation, csv.reader(io.StringIO(self.probe_csv))
            self._docs = [
                Doc(key, int(rev), gen, int(rank), chash, deleted == "t", None)
                for key, rev, rank, chash, deleted in rows
            ]
            if len(self._docs) != self.n:
                raise RuntimeError(f"{self.n} confirming rows read, {len(self._docs)} parsed")
        return self._docs

    def __len__(self) -> int:
        return self.n

    @overload
    def __getitem__(self, i: int) -> Doc: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[Doc]: ...
    def __getitem__(self, i: int | slice) -> Doc | Sequence[Doc]:
        return self.made()[i]

    def __iter__(self) -> Iterator[Doc]:
        return iter(self.made())


def next_batch(
    store: Store, k: Known, manifest_id: str, after: str | None, limit: int, rank: int
) -> Known | None:
    """The next `limit` keys of the manifest after `after` as `k`'s range (its lo and
    hi set, its `docs` a `Confirmed`), when the outcome ledger confirms every one of
    them: the next `limit` confirming rows after `after`, and the manifest holding
    exactly as many keys up to the last of them (a scope's rows are its manifest's
    keys, so the two sets are then one). No manifest key, version or document read;
    None when some key of that range has no confirming row (read the batch the long
    way)."""
    p = store.param
    pg = store.dialect == "postgresql"
    # a CSV line per row (the key quoted: any character survives), NULL -- left out by
    # the aggregate, counted below -- if a column is
    line = (
        "'\"' || replace(o.key, '\"', '\"\"') || '\",' || o.revision || "
        f"',{int(rank)},' || o.content_hash || ',' || "
        f"CASE WHEN o.content_hash = {p('tomb')} THEN 't' ELSE 'f' END"
    )
    start = "" if after is None else f" AND o.key > {p('after')}"
    inner = (
        f"SELECT o.key, {line} AS line FROM sync_outcomes o WHERE "
        f"{join_sql(store, 'o.key')}{start} ORDER BY o.key LIMIT {int(limit)}"
    )
    joined = (
        "string_agg(b.line, chr(10) ORDER BY b.key)" if pg else "group_concat(b.line, char(10))"
    )
    sql = f"SELECT count(*), count(b.line), min(b.key), max(b.key), {joined} FROM ({inner}) b"
    args = {**params(k), "after": after, "tomb": TOMBSTONE_HASH}
    with store.engine.connect() as conn:
        n, lines, lo, hi, text = _fetch(store, sql, args, conn)[0]
        if not n or lines != n:
            return None
        count = (
            f"SELECT count(*) FROM manifest_keys WHERE manifest_id = {p('m')} "
            f"AND key <= {p('hi')}" + ("" if after is None else f" AND key > {p('after')}")
        )
        (held,) = _fetch(store, count, {"m": manifest_id, "hi": hi, "after": after}, conn)[0]
    if int(held) != int(n):
        return None
    k.lo, k.hi, k.rows = lo, hi, {}
    k.docs = Confirmed(text, int(n), k.generation)
    return k
