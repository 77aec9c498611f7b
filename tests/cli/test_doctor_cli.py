"""`feedledger doctor`: exit 0 healthy, 1 with findings (each printed with what, why and
the fix), 2 when the workspace cannot be checked; `--json`'s shape; `--help` teaches
the checks and the exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from feedledger.cli.main import app
from feedledger.config import Workspace
from helpers import Cli, MakeSource

AT = "2026-08-02T12:00:00Z"  # the day after the one publication: nothing due yet


@pytest.fixture
def ingested(cli: Cli, make_source: MakeSource, tmp_path: Path) -> Cli:
    make_source("larimer")
    path = tmp_path / "larimer_2026-08-01.csv"
    path.write_text("parcel_id,zoning\n1,A\n2,B\n", encoding="utf-8")
    cli("ingest", "larimer", str(path))
    return cli


def _skip(cli: Cli) -> list[str]:
    # the test server runs PostgreSQL's defaults (judged in api/workspace/test_doctor_postgres.py)
    return ["--skip", "postgres_settings"] if cli.ws.store_url.startswith("postgres") else []


def test_healthy_exits_0_and_says_so(ingested: Cli) -> None:
    result = ingested("doctor", "--at", AT, *_skip(ingested))
    assert "healthy: every check passed" in result.stdout


def test_findings_exit_1_each_with_what_why_and_fix(ingested: Cli) -> None:
    result = ingested("doctor", "--at", "2026-08-20", *_skip(ingested), expect=1)
    lines = result.stdout.splitlines()
    first = next(i for i, line in enumerate(lines) if "source_stale" in line)
    assert "larimer" in lines[first]
    assert lines[first + 1].strip().startswith("why:")
    assert lines[first + 2].strip().startswith("fix: feedledger ingest larimer")
    assert "1 finding (stale_sources 1)" in result.stdout


def test_json_lists_findings_and_checks(ingested: Cli) -> None:
    args = ("doctor", "--at", "2026-08-20", "--min-free-gb", "1e9", "--sample", "1", "--json")
    got = json.loads(ingested(*args, expect=1).stdout)
    assert got["ok"] is False and got["full"] is False and got["at"] == "2026-08-20T00:00:00Z"
    codes = {f["code"] for f in got["findings"]}
    assert {"source_stale", "disk_low"} <= codes
    assert set(got["findings"][0]) == {"code", "severity", "subject", "what", "why", "fix"}
    checks = {c["check"]: c for c in got["checks"]}
    assert checks["archive"]["note"].startswith("sampled (1 payloads")
    assert set(checks["disk"]) == {"check", "status", "note", "findings"}


def test_a_store_that_cannot_be_reached_exits_2(
    ingested: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FEEDLEDGER_STORE", "postgresql://nobody@127.0.0.1:1/none")
    result = ingested("doctor", expect=2)
    assert result.stderr.startswith("error: cannot check: ")
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_missing_sqlite_store_exits_2(tmp_path: Path) -> None:
    ws = Workspace.create(tmp_path / "ws", store_url=f"sqlite:///{tmp_path}/gone.db", archive=None)
    result = CliRunner().invoke(app, ["--config", str(ws.config_path), "doctor"])
    assert result.exit_code == 2 and "no store at" in result.stderr


def test_no_workspace_exits_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["--config", str(tmp_path / "none.toml"), "doctor"])
    assert result.exit_code == 2 and "cannot check" in result.stderr


def test_help_teaches_the_checks_and_exit_codes() -> None:
    result = CliRunner().invoke(app, ["doctor", "--help"], env={"COLUMNS": "120"})
    assert result.exit_code == 0
    for word in ("state_cache", "stale_sources", "postgres_settings", "--full", "--sample"):
        assert word in result.stdout
    assert "Exit 0: healthy; 1: findings" in " ".join(result.stdout.split())
