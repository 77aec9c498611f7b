"""A versions row's attributes as columns: the ONE place that decodes them.

Attributes are canonical JSON texts (formats/canonical.py: an object, fields in
code-point order, values as the payload stated them), as ledger/encoding/codebooks.py decodes
them from their stored compact form. A snapshot lays them out as
one text column per field, each cell the value as an export writes it:

* a string as itself; a number as its literal text (`2.50` stays `2.50`); `true` /
  `false` as such;
* `null`, and a field the record lacks, as a null cell;
* an object or an array as `json.dumps` of it (numbers inside as their texts, quoted:
  the per-row form the CSV export has always written).

`text_columns` does this a batch at a time in Arrow's JSON reader (C++, threaded): the
fast path reads every field as a string; a batch whose values include numbers or
booleans is read again after turning them into strings (their literal text, a regex
on the canonical text, where `":` only ever ends a field name); anything else (objects,
arrays, a field outside `names`) goes through Python's `json` row by row. A record with
a field outside `names` raises `UnknownField`.

`batch_frame` does the same for a batch still in its stored form (`snapshot_rows.batches`
with `stored=True`: the texts as the store holds them, their `fields_id`, and the
source's codebooks in the batch's schema metadata, `CODEBOOKS`): the rows in the flat
form are split without any JSON parsing (`encoding.split`); only the others are
decoded (`codebooks.decode_arrow`) and read as above.
"""

from __future__ import annotations

import json
import struct
from functools import lru_cache
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from feedledger.formats.canonical import RawNumber
from feedledger.ledger.encoding import codebooks, split
from feedledger.ledger.encoding.codec import Codebook, FieldTokens, field_tokens, from_text

__all__ = [
    "CODEBOOKS",
    "UnknownField",
    "batch_frame",
    "concatenated",
    "fields_of",
    "first_fields",
    "stored_form",
    "text_columns",
    "value_text",
]

# a stored-form batch's schema metadata key: {fields_id: codebook text} (JSON)
CODEBOOKS = b"feedledger.codebooks"

# a number, true or false stated as a field's value (after `"name":`), made a string
_SCALAR = r'":(-?[0-9][0-9.eE+\-]*|true|false)([,}])'
_AS_STRING = r'":"\1"\2'
_BLOCK = 1 << 20


class UnknownField(ValueError):
    """A record names a field outside the columns asked for."""


def value_text(value: Any) -> str | None:
    """One parsed value (numbers as RawNumber) as an export's cell text; None for null."""
    if value is None:
        return None
    if isinstance(value, str):
        return str.__str__(value)
    if value is True:
        return "true"
    if value is False:
        return "false"
    return json.dumps(value, ensure_ascii=False)


def parse(attributes: str) -> dict[str, Any]:
    """A stored attributes text, numbers kept as their literal text (RawNumber)."""
    record: dict[str, Any] = json.loads(attributes, parse_float=RawNumber, parse_int=RawNumber)
    return record


def fields_of(attributes: str) -> list[str]:
    """The field names of one stored attributes text, in stored (code-point) order."""
    return list(parse(attributes))


def concatenated(texts: pa.Array) -> pa.Buffer:
    """The bytes of a string array's values end to end (no copy)."""
    if texts.type == pa.large_string():
        width, fmt = 8, "<q"
    else:
        width, fmt = 4, "<i"
    offsets = texts.buffers()[1]
    first = struct.unpack_from(fmt, offsets, width * texts.offset)[0]
    last = struct.unpack_from(fmt, offsets, width * (texts.offset + len(texts)))[0]
    data = texts.buffers()[2]
    if data is None:
        return pa.py_buffer(b"")
    return data.slice(first, last - first)


def _read(lines: pa.Array, schema: pa.Schema) -> pa.Table:
    data = concatenated(lines)
    options = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="error")
    # blocks of ~1 MiB are parsed in parallel (the reader's thread pool)
    reading = pj.ReadOptions(block_size=_BLOCK)
    return pj.read_json(pa.BufferReader(data), read_options=reading, parse_options=options)


def json_lines(texts: pa.Array) -> pa.Array:
    return pc.binary_join_element_wise(texts, pa.scalar("\n"), "")


