"""The dashboard's JSON and pages without a browser: a source's publication
calendar (api/calendar.py; one cell per expected publication day: live, backfill, held,
retracted, gap, late, waiting, missed) on both backends, its endpoint's errors as
problem details, the page shells (stable URLs, escaped parameters, CSP) and the static
files (nothing outside server/static/)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

import feedledger as fl
from feedledger.api.calendar import DayState
from feedledger.server.app import create_app
from feedledger.server.assets import version
from feedledger.server.auth import Token


def _csv(values: dict[int, str], n: int = 30) -> bytes:
    return ("id,v\n" + "".join(f"{i},{values.get(i, 'a')}\n" for i in range(n))).encode()


@pytest.fixture
def led(store_url: str, tmp_path: Path) -> Iterator[fl.Ledger]:
    with fl.init(tmp_path / "ws", store=store_url) as ledger:
        ledger.add_source(
            "s", key=["id"], timezone="America/Denver", cadence="daily",
            hold_factor=5, hold_min_changes=10,
        )  # fmt: skip
        yield ledger


def _build(led: fl.Ledger) -> dict[str, Any]:
    src = led.source("s")
    d = lambda day: date(2026, 8, day)  # noqa: E731
    runs: dict[str, Any] = {}
    runs["1"] = src.ingest(_csv({}), published_at=d(1)).run_id
    runs["2"] = src.ingest(_csv({0: "b"}), published_at=d(2)).run_id
    src.archive_add(_csv({0: "c"}), published_at=d(4), name="s_2026-08-04.csv")
    src.archive_add(_csv({0: "d"}), published_at=d(5), name="s_2026-08-05.csv")
    back = src.backfill(d(3), d(5), fetch=False)  # the 3rd: nothing archived, a gap
    runs["backfill"] = back.run_id  # type: ignore[union-attr]
    runs["7"] = src.ingest(_csv({0: "e"}), published_at=d(7)).run_id
    src.archive_add(_csv({0: "f"}), published_at=d(6), name="s_2026-08-06.csv")  # late
    wrong = src.ingest(_csv({0: "g"}), published_at=d(8)).run_id
    led.retract(str(wrong))
    runs["8"] = wrong
    held = src.ingest(_csv({i: "z" for i in range(30)}), published_at=d(9))
    assert held.held_for_review
    runs["9"] = held.run_id
    src.archive_add(_csv({0: "h"}), published_at=d(11), name="s_2026-08-11.csv")  # waiting
    return runs


def test_calendar_cells(led: fl.Ledger) -> None:
    runs = _build(led)
    cal = led.source("s").calendar(date(2026, 8, 1), date(2026, 8, 12))
    cells = {c.day.day: c for c in cal.days}
    assert sorted(cells) == list(range(1, 13))  # daily: every day, each once
    states = {day: c.state for day, c in cells.items()}
    assert states == {
        1: DayState.LIVE, 2: DayState.LIVE, 3: DayState.GAP, 4: DayState.BACKFILL,
        5: DayState.BACKFILL, 6: DayState.LATE, 7: DayState.LIVE, 8: DayState.RETRACTED,
        9: DayState.HELD, 10: DayState.MISSED, 11: DayState.WAITING, 12: DayState.MISSED,
    }  # fmt: skip
    assert cells[1].run_id == runs["1"] and cells[7].run_id == runs["7"]
    assert cells[4].run_id == cells[5].run_id == runs["backfill"]
    assert cells[8].run_id == runs["8"] and cells[9].run_id == runs["9"]
    gap = led.source("s").gaps()[0]
    assert cells[3].run_id == gap.run_id and cells[3].gap_reason == gap.reason
    assert cells[10].run_id is None and cells[6].payload_id is not None
    data = cal.to_json()
    assert data["days"][0] == {
        "day": "2026-08-01", "expected": True, "state": "live", "run_id": runs["1"],
        "payload_id": cells[1].payload_id, "published_at": "2026-08-01T06:00:00+00:00",
        "recorded_at": cells[1].recorded_at.isoformat(),  # type: ignore[union-attr]
        "gap_reason": None,
    }  # fmt: skip
    # the default window: from the first publication to today (a year and a day at most)
    whole = led.source("s").calendar()
    assert whole.start == date(2026, 8, 1) and len(whole.days) == (whole.end - whole.start).days + 1


def test_weekday_cadence_keeps_a_publication_off_the_cadence(led: fl.Ledger) -> None:
    led.add_source("w", key=["id"], timezone="UTC", cadence="weekdays")
    src = led.source("w")
    src.ingest(_csv({}, 3), published_at=date(2026, 8, 7))  # a Friday
    src.ingest(_csv({0: "b"}, 3), published_at=date(2026, 8, 8))  # a Saturday
    cal = led.source("w").calendar(date(2026, 8, 7), date(2026, 8, 10))
    assert [(c.day.day, c.expected, c.state.value) for c in cal.days] == [
        (7, True, "live"), (8, False, "live"), (10, True, "missed"),
    ]  # fmt: skip


@pytest.fixture
def client(led: fl.Ledger, tmp_path: Path) -> Iterator[TestClient]:
    _build(led)
    pair = led.add_source("pair", key=["a", "b"], timezone="UTC")  # a compound key
    pair.ingest(b"a,b,v\n08,0714,x\n", published_at="2026-08-01", name="p.csv")
    app = create_app(lambda: fl.open(tmp_path / "ws"), [Token("ops", "secret")])
    with TestClient(app) as c:
        yield c


def test_calendar_endpoint_and_its_errors(client: TestClient, led: fl.Ledger) -> None:
    got = client.get("/api/sources/s/calendar", params={"from": "2026-08-01", "to": "2026-08-12"})
    assert got.status_code == 200
    assert got.json() == led.source("s").calendar(date(2026, 8, 1), date(2026, 8, 12)).to_json()
    missing = client.get("/api/sources/nope/calendar")
    assert missing.status_code == 404
    assert missing.headers["content-type"].startswith("application/problem+json")
    assert client.get("/api/sources/s/calendar", params={"from": "08/01"}).status_code == 422
    assert client.get("/api/dashboard").json() == {"writes": True}


def test_pages_and_static_files(client: TestClient, led: fl.Ledger, tmp_path: Path) -> None:
    run = client.get("/api/runs", params={"limit": 1}).json()["runs"][0]["run_id"]
    led.add_destination("search", source="s", table="t", sqlite=tmp_path / "dest.db")
    for path, page in [
        ("/", "board"),
        ("/sources/s", "source"),
        ("/sources/s/entities/0", "entity"),
        (f"/runs/{run}", "run"),
        (f"/runs/{run[:8]}", "run"),
        ("/destinations/search", "destination"),
        ("/review", "review"),
    ]:
        got = client.get(path)
        assert got.status_code == 200 and f'data-page="{page}"' in got.text
        assert "default-src 'self'" in got.headers["content-security-policy"]
        assert "http://" not in got.text and "https://" not in got.text  # no CDN
    # parameters are data attributes, escaped (on the not-found page too); a compound
    # key's JSON array passes whole
    evil = client.get('/sources/s/entities/"><script>alert(1)</script>')
    assert evil.status_code == 404
    assert "<script>alert" not in evil.text and "&lt;script&gt;" in evil.text
    got = client.get("/sources/pair/entities/%5B%2208%22%2C%220714%22%5D")
    assert got.status_code == 200
    assert 'data-key="[&quot;08&quot;,&quot;0714&quot;]"' in got.text
    js = client.get("/static/js/app.js")
    assert js.status_code == 200 and js.headers["content-type"].startswith("text/javascript")
    assert client.get("/static/app.css").headers["content-type"].startswith("text/css")
    for bad in ("/static/../pages.py", "/static/%2e%2e/pages.py", "/static/shell.py"):
        assert client.get(bad).status_code == 404
    assert client.get(f"/static/{version()}/../pages.py").status_code == 404


def test_assets_are_stamped_preloaded_and_cached(client: TestClient) -> None:
    """The shell (never cached) names its assets under the version stamp and preloads
    the page's module graph; stamped files are cached for a year, unstamped revalidated."""
    got = client.get("/")
    assert got.headers["cache-control"] == "no-cache"
    stamp = f"/static/{version()}"
    assert f'<script type="module" src="{stamp}/js/app.js">' in got.text
    for module in ("app.js", "board.js", "api.js", "dom.js"):
        assert f'<link rel="modulepreload" href="{stamp}/js/{module}">' in got.text
    assert "geometry.js" not in got.text  # only the page's own graph
    assert '<link rel="preload" href="/api/health" as="fetch" crossorigin>' in got.text
    assert (
        'rel="modulepreload" href="' + stamp + '/js/geometry.js"'
        in client.get("/sources/s/entities/0").text
    )
    stamped = client.get(f"{stamp}/js/board.js")
    assert stamped.status_code == 200
    assert stamped.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert stamped.content == client.get("/static/js/board.js").content
    assert client.get("/static/js/board.js").headers["cache-control"] == "no-cache"
    assert client.get("/static/v000000000000/js/board.js").headers["cache-control"] == "no-cache"


