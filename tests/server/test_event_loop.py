"""The HTTP server never reads the store on its event loop: an entity request the fast
path leaves to the app (`?with_gaps=`, `?all=`, an extra parameter) reads in a thread,
so a slow read does not hold up the other requests. SQLite and PostgreSQL.

A slow read is injected (it waits until the test lets it go); while it waits, fast
requests -- one the fast path answers on the loop, one a plain route answers in the
threadpool -- must complete. Were the slow read on the loop, nothing else could run
until it gave up waiting, and the order recorded would be the other way round.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

import feedledger as fl
from feedledger.config import Workspace
from feedledger.server.app import create_app
from feedledger.server.routes import sources as routes_sources
from helpers import migrate

HANG_S = 20  # the slow read gives up waiting after this (only if the loop is blocked)
FAST = ["/api/sources/s/entities/0/asof?valid=2026-08-01", "/api/health", "/api/sources"]


@pytest.fixture
def client(store_url: str, tmp_path: Path) -> Iterator[TestClient]:
    ws = Workspace.create(tmp_path / "ws", store_url=store_url, archive=None)
    migrate(ws.store_url)
    with fl.open(ws.config_path) as led:
        s = led.add_source("s", key=["id"], timezone="UTC")
        s.ingest(b"id,v\n0,a\n1,b\n", published_at="2026-08-01", name="d1.csv")
        s.add_gap("2026-08-02", "2026-08-03", "outage")
    app = create_app(functools.partial(fl.open, ws.config_path))
    with TestClient(app) as c:
        yield c


@pytest.mark.parametrize(
    ("url", "body"),
    [
        ("/api/sources/s/entities/0/history?with_gaps=true", "history_body"),
        ("/api/sources/s/entities/0/history?all=true", "history_body"),
        ("/api/sources/s/entities/0/asof?valid=2026-08-01&_route=1", "asof_body"),
    ],
)
def test_a_slow_entity_read_does_not_hold_up_other_requests(
    client: TestClient, url: str, body: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = getattr(routes_sources, body)
    entered, release = threading.Event(), threading.Event()
    order: list[str] = []

    def slow(*args: Any) -> Any:
        entered.set()
        order.append("slow read" if release.wait(HANG_S) else "slow read gave up")
        return real(*args)

    monkeypatch.setattr(routes_sources, body, slow)
    answers: list[Any] = []
    waiting = threading.Thread(target=lambda: answers.append(client.get(url)))
    waiting.start()
    try:
        assert entered.wait(60), "the slow request never reached its read"
        for fast in FAST:
            got = client.get(fast)
            assert got.status_code == 200, got.text
            order.append(fast)
    finally:
        release.set()
        waiting.join(60)
    assert order == [*FAST, "slow read"]
    (slow_answer,) = answers
    monkeypatch.setattr(routes_sources, body, real)
    assert slow_answer.status_code == 200
    assert slow_answer.content == client.get(url).content
