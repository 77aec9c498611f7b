"""Typed columns for a snapshot written to a typed format (GeoParquet, GeoPackage).

Attributes are stored as canonical JSON texts, values as the payload stated them.
A typed format needs one type per column, so each column's type is inferred from the
JSON values of every exported entity (a first pass, `ColumnTypes.observe`):

* only `true`/`false` -> boolean; only integers (fitting 64 bits) -> int64;
  integers and decimals -> float64 (a decimal's literal text such as `2.50` is not
  kept: the typed value is 2.5);
* only strings -> string; `null` (and an absent field) never decides a type: it is a
  null cell; a column of nulls only is a string column;
* anything mixed (a string and a number, a boolean and a number), an object or an
  array, or an integer too wide for 64 bits -> string, each value as its JSON text
  (strings as themselves, like the CSV export).

Columns follow the source's field order (see `order.ordered`).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pyarrow as pa

from feedledger.formats.canonical import RawNumber, canonical

__all__ = ["ColumnTypes", "parse", "typed_columns"]

_INT = re.compile(r"-?(0|[1-9][0-9]*)")
_I64 = (-(1 << 63), (1 << 63) - 1)
_ARROW = {
    "bool": pa.bool_(),
    "int": pa.int64(),
    "float": pa.float64(),
    "string": pa.string(),
    "null": pa.string(),
}


def parse(attributes: str) -> dict[str, Any]:
    """A stored attributes text, numbers kept as their literal text (RawNumber)."""
    record: dict[str, Any] = json.loads(attributes, parse_float=RawNumber, parse_int=RawNumber)
    return record


def kind_of(value: Any) -> str:
    """The type one JSON value asks of its column: null|bool|int|float|string."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, RawNumber):
        if _INT.fullmatch(value):
            return "int" if _I64[0] <= int(value) <= _I64[1] else "string"
        return "float"
    if isinstance(value, float):  # NaN / Infinity, stated as such
        return "float"
    return "string"


def merge(held: str, seen: str) -> str:
    """Two kinds of one column's values as the one type that holds both."""
    if held == seen or seen == "null":
        return held
    if held == "null":
        return seen
    if {held, seen} == {"int", "float"}:
        return "float"
    return "string"


class ColumnTypes:
    """The inferred type of every field seen so far (first pass of a typed export)."""

    def __init__(self) -> None:
        self.kinds: dict[str, str] = {}

    def observe(self, record: dict[str, Any]) -> None:
        kinds = self.kinds
        for name, value in record.items():
            seen = kind_of(value)
            held = kinds.get(name)
            kinds[name] = seen if held is None else merge(held, seen)

    def fields(self) -> list[str]:
        """Every field seen, in code-point order (the stored order)."""
        return sorted(self.kinds)

    def arrow_type(self, name: str) -> pa.DataType:
        return _ARROW[self.kinds.get(name, "null")]


def _typed(value: Any, kind: str) -> Any:
    if value is None:
        return None
    if kind == "int":
        return int(value)
    if kind == "float":
        return float(value)
    if kind == "bool":
        return value
    if isinstance(value, str) and not isinstance(value, RawNumber):
        return str.__str__(value)
    return canonical(value)  # a number, boolean, object or array as its JSON text


def typed_columns(
    records: list[dict[str, Any]], columns: list[str], types: ColumnTypes
) -> list[pa.Array]:
    """One Arrow array per column (in `columns` order) of the records' values."""
    arrays: list[pa.Array] = []
    for name in columns:
        kind = types.kinds.get(name, "null")
        values = [_typed(record.get(name), kind) for record in records]
        arrays.append(pa.array(values, type=_ARROW[kind]))
    return arrays
