"""A snapshot batch in the stored form (`snapshot_rows.batches(stored=True)`) rendered
by the compiled loops of `encoding.render_kernel` -- CSV lines, or one string column per field
-- for the rows in the flat form (see there); the caller renders the rest its general
way and splices them in (`Rendered.taken`).

The texts of each codebook (`fields_id`) are read with that codebook's tables
(`encoding.render_tables`); a batch holding a null text, or none in the stored form, is not
rendered here at all (None), nor is any batch when numba cannot be imported (the
general path is the same output, slower).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from feedledger.ledger.encoding import render_tables
from feedledger.ledger.encoding.columns import stored_form
from feedledger.ledger.encoding.split import text_bytes, text_offsets

__all__ = ["Outside", "Rendered", "csv_lines", "gather", "string_columns"]

Mask = npt.NDArray[np.bool_]
Ints = npt.NDArray[np.int64]


class Outside(ValueError):
    """A row holds a top-level field outside the columns."""


@dataclass(frozen=True, slots=True)
class Rendered:
    """`taken`: which rows were rendered; row i's output (a taken row's; empty for
    the others) is data[starts[i]:ends[i]], the taken rows' in row order."""

    taken: Mask
    data: npt.NDArray[np.uint8]
    starts: Ints
    ends: Ints


def _groups(batch: pa.RecordBatch) -> list[tuple[Ints | None, pa.Array, Any]] | None:
    """(rows or None for all, their texts, their codebook) per fields_id; None when the
    batch is not rendered here."""
    got = stored_form(batch)
    if got is None:
        return None
    stored, ids, books = got
    if stored.null_count or ids.null_count or stored.type not in (pa.string(), pa.large_string()):
        return None
    distinct = ids.unique().to_pylist()
    if len(distinct) == 1:
        return [(None, stored, books[int(distinct[0])])]
    every = ids.to_numpy(zero_copy_only=False)
    out: list[tuple[Ints | None, pa.Array, Any]] = []
    for fields_id in distinct:
        rows = np.flatnonzero(every == fields_id).astype(np.int64)
        out.append((rows, stored.take(pa.array(rows)), books[int(fields_id)]))
    return out


def _prepared(batch: pa.RecordBatch) -> tuple[list[tuple[Ints | None, pa.Array, Any]], Any] | None:
    """The batch's groups (`_groups`) and the compiled loops' module; None when the
    batch is not rendered here or numba cannot be imported."""
    groups = _groups(batch)
    if groups is None:
        return None
    kernel = _kernel()
    return None if kernel is None else (groups, kernel)


def _kernel() -> Any:
    """ledger.stored_kernel (numba loaded on first use), or None without numba."""
    try:
        return importlib.import_module("feedledger.ledger.encoding.render_kernel")
    except ImportError:
        return None


def _bytes(texts: pa.Array) -> tuple[npt.NDArray[np.uint8], Ints]:
    """The texts' bytes (read-only, always: one compiled signature) and offsets."""
    offsets = np.array(text_offsets(texts), np.int64)
    data = np.ascontiguousarray(text_bytes(texts, int(offsets[-1]))).view()
    data.flags.writeable = False
    return data, offsets


def _inputs(
    groups: list[tuple[Ints | None, pa.Array, Any]], columns: list[str]
) -> Iterator[tuple[Ints | None, npt.NDArray[np.uint8], Ints, Any]]:
    """Per group: its rows, its texts' bytes and offsets, and its codebook's tables
    for `columns` -- what the compiled loops take."""
    for rows, texts, book in groups:
        t = render_tables.tables(tuple(book.patterns), tuple(book.values), tuple(columns))
        data, offsets = _bytes(texts)
        yield rows, data, offsets, t


def _check(status: npt.NDArray[np.uint8], stored_kernel: Any) -> None:
    """Outside when a row holds a field outside the columns (status 2)."""
    if (status == stored_kernel.OUTSIDE).any():
        raise Outside


