"""A Parquet or GeoParquet payload that is not one says why in the payload's words: a
gzip, zip, bzip2 or xz wrapper is named (a Parquet payload is read as published, never
decompressed), and bytes cut short or of another format are said to lack Parquet's
PAR1 marker -- not pyarrow's "Parquet magic bytes not found in footer". One line,
exit 4, the bytes kept. Both backends (`cli`)."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import zipfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers import Cli


def _parquet() -> bytes:
    out = io.BytesIO()
    pq.write_table(pa.table({"id": [1, 2], "v": ["a", "b"]}), out)
    return out.getvalue()


def _zip(data: bytes) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("f.parquet", data)
    return out.getvalue()


_WRAPPED = "the payload is {} file, not Parquet: a Parquet payload is read as published"
_NO_MARKER = "its bytes do not begin and end with Parquet's PAR1 marker"


@pytest.mark.parametrize("fmt", ["parquet", "geoparquet"])
@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (gzip.compress, _WRAPPED.format("a gzip")),
        (_zip, _WRAPPED.format("a zip")),
        (bz2.compress, _WRAPPED.format("a bzip2")),
        (lzma.compress, _WRAPPED.format("an xz")),
        (lambda d: d[: len(d) // 2], _NO_MARKER),
        (lambda d: b"id,v\n1,a\n", _NO_MARKER),
    ],
    ids=["gzip", "zip", "bzip2", "xz", "cut-short", "csv"],
)
def test_bytes_that_are_not_parquet_say_why(
    cli: Cli, tmp_path: Path, fmt: str, make: object, problem: str
) -> None:
    assert callable(make)
    data: bytes = make(_parquet())
    cli("source", "add", "feed", "--key", "id", "--format", fmt)
    path = tmp_path / "f.parquet"
    path.write_bytes(data)
    result = cli("ingest", "feed", str(path), "--published-at", "2026-08-01", expect=4)
    (line,) = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert problem in line, line
    assert "magic bytes" not in line, line
    _, sep, kept = line.partition("; the bytes are kept at ")
    assert sep and Path(kept).read_bytes() == data
