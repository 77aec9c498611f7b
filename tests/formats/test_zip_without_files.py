"""A zip holding no file -- only folders, or only the `__MACOSX/` entries macOS adds --
is refused saying so, not "zip payload holds 0 files []". One line, exit 4, the bytes
kept. Both backends (`cli`)."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from helpers import Cli


def _zip(entries: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return out.getvalue()


@pytest.mark.parametrize(
    "entries",
    [{"folder/": b""}, {"__MACOSX/._f.csv": b"x"}, {"a/": b"", "a/b/": b""}],
    ids=["folder", "macosx", "nested-folders"],
)
def test_a_zip_without_a_file_says_so(cli: Cli, tmp_path: Path, entries: dict[str, bytes]) -> None:
    cli("source", "add", "feed", "--key", "id")
    path = tmp_path / "f.zip"
    data = _zip(entries)
    path.write_bytes(data)
    result = cli("ingest", "feed", str(path), "--published-at", "2026-08-01", expect=4)
    (line,) = [ln for ln in result.stderr.splitlines() if ln.strip()]
    problem, sep, kept = line.partition("; the bytes are kept at ")
    assert problem == (
        "error: source 'feed', payload f.zip: the payload is a zip archive holding no file "
        "(only folders or __MACOSX/ entries)"
    ), line
    assert sep and Path(kept).read_bytes() == data
