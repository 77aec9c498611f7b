"""Codebooks of the compact attribute texts in the store (`field_lists`), and the one
place a stored attribute text is decoded (`Decoder`).

A payload's versions are written against one codebook (`versions.fields_id`): the
source's newest one when it has a token for every pattern a sample of the payload's
texts plans (ledger/encoding/codec.py `plan_book`: patterns and frequent values), otherwise
a new one (a schema change, or values no longer those of the codebook). Rows
are write-once, so a decoder may keep what it has read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl
import pyarrow as pa
from sqlalchemy import Connection, insert, select

from feedledger.ledger.encoding.codec import (
    SAMPLE_ROWS,
    Codebook,
    all_gains,
    covers,
    from_text,
    plan_from,
)
from feedledger.ledger.schema import field_lists, field_tokens
from feedledger.ledger.store import Store

__all__ = [
    "Codebook",
    "Decoder",
    "choose",
    "decode_arrow",
    "decode_with",
    "load",
    "sample_of",
    "spread",
]


# The newest codebook is tried first on every PROBE_EVERY-th text of a sample (`choose`)
PROBE_EVERY = 8


# Beyond RUNS_FROM items, a sample is SAMPLE_RUNS runs of contiguous items spread over
# them, not one item every len // SAMPLE_ROWS: a payload that large is usually read in
# batches and spilled (formats/spill.py, the default bound from 256 MiB), where one
# record in each record batch costs reading the whole file (~150 batches, ~3 s at 10M
# parcels) and a first load's key-ordered runs touch a batch or two each
RUNS_FROM = 2_000_000
SAMPLE_RUNS = 8


def spread(items: pl.Series) -> pl.Series:
    """At most SAMPLE_ROWS of `items`, spread over them (in SAMPLE_RUNS runs beyond
    RUNS_FROM items)."""
    n = items.len()
    if n <= SAMPLE_ROWS:
        return items
    if n <= RUNS_FROM:
        return items.gather_every(n // SAMPLE_ROWS).head(SAMPLE_ROWS)
    run, step = SAMPLE_ROWS // SAMPLE_RUNS, n // SAMPLE_RUNS
    return pl.concat([items.slice(i * step, run) for i in range(SAMPLE_RUNS)])


def sample_of(texts: pl.Series) -> list[str]:
    """The non-null texts of `texts`."""
    return [str(t) for t in texts.drop_nulls().to_list()]


def choose(store: Store, source: str, sample: Sequence[str]) -> tuple[int | None, Codebook]:
    """(fields_id, codebook) to write texts like `sample` with: the source's newest
    codebook if it saves nearly what a new plan would (`covers`), else a new one
    (committed at once: an unused codebook is harmless, and a payload's transaction
    finds it there); (None, an empty codebook) when there is nothing to compact.

    The newest codebook is first tried on a probe, every PROBE_EVERY-th text of the
    sample: a source's next payload (a daily's changes) is almost always written as
    well by it, and parsing the probe costs an eighth of the whole sample. Only when
    the probe finds it wanting is the whole sample planned (and the newest codebook
    judged again on it). Either way the texts decode exactly: a codebook only decides
    how compact they are."""
    f = field_lists
    with store.begin() as conn:
        newest = conn.execute(
            select(f.c.fields_id, f.c.codebook)
            .where(f.c.source == source)
            .order_by(f.c.fields_id.desc())
            .limit(1)
        ).first()
        if newest is not None:
            book = from_text(newest.codebook)
            probe = sample[::PROBE_EVERY]
            if len(probe) < len(sample) and covers(book, *all_gains(probe)):
                return int(newest.fields_id), book
        saved, values = all_gains(sample)
        if newest is not None and covers(book, saved, values):
            return int(newest.fields_id), book
        book = plan_from(saved, values)
        if not book.tokens:
            return None, book
        result = conn.execute(insert(f).values(source=source, codebook=book.to_text()))
        key = result.inserted_primary_key
        assert key is not None
        conn.execute(insert(field_tokens), token_rows(int(key[0]), book))
        return int(key[0]), book


def token_rows(fields_id: int, book: Codebook) -> list[dict[str, Any]]:
    """The `field_tokens` rows of codebook `fields_id`: each token and its string, in
    an order that decodes a stored text exactly when SQL `replace`s them one after the
    other (any order does: no string holds a control character, so none is a token or
    part of one, and no one-character token is the second character of a two-character
    one)."""
    strings = book.patterns + book.values
    return [
        {"fields_id": fields_id, "n": n, "token": token, "string": string}
        for n, (token, string) in enumerate(zip(book.tokens, strings, strict=True))
    ]


class Decoder:
    """Stored attribute texts -> their canonical JSON texts, over an open connection
    (codebooks are read on first need, once)."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._books: dict[int, Codebook] = {}

    def _book(self, fields_id: int) -> Codebook:
        book = self._books.get(fields_id)
        if book is None:
            rows = self._conn.execute(select(field_lists.c.fields_id, field_lists.c.codebook))
            self._books = {int(r.fields_id): from_text(r.codebook) for r in rows}
            book = self._books[fields_id]
        return book

    def text(self, fields_id: int | None, stored: str | None) -> str | None:
        """One stored text, canonical."""
        if stored is None or fields_id is None:
            return stored
        return self._book(int(fields_id)).decode(stored)

    def row(self, row: Any, prefix: str = "") -> str | None:
        """The canonical text of a fetched row's `<prefix>attributes`, written against
        its `<prefix>fields_id`."""
        mapping = row._mapping
        return self.text(mapping[f"{prefix}fields_id"], mapping[f"{prefix}attributes"])

    def texts(
        self, fields_ids: Sequence[int | None], stored: Sequence[str | None]
    ) -> list[str | None]:
        """Many stored texts, canonical (columnar: one pass per codebook)."""
        ids = set(fields_ids)
        if ids <= {None}:
            return list(stored)
        if len(ids) == 1:
            (only,) = ids
            assert only is not None
            series = pl.Series(list(stored), dtype=pl.String)
            return list(self._book(int(only)).decode_series(series).to_list())
        return [self.text(i, s) for i, s in zip(fields_ids, stored, strict=True)]


