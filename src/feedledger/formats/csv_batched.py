"""The CSV reader in batches, for a payload larger than its source's memory budget
allows the whole read (`read_csv_payload`) to hold: the bytes are cut into pieces of
about `piece_bytes` at line ends outside quoted fields (an even count of quote
characters before the cut: a doubled quote inside a field counts twice), polars reads
each piece as the whole read reads the payload, and each piece's key text, content hash and key hash
are computed as the whole read computes them (the same expressions, row by row, so
the values are equal: tests/formats/test_csv_batched.py), and its string columns are
spilled to disk (formats/spill.py). What stays in memory is `Observations.frame`
(idx, key, hash, revision, deleted, kh) and the key columns.

Bad input takes the whole read's path, so that the error is the one it gives (a
payload that cannot be read is refused before it costs much memory anyway)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

import polars as pl

from feedledger.formats.canonical import array_expr, columns_needing_escape, string_hash_expr
from feedledger.formats.csv_reader import check_short_rows, read_csv_payload
from feedledger.formats.observations import (
    DELETE_FIELD,
    OP_FIELD,
    TRUE_VALUES,
    Observations,
    require_columns,
)
from feedledger.formats.spill import BATCH_ROWS, SpilledObservations, SpilledRows
from feedledger.model.hashing import hash_expr
from feedledger.model.source import SourceConfig
from feedledger.model.types import PayloadKind

PIECE_BYTES = 32 * 1024**2
# A whole read and apply of a CSV payload peaks at about this many times its size
# (bench/README.md, "10 million entities": 6.1x at 10M parcels, 8x at 1M)
WHOLE_READ_FACTOR = 6


def piece_bytes(src: SourceConfig) -> int:
    """The size of the pieces read at a time within the source's budget: reading one
    holds about ten times its size (its columns, their hashes, the spilled copy)."""
    budget = src.memory_budget or 32 * PIECE_BYTES
    return max(1024**2, min(PIECE_BYTES, budget // 32))


def fits_whole(src: SourceConfig, size: int) -> bool:
    """Whether a CSV payload of `size` bytes may be read whole within the source's
    `memory_budget` (always, without one)."""
    return src.memory_budget is None or size * WHOLE_READ_FACTOR <= src.memory_budget


class _Refused(Exception):
    """Something the whole read reports better (a malformed header or file)."""


def _header(row: tuple[str | None, ...]) -> list[str]:
    header = ["" if h is None else h for h in row]
    if any(n > 1 for n in Counter(header).values()) or any(not h.strip() for h in header):
        raise _Refused
    return header


def _deleted(src: SourceConfig, columns: list[str]) -> tuple[pl.Expr, list[str]]:
    """The delete-marker expression and the attribute columns (as the whole read)."""
    if src.kind != PayloadKind.CHANGES:
        return pl.lit(False), columns
    markers = []
    if DELETE_FIELD in columns:
        markers.append(pl.col(DELETE_FIELD).str.to_lowercase().is_in(list(TRUE_VALUES)))
    if OP_FIELD in columns:
        markers.append(pl.col(OP_FIELD).str.to_lowercase() == "d")
    deleted = pl.any_horizontal(markers) if markers else pl.lit(False)
    return deleted, [c for c in columns if c not in (DELETE_FIELD, OP_FIELD)]


def read_csv_batched(
    data: bytes,
    src: SourceConfig,
    label: str,
    *,
    piece_bytes: int = PIECE_BYTES,
    batch_rows: int = BATCH_ROWS,
    spill_dir: Path | None = None,
) -> Observations:
    """`read_csv_payload(data, src, label)`'s observations, read a
    piece at a time with their string columns spilled to disk (a `SpilledObservations`)."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    if data[:1] in (b"\n", b"\r"):
        data = data.lstrip(b"\r\n")
    spilled = SpilledRows(spill_dir, batch_rows)
    try:
        return _read(pieces(data, piece_bytes), lambda: data, src, label, spilled)
    except (_Refused, pl.exceptions.PolarsError):
        spilled.close()
        return read_csv_payload(data, src, label)  # its error, or (never) its result
    except BaseException:
        spilled.close()
        raise


