"""`GET /api/destinations/{name}/search?q=&limit=` on `serve` (TestClient, both ledger
backends): the same JSON as `search --json`, problem details for an unknown
destination (404), another kind of destination or a bad query (422)."""

from __future__ import annotations

import functools
from pathlib import Path

from fastapi.testclient import TestClient

import feedledger as fl
from feedledger.config import Workspace
from feedledger.server.app import create_app
from helpers import Cli


def test_the_search_endpoint_answers_as_the_command(
    cli: Cli, workspace: Workspace, tmp_path: Path
) -> None:
    csv = tmp_path / "d1.csv"
    csv.write_text("id,name\nx-1,red oak\nx-2,red red maple\nx-3,birch\n")
    cli("source", "add", "trees", "--key", "id", "--format", "csv")
    cli("ingest", "trees", str(csv), "--published-at", "2026-08-01")
    cli("destination", "add", "idx", "--source", "trees", "--tantivy", str(tmp_path / "ix"),
        "--text-fields", "name")  # fmt: skip
    cli("destination", "add", "tbl", "--source", "trees", "--sqlite", str(tmp_path / "t.db"),
        "--table", "t")  # fmt: skip
    cli("manifest", "create", "all", "--source", "trees")
    cli.json("sync", "idx", "--manifest", "all")
    app = create_app(functools.partial(fl.open, workspace.config_path), None)
    with TestClient(app) as client:
        r = client.get("/api/destinations/idx/search", params={"q": "red", "limit": 5})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body == cli.json("search", "idx", "red", "--limit", "5")
        assert [h["key"] for h in body["hits"]] == [["x-2"], ["x-1"]]  # BM25: red twice
        field = client.get("/api/destinations/idx/search", params={"q": "name:birch"}).json()
        assert [h["key"] for h in field["hits"]] == [["x-3"]]
        for url, status in [
            ("/api/destinations/nope/search?q=red", 404),
            ("/api/destinations/tbl/search?q=red", 422),
            ("/api/destinations/idx/search?q=name:(red", 422),
            ("/api/destinations/idx/search?q=red&limit=0", 422),
        ]:
            got = client.get(url)
            assert got.status_code == status, (url, got.text)
            assert got.headers["content-type"] == "application/problem+json"
