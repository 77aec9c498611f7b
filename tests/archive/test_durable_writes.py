"""The folder archive's new files: a large one is written around the page cache
(O_DIRECT, through an aligned buffer, its zero-padded tail cut off) and reads back
byte-identical; where O_DIRECT is refused the file is written as any other."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

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
