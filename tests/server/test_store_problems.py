"""The HTTP API answers a statement the store refuses as the same problem response as
any store error (server/problems.py's one table): 503 `store-unavailable`, the
one-line message as its detail, no traceback and no 500."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text

import feedledger as fl
from feedledger.config import Workspace
from feedledger.server.app import create_app
from helpers import MakeSource, write_csv


def test_a_refused_read_is_a_store_unavailable_problem(
    workspace: Workspace, make_source: MakeSource, tmp_path: Path
) -> None:
    make_source("larimer", "parcel_id")
    csv = write_csv(tmp_path / "larimer_2026-08-01.csv", ["parcel_id", "owner"], [["P-1", "a"]])
    with fl.open(workspace.root) as led:
        led.source("larimer").ingest(csv, published_at=date(2026, 8, 1))
    engine = create_engine(workspace.store_url.replace("postgresql://", "postgresql+psycopg://"))
    with engine.begin() as conn:
        conn.execute(text("ALTER TABLE versions RENAME TO versions_gone"))
    engine.dispose()
    app = create_app(lambda: fl.open(workspace.config_path))
    with TestClient(app, raise_server_exceptions=False) as client:
        for path in (
            "/api/sources/larimer/entities/P-1/history",
            "/api/sources/larimer/entities/P-1/asof?valid=2026-08-02",
        ):
            answer = client.get(path)
            problem = answer.json()
            assert answer.status_code == 503, (path, problem)
            assert problem["type"] == "urn:feedledger:problem:store-unavailable", problem
            assert "versions" in problem["detail"] and "\n" not in problem["detail"]
