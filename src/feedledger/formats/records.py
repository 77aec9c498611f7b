"""The generic reader for JSON, JSON lines and Parquet: per record, keeping number
literals exactly as written; the content hash is the same column-wise fold as CSV."""

from __future__ import annotations

import json
import re
from itertools import repeat
from typing import Any

import polars as pl

from feedledger.formats.canonical import (
    FIELDS_SCHEMA,
    TAG_JSON,
    TAG_NULL,
    TAG_STRING,
    RawNumber,
    canonical,
    json_string,
    json_value,
    sparse_hashes,
)
from feedledger.formats.compressed import not_parquet
from feedledger.formats.observations import (
    DELETE_FIELD,
    OBS_SCHEMA,
    OP_FIELD,
    TRUE_VALUES,
    Observations,
    blank_key_problem,
    clip,
    fail,
    is_blank,
    row_list,
)
from feedledger.model.hashing import hash_expr
from feedledger.model.source import SourceConfig
from feedledger.model.types import PayloadKind


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


class DuplicateFieldError(ValueError):
    """A JSON object states one field name twice (`{"id":1,"id":2}`)."""


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for name, _ in pairs:
            if name in seen:
                raise DuplicateFieldError(
                    f"duplicate field name {clip(json_string(name))} in one object"
                )
            seen.add(name)
    return obj


_DECODER = json.JSONDecoder(
    parse_float=RawNumber,
    parse_int=RawNumber,
    parse_constant=_reject_constant,
    object_pairs_hook=_object,
)


def _loads(text: str) -> Any:
    return _DECODER.decode(text)


def _parse(text: str, src: SourceConfig, label: str, where: str) -> Any:
    """One JSON document; every way it can be bad is one clear BadPayloadError."""
    try:
        return _loads(text)
    except DuplicateFieldError as exc:
        raise fail(src, label, f"{where}{exc}") from None
    except RecursionError:
        raise fail(src, label, f"{where}invalid JSON (nested too deeply)") from None
    except ValueError as exc:
        raise fail(src, label, f"{where}invalid JSON ({clip(str(exc), 200)})") from None


# JSON text may escape a UTF-16 surrogate (\ud800) that no UTF-8 text can hold
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _check_surrogates(text: str, records: list[Any], src: SourceConfig, label: str) -> None:
    if not _SURROGATE_ESCAPE.search(text):
        return
    for i, record in enumerate(records):
        try:
            canonical(record).encode("utf-8")
        except UnicodeEncodeError as exc:
            code = f"\\u{ord(exc.object[exc.start]):04x}"
            raise fail(
                src,
                label,
                f"{row_list([i])}: a string holds a lone surrogate ({code}), which is "
                "not a Unicode character",
            ) from None


def json_records(data: bytes, src: SourceConfig, label: str) -> list[dict[str, Any]]:
    text = data.decode("utf-8").lstrip("\ufeff")
    records: list[Any]
    if src.format == "jsonl":
        # lines end at \n only (\r\n too); U+2028, U+2029 and U+0085 are characters
        records = []
        for lineno, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            records.append(_parse(line, src, label, f"line {lineno}: "))
    else:
        doc = _parse(text, src, label, "")
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
    try:
        _check_surrogates(text, records, src, label)
    except RecursionError:
        raise fail(src, label, "invalid JSON (nested too deeply)") from None
    return records


def parquet_records(data: bytes, src: SourceConfig, label: str) -> list[dict[str, Any]]:
    import pyarrow as pa  # lazy: a Parquet payload only
    import pyarrow.parquet as pq  # lazy: a Parquet payload only

    try:
        table = pq.ParquetFile(pa.BufferReader(data)).read()  # (the file, not a dataset)
    except (pa.ArrowException, OSError, ValueError, MemoryError) as exc:
        why = not_parquet(data) or clip(str(exc), 200)
        raise fail(src, label, f"cannot parse Parquet: {why}") from None
    names = table.column_names
    if len(set(names)) != len(names):
        dupes = sorted({clip(n) for n in names if names.count(n) > 1})[:5]
        raise fail(src, label, f"duplicate column name(s) in the Parquet schema: {dupes}")
    from feedledger.formats.spatial.geoparquet import geo_metadata  # lazy: GIS modules, on need

    if geo_metadata(table.schema) is not None:  # its geometry is not an attribute
        raise fail(src, label, "this is GeoParquet: use --format geoparquet")
    table = _exact_nanoseconds(table)
    try:
        return [{k: json_value(v) for k, v in rec.items()} for rec in table.to_pylist()]
    except RecursionError:
        raise fail(src, label, "cannot read Parquet: a value is nested too deeply") from None
    except (pa.ArrowException, ValueError, OverflowError, TypeError):
        raise fail(src, label, _unreadable_column(table)) from None


