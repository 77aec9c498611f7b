"""A warm server (`feedledger serve`) keeps each GIS layer's spatial index built for the
state in force: at start, and again once a payload another process applied moved the
layer on, before an OGC API request asks for it (the request finds it built); on
SQLite and PostgreSQL."""

from __future__ import annotations

import functools
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

import feedledger as fl
from feedledger.api._source import feature_index
from feedledger.config import Workspace
from feedledger.server import app as server_app
from feedledger.server.auth import parse_tokens
from ogc_layers import DAYS, build, collection


def _until(done: Callable[[], bool], what: str, timeout: float = 120.0) -> None:
    # a bound for a stuck follower, not a speed claim
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def test_a_new_state_is_indexed_before_a_request_asks_for_it(
    workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(server_app, "LAYER_FOLLOW_S", 0.05)
    with fl.open(workspace.config_path) as led:
        build(led)
    before = feature_index.CACHE.builds
    app = server_app.create_app(
        functools.partial(fl.open, workspace.config_path), parse_tokens(None), warm=True
    )
    with TestClient(app) as client:
        _until(lambda: feature_index.CACHE.builds == before + 1, "the layer at start")
        first = client.get("/ogc/collections/parcels/items", params={"limit": 100}).json()
        assert "P000" in {f["id"] for f in first["features"]}
        assert feature_index.CACHE.builds == before + 1  # the page found it built
        # another process applies the next day: no P000 any more
        day4 = {k: v for k, v in DAYS[2].items() if k != "P000"}
        payload = tmp_path / "parcels-4.geojson"
        payload.write_bytes(collection(day4))
        subprocess.run(
            [sys.executable, "-m", "feedledger", "--config", str(workspace.config_path),
             "ingest", "parcels", str(payload), "--published-at", "2026-08-06"],
            check=True, capture_output=True, timeout=300,
        )  # fmt: skip
        _until(lambda: feature_index.CACHE.builds == before + 2, "the layer's new state")
        page = client.get("/ogc/collections/parcels/items", params={"limit": 100}).json()
        assert "P000" not in {f["id"] for f in page["features"]}
        assert page["numberMatched"] == len(day4)
        assert feature_index.CACHE.builds == before + 2  # built before the request
        time.sleep(0.3)  # a few more looks at a state already built build nothing
        assert feature_index.CACHE.builds == before + 2
