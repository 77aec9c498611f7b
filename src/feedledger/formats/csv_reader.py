"""The CSV reader: vectorised (polars reads every field as the string it was; the
canonical key text and content hash are column expressions), with row/line-accurate
errors for malformed lines."""

from __future__ import annotations

import csv
import io
from collections import Counter

import polars as pl

from feedledger.formats.canonical import (
    array_expr,
    columns_needing_escape,
    string_hash_expr,
)
from feedledger.formats.observations import (
    DELETE_FIELD,
    OP_FIELD,
    TRUE_VALUES,
    Observations,
    check_utf8,
    clip,
    fail,
    require_columns,
)
from feedledger.model.errors import BadPayloadError
from feedledger.model.hashing import hash_expr
from feedledger.model.source import SourceConfig
from feedledger.model.types import PayloadKind


def _stray_quote(data: bytes, sep: str = ",") -> str | None:
    """The first header field holding a quote although it is not quoted (`i"d`), if the
    header line has one (a quote there would swallow the lines after it)."""
    end = data.find(b"\n")
    line = data[: end if end >= 0 else len(data)].rstrip(b"\r").decode("utf-8", "replace")
    fields = line.split(sep)
    if any(f.startswith('"') for f in fields):
        return None
    return next((f for f in fields if '"' in f), None)


def _parse_problem(data: bytes, sep: str = ",") -> str:
    """What is wrong with CSV the parser refused, said of the payload (never in the
    parser's words): a header or row field holding a stray quote, else an unbalanced
    quote (the likely cause of any other refusal)."""
    stray = _stray_quote(data, sep)
    if stray is not None:
        doubled = '"' + stray.replace('"', '""') + '"'
        return (
            f"cannot parse CSV: header field {clip(stray)!r} holds a quote but is not "
            f"quoted (quote the whole field and double the quote inside: {clip(doubled)})"
        )
    found = _stray_quote_in_rows(data, sep)
    if found is not None:
        row, field = found
        doubled = '"' + field.replace('"', '""') + '"'
        return (
            f"cannot parse CSV: row {row} (line {row + 1}): field {clip(field)!r} holds a "
            f"quote but is not quoted (quote the whole field and double the quote "
            f"inside: {clip(doubled)})"
        )
    return (
        "cannot parse CSV: its rows cannot be split into fields "
        "(an unbalanced quote? a quoted field must end with a quote)"
    )


def _stray_quote_in_rows(data: bytes, sep: str) -> tuple[int, str] | None:
    """The first row (1-based, on a line of its own) with an unquoted field holding a
    quote (`1,a"b`), among the lines none of whose fields is quoted (error path only)."""
    lines = data.decode("utf-8", "replace").split("\n")
    for row, line in enumerate(lines[1:], start=1):
        fields = line.rstrip("\r").split(sep)
        if any(f.startswith('"') for f in fields):
            continue
        stray = next((f for f in fields if '"' in f), None)
        if stray is not None:
            return row, stray
    return None


def _records_after_header(data: bytes, sep: str = ",") -> bool:
    """Whether the csv module finds a non-empty record after the header (errors: yes)."""
    text = data.decode("utf-8", errors="replace")
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=sep)
    try:
        next(reader, None)
        return any(fields for fields in reader)
    except csv.Error:
        return True


def _field_count_error(
    src: SourceConfig, label: str, row: int, found: int, expected: int
) -> BadPayloadError:
    return fail(
        src,
        label,
        f"cannot parse CSV: row {row} (line {row + 1}) has {found} field(s), "
        f"{'fewer' if found < expected else 'more'} fields than the header's {expected}",
    )


def _check_field_counts(data: bytes, expected: int | None, src: SourceConfig, label: str) -> None:
    """Slow path (errors only, or quoted line breaks): find the first row whose field
    count differs from the header's (`expected`, or as the csv module reads it), with
    the csv module."""
    text = data.decode("utf-8", errors="replace")
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=src.csv_delimiter)
    try:
        header = next(reader, None)
        if expected is None:
            expected = len(header or [])
        for row_no, fields in enumerate(reader, start=1):
            if fields and len(fields) != expected:
                raise fail(
                    src,
                    label,
                    f"cannot parse CSV: row {row_no} (line {reader.line_num}) has "
                    f"{len(fields)} field(s), {'fewer' if len(fields) < expected else 'more'} "
                    f"fields than the header's {expected}",
                )
    except csv.Error:
        return  # a diagnosis only: the caller reports the parser's own error


