"""Canonical encoding of keys and attributes, and the content hash.

This is a storage contract; changing it changes every stored hash. It is:

* **attributes**: the record as a JSON object, keys sorted by code point, no
  whitespace (`{"a":"1","b":null}`), strings escaped exactly like Python's
  `json.dumps(..., ensure_ascii=False)` (`\\"`, `\\\\`, `\\n`, `\\r`, `\\t`, `\\b`,
  `\\f`, other control characters as lowercase `\\u00XX`; everything else raw UTF-8).
  Values are kept as the payload stated them: every CSV field is a string
  (`"007"`, `"2.10"`), JSON numbers keep their literal text (`1.10` stays `1.10`).
* **key**: the key fields, in declared order, as a JSON array of their canonical
  values (`["a","bc"]`), so compound keys compare field by field: `("a","bc")` and
  `("ab","c")` are different entities.
* **content hash**: XXH3-64 (seed 0) of the UTF-8 bytes of the attributes text,
  stored as a signed 64-bit integer (the unsigned value reinterpreted). XXH3 is a
  specified, platform-independent algorithm; the tests pin golden values and check
  them against the reference `xxhash` implementation.
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from feedledger.model.hashing import hash_expr

_SHORT_ESCAPES = {"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_NEEDS_ESCAPE = r'[\x00-\x1f"\\]'


class RawNumber(str):
    """A JSON number kept as its literal text (so `1.10` is never rounded to `1.1`)."""

    __slots__ = ()


def json_string(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def canonical(value: Any) -> str:
    """Canonical JSON text of a parsed JSON value (generic, per-row path)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, RawNumber):
        return str.__str__(value)
    if isinstance(value, str):
        return json_string(value)
    if isinstance(value, dict):
        return (
            "{" + ",".join(json_string(k) + ":" + canonical(value[k]) for k in sorted(value)) + "}"
        )
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(canonical(v) for v in value) + "]"
    raise TypeError(f"not a JSON value: {type(value).__name__}")


_SPECIAL = ['"', "\\", *[chr(i) for i in range(0x20)]]


def columns_needing_escape(frame: pl.DataFrame) -> set[str]:
    """Names of string columns holding a character JSON must escape (one parallel scan)."""
    if not frame.width or not frame.height:
        return set()
    flags = frame.select(
        [pl.col(c).str.contains_any(_SPECIAL).any().alias(c) for c in frame.columns]
    ).row(0, named=True)
    return {c for c, flag in flags.items() if flag}


def escape_expr(name: str, frame: pl.DataFrame, special: set[str] | None = None) -> pl.Expr:
    """JSON-escape a string column, vectorised; columns without special characters are
    passed through untouched (the common case costs one scan)."""
    expr = pl.col(name)
    series = frame.get_column(name)
    if special is not None:
        if name not in special:
            return expr
    elif not bool(series.str.contains(_NEEDS_ESCAPE).any()):
        return expr
    expr = expr.str.replace_all("\\", "\\\\", literal=True).str.replace_all(
        '"', '\\"', literal=True
    )
    for code in range(0x20):
        ch = chr(code)
        if not bool(series.str.contains(ch, literal=True).any()):
            continue
        expr = expr.str.replace_all(ch, _SHORT_ESCAPES.get(ch, f"\\u{code:04x}"), literal=True)
    return expr


def quoted(name: str, frame: pl.DataFrame, special: set[str] | None = None) -> list[pl.Expr]:
    """Pieces for `"<escaped value>"`, or `null` for a null cell."""
    inner = escape_expr(name, frame, special)
    if frame.get_column(name).null_count():
        return [
            pl.when(pl.col(name).is_null())
            .then(pl.lit("null"))
            .otherwise(pl.concat_str([pl.lit('"'), inner, pl.lit('"')]))
        ]
    return [pl.lit('"'), inner, pl.lit('"')]


def object_expr(
    columns: list[str], frame: pl.DataFrame, special: set[str] | None = None
) -> pl.Expr:
    """Canonical JSON object of string columns (CSV path), as one concat_str expression."""
    if not columns:
        return pl.lit("{}")
    pieces: list[pl.Expr] = []
    for i, name in enumerate(sorted(columns)):
        pieces.append(pl.lit(("{" if i == 0 else ",") + json_string(name) + ":"))
        pieces.extend(quoted(name, frame, special))
    pieces.append(pl.lit("}"))
    return pl.concat_str(pieces)


def array_expr(columns: list[str], frame: pl.DataFrame, special: set[str] | None = None) -> pl.Expr:
    """Canonical JSON array of string columns in the given order (CSV key path)."""
    pieces: list[pl.Expr] = []
    for i, name in enumerate(columns):
        pieces.append(pl.lit("[" if i == 0 else ","))
        pieces.extend(quoted(name, frame, special))
    pieces.append(pl.lit("]"))
    return pl.concat_str(pieces)


def content_hash(text: str) -> int:
    """Scalar form of `hash_expr` (for tests and small paths)."""
    frame = pl.DataFrame({"t": [text]})
    return int(frame.select(hash_expr(pl.col("t"))).item())
