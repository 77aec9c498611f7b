"""The Parquet snapshot writer dictionary-encodes the columns that repeat and only
those (`snapshot_writers._repeating`): a column of a few distinct values gets a
dictionary, a column of unique values is written plain; the table read back is the
same either way."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from feedledger.pipeline.exports.writers import _repeating


def test_only_the_repeating_columns_get_a_dictionary(tmp_path: Path) -> None:
    n = 1000
    table = pa.table(
        {
            "id": [f"P{i:05d}" for i in range(n)],
            "zoning": [("R-1", "R-2", "MU")[i % 3] for i in range(n)],
            "owner": [f"owner {i // 2}" for i in range(n)],  # n/2 distinct: not fewer
        }
    )
    assert _repeating(table) == ["zoning"]
    out = tmp_path / "t.parquet"
    with pq.ParquetWriter(out, table.schema, use_dictionary=_repeating(table)) as w:
        w.write_table(table)
    meta = pq.ParquetFile(out).metadata.row_group(0)
    encodings = {meta.column(i).path_in_schema: meta.column(i).encodings for i in range(3)}
    assert any("DICTIONARY" in e for e in encodings["zoning"])
    assert not any("DICTIONARY" in e for e in encodings["id"] + encodings["owner"])
    assert pq.read_table(out).equals(table)