def read_csv_file(
    path: Path,
    src: SourceConfig,
    label: str,
    *,
    piece_bytes: int = PIECE_BYTES,
    batch_rows: int = BATCH_ROWS,
    spill_dir: Path | None = None,
) -> Observations:
    """`read_csv_batched` of the bytes of the file at `path`, read from the file a piece at
    a time (the whole file is never held; only a refused or suspect payload, whose
    error the whole read words, is read whole)."""

    def whole() -> bytes:
        data = path.read_bytes()
        if data.startswith(b"\xef\xbb\xbf"):
            data = data[3:]
        return data.lstrip(b"\r\n") if data[:1] in (b"\n", b"\r") else data

    spilled = SpilledRows(spill_dir, batch_rows)
    try:
        with open(path, "rb") as handle:
            return _read(file_pieces(handle, piece_bytes), whole, src, label, spilled)
    except (_Refused, pl.exceptions.PolarsError):
        spilled.close()
        return read_csv_payload(whole(), src, label)  # its error, or (never) its result
    except BaseException:
        spilled.close()
        raise


def pieces(data: bytes, size: int) -> Iterator[bytes]:
    """`data` in consecutive pieces of at least `size` bytes (the last one shorter), each
    ending at a line end outside any quoted field."""
    start, n = 0, len(data)
    while start < n:
        end = n
        if start + size < n:
            quotes = data.count(b'"', start, start + size)
            cut = data.find(b"\n", start + size)
            quotes += data.count(b'"', start + size, cut) if cut >= 0 else 0
            while cut >= 0 and quotes % 2:
                after = data.find(b"\n", cut + 1)
                quotes += data.count(b'"', cut, after) if after >= 0 else 0
                cut = after
            end = n if cut < 0 else cut + 1
        yield data[start:end]
        start = end


def file_pieces(handle: BinaryIO, size: int) -> Iterator[bytes]:
    """The bytes `handle` reads, less a leading byte-order mark and blank lines, in
    consecutive pieces of about `size` bytes each ending at a line end outside any
    quoted field (the last one as the file ends): what `pieces` cuts, cut elsewhere.

    The file is read into one buffer reused from piece to piece, and each piece copied
    out of it once: reading each chunk as new bytes, joining it to the last piece's
    rest and slicing the piece off made three fresh blocks a piece, each too large for
    the C allocator to reuse (mapped, faulted and zeroed, unmapped: ~1 GiB of page
    faults a 321 MB file, half the read's system time; bench/README.md "10M time
    (helper tenm)")."""
    buffer = bytearray()
    start = held = 0  # the piece being gathered is buffer[start:held]
    first, skipping = True, True  # before the first record (the mark, blank lines)
    while True:
        read = _read_into(handle, buffer, held, max(size, 3))
        held += read
        if skipping:
            if first and buffer.startswith(b"\xef\xbb\xbf"):
                start = 3
            first = False
            while start < held and buffer[start] in b"\r\n":
                start += 1
            if start == held and read:
                start = held = 0  # blank so far: read on
                continue
            skipping = False
        if not read:
            if start < held:
                with memoryview(buffer) as view:
                    last = bytes(view[start:held])
                yield last
            return
        cut = _last_line_end(buffer, start, held)
        if cut < 0:
            continue  # no line end outside quotes yet: read on
        with memoryview(buffer) as view:
            piece = bytes(view[start : cut + 1])
        rest = held - cut - 1
        buffer[:rest] = buffer[cut + 1 : held]  # (a record's part at most)
        start, held = 0, rest
        yield piece
        del piece


