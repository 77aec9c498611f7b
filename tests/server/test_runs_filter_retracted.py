"""`/api/runs?status=retracted` (and `runs_page(status="retracted")`) lists the runs the
API, the CLI and the dashboard show as retracted -- every write of theirs retracted
(`retracted_at` set), whatever status they ended with -- besides the held runs a review
retracted; a run only partly retracted (by a replay) or still standing is not listed.
SQLite and PostgreSQL."""

from __future__ import annotations

import functools
from datetime import date

from fastapi.testclient import TestClient

import feedledger as fl
from feedledger.config import Workspace
from feedledger.server.app import create_app
from feedledger.server.auth import parse_tokens


def _csv(v: str) -> bytes:
    return f"id,v\na,{v}\n".encode()


def test_status_retracted_lists_the_runs_shown_as_retracted(workspace: Workspace) -> None:
    with fl.open(workspace.config_path) as led:
        s = led.add_source("s", key=["id"], timezone="UTC")
        standing = s.ingest(_csv("1"), published_at=date(2026, 8, 1)).run_id
        for day in (2, 3):
            s.archive_add(_csv(str(day)), published_at=date(2026, 8, day))
        window = s.backfill(date(2026, 8, 2), date(2026, 8, 3), fetch=False)
        assert isinstance(window, fl.WindowRun)
        replay = s.replay(date(2026, 8, 3))  # retracts the backfill's 3rd only: partly
        assert isinstance(replay, fl.WindowRun)
        later = s.ingest(_csv("4"), published_at=date(2026, 8, 4)).run_id
        led.retract(later)
        shown = {r.run_id: r for r in led.source("s").runs()}
        assert shown[later].retracted_at is not None
        assert shown[window.run_id].retracted_at is None and shown[window.run_id].retracted_by
        listed = [r.run_id for r in led.runs_page(status="retracted").runs]
        assert listed == [later]
        assert standing not in listed
    app = create_app(functools.partial(fl.open, workspace.config_path), parse_tokens(None))
    with TestClient(app) as client:
        got = client.get("/api/runs?status=retracted")
        assert got.status_code == 200
        assert [r["run_id"] for r in got.json()["runs"]] == [later]
        assert got.json()["runs"][0]["retracted_at"] is not None
        both = client.get("/api/runs?status=succeeded").json()["runs"]
        assert later in [r["run_id"] for r in both]  # how it ended is unchanged
