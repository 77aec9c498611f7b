"""A `--published-at` of the right shape that no calendar holds (2026-02-30, month 13,
year 0) says so -- "2026-02-30 is no day on the calendar" -- instead of asking for the
YYYY-MM-DD it already is. Exit 2, one line, nothing applied. Both backends (`cli`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import Cli


@pytest.mark.parametrize(
    ("given", "day"),
    [
        ("2026-02-30", "2026-02-30"),
        ("2025-02-29", "2025-02-29"),
        ("2026-13-01", "2026-13-01"),
        ("0000-01-01", "0000-01-01"),
        ("2026-02-30T10:00:00Z", "2026-02-30"),
    ],
)
def test_an_impossible_day_is_named(cli: Cli, tmp_path: Path, given: str, day: str) -> None:
    cli("source", "add", "feed", "--key", "id")
    path = tmp_path / "f.csv"
    path.write_bytes(b"id,v\n1,a\n")
    result = cli("ingest", "feed", str(path), "--published-at", given, expect=2)
    (line,) = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert f"cannot parse --published-at '{given}': {day} is no day on the calendar" in line
    assert cli.json("runs", "feed") == []


def test_a_malformed_date_still_shows_the_expected_form(cli: Cli, tmp_path: Path) -> None:
    cli("source", "add", "feed", "--key", "id")
    path = tmp_path / "f.csv"
    path.write_bytes(b"id,v\n1,a\n")
    result = cli("ingest", "feed", str(path), "--published-at", "2026-8-1", expect=2)
    assert "expected YYYY-MM-DD or an ISO-8601 timestamp" in result.stderr
