"""The folder archive's new files: a large one is written around the page cache
(O_DIRECT, through an aligned buffer, its zero-padded tail cut off) and reads back
byte-identical; where O_DIRECT is refused the file is written as any other; a raw
object, read back at once by the ingest's compression, goes through the cache."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from feedledger.archive import durable, local
from feedledger.archive.core import object_rel
from feedledger.archive.durable import DIRECT_MIN, write_new


@pytest.mark.parametrize("extra", [0, 1, 4095, 8 << 20 | 123])
def test_a_large_file_reads_back_identical(tmp_path: Path, extra: int) -> None:
    data = random.Random(extra).randbytes(DIRECT_MIN + extra)
    path = tmp_path / "object"
    write_new(path, data)
    assert path.read_bytes() == data


def test_a_small_file_reads_back_identical_and_an_existing_one_is_refused(
    tmp_path: Path,
) -> None:
    path = tmp_path / "object"
    write_new(path, b"id,value\n1,2\n")
    assert path.read_bytes() == b"id,value\n1,2\n"
    with pytest.raises(FileExistsError):
        write_new(path, b"other")
    with pytest.raises(FileExistsError):
        write_new(path, bytes(DIRECT_MIN))
    assert path.read_bytes() == b"id,value\n1,2\n"


def test_without_o_direct_a_large_file_is_written_all_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delattr(os, "O_DIRECT", raising=False)
    data = bytes(range(256)) * (DIRECT_MIN // 256 + 3)
    write_new(tmp_path / "object", data)
    assert (tmp_path / "object").read_bytes() == data


def test_a_file_read_back_at_once_is_written_through_the_page_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    direct: list[Path] = []
    real = durable._write_direct

    def spy(path: Path, data: bytes, mode: int) -> bool:
        direct.append(path)
        return real(path, data, mode)

    monkeypatch.setattr(durable, "_write_direct", spy)
    data = bytes(range(256)) * (DIRECT_MIN // 256 + 1)
    write_new(tmp_path / "soon", data, read_soon=True)
    write_new(tmp_path / "later", data)
    assert direct == [tmp_path / "later"]
    assert (tmp_path / "soon").read_bytes() == data


def test_the_folder_archive_writes_raw_objects_to_be_read_back_and_others_around_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # an ingest compresses a raw object from its file right after (archive/settle.py)
    soon: list[tuple[str, bool]] = []

    def spy(path: Path, data: bytes, mode: int = 0o600, *, read_soon: bool = False) -> None:
        soon.append((path.parent.name, read_soon))
        write_new(path, data, mode, read_soon=read_soon)

    monkeypatch.setattr(local, "write_new", spy)
    blobs = local.FolderBlobs(tmp_path)
    sha = "ab" + "0" * 62
    assert blobs.create(object_rel(sha), b"raw")
    assert blobs.create(object_rel(sha) + ".zst", b"compressed")
    assert blobs.create("rejected/parcels/x.csv", b"kept")
    assert soon == [("ab", True), ("ab", False), ("parcels", False)]