def csv_lines(batch: pa.RecordBatch, columns: list[str]) -> Rendered | None:
    """The CSV lines (no header) of the batch's rows in the flat form, cells in
    `columns`' order; None when the batch is not rendered here; Outside when a row
    holds a field outside `columns`."""
    ready = _prepared(batch)
    if ready is None:
        return None
    groups, stored_kernel = ready
    n = batch.num_rows
    taken = np.zeros(n, np.bool_)
    starts = np.zeros(n, np.int64)
    ends = np.zeros(n, np.int64)
    parts: list[npt.NDArray[np.uint8]] = []
    base = 0
    for rows, data, offsets, t in _inputs(groups, columns):
        out, status, line = stored_kernel.csv_lines(data, offsets, t, len(columns))
        _check(status, stored_kernel)
        mine = status == stored_kernel.TAKEN
        at = np.arange(len(offsets) - 1) if rows is None else rows
        taken[at[mine]] = True
        starts[at] = line[:-1] + base
        ends[at] = line[1:] + base
        parts.append(out)
        base += len(out)
    if len(parts) == 1:
        return Rendered(taken, parts[0], starts, ends)
    # (several codebooks: each group's lines are end to end; put them in row order)
    sizes = ends - starts
    data = gather(np.concatenate(parts), starts, ends)
    ends = np.cumsum(sizes)
    return Rendered(taken, data, ends - sizes, ends)


def gather(data: npt.NDArray[np.uint8], starts: Ints, stops: Ints) -> npt.NDArray[np.uint8]:
    """data[starts[i]:stops[i]] for each i, end to end."""
    sizes = stops - starts
    total = int(sizes.sum())
    if total == 0:
        return np.zeros(0, np.uint8)
    shift = np.repeat(starts - (np.cumsum(sizes) - sizes), sizes)
    return data[shift + np.arange(total)]


def string_columns(batch: pa.RecordBatch, columns: list[str]) -> tuple[Mask, list[pa.Array]] | None:
    """Which rows are in the flat form, and for them one string array per column (the
    value as stated: a string unescaped, a literal as its text; null for JSON null or
    an absent field); None when the batch is not rendered here; Outside as above."""
    ready = _prepared(batch)
    if ready is None:
        return None
    groups, stored_kernel = ready
    n = batch.num_rows
    taken = np.zeros(n, np.bool_)
    pieces: list[tuple[Ints, list[pa.Array]]] = []
    for rows, data, offsets, t in _inputs(groups, columns):
        status, *cells = stored_kernel.parse_cells(data, offsets, t, len(columns))
        _check(status, stored_kernel)
        mine = np.flatnonzero(status == stored_kernel.TAKEN).astype(np.int64)
        out, start, offs, valid = stored_kernel.columns_text(data, mine, tuple(cells), t)
        arrays = [
            _array(out[start[c] : start[c + 1]], offs[c], valid[c]) for c in range(len(columns))
        ]
        at = mine if rows is None else rows[mine]
        taken[at] = True
        pieces.append((at, arrays))
    if len(pieces) == 1:
        return taken, pieces[0][1]
    order = np.argsort(np.concatenate([at for at, _ in pieces]), kind="stable")
    index = pa.array(order)
    merged = [
        pa.concat_arrays([arrays[c] for _, arrays in pieces]).take(index)
        for c in range(len(columns))
    ]
    return taken, merged


def _array(data: npt.NDArray[np.uint8], offsets: Ints, valid: npt.NDArray[np.uint8]) -> pa.Array:
    m = len(valid)
    mask = None
    nulls = int(m - np.count_nonzero(valid))
    if nulls:
        mask = pa.py_buffer(np.packbits(valid.astype(np.bool_), bitorder="little"))
    if int(offsets[-1]) < 2**31:
        return pa.StringArray.from_buffers(
            m, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data), mask, nulls
        )
    big = pa.LargeStringArray.from_buffers(
        m, pa.py_buffer(offsets), pa.py_buffer(data), mask, nulls
    )
    return big.cast(pa.string())
