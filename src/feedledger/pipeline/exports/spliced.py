"""A stored-form batch's CSV lines or Parquet columns from the compiled renderer
(`ledger.stored_render`) for the rows it takes, the general writer's
(`writers`) for the others, spliced back in row order: the output is the
general writer's, byte for byte (its rows are the same function of each row).

A row outside the columns raises the writers' "different fields" error, as the
general path does for that batch.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import IO, TypeVar

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from feedledger.ledger.encoding import render as stored_render
from feedledger.model.errors import ConfigError

__all__ = ["csv", "table"]

Ints = npt.NDArray[np.int64]
T = TypeVar("T")
_QUOTE, _NEWLINE = 0x22, 0x0A


def csv(
    got: pa.RecordBatch,
    handle: IO[bytes],
    columns: list[str],
    general: Callable[[pa.RecordBatch, IO[bytes]], None],
    different: str,
) -> bool:
    """Write `got`'s CSV lines to `handle`; False (nothing written) when the batch is
    not one the renderer reads (the caller writes it its general way)."""
    got_lines = _rendered(stored_render.csv_lines, got, columns, different)
    if got_lines is None:
        return False
    taken = got_lines.taken
    if taken.all():  # (the lines are in row order)
        handle.write(got_lines.data.data)
        return True
    if not taken.any():
        general(got, handle)
        return True
    rest = np.flatnonzero(~taken)
    buf = io.BytesIO()
    general(got.take(pa.array(rest)), buf)
    slow = np.frombuffer(buf.getbuffer(), np.uint8)
    ends = _line_ends(slow)
    if len(ends) != len(rest):  # (never expected) the general writer's rows alone
        general(got, handle)
        return True
    starts = got_lines.starts.copy()
    stops = got_lines.ends.copy()
    base = len(got_lines.data)
    starts[rest] = base + np.concatenate([[0], ends[:-1]])
    stops[rest] = base + ends
    both = np.concatenate([got_lines.data, slow])
    handle.write(stored_render.gather(both, starts, stops).data)
    return True


def _rendered(
    render: Callable[[pa.RecordBatch, list[str]], T],
    got: pa.RecordBatch,
    columns: list[str],
    different: str,
) -> T:
    """`render(got, columns)`, a row outside the columns being the writers' "different
    fields" error."""
    try:
        return render(got, columns)
    except stored_render.Outside:
        raise ConfigError(different) from None


def _line_ends(text: npt.NDArray[np.uint8]) -> Ints:
    """The end (after its `\\n`) of each CSV line of `text`: a `\\n` outside quotes (an
    even number of `"` before it; a quote inside a quoted cell is doubled)."""
    quotes = np.cumsum(text == _QUOTE)
    return np.flatnonzero((text == _NEWLINE) & (quotes % 2 == 0)).astype(np.int64) + 1


def table(
    got: pa.RecordBatch,
    columns: list[str],
    general: Callable[[pa.RecordBatch], pa.Table],
    different: str,
) -> pa.Table | None:
    """`got`'s columns as a table of strings; None when the batch is not one the
    renderer reads."""
    found = _rendered(stored_render.string_columns, got, columns, different)
    if found is None:
        return None
    taken, arrays = found
    if not taken.any():
        return general(got)
    fast = pa.table(arrays, schema=pa.schema([(c, pa.string()) for c in columns]))
    if taken.all():
        return fast
    rest = np.flatnonzero(~taken)
    slow = general(got.take(pa.array(rest)))
    order = np.argsort(np.concatenate([np.flatnonzero(taken), rest]), kind="stable")
    return pa.concat_tables([fast, slow.cast(fast.schema)]).take(pa.array(order))
