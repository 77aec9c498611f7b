"""The entity routes' fast path (server/fastpath.py) on SQLite and PostgreSQL: a plain
`asof`/`history` request is answered before FastAPI's routing, with exactly the bytes
and headers the route itself answers (the route is forced by an extra query parameter,
which the fast path leaves to the app), and anything it does not answer -- errors,
booleans, unknown parameters, other paths -- is the app's own answer."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

import feedledger as fl
from feedledger.config import Workspace
from feedledger.server import fastpath
from feedledger.server.app import create_app
from helpers import BACKENDS, Cli, backend_store, migrate


def _csv(header: str, rows: list[str]) -> bytes:
    return (header + "\n" + "".join(r + "\n" for r in rows)).encode()


@pytest.fixture(scope="module", params=BACKENDS)
def site(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[TestClient, Cli, list[Any]]]:
    """s: ids 0-4 over days 1, 2 and 5 (0 changes, 1 deleted on day 2, 5 added on day
    5), days 3-4 a recorded gap; pair: a compound key with a comma in a value."""
    tmp = tmp_path_factory.mktemp("fast")
    with backend_store(request.param, tmp) as url:
        ws = Workspace.create(tmp / "ws", store_url=url, archive=None)
        migrate(ws.store_url)
        with fl.open(ws.config_path) as led:
            s = led.add_source("s", key=["id"], timezone="UTC")
            day1 = [f"{i},a{i}" for i in range(5)]
            s.ingest(_csv("id,v", day1), published_at="2026-08-01", name="d1.csv")
            day2 = ["0,b0", *day1[2:]]
            s.ingest(_csv("id,v", day2), published_at="2026-08-02", name="d2.csv")
            s.add_gap("2026-08-03", "2026-08-04", "outage")
            s.ingest(_csv("id,v", [*day2, "5,new"]), published_at="2026-08-05", name="d5.csv")
            pair = led.add_source("pair", key=["a", "b"], timezone="UTC")
            pair.ingest(b'a,b,v\nx,1,one\n"y,z",2,two\n', published_at="2026-08-01", name="p.csv")
        taken: list[Any] = []
        app = create_app(functools.partial(fl.open, ws.config_path))
        with TestClient(app) as client:
            yield client, Cli(Workspace.load(ws.config_path)), taken


PLAIN = [
    "/api/sources/s/entities/0/history",
    "/api/sources/s/entities/1/history",
    "/api/sources/s/entities/0/history?known_at=2026-01-01",
    "/api/sources/s/entities/0/history?known_at=2999-01-01",
    "/api/sources/s/entities/0/asof?valid=2026-08-01",
    "/api/sources/s/entities/0/asof?valid=2026-08-02T12:00:00Z",
    "/api/sources/s/entities/1/asof?valid=2026-08-02",  # deleted: absent
    "/api/sources/s/entities/0/asof?valid=2026-08-03",  # in the gap: not_observed
    "/api/sources/s/entities/5/asof?valid=2026-08-04",  # in the gap, added after it
    "/api/sources/s/entities/0/asof?valid=2026-07-01",  # before its first version
    "/api/sources/s/entities/0/asof?valid=2026-08-02&known_at=2000-01-01",  # not_known
    "/api/sources/s/entities/0/asof?valid=2026-08-02&known_at=",
    "/api/sources/pair/entities/y%5C,z,2/history",
    "/api/sources/pair/entities/%5B%22y,z%22,%222%22%5D/history",
    "/api/sources/pair/entities/x,1/asof?valid=2026-08-02",
]

LEFT_TO_THE_APP = [
    ("/api/sources/s/entities/nobody/history", 404),
    ("/api/sources/s/entities/nobody/asof?valid=2026-08-02", 404),  # as history
    ("/api/sources/nope/entities/0/history", 404),
    ("/api/sources/s/entities/0/asof", 422),
    ("/api/sources/s/entities/0/asof?valid=", 422),
    ("/api/sources/s/entities/0/asof?valid=yesterday", 422),
    ("/api/sources/s/entities/0/asof?valid=2026-08-02&valid=2026-08-01", 200),
    ("/api/sources/s/entities/0/history?all=true", 200),
    ("/api/sources/s/entities/0/history?with_gaps=1", 200),
    ("/api/sources/pair/entities/x/history", 422),
    ("/api/sources/s/entities/0/versions", 404),
]


def _spy(monkeypatch: pytest.MonkeyPatch, taken: list[Any]) -> None:
    real = fastpath.answer

    def answer(scope: Any) -> Any:
        found = real(scope)
        taken.append((scope["path"], found is not None))
        return found

    monkeypatch.setattr(fastpath, "answer", answer)


@pytest.mark.parametrize("url", PLAIN)
def test_the_fast_path_answers_as_the_route(
    site: tuple[TestClient, Cli, list[Any]], url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    client, _cli, taken = site
    _spy(monkeypatch, taken)
    taken.clear()
    fast = client.get(url)
    assert taken == [(fast.request.url.path, True)]  # answered by the fast path
    slow = client.get(url + ("&" if "?" in url else "?") + "_route=1")
    assert taken[1][1] is False  # an unknown parameter: the route answered
    assert (fast.status_code, fast.content) == (slow.status_code, slow.content) and fast.is_success
    assert fast.headers.items() == slow.headers.items()


@pytest.mark.parametrize(("url", "status"), LEFT_TO_THE_APP)
def test_what_the_fast_path_leaves_is_the_apps_answer(
    site: tuple[TestClient, Cli, list[Any]],
    url: str,
    status: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    client, _cli, taken = site
    _spy(monkeypatch, taken)
    taken.clear()
    r = client.get(url)
    assert r.status_code == status, r.text
    assert [t for _p, t in taken] in ([False], [])  # [] : not an entity route at all
    if status != 200:
        assert r.headers["content-type"] == "application/problem+json"


def test_the_answers_are_the_cli_json(site: tuple[TestClient, Cli, list[Any]]) -> None:
    client, cli, _taken = site
    assert client.get("/api/sources/s/entities/0/history").json() == cli.json("history", "s", "0")
    for day in ("2026-08-02", "2026-08-03", "2026-08-05"):
        got = client.get(f"/api/sources/s/entities/0/asof?valid={day}").json()
        assert got == cli.json("asof", "s", "0", "--valid", day)
    assert client.get("/api/sources/s/entities/0/asof?valid=2026-08-03").json()["status"] == (
        "not_observed"
    )
