"""Payload readers: bytes -> Observations (columnar), with clear errors for bad input.

CSV takes a vectorised path (polars reads every field as a string, the canonical
JSON and hash are built as column expressions). JSON, JSON lines and Parquet take a
generic per-record path that keeps number literals exactly as written.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import polars as pl

from feedledger.formats.canonical import (
    RawNumber,
    array_expr,
    canonical,
    columns_needing_escape,
    field_tag_text,
    fold_hash_expr,
    object_expr,
    string_record_hash_expr,
)
from feedledger.model.errors import BadPayloadError
from feedledger.model.hashing import hash_expr
from feedledger.model.source import SourceConfig
from feedledger.model.types import PayloadKind

DELETE_FIELD = "_deleted"
OP_FIELD = "op"
_TRUE = {"true", "1", "yes", "y", "t"}
_MAX_LISTED = 5

# Columns of Observations.frame
OBS_SCHEMA = {
    "idx": pl.UInt32,
    "key": pl.String,
    "hash": pl.Int64,
    "revision": pl.String,
    "deleted": pl.Boolean,
}
# plus "kh": XXH3-64 of the key text, used as the join key (collisions are detected)


@dataclass
class Observations:
    """One payload's records: `frame` has idx (0-based), key, hash, revision, deleted.

    Attribute texts are built on demand (`attributes`) so that a daily ingest only
    materialises the JSON of the rows that actually changed.
    """

    frame: pl.DataFrame
    raw: pl.DataFrame
    attr_columns: list[str] | None  # CSV: string columns; None: raw has "attributes"
    published_values: list[str] | None = None

    @property
    def height(self) -> int:
        return self.frame.height

    def attributes(self, idx: pl.Series) -> pl.Series:
        """Canonical attribute JSON for the given 0-based record indexes, in that order
        (a null index gives a null text)."""
        if idx.len() > self.raw.height // 4:
            # most rows are wanted (a first load): encode the frame once, in its own order,
            # and gather one column instead of gathering every input column
            return self._all_attributes().gather(idx).alias("attributes")
        wanted = idx.drop_nulls()
        texts = self._encode(self.raw[wanted] if wanted.len() else self.raw.clear())
        if wanted.len() == idx.len():
            return texts
        position = (idx.is_not_null().cast(pl.Int64).cum_sum() - 1).alias("p")
        slots = pl.select(pl.when(idx.is_not_null()).then(position)).to_series()
        return texts.gather(slots).alias("attributes")

    def _all_attributes(self) -> pl.Series:
        return self._encode(self.raw)

    def _encode(self, rows: pl.DataFrame) -> pl.Series:
        if self.attr_columns is None:
            return rows.get_column("attributes")
        special = columns_needing_escape(rows.select(self.attr_columns))
        expr = object_expr(self.attr_columns, rows, special)
        return rows.select(expr.alias("attributes")).get_column("attributes")


def _rows(idx: Iterable[int]) -> str:
    items = sorted(set(idx))
    listed = ", ".join(str(i + 1) for i in items[:_MAX_LISTED])
    more = f" and {len(items) - _MAX_LISTED} more" if len(items) > _MAX_LISTED else ""
    return f"row{'s' if len(items) > 1 else ''} {listed}{more}"


def _fail(src: SourceConfig, label: str, problem: str) -> BadPayloadError:
    return BadPayloadError(problem, source=src.name, payload=label)


def _check_utf8(data: bytes, src: SourceConfig, label: str) -> None:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise _fail(src, label, f"invalid UTF-8 at byte {exc.start} (line {line})") from None


def read_observations(data: bytes, src: SourceConfig, *, label: str) -> Observations:
    """Parse and validate a payload for `src`. Raises BadPayloadError on any bad input."""
    if not data or not data.strip():
        raise _fail(src, label, f"payload is empty ({len(data)} bytes, no data)")
    if src.format == "csv":
        obs = _read_csv(data, src, label)
    elif src.format == "parquet":
        obs = _read_generic(_parquet_records(data, src, label), src, label)
    else:
        _check_utf8(data, src, label)
        records = _json_records(data, src, label)
        obs = _read_generic(records, src, label)
    _check_keys(obs, src, label)
    return obs


# -- CSV (vectorised) ------------------------------------------------------------------


def _csv_header(data: bytes, src: SourceConfig, label: str) -> list[str]:
    first = data.split(b"\n", 1)[0]
    try:
        text = first.decode("utf-8")
    except UnicodeDecodeError:
        _check_utf8(data, src, label)
        raise
    return next(csv.reader([text.rstrip("\r")]), [])


def _field_count_error(
    src: SourceConfig, label: str, row: int, found: int, expected: int
) -> BadPayloadError:
    return _fail(
        src,
        label,
        f"cannot parse CSV: row {row} (line {row + 1}) has {found} field(s), "
        f"{'fewer' if found < expected else 'more'} fields than the header's {expected}",
    )


def _check_field_counts(data: bytes, expected: int, src: SourceConfig, label: str) -> None:
    """Slow path (errors only, or quoted line breaks): find the first row whose field
    count differs from the header's, with the csv module."""
    text = data.decode("utf-8", errors="replace")
    reader = csv.reader(io.StringIO(text, newline=""))
    next(reader, None)
    for row_no, fields in enumerate(reader, start=1):
        if fields and len(fields) != expected:
            raise _fail(
                src,
                label,
                f"cannot parse CSV: row {row_no} (line {reader.line_num}) has "
                f"{len(fields)} field(s), {'fewer' if len(fields) < expected else 'more'} "
                f"fields than the header's {expected}",
            )


