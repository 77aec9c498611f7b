"""The API calls the CLI's commands now go through, exercised
through the API itself on SQLite and PostgreSQL, and the CLI's layering rule: every CLI
module imports only feedledger.api, feedledger.model and feedledger.cli (the scheduler
command may import feedledger.scheduler), registers its commands with module-level
decorators on cli/app.py's groups, and no command is wrapped by a per-command guard."""

from __future__ import annotations

import ast
import json
import re
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import feedledger as fl
from feedledger.api import workspace as api_ws
from feedledger.api.ledger import open_config
from feedledger.api.results import Gap, Version
from feedledger.api.source import Source
from feedledger.api.windows import one_source
from feedledger.cli.exit_codes import exit_code
from feedledger.demo import PARCEL, SOURCE, build_demo
from feedledger.ledger.failures import Place, translate

CLI = Path(__file__).resolve().parents[2] / "src" / "feedledger" / "cli"
ALLOWED = ("feedledger.api", "feedledger.model", "feedledger.cli")


def _csv(*rows: tuple[str, str]) -> bytes:
    return ("parcel_id,zoning\n" + "".join(f"{k},{z}\n" for k, z in rows)).encode()


@pytest.fixture
def led(store_url: str, tmp_path: Path) -> Any:
    with fl.init(tmp_path / "ws", store=store_url) as ledger:
        ledger.add_source("larimer", key=["parcel_id"], timezone="America/Denver")
        yield ledger


def _imports(path: Path) -> list[str]:
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names]
    return [m for m in found if m == "feedledger" or m.startswith("feedledger.")]


def test_cli_modules_import_only_the_api_model_and_cli() -> None:
    for path in sorted(CLI.rglob("*.py")):  # cli/ and cli/commands/
        # the two long-running faces are started by their commands: the scheduler by
        # `scheduler`, the HTTP server (another face over the API) by `serve`; the demo
        # (a face over the API too) is run by `demo`
        extra = {
            "scheduler_cmds.py": ("feedledger.scheduler",),
            "serve_cmd.py": ("feedledger.server",),
            "demo_cmd.py": ("feedledger.demo",),
        }
        allowed = ALLOWED + extra.get(path.name, ())
        # `feedledger` itself: its public names (`__version__`, the API's re-exports)
        bad = [m for m in _imports(path) if m != "feedledger" and not m.startswith(allowed)]
        assert not bad, f"{path.name} imports {bad}"


def test_cli_commands_register_on_app_groups_without_guards() -> None:
    for path in sorted(CLI.rglob("*.py")):  # cli/ and cli/commands/
        text = path.read_text(encoding="utf-8")
        assert "def register(" not in text, path.name
        assert "@guarded" not in text, path.name
        # no `app.command("x")(fn)` calls: decorators only
        assert not re.search(r"\.command\([^)]*\)\(", text), path.name
        if path.name != "app.py":
            assert "typer.Typer(" not in text, f"{path.name}: groups live in cli/app.py"


def test_error_boundary_is_the_root_group(tmp_path: Path) -> None:
    """Under CliRunner (not main()): one line, the error's exit code, no traceback."""
    from feedledger.cli.main import app

    missing = tmp_path / "nowhere" / "feedledger.toml"
    result = CliRunner().invoke(app, ["--config", str(missing), "runs", "x"])
    assert result.exit_code == exit_code(fl.ConfigError("x"))
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "error:" in result.output and "Traceback" not in result.output
    assert translate(ValueError("not a store error"), Place("sqlite:///x")) is None


def test_workspace_create_schema_and_open_config(store_url: str, tmp_path: Path) -> None:
    ws, created = api_ws.create(tmp_path / "w", store=store_url)
    assert created.config == ws.config_path and created.schema
    assert set(created.to_json()) == {"config", "store", "archive", "schema"}
    state = api_ws.schema_state(ws.config_path)
    assert state.current == state.head == created.schema
    change = api_ws.upgrade_schema(ws.config_path)
    assert (change.before, change.after) == (created.schema, created.schema)
    with open_config(ws.config_path, leave_wal=True) as led:
        assert led.context.leave_wal
        led.add_source("b", key=["id"], fetch=str(tmp_path / "later"))
        led.add_source("a", key=["id"])
        assert [s.name for s in led.sources(by_name=False)] == ["b", "a"]
        assert [s.name for s in led.sources()] == ["a", "b"]
        assert api_ws.missing_fetch_folder(led.source("b").config) == tmp_path / "later"
        assert api_ws.missing_fetch_folder(led.source("a").config) is None