def _read_into(handle: BinaryIO, buffer: bytearray, at: int, n: int) -> int:
    """Read up to `n` bytes of `handle` into `buffer` from `at` (grown to hold them);
    how many were read (0: the end of the file)."""
    if len(buffer) < at + n:
        buffer.extend(bytes(at + n - len(buffer)))
    with memoryview(buffer) as view, view[at : at + n] as into:
        return handle.readinto(into) or 0  # type: ignore[attr-defined]


def _last_line_end(buffer: bytes | bytearray, start: int = 0, end: int | None = None) -> int:
    """The offset of the last line end in `buffer[start:end]` outside quoted fields
    (`start` is a record's start), or -1."""
    end = len(buffer) if end is None else end
    cut = buffer.rfind(b"\n", start, end)
    quotes = buffer.count(b'"', start, cut) if cut >= 0 else 0
    while cut >= 0 and quotes % 2:
        before = buffer.rfind(b"\n", start, cut)
        quotes -= buffer.count(b'"', before + 1 if before >= 0 else start, cut)
        cut = before
    return cut


def _parse(piece: bytes, src: SourceConfig) -> pl.DataFrame:
    return pl.read_csv(
        piece,
        has_header=False,
        separator=src.csv_delimiter,
        infer_schema=False,
        empty_string_is_null=True,
        raise_if_empty=False,
    )


def _read(
    cut: Iterator[bytes],
    whole: Callable[[], bytes],
    src: SourceConfig,
    label: str,
    spilled: SpilledRows,
) -> Observations:
    header: list[str] = []
    frames: list[pl.DataFrame] = []
    keys: list[pl.DataFrame] = []
    published: set[str] = set()
    suspects: list[int] = []
    offset = 0
    for piece in cut:
        batch = _parse(piece, src)
        del piece
        if not header:
            if not batch.height:
                continue
            header = _header(batch.row(0))
            require_columns(header, src, label)
            batch = batch.slice(1)
        batch.columns = header
        if not batch.height:
            continue
        last = header[-1]
        if batch.get_column(last).null_count():
            # a line with too few fields leaves its last column(s) null (checked below)
            found = batch.select(pl.arg_where(pl.col(last).is_null())).to_series()
            suspects.extend((found + offset).to_list())
        batch = batch.with_columns(pl.all().fill_null(""))
        frames.append(_observe(batch, src))
        keys.append(batch.select(list(src.key)))
        field = src.published_from.field
        if field and field in header:
            published.update(batch.get_column(field).unique().to_list())
        spilled.append(batch)
        offset += batch.height
    if not offset:
        raise _Refused  # no records (or an unreadable file): the whole read says which
    if suspects:
        check_short_rows(whole(), offset, len(header), suspects, src, label)
    spilled.finish()
    frame = (
        pl.concat(frames, how="vertical", rechunk=False)
        .with_row_index("idx")
        .select("idx", "key", "hash", "revision", "deleted", "kh")
    )
    _, attr_columns = _deleted(src, header)
    return SpilledObservations(
        frame=frame,
        raw=pl.concat(keys, how="vertical", rechunk=False),
        attr_columns=attr_columns,
        published_values=sorted(published) if src.published_from.field in header else None,
        fields=header,
        spilled=spilled,
    )


def _observe(batch: pl.DataFrame, src: SourceConfig) -> pl.DataFrame:
    """key, hash, revision, deleted, kh of one batch (the whole read's expressions)."""
    deleted, attr_columns = _deleted(src, list(batch.columns))
    key_special = columns_needing_escape(batch.select(list(src.key)).rechunk())
    revision = pl.col(src.revision) if src.revision else pl.lit(None, dtype=pl.String)
    return (
        batch.lazy()
        .select(
            array_expr(list(src.key), batch, key_special).alias("key"),
            string_hash_expr(batch, attr_columns).alias("hash"),
            revision.alias("revision"),
            deleted.alias("deleted"),
        )
        .with_columns(hash_expr(pl.col("key")).alias("kh"))
        .collect()
    )