def _check_short_rows(
    data: bytes, height: int, expected: int, suspects: list[int], src: SourceConfig, label: str
) -> None:
    """Rows holding a null have an unquoted empty field or too few fields: tell them
    apart by re-reading just those lines (all of them if quoted line breaks shift the
    row/line mapping)."""
    lines = data.split(b"\n")
    while lines and not lines[-1].strip():
        lines.pop()
    if len(lines) - 1 != height:
        _check_field_counts(data, expected, src, label)
        return
    texts = [lines[i + 1].rstrip(b"\r").decode("utf-8", errors="replace") for i in suspects]
    # lines without quotes: fields = separators + 1, counted in one vectorised pass
    frame = pl.DataFrame({"i": suspects, "line": texts}, schema={"i": pl.Int64, "line": pl.String})
    plain = frame.filter(~pl.col("line").str.contains('"', literal=True))
    short = plain.filter(pl.col("line").str.count_matches(",", literal=True) + 1 != expected)
    if short.height:
        i, line = short.row(0)
        raise _field_count_error(src, label, i + 1, line.count(",") + 1, expected)
    for i, line in frame.filter(pl.col("line").str.contains('"', literal=True)).iter_rows():
        fields = next(csv.reader([line]), [])
        if len(fields) != expected:
            raise _field_count_error(src, label, i + 1, len(fields), expected)