def text_columns(attributes: pa.Array, names: list[str]) -> list[pa.Array]:
    """One string array per name in `names` (same length as `attributes`, no nulls in
    it) of each record's value as an export writes it (see the module doc)."""
    schema = pa.schema([(name, pa.string()) for name in names])
    if len(attributes) == 0:
        return [pa.array([], pa.string()) for _ in names]
    lines = json_lines(attributes)
    try:
        table = _read(lines, schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        try:
            table = _read(pc.replace_substring_regex(lines, _SCALAR, _AS_STRING), schema)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return _per_row(attributes, names)
    if table.num_rows != len(attributes):  # (never expected: one line per record)
        return _per_row(attributes, names)
    return [table.column(name).combine_chunks() for name in names]


def _per_row(attributes: pa.Array, names: list[str]) -> list[pa.Array]:
    known = set(names)
    cols: list[list[str | None]] = [[] for _ in names]
    for text in attributes.to_pylist():
        record = parse(text)
        extra = record.keys() - known
        if extra:
            raise UnknownField(sorted(extra)[0])
        for col, name in zip(cols, names, strict=True):
            col.append(value_text(record.get(name)))
    return [pa.array(col, pa.string()) for col in cols]


def with_codebooks(schema: pa.Schema, books: dict[int, Codebook]) -> pa.Schema:
    """`schema` carrying `books` (a stored-form batch's codebooks)."""
    texts = {str(i): book.to_text() for i, book in books.items()}
    return schema.with_metadata({CODEBOOKS: json.dumps(texts, sort_keys=True)})


@lru_cache(maxsize=64)
def _books(meta: bytes) -> dict[int, Codebook]:
    return {int(i): from_text(text) for i, text in json.loads(meta).items()}


@lru_cache(maxsize=256)
def _tokens(patterns: tuple[str, ...], values: tuple[str, ...]) -> FieldTokens:
    return field_tokens(Codebook(list(patterns), list(values)))


def stored_form(batch: pa.RecordBatch) -> tuple[pa.Array, pa.Array, dict[int, Codebook]] | None:
    """(stored texts, fields ids, codebooks) of a stored-form batch; None otherwise."""
    meta = batch.schema.metadata or {}
    if CODEBOOKS not in meta or "fields_id" not in batch.schema.names:
        return None
    return batch.column("attributes"), batch.column("fields_id"), _books(meta[CODEBOOKS])


def canonical_texts(batch: pa.RecordBatch) -> pa.Array:
    """A batch's attributes as canonical JSON texts (decoded if in stored form)."""
    got = stored_form(batch)
    if got is None:
        return batch.column("attributes")
    stored, ids, books = got
    return codebooks.decode_arrow(books, ids, stored)


def first_fields(batch: pa.RecordBatch) -> list[str]:
    """The field names of a batch's first entity, in stored (code-point) order."""
    return fields_of(canonical_texts(batch.slice(0, 1))[0].as_py())


def batch_frame(batch: pa.RecordBatch, names: list[str]) -> pl.DataFrame:
    """One String column per name in `names` of each entity's value as an export writes
    it (the module doc), from a batch of `snapshot_rows.batches` in either form."""
    got = stored_form(batch)
    if got is None:
        return _frame(text_columns(batch.column("attributes"), names), names)
    stored, ids, books = got
    n = len(stored)
    if n == 0:
        return pl.DataFrame({name: pl.Series([], dtype=pl.String) for name in names})
    parts: list[tuple[np.ndarray[Any, Any], pl.DataFrame]] = []
    rest = np.ones(n, np.bool_)
    for fields_id in [i for i in ids.unique().to_pylist() if i is not None]:
        mine = np.asarray(ids.to_numpy(zero_copy_only=False) == fields_id, np.bool_)
        whole = bool(mine.all())
        texts = stored if whole else stored.filter(pa.array(mine))
        book = books[int(fields_id)]
        tokens = _tokens(tuple(book.patterns), tuple(book.values))
        try:
            cut = split.split(texts, tokens, names)
        except split.UnknownName as exc:
            raise UnknownField(str(exc)) from None
        rows = np.flatnonzero(mine)[cut.done]
        if rows.size:
            parts.append((rows, cut.frame))
            rest[rows] = False
    left = np.flatnonzero(rest)
    if left.size:
        at = pa.array(left)
        texts = codebooks.decode_arrow(books, ids.take(at), stored.take(at))
        parts.append((left, _frame(text_columns(texts, names), names)))
    if len(parts) == 1:
        return parts[0][1]
    order = np.argsort(np.concatenate([rows for rows, _ in parts]), kind="stable")
    return pl.concat([frame for _, frame in parts])[pl.Series(order)]


def _frame(arrays: list[pa.Array], names: list[str]) -> pl.DataFrame:
    frame = pl.from_arrow(pa.table(arrays, names=names))
    assert isinstance(frame, pl.DataFrame)
    return frame
