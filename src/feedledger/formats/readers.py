"""Payload readers: bytes -> Observations (columnar), with clear errors for bad input.

CSV takes a vectorised path (polars reads every field as a string, the canonical
JSON and hash are built as column expressions). JSON, JSON lines and Parquet take a
generic per-record path that keeps number literals exactly as written. GIS formats
(GeoJSON, shapefile, GeoPackage, File Geodatabase, FlatGeobuf, GeoParquet) take the
columnar path of `formats.spatial.geo_reader`: properties as the record, geometry beside it.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import chain
from pathlib import Path

import polars as pl

from feedledger.formats.compressed import decode_text, decompress, plain_utf8
from feedledger.formats.csv_reader import read_csv_payload
from feedledger.formats.observations import (
    BLANK_PATTERN,
    Observations,
    blank_key_problem,
    check_utf8,
    clip,
    fail,
    row_list,
)
from feedledger.formats.records import json_records, parquet_records, read_records
from feedledger.model.errors import ConfigError
from feedledger.model.source import SourceConfig

__all__ = [
    "Observations",
    "published_from_field",
    "read_observations",
    "read_observations_file",
    "reads_from_file",
]


def _fits_whole(src: SourceConfig, size: int) -> bool:
    """`csv_batched.fits_whole`, whose module (with pyarrow) is imported only for a
    source with a `memory_budget`: a whole read's ingest leaves Arrow to the store's
    warm-up thread (pipeline/intake/ingest.py), off the parse's critical path."""
    if src.memory_budget is None:
        return True
    from feedledger.formats.csv_batched import fits_whole  # lazy: see above

    return fits_whole(src, size)


def read_observations(
    data: bytes,
    src: SourceConfig,
    *,
    label: str,
    pre_read: Callable[[str], Observations | None] | None = None,
) -> Observations:
    """Parse and validate a payload for `src`. Raises BadPayloadError on any bad input.
    `pre_read(label)`: a GIS payload already read as it arrived (formats/spatial/geo_pages.py),
    equal to reading `data`; None: `data` is read."""
    if not data or data.isspace():  # (no copy of a large payload)
        raise fail(src, label, f"payload is empty ({len(data)} bytes, no data)")
    if src.is_geo:
        # lazy: the GIS readers and shapely cost a CSV ingest 0.1-0.3 s
        from feedledger.formats.spatial.geo_reader import read_geo  # lazy: see above

        pre = pre_read(label) if pre_read is not None else None
        obs = pre if pre is not None else read_geo(_geo_bytes(data, src, label), src, label)
        _check_keys(obs, src, label)
        return obs
    if src.format != "parquet":
        # gzip/zip by their first bytes; the declared encoding decoded to UTF-8
        data = decode_text(decompress(data, src, label), src, label)
        if not data or data.isspace() or _bom_only(data):
            raise fail(src, label, f"payload is empty ({len(data)} bytes once decompressed)")
    if src.format in ("csv", "jsonl"):
        _check_line_ends(data, src, label)
    if src.format == "csv" and not _fits_whole(src, len(data)):
        from feedledger.formats.csv_batched import (  # lazy: only for a payload over budget
            piece_bytes,  # (the batched read imports its spill and pyarrow)
            read_csv_batched,
        )

        # its fields: the header's order
        obs = read_csv_batched(data, src, label, piece_bytes=piece_bytes(src))
    elif src.format == "csv":
        obs = read_csv_payload(data, src, label)
        obs.fields = list(obs.raw.columns)  # the header's order
    else:
        if src.format == "parquet":
            records = parquet_records(data, src, label)
        else:
            check_utf8(data, src, label)
            records = json_records(data, src, label)
        obs = read_records(records, src, label)
        obs.fields = list(dict.fromkeys(chain.from_iterable(records)))  # first seen
    _check_keys(obs, src, label)
    return _without_raw(obs)


def _without_raw(obs: Observations) -> Observations:
    """A payload read in batches keeps its key columns (`raw`) only for the key checks
    above: dropped after them (a 10M-row payload's: ~150 MiB)."""
    if obs.on_disk:
        obs.raw = obs.raw.clear()
    return obs


def reads_from_file(src: SourceConfig, size: int, head: bytes) -> bool:
    """Whether a payload file of `size` bytes beginning with `head` (its first
    bytes, 64 KiB) is read for `src` by `read_observations_file`, from the file a
    piece at a time, to what `read_observations` makes of its bytes: a CSV payload
    neither compressed nor in another encoding than UTF-8, too large for the whole read
    within the source's `memory_budget`, whose first bytes hold a line end and more than
    white space. Any other payload is read from its bytes."""
    return (
        src.format == "csv"
        and not src.is_geo
        and not _fits_whole(src, size)
        and plain_utf8(head, src)
        and b"\n" in head
        and not head.isspace()
    )


def read_observations_file(path: Path, src: SourceConfig, *, label: str) -> Observations:
    """`read_observations` of the bytes of the file at `path`, for a payload
    `reads_from_file` takes: read from the file a piece at a time (formats/csv_batched.py),
    never held whole. Raises BadPayloadError on any bad input, as that does."""
    from feedledger.formats.csv_batched import piece_bytes, read_csv_file  # lazy: see above

    obs = read_csv_file(path, src, label, piece_bytes=piece_bytes(src))
    _check_keys(obs, src, label)
    return _without_raw(obs)


