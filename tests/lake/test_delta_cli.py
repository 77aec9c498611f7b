"""`feedledger export delta|status` as a user meets it: `--help` that teaches, one-line
errors with the existing exit codes (an unknown source 3, a URI that is neither a folder
nor s3:// 2, the extra missing 2), nothing written by a refused call, `export status`
before and after."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from helpers import Cli
from lake.delta_scenario import SRC, declare, export, ingest


def one_line(result: object) -> str:
    lines = str(result.stderr).strip().splitlines()  # type: ignore[attr-defined]
    assert len(lines) == 1 and lines[0].startswith("error:"), lines
    return lines[0]


def test_help_teaches(cli: Cli) -> None:
    text = " ".join(cli("export", "delta", "--help").stdout.split())
    for words in ("--to", "s3://", "--follow", "ONE Delta commit", "valid_to", "--json"):
        assert words in text, words
    assert "Delta Lake" in cli("export", "--help").stdout


def test_refusals_are_one_line_and_write_nothing(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    declare(cli)
    ingest(cli, tmp_path, "2025-08-01")
    lake = tmp_path / "lake"
    unknown = cli("export", "delta", "nope", "--to", str(lake), expect=3)
    assert "nope" in one_line(unknown)
    scheme = cli("export", "delta", SRC, "--to", "gs://bucket/t", expect=2)
    assert "s3://" in one_line(scheme)
    monkeypatch.setitem(sys.modules, "deltalake", None)  # the extra not installed
    missing = cli("export", "delta", SRC, "--to", str(lake), expect=2)
    assert "feedledger[delta]" in one_line(missing)
    monkeypatch.undo()
    assert not lake.exists()
    assert cli.json("export", "status") == []
    assert "no Delta exports yet" in cli("export", "status").stdout


def test_status_and_human_output(cli: Cli, tmp_path: Path) -> None:
    declare(cli)
    ingest(cli, tmp_path, "2025-08-01")
    lake = str(tmp_path / "lake")
    text = cli("export", "delta", SRC, "--to", lake).stdout
    assert "committed version 0" in text and "3 rows written" in text
    assert "up to date" in cli("export", "delta", SRC, "--to", lake).stdout
    [status] = cli.json("export", "status", "--to", lake)
    assert (status["source"], status["delta_version"], status["follow"]) == (SRC, 0, False)
    assert status["target"] == lake
    assert export(cli, lake)["committed"] is False