def _read_csv(data: bytes, src: SourceConfig, label: str) -> Observations:
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    header = _csv_header(data, src, label)
    dupes = sorted({h for h in header if header.count(h) > 1})
    if dupes:
        raise _fail(src, label, f"duplicate column name(s) in the CSV header: {dupes}")
    if any(not h.strip() for h in header):
        raise _fail(src, label, "the CSV header has an empty column name")
    try:
        # Unquoted empty fields AND missing trailing fields both read as null here;
        # quoted "" stays "". Rows with a null are checked against their line below.
        raw = pl.read_csv(
            io.BytesIO(data),
            infer_schema=False,
            empty_string_is_null=True,
            raise_if_empty=True,
        )
    except pl.exceptions.ComputeError as exc:
        if "utf-8" in str(exc).lower() or "utf8" in str(exc).lower():
            _check_utf8(data, src, label)
        _check_field_counts(data, len(header), src, label)
        first = str(exc).strip().splitlines()[0]
        raise _fail(src, label, f"cannot parse CSV: {first}") from None
    except (pl.exceptions.NoDataError, pl.exceptions.PolarsError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise _fail(src, label, f"cannot parse CSV: {first}") from None
    nulls = raw.null_count().row(0, named=True) if raw.height else {}
    with_nulls = [c for c, n in nulls.items() if n]
    if with_nulls:
        # A line with too few fields leaves its LAST column(s) null; only those rows can
        # be short (a null elsewhere is an unquoted empty field).
        last = raw.columns[-1]
        if nulls[last]:
            suspects = raw.with_row_index("i").filter(pl.col(last).is_null())["i"]
            _check_short_rows(data, raw.height, len(header), suspects.to_list(), src, label)
        raw = raw.with_columns([pl.col(c).fill_null("") for c in with_nulls])
    _require_columns(list(raw.columns), src, label)

    columns = list(raw.columns)
    deleted_expr: pl.Expr = pl.lit(False)
    attr_columns = columns
    if src.kind == PayloadKind.CHANGES:
        markers = []
        if DELETE_FIELD in columns:
            markers.append(pl.col(DELETE_FIELD).str.to_lowercase().is_in(list(_TRUE)))
        if OP_FIELD in columns:
            markers.append(pl.col(OP_FIELD).str.to_lowercase() == "d")
        if markers:
            deleted_expr = pl.any_horizontal(markers)
        attr_columns = [c for c in columns if c not in (DELETE_FIELD, OP_FIELD)]

    key_special = columns_needing_escape(raw.select(list(src.key)))
    revision = pl.col(src.revision) if src.revision else pl.lit(None, dtype=pl.String)
    frame = raw.select(
        pl.int_range(pl.len(), dtype=pl.UInt32).alias("idx"),
        array_expr(list(src.key), raw, key_special).alias("key"),
        string_record_hash_expr(attr_columns).alias("hash"),
        revision.alias("revision"),
        deleted_expr.alias("deleted"),
    ).with_columns(hash_expr(pl.col("key")).alias("kh"))
    published = _published_field(src)
    values = (
        raw.get_column(published).unique().sort().to_list()
        if published and published in columns
        else None
    )
    return Observations(frame=frame, raw=raw, attr_columns=attr_columns, published_values=values)


# -- generic (JSON, JSON lines, Parquet) ----------------------------------------------


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _loads(text: str) -> Any:
    return json.loads(
        text, parse_float=RawNumber, parse_int=RawNumber, parse_constant=_reject_constant
    )


def _json_records(data: bytes, src: SourceConfig, label: str) -> list[dict[str, Any]]:
    text = data.decode("utf-8").lstrip("\ufeff")
    records: list[Any]
    if src.format == "jsonl":
        records = []
        for lineno, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                records.append(_loads(line))
            except ValueError as exc:
                raise _fail(src, label, f"line {lineno}: invalid JSON ({exc})") from None
    else:
        try:
            doc = _loads(text)
        except ValueError as exc:
            raise _fail(src, label, f"invalid JSON ({exc})") from None
        if isinstance(doc, dict):
            lists = [v for v in doc.values() if isinstance(v, list)]
            if len(lists) != 1:
                raise _fail(
                    src,
                    label,
                    "a JSON payload must be an array of records, or an object holding "
                    "exactly one array of records",
                )
            doc = lists[0]
        if not isinstance(doc, list):
            raise _fail(src, label, "a JSON payload must be an array of records")
        records = doc
    bad = [i for i, r in enumerate(records) if not isinstance(r, dict)]
    if bad:
        raise _fail(src, label, f"{_rows(bad)}: not a JSON object")
    return records


def _py_value(value: Any) -> Any:
    """Parquet/Arrow Python values -> JSON values (numbers as literal text)."""
    import base64
    import datetime as dt
    import decimal
    import math

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
        return {str(k): _py_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_py_value(v) for v in value]
    return str(value)


def _parquet_records(data: bytes, src: SourceConfig, label: str) -> list[dict[str, Any]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(pa.BufferReader(data))
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise _fail(src, label, f"cannot parse Parquet: {exc}") from None
    return [{k: _py_value(v) for k, v in rec.items()} for rec in table.to_pylist()]


def _is_delete(record: dict[str, Any]) -> bool:
    marker = record.get(DELETE_FIELD)
    if marker is True or (isinstance(marker, str) and marker.lower() in _TRUE):
        return True
    op = record.get(OP_FIELD)
    return isinstance(op, str) and op.lower() == "d"


def _scalar_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return str.__str__(value)
    return canonical(value)


def _read_generic(records: list[dict[str, Any]], src: SourceConfig, label: str) -> Observations:
    columns: dict[str, None] = {}
    for rec in records[:1000]:
        columns.update(dict.fromkeys(rec))
    missing_key = [k for k in src.key if not any(k in r for r in records)] if records else []
    if missing_key:
        raise _fail(
            src,
            label,
            f"missing key field(s) {missing_key}; fields present: {sorted(columns)[:20]}",
        )
    changes = src.kind == PayloadKind.CHANGES
    keys: list[str | None] = []
    attrs: list[str] = []
    revisions: list[str | None] = []
    deleted: list[bool] = []
    empty_key: list[int] = []
    names: dict[str, None] = {}
    bodies: list[dict[str, Any]] = []
    for i, rec in enumerate(records):
        key_values = [rec.get(k) for k in src.key]
        if any(v is None or v == "" for v in key_values):
            empty_key.append(i)
            keys.append(None)
        else:
            keys.append("[" + ",".join(canonical(v) for v in key_values) + "]")
        is_del = changes and _is_delete(rec)
        deleted.append(is_del)
        body = (
            {k: v for k, v in rec.items() if k not in (DELETE_FIELD, OP_FIELD)} if changes else rec
        )
        attrs.append(canonical(body))
        bodies.append(body)
        names.update(dict.fromkeys(body))
        revisions.append(_scalar_text(rec.get(src.revision)) if src.revision else None)
    if empty_key:
        raise _fail(src, label, f"{_rows(empty_key)}: null or empty key {list(src.key)}")
    raw = pl.DataFrame({"attributes": attrs}, schema={"attributes": pl.String})
    frame = pl.DataFrame(
        {
            "idx": pl.int_range(len(records), dtype=pl.UInt32, eager=True),
            "key": keys,
            "hash": _generic_hashes(bodies, list(names)),
            "revision": revisions,
            "deleted": deleted,
        },
        schema=OBS_SCHEMA,
    ).with_columns(hash_expr(pl.col("key")).alias("kh"))
    published = _published_field(src)
    values = (
        sorted({t for r in records if (t := _scalar_text(r.get(published))) is not None})
        if published
        else None
    )
    return Observations(frame=frame, raw=raw, attr_columns=None, published_values=values)


def _generic_hashes(bodies: list[dict[str, Any]], names: list[str]) -> pl.Series:
    """Content hashes of parsed records: a wide frame of (tag, text) per field, then the
    same column-wise fold as the CSV path (tag 0 = field absent from that record)."""
    data: dict[str, list[Any]] = {}
    fields: list[tuple[str, pl.Expr | None, pl.Expr]] = []
    for j, name in enumerate(names):
        tags: list[int] = []
        texts: list[str | None] = []
        for body in bodies:
            if name in body:
                tag, text = field_tag_text(body[name])
            else:
                tag, text = 0, None
            tags.append(tag)
            texts.append(text)
        data[f"t{j}"] = tags
        data[f"x{j}"] = texts
        fields.append((name, pl.col(f"t{j}"), pl.col(f"x{j}")))
    schema = {k: (pl.UInt8 if k.startswith("t") else pl.String) for k in data}
    if not bodies:
        return pl.Series("hash", [], dtype=pl.Int64)
    wide = pl.DataFrame(data, schema=schema) if data else pl.DataFrame({"_": [0] * len(bodies)})
    return wide.select(fold_hash_expr(fields).alias("hash")).get_column("hash")


# -- validation shared by both paths ---------------------------------------------------


def _published_field(src: SourceConfig) -> str | None:
    if src.published_from.startswith("field:"):
        return src.published_from.split(":", 1)[1]
    return None


def _require_columns(columns: list[str], src: SourceConfig, label: str) -> None:
    missing = [k for k in src.key if k not in columns]
    if missing:
        raise _fail(src, label, f"missing key column(s) {missing}; columns present: {columns[:20]}")
    if src.revision and src.revision not in columns:
        raise _fail(
            src, label, f"missing revision column {src.revision!r}; columns present: {columns[:20]}"
        )


def _check_keys(obs: Observations, src: SourceConfig, label: str) -> None:
    frame = obs.frame
    if not frame.height:
        return
    if src.format == "csv":
        # key text of an empty field is `""`; one per key field position
        empty = obs.raw.select(
            pl.int_range(pl.len(), dtype=pl.UInt32).alias("i"),
            pl.any_horizontal([pl.col(k) == "" for k in src.key]).alias("e"),
        ).filter(pl.col("e"))
        if empty.height:
            raise _fail(
                src, label, f"{_rows(empty['i'].to_list())}: null or empty key {list(src.key)}"
            )
    if frame.get_column("kh").n_unique() == frame.height:
        dup = frame.clear()  # distinct key hashes imply distinct keys (cheap check first)
    else:
        dup = frame.filter(pl.col("key").is_duplicated())
    if dup.height:
        first = dup.sort("idx").row(0, named=True)["key"]
        rows = dup.filter(pl.col("key") == first)["idx"].to_list()
        raise _fail(
            src,
            label,
            f"duplicate key {first} at {_rows(rows)} "
            f"({dup.get_column('key').n_unique()} duplicated key(s) in all)",
        )
    if src.revision:
        missing_rev = frame.filter(pl.col("revision").is_null() & ~pl.col("deleted"))
        if missing_rev.height:
            raise _fail(
                src,
                label,
                f"{_rows(missing_rev['idx'].to_list())}: no value for "
                f"revision field {src.revision!r}",
            )


def published_from_field(
    obs: Observations, src: SourceConfig, label: str, parse: Callable[[str], int]
) -> int:
    """The publisher timestamp stated by the payload's `field:NAME` (it must be one value)."""
    field = _published_field(src)
    values = obs.published_values or []
    if not field or not values:
        raise _fail(src, label, f"no publisher date: field {field!r} is missing or empty")
    if len(values) > 1:
        shown = ", ".join(values[:3])
        raise _fail(
            src,
            label,
            f"field {field!r} states {len(values)} different publisher "
            f"dates ({shown}...); a payload must have one",
        )
    return parse(values[0])
