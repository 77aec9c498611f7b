"""OpenAPI documents what `asof` and `history` answer for a key the source never had
(and an unknown source): 404 with a problem document, as the routes answer it.
SQLite and PostgreSQL."""

from __future__ import annotations

import functools
from datetime import date

from fastapi.testclient import TestClient

import feedledger as fl
from feedledger.config import Workspace
from feedledger.server.app import create_app
from feedledger.server.auth import parse_tokens

PATHS = (
    "/api/sources/{source}/entities/{key}/asof",
    "/api/sources/{source}/entities/{key}/history",
)


def test_asof_and_history_document_and_answer_404_for_a_key_never_had(
    workspace: Workspace,
) -> None:
    with fl.open(workspace.config_path) as led:
        s = led.add_source("s", key=["id"], timezone="UTC")
        s.ingest(b"id,v\na,1\n", published_at=date(2026, 8, 1))
    app = create_app(functools.partial(fl.open, workspace.config_path), parse_tokens(None))
    with TestClient(app) as client:
        spec = client.get("/openapi.json").json()
        for path in PATHS:
            documented = spec["paths"][path]["get"]["responses"]
            assert "404" in documented, path
            assert "application/problem+json" in documented["404"]["content"]
            assert "never had" in documented["404"]["description"]
        for url in (
            "/api/sources/s/entities/zz/asof?valid=2026-08-02",
            "/api/sources/s/entities/zz/history",
            "/api/sources/nosuch/entities/a/asof?valid=2026-08-02",
            "/api/sources/nosuch/entities/a/history",
        ):
            got = client.get(url)
            assert got.status_code == 404, (url, got.text)
            assert got.headers["content-type"] == "application/problem+json"
            assert got.json()["type"] == "urn:feedledger:problem:not-found"