def test_ingest_by_name_keeps_refused_bytes(led: fl.Ledger, tmp_path: Path) -> None:
    payload = tmp_path / "larimer_2026-08-01.csv"
    payload.write_bytes(_csv(("0714-22-1", "R-1")))
    done = led.source("larimer").ingest(payload, published_at="2026-08-01")
    assert done.status == "applied" and done.counts.added == 1
    with pytest.raises(fl.ConfigError) as bad:
        led.source("larimer").ingest(_csv(("0714-22-1", "R-2")), published_at="2026-13-45")
    assert "'larimer'" in str(bad.value)
    with pytest.raises(fl.NotFoundError, match="bytes are kept"):
        led.source("weld", require_declared=False).ingest(
            _csv(("1", "A")), published_at="2026-08-02"
        )
    kept = led.source("larimer").rejected_payloads()  # the archive alone: refused bytes, typed
    assert all(r.source == "larimer" and r.location for r in kept)
    assert [r.to_json()["source"] for r in kept] == [r.source for r in kept]


def test_backfill_replay_callbacks_review_and_gaps(led: fl.Ledger) -> None:
    src = led.source("larimer")
    src.ingest(_csv(("0714-22-1", "R-1")), published_at=date(2026, 8, 1))
    src.archive_add(_csv(("0714-22-1", "MU-2")), published_at="2026-08-04")
    plans: list[Any] = []
    steps: list[Any] = []
    with pytest.raises(fl.ConfigError, match="one source at a time"):
        led.source(one_source(["larimer", "weld"])).backfill("2026-08-02", "2026-08-05")
    report = led.source(one_source(["larimer"])).backfill(
        "2026-08-02",
        date(2026, 8, 5),
        fetch=False,
        on_plan=plans.append,
        progress=lambda done, total, ref: steps.append((done, total, ref)),
    )
    assert isinstance(report, fl.WindowRun) and report.fetched == 0 and not report.notify
    assert isinstance(plans[0], fl.Assessment) and plans[0].source == "larimer"
    assert any(isinstance(ref, fl.Payload) for _d, _t, ref in steps)
    seen: list[Any] = []
    again = led.source("larimer").replay(
        "2026-08-04", on_plan=lambda refs, missing: seen.append(refs)
    )
    assert isinstance(again, fl.WindowRun) and again.retracted_payloads == 1
    assert isinstance(seen[0][0], fl.Payload)
    gap = src.add_gap("2026-08-10", "2026-08-11", "outage")
    line = src.history_with_gaps("0714-22-1")
    assert any(isinstance(i, Gap) for i in line) and isinstance(line[0], Version)
    inside = src.snapshot_gap(valid=date(2026, 8, 10))
    assert inside is not None and inside.gap.start == gap.start
    assert src.snapshot_gap(valid=date(2026, 8, 5)) is None
    with pytest.raises(fl.ConfigError):
        led.review(report.run_id, release=True)  # not held


def test_export_snapshot_and_reindex(led: fl.Ledger, tmp_path: Path) -> None:
    src = led.source("larimer")
    src.ingest(_csv(("0714-22-1", "R-1"), ("0714-22-2", "A")), published_at=date(2026, 8, 1))
    with pytest.raises(fl.ConfigError):
        Source.check_export("xml", None)
    with pytest.raises(fl.ConfigError):
        Source.check_export("csv", tmp_path)
    out = tmp_path / "snap.jsonl"
    assert src.export_snapshot(out, valid=date(2026, 8, 2), format="jsonl") == 2
    assert [json.loads(x)["zoning"] for x in out.read_text().splitlines()] == ["R-1", "A"]
    again = led.reindex_archive()
    assert again.scanned >= 1 and again.added == 0 and again.to_json()["ambiguous"] == []
    files = src.payload_files([tmp_path / "snap.jsonl"], published_at="2026-08-03")
    assert files.files == [out] and files.skipped == []


def test_demo_builder(tmp_path: Path) -> None:
    demo = build_demo(tmp_path / "demo")
    assert len(demo.files) == len(demo.results) and demo.results[0].status == "applied"
    with fl.open(demo.workspace) as led:
        assert led.source(SOURCE).history(PARCEL)
