"""`snapshot`: the whole source as it stood at a valid time, written as CSV or JSON lines.

Attributes are stored as canonical JSON (fields in code-point order, for the content
hash); a CSV export puts its columns back in the SOURCE's order instead: the order the
fields had in the newest payload applied at or before the valid time (its CSV header,
its first JSON records, its Parquet schema). Fields that payload does not name follow
in stored order. The output file is written beside its final name and moved into place
only when complete, so a refused or failed export leaves nothing behind.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from feedledger.context import Context
from feedledger.ledger import queries
from feedledger.model.errors import ConfigError, FeedledgerError
from feedledger.pipeline.query import instant

_SCAN_RECORDS = 1_000  # JSON records whose field names give the order (first seen)


def field_order(
    ctx: Context, source: str, *, valid: str | int, known_at: str | int | None
) -> list[str]:
    """The source's field order at `valid` (see module doc); [] if it cannot be told."""
    src = ctx.workspace.source(source)
    valid_us = instant(src, valid, "--valid")
    assert valid_us is not None
    found = queries.applied_payload_at(
        ctx.store, src.name, valid_us, instant(src, known_at, "--known-at")
    )
    if found is None:
        return []
    try:
        data = ctx.archive.get(found[1])
    except FeedledgerError:
        return []  # the archive is unavailable: fall back to the stored order
    return payload_fields(data, src.format)


def payload_fields(data: bytes, fmt: str) -> list[str]:
    """Field names of a payload in the order it states them; [] if unreadable."""
    try:
        if fmt == "csv":
            text = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8-sig", newline="")
            return [str(name) for name in next(csv.reader(text), [])]
        if fmt == "parquet":
            import pyarrow.parquet as pq

            return list(pq.read_schema(io.BytesIO(data)).names)
        return _json_fields(data, fmt)
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
    """`fields` in the position `order` gives them; fields it lacks follow, as given."""
    rank = {name: i for i, name in enumerate(order)}
    known = sorted((f for f in fields if f in rank), key=rank.__getitem__)
    return known + [f for f in fields if f not in rank]


def check_output(output: Path) -> None:
    """Refuse, before anything is read or written, an output path that cannot be a file."""
    if output.is_dir():
        raise ConfigError(
            f"cannot write the snapshot to {output}: it is a directory",
            hint="give a file name, e.g. -o " + str(output / "snapshot.csv"),
        )
    if not output.parent.is_dir():
        raise ConfigError(
            f"cannot write the snapshot to {output}: folder {output.parent} does not exist"
        )


def write(rows: Iterable[tuple[str, str]], fmt: str, output: Path | None, order: list[str]) -> int:
    """Write the rows (key, attributes JSON) to `output` (stdout if None); the count.
    The rows' iterator is closed either way (its store connection is given back)."""
    try:
        return _write(rows, fmt, output, order)
    finally:
        close = getattr(rows, "close", None)
        if close is not None:
            close()


def _write(rows: Iterable[tuple[str, str]], fmt: str, output: Path | None, order: list[str]) -> int:
    import sys

    if output is None:
        return write_rows(rows, fmt, sys.stdout, order)
    check_output(output)
    part = output.with_name(f".{output.name}.part-{os.getpid()}")
    try:
        with part.open("w", encoding="utf-8", newline="") as handle:
            n = write_rows(rows, fmt, handle, order)
        os.replace(part, output)
    except OSError as exc:
        raise ConfigError(f"cannot write the snapshot to {output}: {exc.strerror or exc}") from None
    finally:
        part.unlink(missing_ok=True)
    return n


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return str.__str__(value)
    return json.dumps(value, ensure_ascii=False)


def write_rows(rows: Iterable[tuple[str, str]], fmt: str, handle: IO[str], order: list[str]) -> int:
    from feedledger.formats.canonical import RawNumber

    n = 0
    if fmt == "jsonl":
        for _key, attrs in rows:
            handle.write(attrs + "\n")
            n += 1
        return n
    writer: Any = None
    columns: list[str] = []
    buf = io.StringIO()
    for _key, attrs in rows:
        record = json.loads(attrs, parse_float=RawNumber, parse_int=RawNumber)
        if writer is None:
            columns = ordered(list(record), order)
            writer = csv.writer(buf, lineterminator="\n")
            writer.writerow(columns)
        elif set(record) - set(columns):
            raise ConfigError("entities have different fields; use --format jsonl")
        writer.writerow([_cell(record.get(col)) for col in columns])
        n += 1
        if buf.tell() > 1 << 20:
            handle.write(buf.getvalue())
            buf.seek(0)
            buf.truncate()
    handle.write(buf.getvalue())
    return n
