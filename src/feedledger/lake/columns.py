"""Attributes (canonical JSON texts) as typed Arrow columns for the Delta table.

The rule of the typed snapshot exports (`pipeline/exports/columns.py`): a column of
only `true`/`false` is boolean, of only integers (64-bit) int64, of integers and
decimals float64, of only strings string; null never decides; anything mixed, an
object, an array or a too-wide integer is a string column of each value's JSON text
(strings as themselves). A CSV source states strings only: its columns are strings.

A Delta column keeps its type once written. A column the table already has is cast to
its type (`known`): an int64 column meeting a decimal, or a boolean meeting a string,
is refused with an error naming the column (re-export into a new table); a string
column takes any value as its text.

Fast path: Arrow's JSON reader parses every text at once with types inferred; a column
it types otherwise (a timestamp it recognised in a string, a struct, a list) is read
again as text. Texts it cannot read as one typed table (a column whose values change
kind) go through the per-record rule above.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from feedledger.ledger.encoding.columns import concatenated, json_lines
from feedledger.model.errors import ConfigError
from feedledger.pipeline.exports.columns import ColumnTypes, parse, typed_columns
from feedledger.pipeline.exports.order import ordered

__all__ = ["typed"]

_PLAIN = (pa.int64(), pa.float64(), pa.bool_(), pa.string())


def typed(
    texts: pa.Array, order: list[str], known: dict[str, pa.DataType]
) -> tuple[list[str], list[pa.Array]]:
    """(field names in the source's order, one typed array per field) of `texts`."""
    from feedledger.ledger.encoding.columns import text_columns  # lazy: Arrow's JSON reader
    from feedledger.pipeline.exports.order import ordered  # lazy: as above

    table = _inferred(texts)
    if table is None:
        return _per_record(texts, order, known)
    names = ordered([str(n) for n in table.column_names], order)
    arrays: list[pa.Array] = []
    again = [n for n in names if table.column(n).type not in (*_PLAIN, pa.null())]
    as_text: dict[str, pa.Array] = {}
    if again:  # (the reader takes every field of the records, or none)
        every = dict(zip(names, text_columns(texts, names), strict=True))
        as_text = {n: every[n] for n in again}
    for name in names:
        array = as_text[name] if name in as_text else table.column(name).combine_chunks()
        if array.type == pa.null():
            array = array.cast(pa.string())
        arrays.append(_as_known(name, array, known))
    return names, arrays


def _inferred(texts: pa.Array) -> pa.Table | None:
    import pyarrow.json as pj  # lazy: as the readers

    if len(texts) == 0:
        return pa.table({})
    data = concatenated(json_lines(texts))
    options = pj.ParseOptions(unexpected_field_behavior="infer")
    try:
        table = pj.read_json(pa.BufferReader(data), parse_options=options)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    return table if table.num_rows == len(texts) else None


def _per_record(
    texts: pa.Array, order: list[str], known: dict[str, pa.DataType]
) -> tuple[list[str], list[pa.Array]]:

    records = [parse(t) for t in texts.to_pylist()]
    types = ColumnTypes()
    for record in records:
        types.observe(record)
    names = ordered(types.fields(), order)
    arrays = typed_columns(records, names, types)
    return names, [_as_known(n, a, known) for n, a in zip(names, arrays, strict=True)]


def _as_known(name: str, array: pa.Array, known: dict[str, pa.DataType]) -> pa.Array:
    """`array` in the type the table's column `name` already has (if any)."""
    want: Any = known.get(name)
    if want is None or array.type == want:
        return array
    if pa.types.is_string(want) or pa.types.is_large_string(want):
        if pa.types.is_boolean(array.type):
            import pyarrow.compute as pc  # lazy

            text = pc.if_else(array, "true", "false")
            return text.cast(want)
        return array.cast(want)
    try:
        return array.cast(want, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise ConfigError(
            f"attribute {name!r} is {want} in the Delta table, and now has values of "
            f"type {array.type} ({exc})",
            hint="a Delta column keeps its type: export into a new table (--to another URI)",
        ) from exc
