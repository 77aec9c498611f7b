"""A CSV field holding a quote without being quoted is refused naming that field and
showing the field itself quoted as it should be -- in the header as in a row (the
header's advice once showed a fixed example, `"i""d"`, whatever the field was). One
line, exit 4, the bytes kept. Both backends (`cli`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import Cli


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (
            b'id,v"x\n1,a\n',
            "header field 'v\"x' holds a quote but is not quoted (quote the whole field "
            'and double the quote inside: "v""x")',
        ),
        (
            b'id,v\n1,a"b\n',
            "row 1 (line 2): field 'a\"b' holds a quote but is not quoted (quote the whole "
            'field and double the quote inside: "a""b")',
        ),
    ],
    ids=["header", "row"],
)
def test_a_stray_quote_is_shown_quoted_as_it_should_be(
    cli: Cli, tmp_path: Path, data: bytes, problem: str
) -> None:
    cli("source", "add", "feed", "--key", "id")
    path = tmp_path / "f.csv"
    path.write_bytes(data)
    result = cli("ingest", "feed", str(path), "--published-at", "2026-08-01", expect=4)
    (line,) = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert line.startswith(
        f"error: source 'feed', payload f.csv: cannot parse CSV: {problem}; the bytes are kept at "
    ), line
