"""The CSV reader: vectorised (polars reads every field as the string it was; the
canonical key text and content hash are column expressions), with row/line-accurate
errors for malformed lines."""

from __future__ import annotations

import csv
import io

import polars as pl

from feedledger.formats.canonical import (
    array_expr,
    columns_needing_escape,
    string_record_hash_expr,
)
from feedledger.formats.observations import (
    DELETE_FIELD,
    OP_FIELD,
    TRUE_VALUES,
    Observations,
    check_utf8,
    fail,
    published_field,
    require_columns,
)
from feedledger.model.errors import BadPayloadError
from feedledger.model.hashing import hash_expr
from feedledger.model.source import SourceConfig
from feedledger.model.types import PayloadKind


def _csv_header(data: bytes, src: SourceConfig, label: str) -> list[str]:
    end = data.find(b"\n")
    first = data[: end if end >= 0 else len(data)]  # slicing copies only the header line
    try:
        text = first.decode("utf-8")
    except UnicodeDecodeError:
        check_utf8(data, src, label)
        raise
    return next(csv.reader([text.rstrip("\r")]), [])


def _field_count_error(
    src: SourceConfig, label: str, row: int, found: int, expected: int
) -> BadPayloadError:
    return fail(
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
            raise fail(
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


def read_csv_payload(data: bytes, src: SourceConfig, label: str) -> Observations:
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    header = _csv_header(data, src, label)
    dupes = sorted({h for h in header if header.count(h) > 1})
    if dupes:
        raise fail(src, label, f"duplicate column name(s) in the CSV header: {dupes}")
    if any(not h.strip() for h in header):
        raise fail(src, label, "the CSV header has an empty column name")
    try:
        # Unquoted empty fields AND missing trailing fields both read as null here;
        # quoted "" stays "". Rows with a null are checked against their line below.
        raw = pl.read_csv(
            data,
            infer_schema=False,
            empty_string_is_null=True,
            raise_if_empty=True,
        )
    except pl.exceptions.ComputeError as exc:
        if "utf-8" in str(exc).lower() or "utf8" in str(exc).lower():
            check_utf8(data, src, label)
        _check_field_counts(data, len(header), src, label)
        first = str(exc).strip().splitlines()[0]
        raise fail(src, label, f"cannot parse CSV: {first}") from None
    except (pl.exceptions.NoDataError, pl.exceptions.PolarsError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise fail(src, label, f"cannot parse CSV: {first}") from None
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
    require_columns(list(raw.columns), src, label)

    columns = list(raw.columns)
    deleted_expr: pl.Expr = pl.lit(False)
    attr_columns = columns
    if src.kind == PayloadKind.CHANGES:
        markers = []
        if DELETE_FIELD in columns:
            markers.append(pl.col(DELETE_FIELD).str.to_lowercase().is_in(list(TRUE_VALUES)))
        if OP_FIELD in columns:
            markers.append(pl.col(OP_FIELD).str.to_lowercase() == "d")
        if markers:
            deleted_expr = pl.any_horizontal(markers)
        attr_columns = [c for c in columns if c not in (DELETE_FIELD, OP_FIELD)]

    key_special = columns_needing_escape(raw.select(list(src.key)))
    revision = pl.col(src.revision) if src.revision else pl.lit(None, dtype=pl.String)
    frame = (
        raw.lazy()
        .select(
            array_expr(list(src.key), raw, key_special).alias("key"),
            string_record_hash_expr(attr_columns).alias("hash"),
            revision.alias("revision"),
            deleted_expr.alias("deleted"),
        )
        .with_columns(hash_expr(pl.col("key")).alias("kh"))
        .with_row_index("idx")
        .select("idx", "key", "hash", "revision", "deleted", "kh")
        .collect()
    )
    published = published_field(src)
    values = (
        raw.get_column(published).unique().sort().to_list()
        if published and published in columns
        else None
    )
    return Observations(frame=frame, raw=raw, attr_columns=attr_columns, published_values=values)
