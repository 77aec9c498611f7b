"""A scratch file of the staged ingest (ledger/staging.py) holds exactly the rows of its
parts, in order, whatever their number against the rows bound per statement."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import polars as pl

from feedledger.ledger import staging


def _part(start: int, rows: int) -> pl.DataFrame:
    ids = list(range(start, start + rows))
    return pl.DataFrame(
        {
            "version_id": ids,
            "key": [f"k{i}" for i in ids],
            "deleted": [i % 3 == 0 for i in ids],
            "prev_version_id": [None if i % 2 else i - 1 for i in ids],
            "attributes": [None if i % 5 == 0 else f'["é{i}"]' for i in ids],
        },
        schema_overrides={"prev_version_id": pl.Int64},
    )


def test_every_row_of_every_part_in_order(tmp_path: Path) -> None:
    n = staging.INSERT_ROWS
    sizes = [0, 1, n, 2 * n + 5, n - 1]
    parts, start = [], 0
    for size in sizes:
        parts.append(_part(start, size))
        start += size
    path = tmp_path / "scratch"
    staging.write_file(path, parts)
    conn = sqlite3.connect(path)
    try:
        got = conn.execute("SELECT * FROM batch ORDER BY rowid").fetchall()
    finally:
        conn.close()
    want = [(r[0], r[1], int(r[2]), r[3], r[4]) for part in parts for r in part.iter_rows()]
    assert got == want
    assert len(got) == sum(sizes)
