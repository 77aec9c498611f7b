"""Rows read back from a spilled payload (formats/spill.py) are the rows written, in the
order asked, wherever they are among its record batches (each piece gathered from a
batch is copied out of it, so that it does not keep the whole batch's texts alive)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from feedledger.formats.spill import SpilledRows


def spilled(tmp_path: Path, rows: int, batch_rows: int) -> tuple[SpilledRows, pl.DataFrame]:
    frame = pl.DataFrame(
        {
            "name": [f"owner number {i} of a long street name" for i in range(rows)],
            "note": [None if i % 7 == 0 else f"n{i}" for i in range(rows)],
        }
    )
    spill = SpilledRows(tmp_path, batch_rows=batch_rows)
    for start in range(0, rows, 1500):
        spill.append(frame.slice(start, 1500))
    spill.finish()
    return spill, frame


def test_rows_gathered_across_batches_are_the_rows_written(tmp_path: Path) -> None:
    spill, frame = spilled(tmp_path, 20_000, batch_rows=1000)
    idx = pl.Series([19_999, 0, 5_432, 5_433, 999, 1000, 0])
    assert spill.rows(idx).equals(frame[idx.to_list()])
    spill.close()


def test_a_few_rows_from_every_batch_are_the_rows_written(tmp_path: Path) -> None:
    spill, frame = spilled(tmp_path, 40_000, batch_rows=1000)
    one_per_batch = pl.Series(range(0, 40_000, 1000))
    rows = spill.rows(one_per_batch)
    assert rows.equals(frame[one_per_batch.to_list()])
    # 40 short rows: a few KiB, not the 40 batches' texts (~1.7 MB) they were read from
    assert rows.estimated_size() < frame.estimated_size() // 20
    spill.close()


@settings(max_examples=30, deadline=None)
@given(
    rows=st.integers(1, 3_500),
    batch_rows=st.sampled_from([1000, 1024]),
    start=st.integers(0, 3_499),
    length=st.integers(0, 1_100),
    dtype=st.sampled_from([pl.UInt32, pl.Int64]),
)
def test_runs_of_rows_and_whole_batches_are_the_rows_written(
    tmp_path_factory: pytest.TempPathFactory,
    rows: int,
    batch_rows: int,
    start: int,
    length: int,
    dtype: type[pl.DataType],
) -> None:
    """A first load's chunk (a whole record batch, in order: read as it is, not gathered
    and copied) and any other run of indexes give the rows written, typed alike."""
    spill, frame = spilled(tmp_path_factory.mktemp("spill"), rows, batch_rows)
    start = start % rows
    for first, n in ((start, min(length, rows - start)), (start - start % batch_rows, None)):
        n = min(batch_rows, rows - first) if n is None else n
        idx = pl.Series(range(first, first + n), dtype=dtype)
        got = spill.rows(idx)
        assert got.schema == frame.schema
        assert got.equals(frame.slice(first, n))
    spill.close()
