"""The generic reader for JSON, JSON lines and Parquet: per record, keeping number
literals exactly as written; the content hash is the same column-wise fold as CSV."""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from feedledger.formats.canonical import (
    RawNumber,
    canonical,
    field_tag_text,
    fold_hash_expr,
)
from feedledger.formats.observations import (
    DELETE_FIELD,
    OBS_SCHEMA,
    OP_FIELD,
    TRUE_VALUES,
    Observations,
    fail,
    published_field,
    row_list,
)
from feedledger.model.hashing import hash_expr
from feedledger.model.source import SourceConfig
from feedledger.model.types import PayloadKind


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _loads(text: str) -> Any:
    return json.loads(
        text, parse_float=RawNumber, parse_int=RawNumber, parse_constant=_reject_constant
    )


def json_records(data: bytes, src: SourceConfig, label: str) -> list[dict[str, Any]]:
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
                raise fail(src, label, f"line {lineno}: invalid JSON ({exc})") from None
    else:
        try:
            doc = _loads(text)
        except ValueError as exc:
            raise fail(src, label, f"invalid JSON ({exc})") from None
        if isinstance(doc, dict):
            lists = [v for v in doc.values() if isinstance(v, list)]
            if len(lists) != 1:
                raise fail(
                    src,
                    label,
                    "a JSON payload must be an array of records, or an object holding "
                    "exactly one array of records",
                )
            doc = lists[0]
        if not isinstance(doc, list):
            raise fail(src, label, "a JSON payload must be an array of records")
        records = doc
    bad = [i for i, r in enumerate(records) if not isinstance(r, dict)]
    if bad:
        raise fail(src, label, f"{row_list(bad)}: not a JSON object")
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


def parquet_records(data: bytes, src: SourceConfig, label: str) -> list[dict[str, Any]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(pa.BufferReader(data))
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise fail(src, label, f"cannot parse Parquet: {exc}") from None
    return [{k: _py_value(v) for k, v in rec.items()} for rec in table.to_pylist()]


def _is_delete(record: dict[str, Any]) -> bool:
    marker = record.get(DELETE_FIELD)
    if marker is True or (isinstance(marker, str) and marker.lower() in TRUE_VALUES):
        return True
    op = record.get(OP_FIELD)
    return isinstance(op, str) and op.lower() == "d"


def _scalar_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return str.__str__(value)
    return canonical(value)


def read_records(records: list[dict[str, Any]], src: SourceConfig, label: str) -> Observations:
    columns: dict[str, None] = {}
    for rec in records[:1000]:
        columns.update(dict.fromkeys(rec))
    missing_key = [k for k in src.key if not any(k in r for r in records)] if records else []
    if missing_key:
        raise fail(
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
        raise fail(src, label, f"{row_list(empty_key)}: null or empty key {list(src.key)}")
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
    published = published_field(src)
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
