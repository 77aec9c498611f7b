"""A versions row's attributes as columns: the ONE place that decodes them.

Attributes are canonical JSON texts (formats/canonical.py: an object, fields in
code-point order, values as the payload stated them), as ledger/codebooks.py decodes
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
"""

from __future__ import annotations

import json
import struct
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from feedledger.formats.canonical import RawNumber

__all__ = ["UnknownField", "concatenated", "fields_of", "text_columns", "value_text"]

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


def _lines(texts: pa.Array) -> pa.Array:
    return pc.binary_join_element_wise(texts, pa.scalar("\n"), "")


def text_columns(attributes: pa.Array, names: list[str]) -> list[pa.Array]:
    """One string array per name in `names` (same length as `attributes`, no nulls in
    it) of each record's value as an export writes it (see the module doc)."""
    schema = pa.schema([(name, pa.string()) for name in names])
    if len(attributes) == 0:
        return [pa.array([], pa.string()) for _ in names]
    lines = _lines(attributes)
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
