"""A snapshot's column order: the SOURCE's, not the stored one.

Attributes are stored as canonical JSON (fields in code-point order, for the content
hash); an export puts its columns back in the order the fields had in the newest
payload applied at or before the valid time (as known at the known-at time). That
order is the payload's `payloads.fields` (recorded when it is applied: its CSV header,
its JSON records' first-seen keys, its Parquet or GIS layer schema). For a payload
applied before that column existed the archived bytes are read again (CSV header,
Parquet schema, the first JSON records). Fields the payload does not name -- fields of
entities unchanged since an older payload -- follow in code-point order.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable
from typing import Any

from feedledger.context import Context
from feedledger.ledger.readers import snapshot_rows
from feedledger.ledger.readers.snapshot_rows import PayloadLayout
from feedledger.model.errors import FeedledgerError

__all__ = ["field_order", "ordered", "payload_fields"]

_SCAN_RECORDS = 1_000  # JSON records whose field names give the order (first seen)


def field_order(ctx: Context, layout: PayloadLayout | None, fmt: str) -> list[str]:
    """The field order of the payload in force (`layout`); [] if it cannot be told."""
    if layout is None:
        return []
    if layout.fields is not None:
        return layout.fields
    try:
        data = ctx.archive.get(layout.sha256)
    except FeedledgerError:
        return []  # the archive is unavailable: fall back to the stored order
    return payload_fields(data, fmt)


def layout_at(
    ctx: Context, source: str, valid_us: int, known_us: int | None
) -> PayloadLayout | None:
    """The payload in force at `valid_us` (see `ledger.readers.snapshot_rows.layout`)."""
    return snapshot_rows.layout(ctx.store, source, valid_us, known_us)


def payload_fields(data: bytes, fmt: str) -> list[str]:
    """Field names of a payload in the order it states them; [] if unreadable (and for
    the GIS formats, whose order is recorded at apply time)."""
    try:
        if fmt == "csv":
            text = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8-sig", newline="")
            return [str(name) for name in next(csv.reader(text), [])]
        if fmt == "parquet":
            import pyarrow.parquet as pq  # lazy: a Parquet payload's names only

            return list(pq.read_schema(io.BytesIO(data)).names)
        if fmt in ("json", "jsonl"):
            return _json_fields(data, fmt)
        return []
    except (ValueError, OSError, csv.Error, ImportError):
        return []


def _json_fields(data: bytes, fmt: str) -> list[str]:
    seen: dict[str, None] = {}
    records: Iterable[Any]
    if fmt == "jsonl":
        lines = (ln for ln in data.split(b"\n") if ln.strip())
        records = (json.loads(ln) for _, ln in zip(range(_SCAN_RECORDS), lines, strict=False))
    else:
        doc = json.loads(data.decode("utf-8-sig"))
        if isinstance(doc, dict):
            doc = next((v for v in doc.values() if isinstance(v, list)), [])
        records = doc[:_SCAN_RECORDS] if isinstance(doc, list) else []
    for record in records:
        if isinstance(record, dict):
            seen.update(dict.fromkeys(str(k) for k in record))
    return list(seen)


def ordered(fields: list[str], order: list[str]) -> list[str]:
    """`fields` in the position `order` gives them; fields it lacks follow, in
    code-point order."""
    rank = {name: i for i, name in enumerate(order)}
    known = sorted((f for f in fields if f in rank), key=rank.__getitem__)
    return known + sorted(f for f in fields if f not in rank)