def check_short_rows(
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
    sep = src.csv_delimiter
    plain = frame.filter(~pl.col("line").str.contains('"', literal=True))
    short = plain.filter(pl.col("line").str.count_matches(sep, literal=True) + 1 != expected)
    if short.height:
        i, line = short.row(0)
        raise _field_count_error(src, label, i + 1, line.count(sep) + 1, expected)
    for i, line in frame.filter(pl.col("line").str.contains('"', literal=True)).iter_rows():
        try:
            fields = next(csv.reader([line], delimiter=sep), [])
        except csv.Error as exc:
            raise fail(src, label, f"cannot parse CSV: row {i + 1}: {clip(str(exc))}") from None
        if len(fields) != expected:
            raise _field_count_error(src, label, i + 1, len(fields), expected)


def _read(data: bytes, src: SourceConfig, label: str) -> pl.DataFrame:
    """Header and body read by ONE parser (polars, the header as the first row)."""
    try:
        # Unquoted empty fields AND missing trailing fields both read as null here;
        # quoted "" stays "". Rows with a null are checked against their line below.
        return pl.read_csv(
            data,
            has_header=False,
            separator=src.csv_delimiter,
            infer_schema=False,
            empty_string_is_null=True,
            raise_if_empty=True,
        )
    except pl.exceptions.ComputeError as exc:
        if "utf-8" in str(exc).lower() or "utf8" in str(exc).lower():
            check_utf8(data, src, label)
        if _stray_quote(data, src.csv_delimiter) is None:
            _check_field_counts(data, None, src, label)
        raise fail(src, label, _parse_problem(data, src.csv_delimiter)) from None
    except pl.exceptions.PolarsError:
        raise fail(src, label, _parse_problem(data, src.csv_delimiter)) from None


def read_csv_payload(data: bytes, src: SourceConfig, label: str) -> Observations:
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    if data[:1] in (b"\n", b"\r"):
        data = data.lstrip(b"\r\n")  # blank lines before the header are skipped
    table = _read(data, src, label)
    header = ["" if h is None else h for h in table.row(0)]
    dupes = sorted(clip(h) for h, n in Counter(header).items() if n > 1)
    if dupes:
        raise fail(src, label, f"duplicate column name(s) in the CSV header: {dupes[:5]}")
    if any(not h.strip() for h in header):
        raise fail(src, label, "the CSV header has an empty column name")
    raw = table.slice(1)
    raw.columns = header
    del table
    if not raw.height and _records_after_header(data, src.csv_delimiter):
        raise fail(
            src,
            label,
            "cannot parse CSV: no rows were read although the payload has lines after "
            "its header (an unbalanced quote?)",
        )
    nulls = raw.null_count().row(0, named=True) if raw.height else {}
    with_nulls = [c for c, n in nulls.items() if n]
    if with_nulls:
        # A line with too few fields leaves its LAST column(s) null; only those rows can
        # be short (a null elsewhere is an unquoted empty field).
        last = raw.columns[-1]
        if nulls[last]:
            suspects = raw.with_row_index("i").filter(pl.col(last).is_null())["i"]
            check_short_rows(data, raw.height, len(header), suspects.to_list(), src, label)
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

    key_special = columns_needing_escape(raw.select(list(src.key)).rechunk())
    revision = pl.col(src.revision) if src.revision else pl.lit(None, dtype=pl.String)
    frame = (
        raw.lazy()
        .select(
            array_expr(list(src.key), raw, key_special).alias("key"),
            string_hash_expr(raw, attr_columns).alias("hash"),
            revision.alias("revision"),
            deleted_expr.alias("deleted"),
        )
        .with_columns(hash_expr(pl.col("key")).alias("kh"))
        .with_row_index("idx")
        .select("idx", "key", "hash", "revision", "deleted", "kh")
        .collect()
    )
    published = src.published_from.field
    values = (
        raw.get_column(published).unique().sort().to_list()
        if published and published in columns
        else None
    )
    return Observations(frame=frame, raw=raw, attr_columns=attr_columns, published_values=values)