def _bom_only(data: bytes) -> bool:
    """A UTF-8 byte-order mark and nothing else but whitespace: an empty file (no slice
    of a payload that has more)."""
    if not data.startswith(b"\xef\xbb\xbf"):
        return False
    return len(data) == 3 or (data[3:4].isspace() and data[3:].isspace())


# zipped by nature: their zip is the file itself, not a wrapper around it
_ZIPPED_GEO = ("shapefile", "filegdb", "geoparquet")


def _geo_bytes(data: bytes, src: SourceConfig, label: str) -> bytes:
    """A GIS payload's file: a gzip (or a zip of one file) around a GeoJSON, GeoPackage
    or FlatGeobuf is undone; GeoJSON text in a declared encoding is decoded to UTF-8."""
    if src.format in _ZIPPED_GEO:
        return data
    data = decompress(data, src, label)
    if src.format in ("geojson", "geojsonseq"):
        data = decode_text(data, src, label)
    if not data or data.isspace():
        raise fail(src, label, f"payload is empty ({len(data)} bytes once decompressed)")
    return data


def _check_line_ends(data: bytes, src: SourceConfig, label: str) -> None:
    """Lines end with LF or CRLF. A file whose lines end with a bare CR (classic Mac OS)
    is refused rather than guessed at: read as it stands it is one line, and reading a
    lone CR as a line end would change what CRs inside values mean."""
    if b"\n" in data:
        return
    cr = data.find(b"\r")
    if 0 <= cr < len(data.rstrip()):
        raise fail(
            src,
            label,
            f"lines end with a bare CR (byte {cr}; classic Mac OS line ends): convert "
            "the file to LF or CRLF line ends",
        )


def _check_keys(obs: Observations, src: SourceConfig, label: str) -> None:
    frame = obs.frame
    if not frame.height:
        return
    if src.format == "csv":
        # key text of an empty field is `""`; one per key field position. Both looks
        # in one pass; the rows are listed only where one finds something
        empty_any, blank_any = obs.raw.select(
            pl.any_horizontal([pl.col(k) == "" for k in src.key]).any().alias("e"),
            pl.any_horizontal([pl.col(k).str.contains(BLANK_PATTERN) for k in src.key])
            .any()
            .alias("b"),
        ).row(0)
        if empty_any:
            empty = obs.raw.select(
                pl.int_range(pl.len(), dtype=pl.UInt32).alias("i"),
                pl.any_horizontal([pl.col(k) == "" for k in src.key]).alias("e"),
            ).filter(pl.col("e"))
            raise fail(
                src, label, f"{row_list(empty['i'].to_list())}: null or empty key {list(src.key)}"
            )
        if blank_any:
            blank = obs.raw.select(
                pl.int_range(pl.len(), dtype=pl.UInt32).alias("i"),
                pl.any_horizontal([pl.col(k).str.contains(BLANK_PATTERN) for k in src.key]).alias(
                    "b"
                ),
            ).filter(pl.col("b"))
            raise fail(src, label, blank_key_problem(blank["i"].to_list(), src))
    dup = frame.clear() if _distinct(frame) else frame.filter(pl.col("key").is_duplicated())
    if dup.height:
        first = dup.sort("idx").row(0, named=True)["key"]
        rows = dup.filter(pl.col("key") == first)["idx"].to_list()
        raise fail(
            src,
            label,
            f"duplicate key {clip(first)} at {row_list(rows)} "
            f"({dup.get_column('key').n_unique()} duplicated key(s) in all)",
        )
    if src.revision:
        missing_rev = frame.filter(pl.col("revision").is_null() & ~pl.col("deleted"))
        if missing_rev.height:
            raise fail(
                src,
                label,
                f"{row_list(missing_rev['idx'].to_list())}: no value for "
                f"revision field {src.revision!r}",
            )


def _distinct(frame: pl.DataFrame) -> bool:
    """True if the key texts of `frame` are all distinct, by the cheap look that proves
    it: no two neighbours equal in a key column in ascending order (an export sorted by
    its key, the usual daily), else as many distinct key hashes as rows. False means
    only that the caller must look at the texts."""
    key = frame.get_column("key")
    if not key.null_count() and key.is_sorted():
        return not bool((key.slice(1) == key.slice(0, key.len() - 1)).any())
    return bool(frame.get_column("kh").n_unique() == frame.height)


def published_from_field(
    obs: Observations, src: SourceConfig, label: str, parse: Callable[[str], int]
) -> int:
    """The publisher timestamp stated by the payload's `field:NAME` (it must be one value)."""
    field = src.published_from.field
    values = obs.published_values or []
    if not field or not values:
        raise fail(src, label, f"no publisher date: field {field!r} is missing or empty")
    if len(values) > 1:
        shown = ", ".join(clip(v, 40) for v in values[:3])
        raise fail(
            src,
            label,
            f"field {field!r} states {len(values)} different publisher "
            f"dates ({shown}...); a payload must have one",
        )
    try:
        return parse(values[0])
    except ConfigError as exc:  # named here: the parser knows neither source nor payload
        if exc.source is not None:
            raise
        raise ConfigError(
            f"field {field!r}: {exc.problem}", source=src.name, payload=label, hint=exc.hint
        ) from None
