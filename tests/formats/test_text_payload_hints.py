"""A text payload's refusal says what the user can do about it: a file holding only a
UTF-8 byte-order mark is empty (not "an unbalanced quote?"); UTF-16 text (its
byte-order mark) names `--encoding utf-16` (not "invalid UTF-8 at byte 0"), which then
reads it; a tab- or semicolon-separated file read as one column names
`--csv-delimiter`. One line, exit 4, the bytes kept. Both backends (`cli`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import Cli


def _refused(cli: Cli, tmp_path: Path, data: bytes) -> str:
    path = tmp_path / "f.csv"
    path.write_bytes(data)
    result = cli("ingest", "feed", str(path), "--published-at", "2026-08-01", expect=4)
    (line,) = [ln for ln in result.stderr.splitlines() if ln.strip()]
    problem, sep, kept = line.partition("; the bytes are kept at ")
    assert sep and Path(kept).read_bytes() == data, line
    return problem.removeprefix("error: source 'feed', payload f.csv: ")


@pytest.mark.parametrize(
    "data", [b"\xef\xbb\xbf", b"\xef\xbb\xbf\r\n  \n"], ids=["bom", "bom-blank"]
)
def test_a_byte_order_mark_alone_is_an_empty_payload(cli: Cli, tmp_path: Path, data: bytes) -> None:
    cli("source", "add", "feed", "--key", "id")
    assert _refused(cli, tmp_path, data).startswith("payload is empty")


def test_utf16_text_names_the_encoding_option(cli: Cli, tmp_path: Path) -> None:
    cli("source", "add", "feed", "--key", "id")
    data = "id,v\n1,café\n".encode("utf-16")
    assert _refused(cli, tmp_path, data) == (
        "the payload is UTF-16 text (it starts with a UTF-16 byte-order mark), not UTF-8: "
        "declare its encoding (source add ... --encoding utf-16 --replace)"
    )
    cli("source", "add", "feed", "--key", "id", "--encoding", "utf-16", "--replace")
    path = tmp_path / "g.csv"
    path.write_bytes(data)
    assert "added 1" in cli("ingest", "feed", str(path), "--published-at", "2026-08-02").stdout


@pytest.mark.parametrize(
    ("data", "name"), [(b"id\tv\n1\ta\n", "tab"), (b"id;v\n1;a\n", "';'")], ids=["tab", "semi"]
)
def test_another_delimiter_is_named(cli: Cli, tmp_path: Path, data: bytes, name: str) -> None:
    cli("source", "add", "feed", "--key", "id")
    problem = _refused(cli, tmp_path, data)
    assert problem.startswith("missing key column(s) ['id']; columns present: "), problem
    assert problem.endswith(
        f" -- one column whose name holds {name}: a file separated by {name}? declare it "
        f"with --csv-delimiter {name} (source add ... --replace)"
    ), problem
