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
* **content hash**: a fold over the record's fields in code-point order of their
  names, computed column by column (no per-row JSON is built on the hot path)::

      h = 0x243F6A8885A308D3
      for each field (name, value), sorted by name:
          h = mix(h, xxh3_64(name))
          h = mix(h, tag)          # 1 null, 2 string, 3 any other JSON value
          h = mix(h, xxh3_64(text))  # string: the string itself; other: its
                                     # canonical JSON text (e.g. `1.10`); null: 0
      mix(h, x) = ((h XOR x) * 0x9E3779B97F4A7C15) mod 2**64

  stored as a signed 64-bit integer (the unsigned value reinterpreted). xxh3_64 is
  XXH3 64-bit with seed 0 over UTF-8 bytes, a specified, platform-independent
  algorithm; the tests pin golden values and check the fold against an independent
  implementation on the reference `xxhash` package. A field that is absent is not
  folded at all, so `{}` and `{"a": null}` differ.
* **key hash** (`kh`, the diff's join key): xxh3_64 of the key text; collisions are
  detected and fall back to comparing the key texts.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import math
from concurrent.futures import ThreadPoolExecutor
from json.encoder import encode_basestring
from typing import Any

import polars as pl

SEED = 0x243F6A8885A308D3
PRIME = 0x9E3779B97F4A7C15
TAG_NULL, TAG_STRING, TAG_JSON = 1, 2, 3
_U64 = pl.UInt64
# one row per present field, for sparse_hashes
FIELDS_SCHEMA = {
    "row": pl.UInt32,
    "pos": pl.UInt32,
    "name": pl.String,
    "tag": pl.UInt8,
    "text": pl.String,
}

_SHORT_ESCAPES = {"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_NEEDS_ESCAPE = r'[\x00-\x1f"\\]'


class RawNumber(str):
    """A JSON number kept as its literal text (so `1.10` is never rounded to `1.1`)."""

    __slots__ = ()


def json_string(value: str) -> str:
    """`json.dumps(value, ensure_ascii=False)` for a str (the very function it calls)."""
    return encode_basestring(value)


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
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return json.dumps(value)
    if isinstance(value, str):
        return json_string(value)
    if isinstance(value, dict):
        return (
            "{" + ",".join(json_string(k) + ":" + canonical(value[k]) for k in sorted(value)) + "}"
        )
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(canonical(v) for v in value) + "]"
    raise TypeError(f"not a JSON value: {type(value).__name__}")


# the characters JSON escapes in a string (a value holding none is written as it is)
JSON_SPECIAL = ['"', "\\", *[chr(i) for i in range(0x20)]]


def json_value(value: Any) -> Any:
    """Parquet/Arrow Python values -> JSON values (numbers as literal text)."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return RawNumber(str(value))
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return RawNumber(json.dumps(str(value)))
        return RawNumber(repr(value))
    if isinstance(value, decimal.Decimal):
        return RawNumber(str(value))
    if isinstance(value, (dt.date, dt.datetime, dt.time)):
        return value.isoformat()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    return str(value)


def columns_needing_escape(frame: pl.DataFrame) -> set[str]:
    """Names of string columns holding a character JSON must escape (one parallel scan)."""
    if not frame.width or not frame.height:
        return set()
    flags = frame.select(
        [pl.col(c).str.contains_any(JSON_SPECIAL).any().alias(c) for c in frame.columns]
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
    # one scan says which of the special characters occur at all; only those are replaced
    present = series.str.extract_all(_NEEDS_ESCAPE).explode().drop_nulls().unique().to_list()
    if "\\" in present:
        expr = expr.str.replace_all("\\", "\\\\", literal=True)
    if '"' in present:
        expr = expr.str.replace_all('"', '\\"', literal=True)
    for ch in sorted(c for c in present if c not in ("\\", '"')):
        code = ord(ch)
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


def object_texts(rows: pl.DataFrame, columns: list[str]) -> pl.Series:
    """The canonical JSON object of `columns` (string columns) of each row of `rows`,
    as the String series "attributes"."""
    special = columns_needing_escape(rows.select(columns))
    expr = object_expr(columns, rows, special).alias("attributes")
    return rows.select(expr).get_column("attributes")


def array_expr(columns: list[str], frame: pl.DataFrame, special: set[str] | None = None) -> pl.Expr:
    """Canonical JSON array of string columns in the given order (CSV key path)."""
    pieces: list[pl.Expr] = []
    for i, name in enumerate(columns):
        pieces.append(pl.lit("[" if i == 0 else ","))
        pieces.extend(quoted(name, frame, special))
    pieces.append(pl.lit("]"))
    return pl.concat_str(pieces)


def _xxh(text: pl.Expr) -> pl.Expr:
    hashed: pl.Expr = text.nchash.xxh3_64()  # type: ignore[attr-defined]
    return hashed


_NAME_HASHES: dict[str, int] = {}
_NAME_CACHE_MAX = 100_000


def name_hashes(names: list[str]) -> list[int]:
    """xxh3_64 of each field name, hashed in one vectorised call (and cached)."""
    missing = [n for n in dict.fromkeys(names) if n not in _NAME_HASHES]
    if missing:
        if len(_NAME_HASHES) + len(missing) > _NAME_CACHE_MAX:
            _NAME_HASHES.clear()
        hashed = _hash_texts(pl.Series("n", missing, dtype=pl.String))
        _NAME_HASHES.update(zip(missing, hashed.to_list(), strict=True))
    return [_NAME_HASHES[n] for n in names]


def name_hash(name: str) -> int:
    return name_hashes([name])[0]


def _u64(value: int) -> pl.Series:
    return pl.Series([value], dtype=_U64)


_PRIME = _u64(PRIME)


def _fold_step(h: pl.Series, name: pl.Series, tag: pl.Series, value: pl.Series) -> pl.Series:
    """mix(mix(mix(h, name), tag), value), elementwise (wrapping uint64 arithmetic);
    a length-1 operand is broadcast."""
    return ((((((h ^ name) * _PRIME) ^ tag) * _PRIME) ^ value) * _PRIME).rename("hash")


def _hash_texts(texts: pl.Series) -> pl.Series:
    """xxh3_64 of each text; a null text hashes as 0."""
    return texts.to_frame("x").select(_xxh(pl.col("x")).fill_null(0)).to_series()


def _seeds(height: int) -> pl.Series:
    return pl.repeat(SEED, height, dtype=_U64, eager=True).rename("hash")


_TAG_STRING = _u64(TAG_STRING)
# Up to this many fields, the string fold is one expression (evaluated with the rest of
# the reader's select, in parallel, on the columns as parsed); a wider one is folded
# field by field over materialised column hashes (an expression per field would nest
# one level deeper per field, and polars' planning cost grows faster than linearly).
NARROW = 16
_BLOCK_CELLS = 4_000_000  # cells hashed per block on the wide path (bounds the copy)
_BLOCK_COLUMNS = 64  # (blocks are pipelined: one is hashed while the last is folded)


def _string_fold(ordered: list[str]) -> pl.Expr:
    h = pl.lit(SEED, dtype=_U64)
    for name, name_h in zip(ordered, name_hashes(ordered), strict=True):
        for x in (pl.lit(name_h, dtype=_U64), pl.lit(TAG_STRING, dtype=_U64)):
            h = (h ^ x) * pl.lit(PRIME, dtype=_U64)
        h = (h ^ _xxh(pl.col(name)).fill_null(0)) * pl.lit(PRIME, dtype=_U64)
    return h.reinterpret(signed=True)


def string_column_hashes(frame: pl.DataFrame, columns: list[str]) -> pl.Series:
    """Content hashes of records whose fields are all non-null strings (the CSV path).

    Wide records are folded field by field over whole columns (a few vectorised
    operations per field) after hashing a block of columns at a time as one contiguous
    column (a parsed CSV's columns come in many chunks, and per-chunk overhead would
    dominate a wide frame): time and memory linear in the number of cells."""
    ordered = sorted(columns)
    if len(ordered) <= NARROW:
        return frame.select(_string_fold(ordered).alias("hash")).to_series()
    height = frame.height
    h = _seeds(height)
    names = pl.Series(name_hashes(ordered), dtype=_U64)
    step = max(NARROW, min(_BLOCK_COLUMNS, _BLOCK_CELLS // max(height, 1)))
    blocks = [ordered[start : start + step] for start in range(0, len(ordered), step)]

    def hash_block(batch: list[str]) -> pl.Series:
        # the block's cells as ONE contiguous column, hashed in one call
        return _hash_texts(pl.concat([frame.get_column(c) for c in batch], rechunk=True))

    with ThreadPoolExecutor(max_workers=1) as pool:  # hashes the next block meanwhile
        ahead = pool.submit(hash_block, blocks[0])
        start = 0
        for i, batch in enumerate(blocks):
            hashed = ahead.result()
            if i + 1 < len(blocks):
                ahead = pool.submit(hash_block, blocks[i + 1])
            for j in range(len(batch)):
                value = hashed.slice(j * height, height)
                h = _fold_step(h, names.slice(start + j, 1), _TAG_STRING, value)
            start += len(batch)
            del hashed
    return h.reinterpret(signed=True)


def string_hash_expr(frame: pl.DataFrame, columns: list[str]) -> pl.Expr:
    """The content hash column of `frame` for a select on it: the fold itself when the
    record is narrow, else the hashes computed by `string_column_hashes`."""
    if len(columns) <= NARROW:
        return _string_fold(sorted(columns))
    return pl.lit(string_column_hashes(frame, columns))


def sparse_hashes(height: int, fields: pl.DataFrame) -> pl.Series:
    """Content hashes from one row per present field (the JSON/Parquet path).

    `fields` has `row` (the record, UInt32), `pos` (the field's place among the
    record's fields in code-point order of their names, UInt32), `name`, `tag` and
    `text`. Absent fields have no row at all. The fold runs position by position (every
    record's first field, then every second field...), so time and memory are linear
    in the number of fields present."""
    h = _seeds(height)
    if not fields.height:
        return h.reinterpret(signed=True)
    steps = fields.select(
        "row",
        "pos",
        _xxh(pl.col("name")).alias("nh"),
        pl.col("tag").cast(_U64),
        _xxh(pl.col("text")).fill_null(0).alias("vh"),
    )
    for step in steps.partition_by("pos", maintain_order=True, include_key=False):
        nh, tag, vh = step.get_column("nh"), step.get_column("tag"), step.get_column("vh")
        if step.height == height:  # every record has this many fields: no gather needed
            h = _fold_step(h, nh, tag, vh)
            continue
        rows = step.get_column("row")
        h = h.scatter(rows, _fold_step(h.gather(rows), nh, tag, vh))
    return h.reinterpret(signed=True)


def string_record_hash_expr(columns: list[str]) -> pl.Expr:
    """Content hash of records whose fields are all non-null strings, as an expression
    (a wide record's is evaluated by `string_column_hashes` on the struct of its
    columns)."""
    if len(columns) <= NARROW:
        return _string_fold(sorted(columns))
    ordered = list(columns)

    def fold(batch: pl.Series) -> pl.Series:
        return string_column_hashes(batch.struct.unnest(), ordered)

    return pl.struct(ordered).map_batches(fold, return_dtype=pl.Int64)


def field_tag_text(value: Any) -> tuple[int, str | None]:
    """(tag, text) of one parsed JSON value for the hash fold."""
    if value is None:
        return TAG_NULL, None
    if isinstance(value, str) and not isinstance(value, RawNumber):
        return TAG_STRING, str.__str__(value)
    return TAG_JSON, canonical(value)


def record_hash(record: dict[str, Any]) -> int:
    """Scalar content hash of one parsed record (tests and small paths)."""
    names = sorted(record)
    pairs = [field_tag_text(record[n]) for n in names]
    fields = pl.DataFrame(
        {
            "row": [0] * len(names),
            "pos": list(range(len(names))),
            "name": names,
            "tag": [t for t, _ in pairs],
            "text": [x for _, x in pairs],
        },
        schema=FIELDS_SCHEMA,
    )
    return int(sparse_hashes(1, fields)[0])