def test_pages_under_a_root_path(led: fl.Ledger, tmp_path: Path) -> None:
    """Behind a reverse proxy (`serve --root-path /fl`) every link and asset of the
    shell is under the prefix, and the page scripts take it from data-root."""
    app = create_app(lambda: fl.open(tmp_path / "ws"), [])
    with TestClient(app, root_path="/fl") as c:
        text = c.get("/sources/s").text
    stamp = f"/fl/static/{version()}"
    assert 'data-root="/fl"' in text and f'src="{stamp}/js/app.js"' in text
    assert f'href="{stamp}/app.css"' in text and 'href="/fl/review"' in text
    assert 'href="/static' not in text and 'href="/"' not in text


def test_the_review_flag_is_off_without_a_token(led: fl.Ledger, tmp_path: Path) -> None:
    app = create_app(lambda: fl.open(tmp_path / "ws"), [])
    with TestClient(app) as c:
        assert c.get("/api/dashboard").json() == {"writes": False}


def test_not_found_is_a_problem_for_the_api_and_a_page_for_page_urls(
    client: TestClient,
) -> None:
    """An unknown static file or API path answers an RFC 9457 problem (404); a page URL
    naming no page, the dashboard's own not-found page (404, the shell)."""
    for path in ("/static/js/nope.js", f"/static/{version()}/nope.css", "/api/nope", "/api"):
        got = client.get(path)
        assert got.status_code == 404, path
        assert got.headers["content-type"].startswith("application/problem+json"), path
        problem = got.json()
        assert problem["status"] == 404 and problem["type"].endswith(":not-found"), path
        assert problem["instance"] == path and problem["detail"]
        assert "/work" not in problem["detail"] and "site-packages" not in problem["detail"]
    for path in ("/nope", "/sources/s/nope/more", "/runs"):
        got = client.get(path)
        assert got.status_code == 404, path
        assert got.headers["content-type"].startswith("text/html"), path
        assert 'data-page="notfound"' in got.text and f'data-path="{path}"' in got.text
        assert "default-src 'self'" in got.headers["content-security-policy"]
    assert client.head("/nope").status_code == 404
    # a pasted URL naming a source, run or destination there is none of: the same
    # page, with the reason
    for path, reason in [
        ("/sources/nope", "unknown source"),
        ("/sources/nope/entities/k", "unknown source"),
        ("/sources/s/entities/nobody", "nobody"),
        ("/runs/deadbeef", "unknown run id"),
        ("/destinations/nope", "no destination named"),
    ]:
        got = client.get(path)
        assert got.status_code == 404 and 'data-page="notfound"' in got.text, path
        assert reason in got.text, (path, got.text)


