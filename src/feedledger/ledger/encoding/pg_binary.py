"""Rows in PostgreSQL COPY's binary format, built column by column in Arrow (no Python
object per row): what `ledger/bulk/pg_copy.py` sends for a payload's versions on PostgreSQL.

Each column is written as its table type's binary form, exactly the `versions` table's
(ledger/schema.py): a binary COPY is not converted by the server. Standard library,
numpy, polars and pyarrow only; no store.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

# column of `versions` -> its type's binary form
VERSION_PG_TYPES = {
    "version_id": "int8",
    "key": "text",
    "deleted": "bool",
    "change": "int2",
    "prev_version_id": "int8",
    "content_hash": "int8",
    "revision": "text",
    "attributes": "text",
    "geometry": "text",
    "geometry_hash": "int8",
    "source": "text",
    "valid_from": "int8",
    "recorded_at": "int8",
    "txn_seq": "int8",
    "backfill": "bool",
    "fields_id": "int4",
}
PG_SIGNATURE = b"PGCOPY\n\xff\r\n\x00" + bytes(8)  # signature, flags, no header extension
PG_TRAILER = b"\xff\xff"


# one fixed-width binary type: its Polars dtype, its big-endian NumPy dtype, its width
_FIXED = {
    "int8": (pl.Int64, ">i8", 8),
    "int4": (pl.Int32, ">i4", 4),
    "int2": (pl.Int16, ">i2", 2),
    "bool": (pl.Boolean, "u1", 1),
}
_NULL = b"\xff\xff\xff\xff"  # a field's length -1: NULL


def encode_values(values: list[Any], kinds: list[str]) -> bytes:
    """Fields (length and bytes each) of one row's `values` of binary types `kinds`."""
    out = bytearray()
    for value, kind in zip(values, kinds, strict=True):
        if value is None:
            out += _NULL
        elif kind == "text":
            data = str(value).encode()
            out += struct.pack(">i", len(data)) + data
        else:
            _, dtype, width = _FIXED[kind]
            out += struct.pack(">i", width) + np.array([value]).astype(dtype).tobytes()
    return bytes(out)


def _fixed_array(block: np.ndarray, valid: np.ndarray | None = None) -> pa.Array:
    """Rows of a (rows, width) uint8 block as an Arrow binary column (null where
    `valid` is false)."""
    rows, width = block.shape
    bitmap = None if valid is None else pa.array(valid, type=pa.bool_()).buffers()[1]
    data = pa.py_buffer(np.ascontiguousarray(block))
    fixed = pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), rows, [bitmap, data])
    return fixed.cast(pa.large_binary())


def binary_rows(part: pl.DataFrame, kinds: list[str], tail: bytes, *, fields: int) -> memoryview:
    """The rows of `part` in COPY's binary format (no signature, no trailer): each
    row's field count (`fields`), its columns as binary types `kinds` (int8, int4,
    int2, bool, text) and then the bytes `tail` (the fields the rows share). Built
    column by column in Arrow: no Python object per row."""
    n = part.height
    header = np.frombuffer(struct.pack(">h", fields), dtype=np.uint8)
    blocks: list[np.ndarray] = [np.broadcast_to(header, (n, 2))]
    pieces: list[pa.Array] = []

    def flush() -> None:
        if blocks:
            pieces.append(_fixed_array(np.hstack(blocks)))
            blocks.clear()

    for column, kind in zip(part.get_columns(), kinds, strict=True):
        if kind == "text":
            texts = column.cast(pl.String).rechunk().to_arrow().cast(pa.large_binary())
            lengths = pc.fill_null(pc.binary_length(texts), -1)
            flush()
            pieces.append(_fixed_array(_big_endian(lengths.to_numpy(), ">i4")))
            pieces.append(texts)  # a NULL text adds nothing after its length -1
            continue
        dtype, big, width = _FIXED[kind]
        values = column.cast(dtype)
        data = _big_endian(values.fill_null(0).to_numpy(), big)
        length = np.frombuffer(struct.pack(">i", width), dtype=np.uint8)
        if not values.has_nulls():
            blocks += [np.broadcast_to(length, (n, 4)), data]
            continue
        valid = values.is_not_null().to_numpy()
        lengths = np.where(valid, width, -1)
        flush()
        pieces.append(_fixed_array(_big_endian(lengths, ">i4")))
        pieces.append(_fixed_array(data, valid))
    blocks.append(np.broadcast_to(np.frombuffer(tail, dtype=np.uint8), (n, len(tail))))
    flush()
    empty = pa.scalar(b"", pa.large_binary())
    rows = pc.binary_join_element_wise(*pieces, empty, null_handling="skip")
    offsets = np.frombuffer(rows.buffers()[1], dtype=np.int64, count=n + 1, offset=rows.offset * 8)
    return memoryview(rows.buffers()[2])[int(offsets[0]) : int(offsets[-1])]


def _big_endian(values: np.ndarray, dtype: str) -> np.ndarray:
    """`values` as a (rows, width) uint8 block of big-endian `dtype` numbers."""
    data = np.ascontiguousarray(values.astype(dtype))
    return data.view(np.uint8).reshape(len(values), data.itemsize)
