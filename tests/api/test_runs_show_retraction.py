"""A retracted run is shown as retracted (when, by which run) wherever runs are listed:
`runs` (human and --json), `Ledger.runs`, `/api/runs`, `/api/sources/{s}` and
`/api/runs/{id}`; a cascaded retraction marks every run it hit; a replay that retracts
part of a run marks it partly retracted. SQLite and PostgreSQL. (The dashboard's runs
table: server/test_dashboard_runs_and_ticks.py.)"""

from __future__ import annotations

import functools
from datetime import date

from fastapi.testclient import TestClient

import feedledger as fl
from feedledger.config import Workspace
from feedledger.server.app import create_app
from feedledger.server.auth import parse_tokens
from helpers import Cli


def _csv(v: str) -> bytes:
    return f"id,v\na,{v}\nb,{v}\n".encode()


def test_a_retracted_run_says_so_everywhere(workspace: Workspace) -> None:
    with fl.open(workspace.config_path) as led:
        src = led.add_source("s", key=["id"], timezone="UTC")
        first = src.ingest(_csv("1"), published_at=date(2026, 8, 1))
        second = src.ingest(_csv("2"), published_at=date(2026, 8, 2))
        third = src.ingest(_csv("3"), published_at=date(2026, 8, 3))
        undo = led.retract(str(second.run_id), cascade=True)  # the 2nd and the 3rd
        runs = {r.run_id: r for r in led.source("s").runs()}
        for hit in (second.run_id, third.run_id):
            run = runs[str(hit)]
            assert run.retracted and run.status is fl.RunStatus.SUCCEEDED
            assert run.retracted_by == [undo.run_id]
            assert run.retracted_at is not None and run.retracted_at.tzinfo is not None
        kept = runs[str(first.run_id)]
        assert not kept.retracted and kept.retracted_at is None and kept.retracted_by == []
        retraction = runs[undo.run_id]
        assert retraction.kind is fl.RunKind.RETRACTION and not retraction.retracted
    cli = Cli(workspace)
    items = {r["run_id"]: r for r in cli.json("runs", "s")}
    assert items[str(second.run_id)]["retracted_by"] == [undo.run_id]
    assert (
        items[str(second.run_id)]["retracted_at"]
        == runs[str(second.run_id)].to_json()["retracted_at"]
    )
    assert items[str(first.run_id)]["retracted_at"] is None
    assert items[str(first.run_id)]["retracted_by"] == []
    human = cli("runs", "s").stdout
    lines = human.splitlines()
    at = next(i for i, line in enumerate(lines) if str(second.run_id)[:8] in line)
    row = " ".join(lines[at : at + 2])  # the status cell may wrap onto a second line
    assert "retracted" in row and undo.run_id[:8] in row, human
    assert not any(
        "retracted" in line for line in human.splitlines() if str(first.run_id)[:8] in line
    )
    app = create_app(functools.partial(fl.open, workspace.config_path), parse_tokens(None))
    with TestClient(app) as client:
        page = {r["run_id"]: r for r in client.get("/api/runs?source=s").json()["runs"]}
        assert page[str(third.run_id)]["retracted_by"] == [undo.run_id]
        assert page[str(third.run_id)]["retracted_at"] == items[str(third.run_id)]["retracted_at"]
        one = {r["run_id"]: r for r in client.get("/api/sources/s").json()["runs"]}
        assert one[str(second.run_id)]["retracted_at"] is not None
        detail = client.get(f"/api/runs/{third.run_id}").json()
        assert detail["retracted"] is True and detail["retracted_by"] == [undo.run_id]
        assert detail["retracted_at"] == items[str(third.run_id)]["retracted_at"]


def test_a_replay_marks_the_run_it_retracts_part_of(workspace: Workspace) -> None:
    with fl.open(workspace.config_path) as led:
        src = led.add_source("s", key=["id"], timezone="UTC")
        src.ingest(_csv("1"), published_at=date(2026, 8, 1))
        for day in (2, 3, 4):
            src.archive_add(_csv(str(day)), published_at=date(2026, 8, day))
        back = src.backfill(date(2026, 8, 2), date(2026, 8, 4), fetch=False)
        assert isinstance(back, fl.WindowRun)
        again = src.replay(date(2026, 8, 3))
        assert isinstance(again, fl.WindowRun)
        run = next(r for r in led.source("s").runs() if r.run_id == back.run_id)
        # the 2nd still stands: partly retracted, by the replay
        assert run.retracted_by == [again.run_id] and run.retracted_at is None
        assert not run.retracted
    human = Cli(workspace)("runs", "s").stdout
    lines = human.splitlines()
    at = next(i for i, line in enumerate(lines) if back.run_id[:8] in line)
    assert "partly" in " ".join(lines[at : at + 2]), human
