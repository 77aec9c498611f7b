"""A payload compressed with bzip2, xz, zstandard or 7-Zip -- alone or inside a gzip or
zip -- is refused naming the compression, not read as text ("invalid UTF-8 at byte
10"): one line, exit 4, the bytes kept under rejected/. A CSV whose first field merely
starts with the letters of a magic number is read as before. Both backends (`cli`)."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import zipfile
from pathlib import Path

import pytest

from helpers import Cli

CSV = b"id,v\n1,a\n2,b\n"
_ZSTD_EMPTY_FRAME = b"\x28\xb5\x2f\xfd\x20\x00\x01\x00\x00"  # a zstandard frame header
_SEVEN_ZIP = b"7z\xbc\xaf\x27\x1c\x00\x04" + bytes(24)  # a 7-Zip signature header


def _zip(name: str, data: bytes) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr(name, data)
    return out.getvalue()


def _refused(cli: Cli, tmp_path: Path, name: str, data: bytes) -> str:
    cli("source", "add", "feed", "--key", "id")
    path = tmp_path / name
    path.write_bytes(data)
    result = cli("ingest", "feed", str(path), "--published-at", "2026-08-01", expect=4)
    (line,) = [ln for ln in result.stderr.splitlines() if ln.strip()]
    problem, sep, kept = line.partition("; the bytes are kept at ")
    assert sep and Path(kept).read_bytes() == data, line
    assert any((cli.ws.archive_root / "rejected" / "feed").glob("*.json"))
    return problem


@pytest.mark.parametrize(
    ("inner", "word"),
    [(bz2.compress(CSV), "a bzip2"), (lzma.compress(CSV), "an xz")],
    ids=["bzip2", "xz"],
)
@pytest.mark.parametrize("outer", ["gzip", "zip"])
def test_another_compression_inside_a_gzip_or_zip_is_named(
    cli: Cli, tmp_path: Path, inner: bytes, word: str, outer: str
) -> None:
    data = gzip.compress(inner) if outer == "gzip" else _zip("f.csv", inner)
    problem = _refused(cli, tmp_path, f"f.csv.{outer}", data)
    assert problem == (
        f"error: source 'feed', payload f.csv.{outer}: the payload is {word} file inside "
        f"a {outer} file (compressed twice): feedledger undoes one layer; publish it "
        "compressed once"
    )


@pytest.mark.parametrize(
    ("data", "word"),
    [
        (bz2.compress(CSV), "a bzip2"),
        (lzma.compress(CSV), "an xz"),
        (_ZSTD_EMPTY_FRAME, "a zstandard"),
        (_SEVEN_ZIP, "a 7-Zip"),
    ],
    ids=["bzip2", "xz", "zstandard", "7zip"],
)
def test_a_compression_feedledger_does_not_read_is_named(
    cli: Cli, tmp_path: Path, data: bytes, word: str
) -> None:
    problem = _refused(cli, tmp_path, "f.csv.x", data)
    assert problem == (
        f"error: source 'feed', payload f.csv.x: the payload is {word} file: feedledger "
        "reads gzip or zip (or uncompressed) payloads only; publish it in one of those"
    )


def test_a_csv_starting_with_bzh_is_read(cli: Cli, tmp_path: Path) -> None:
    cli("source", "add", "feed", "--key", "BZh9")
    path = tmp_path / "f.csv"
    path.write_bytes(b"BZh9,v\n1,a\n")
    result = cli("ingest", "feed", str(path), "--published-at", "2026-08-01")
    assert "added 1" in result.stdout