def test_openapi_pages_load_nothing_from_outside(client: TestClient) -> None:
    """/docs (Swagger UI) loads its script and stylesheet from this process (the assets
    the fastapi-offline package ships), never from a CDN; ReDoc (which cannot) is off."""
    for path in ("/docs",):
        got = client.get(path)
        assert got.status_code == 200 and got.headers["content-type"].startswith("text/html")
        assert "http://" not in got.text and "https://" not in got.text, path
        assets = re.findall(r'(?:src|href)="([^"]+)"', got.text)
        assert assets and all(a.startswith("/") for a in assets), assets
        for asset in assets:
            loaded = client.get(asset)
            assert loaded.status_code == 200 and len(loaded.content) > 0, asset
    js = client.get(re.findall(r'src="([^"]+)"', client.get("/docs").text)[0])
    assert js.headers["content-type"].startswith("text/javascript")
    assert js.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert "SwaggerUIBundle" in js.text
    assert client.get("/docs/assets/0/nope.js").status_code == 404
    assert client.get("/docs/oauth2-redirect").status_code == 200
    assert client.get("/redoc").status_code == 404
    openapi = client.get("/openapi.json").json()
    assert openapi["paths"]["/api/health"]
    # the writes declare their bearer token: /docs offers "Authorize" and sends it
    assert openapi["components"]["securitySchemes"]["token"]["scheme"] == "bearer"
    assert openapi["paths"]["/api/runs/{run_id}/review"]["post"]["security"] == [{"token": []}]
    assert "security" not in openapi["paths"]["/api/health"]["get"]