def decode_with(codebook: str | None, stored: str | None) -> str | None:
    """One stored text, canonical, given its codebook's stored text (a reader that
    joined `field_lists`); a text without a codebook is canonical already."""
    if stored is None or codebook is None:
        return stored
    return from_text(codebook).decode(stored)


def load(store: Store, source: str) -> dict[int, Codebook]:
    """Every codebook of `source`, by fields_id (for a columnar reader)."""
    f = field_lists
    with store.engine.connect() as conn:
        rows = conn.execute(select(f.c.fields_id, f.c.codebook).where(f.c.source == source))
        return {int(r.fields_id): from_text(r.codebook) for r in rows}


def decode_arrow(books: dict[int, Codebook], fields_ids: Any, stored: Any) -> Any:
    """A column of stored texts (Arrow), canonical, each by its row's codebook
    (`fields_ids`, an Arrow column; null: already canonical)."""
    import pyarrow.compute as pc  # lazy: an ingest imports this module, and never needs it

    ids = [i for i in pc.unique(fields_ids).to_pylist() if i is not None]
    if not ids:
        return stored
    texts = pl.from_arrow(stored)
    assert isinstance(texts, pl.Series)
    out = stored
    for fields_id in ids:
        decoded = books[int(fields_id)].decode_series(texts).to_arrow().cast(pa.string())
        if len(ids) == 1 and fields_ids.null_count == 0:
            return decoded
        # (a null id is a row already canonical: its condition false, not null -- a null
        # condition would make the row null)
        mine = pc.fill_null(pc.equal(fields_ids, fields_id), False)
        out = pc.if_else(mine, decoded, out)
    return out