def _exact_nanoseconds(table: Any) -> Any:
    """Nanosecond timestamps, times and durations (pandas' and Spark's default) as the
    texts the GIS path gives them, nanoseconds kept (`formats.typed_columns`)."""
    import pyarrow as pa  # lazy: a Parquet payload only

    from feedledger.formats.typed_columns import nanosecond_texts  # lazy: it imports this

    for i, column in enumerate(table.columns):
        texts = nanosecond_texts(column)
        if texts is not None:
            table = table.set_column(i, table.field(i).name, pa.array(texts.to_list(), pa.string()))
    return table


def _unreadable_column(table: Any) -> str:
    """Which column's values could not be read, and of what type (on the error path
    only: each column is tried alone)."""
    from feedledger.formats.typed_columns import unreadable_column  # lazy: it imports this

    for name, column in zip(table.column_names, table.columns, strict=True):
        try:
            for value in column.to_pylist():
                json_value(value)
        except Exception:  # any failure names this column
            return unreadable_column(name, column.type)
    return "cannot read the Parquet values"


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


class _Fields:
    """One entry per present field of every record (the hash fold's input: linear in
    the fields present), and each record's canonical attribute text, in one pass."""

    def __init__(self) -> None:
        self.rows: list[int] = []
        self.positions: list[int] = []
        self.names: list[str] = []
        self.tags: list[int] = []
        self.texts: list[str | None] = []
        self._labels: dict[str, str] = {}  # field name -> its JSON text and a colon

    def add(self, row: int, body: dict[str, Any]) -> str:
        """Add the record's fields; returns canonical(body), built piece by piece."""
        names = sorted(body)
        self.rows.extend(repeat(row, len(names)))
        self.positions.extend(range(len(names)))
        self.names.extend(names)
        tags, texts, labels = self.tags, self.texts, self._labels
        parts: list[str] = []
        for name in names:
            value = body[name]
            if value is None:
                tags.append(TAG_NULL)
                texts.append(None)
                text = "null"
            elif isinstance(value, str) and value.__class__ is not RawNumber:
                tags.append(TAG_STRING)
                texts.append(value)
                text = json_string(value)
            else:  # numbers (their literal text), booleans, arrays, objects
                text = canonical(value)
                tags.append(TAG_JSON)
                texts.append(text)
            label = labels.get(name)
            if label is None:
                label = labels[name] = json_string(name) + ":"
            parts.append(label + text)
        return "{" + ",".join(parts) + "}"

    def frame(self) -> pl.DataFrame:
        data = {
            "row": self.rows,
            "pos": self.positions,
            "name": self.names,
            "tag": self.tags,
            "text": self.texts,
        }
        return pl.DataFrame(data, schema=FIELDS_SCHEMA)


def read_records(records: list[dict[str, Any]], src: SourceConfig, label: str) -> Observations:
    try:
        return _read_records(records, src, label)
    except RecursionError:
        raise fail(src, label, "a value is nested too deeply") from None


def _read_records(records: list[dict[str, Any]], src: SourceConfig, label: str) -> Observations:
    columns: dict[str, None] = {}
    for rec in records[:1000]:
        columns.update(dict.fromkeys(rec))
    missing_key = [k for k in src.key if not any(k in r for r in records)] if records else []
    if missing_key:
        present = [clip(c, 40) for c in sorted(columns)[:20]]
        raise fail(
            src,
            label,
            f"missing key field(s) {missing_key}; fields present: {present}",
        )
    changes = src.kind == PayloadKind.CHANGES
    keys: list[str | None] = []
    attrs: list[str] = []
    revisions: list[str | None] = []
    deleted: list[bool] = []
    empty_key: list[int] = []
    blank_key: list[int] = []
    fields = _Fields()
    for i, rec in enumerate(records):
        key_values = [rec.get(k) for k in src.key]
        if any(v is None or v == "" for v in key_values):
            empty_key.append(i)
            keys.append(None)
        elif any(is_blank(v) for v in key_values):
            blank_key.append(i)
            keys.append(None)
        else:
            keys.append("[" + ",".join(canonical(v) for v in key_values) + "]")
        is_del = changes and _is_delete(rec)
        deleted.append(is_del)
        body = (
            {k: v for k, v in rec.items() if k not in (DELETE_FIELD, OP_FIELD)} if changes else rec
        )
        attrs.append(fields.add(i, body))
        revisions.append(_scalar_text(rec.get(src.revision)) if src.revision else None)
    if empty_key:
        raise fail(src, label, f"{row_list(empty_key)}: null or empty key {list(src.key)}")
    if blank_key:
        raise fail(src, label, blank_key_problem(blank_key, src))
    raw = pl.DataFrame({"attributes": attrs}, schema={"attributes": pl.String})
    frame = pl.DataFrame(
        {
            "idx": pl.int_range(len(records), dtype=pl.UInt32, eager=True),
            "key": keys,
            "hash": sparse_hashes(len(records), fields.frame()),
            "revision": revisions,
            "deleted": deleted,
        },
        schema=OBS_SCHEMA,
    ).with_columns(hash_expr(pl.col("key")).alias("kh"))
    published = src.published_from.field
    values = (
        sorted({t for r in records if (t := _scalar_text(r.get(published))) is not None})
        if published
        else None
    )
    return Observations(frame=frame, raw=raw, attr_columns=None, published_values=values)
