"""The dashboard in a real Chromium: Debian's `chromium` driven by Playwright
over `feedledger serve` on a free 127.0.0.1 port, the workspace built by the demo plus a
gap, a backfill, a destination and a burst held for review. Each page opens without a
console error (screenshots under tests/artefacts/dashboard/), the entity timeline has
one rectangle per version of `history --all --json`, the calendar's cells agree with
`gaps --json` and `runs --json`, and a held run released on the review page reaches a
webhook receiver. One browser and one server for the module; SQLite (the API tests run
both backends)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import pytest

import feedledger as fl
from browser_support import (
    ARTEFACTS,
    SKIP_NO_CHROMIUM,
    Receiver,
    Served,
    chromium,
    cli_json,
    serve,
    webhook_receiver,
)
from feedledger.model.jsonout import dumps

CHROMIUM = chromium()
if CHROMIUM is None and os.environ.get("FEEDLEDGER_REQUIRE_BROWSER"):
    raise RuntimeError(SKIP_NO_CHROMIUM)  # CI (.ci/run) must run these, never skip them
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason=SKIP_NO_CHROMIUM)

TOKEN_ENV = "FEEDLEDGER_TEST_DASHBOARD_TOKENS"
TOKEN = "t0ken-for-the-browser"
LABEL = "ops"
PARCEL = "0714-22-1"


@pytest.fixture(scope="module")
def shots() -> Path:
    folder = Path(os.environ.get("FEEDLEDGER_TEST_ARTEFACTS") or ARTEFACTS) / "dashboard"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _csv(rows: dict[int, str]) -> bytes:
    return ("id,v\n" + "".join(f"{i},{rows.get(i, 'a')}\n" for i in range(30))).encode()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The demo workspace plus: a gap and a backfill on `larimer`, a destination over it,
    and a `permits` source whose fourth run is a burst held for review, its subscriber a
    webhook receiver."""
    from feedledger.demo import build_demo

    root = tmp_path_factory.mktemp("dashboard")
    demo = build_demo(root / "ws")
    config = demo.workspace / "feedledger.toml"
    with webhook_receiver() as receiver, fl.open(demo.workspace) as led:
        larimer = led.source("larimer")
        larimer.add_gap(date(2026, 8, 20), date(2026, 8, 22), "county portal down")
        last = demo.files[-1].read_bytes().replace(b"Hughes, A.", b"Hughes, B.")
        larimer.archive_add(last, published_at=date(2026, 8, 19), name="larimer_2026-08-19.csv")
        backfill = larimer.backfill(date(2026, 8, 18), date(2026, 8, 19), fetch=False)
        wrong = larimer.ingest(last.replace(b"MU-3", b"MU-9"), published_at=date(2026, 8, 23))
        led.retract(str(wrong.run_id))  # the parcel's MU-9 version: retracted, hatched
        led.add_destination("search", source="larimer", table="parcels", sqlite=root / "dest.db")
        search = led.destination("search")
        search.sync_live(once=True)
        search.create_manifest("m1")
        search.rebuild("m1", batch=4)
        search.reconcile("m1")
        led.add_source(
            "permits", key=["id"], timezone="UTC", cadence="daily",
            hold_factor=5, hold_min_changes=10,
        )  # fmt: skip
        led.notify.add_subscriber("hook", webhook=receiver.url, sources=["permits"])
        permits = led.source("permits")
        for day, rows in ((1, {}), (2, {0: "b"}), (3, {0: "b", 1: "c"})):
            permits.ingest(_csv(rows), published_at=date(2026, 8, day))
        burst = permits.ingest(_csv({i: "z" for i in range(30)}), published_at=date(2026, 8, 4))
        assert burst.held_for_review
        led.notify.dispatch(once=True)
        assert receiver.bodies and not receiver.mentioning(str(burst.run_id))
        env = {TOKEN_ENV: f"{LABEL}:{TOKEN}"}
        with serve(config, TOKEN_ENV, env) as server:
            yield {
                "config": config,
                "server": server,
                "receiver": receiver,
                "led": led,
                "burst": burst.run_id,
                "backfill": backfill.run_id,  # type: ignore[union-attr]
                "retracted": wrong.run_id,
            }


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM)
        yield b
        b.close()


class Page:
    """A browser page that records console errors, uncaught exceptions and any request
    to anywhere but the server (the dashboard works with no internet)."""

    def __init__(self, browser: Any, server: Served, shots: Path) -> None:
        self.page = browser.new_page(viewport={"width": 1280, "height": 900})
        self.errors: list[str] = []
        self.outside: list[str] = []
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(f"uncaught: {e}"))
        self.page.on("request", self._request)
        self.server = server
        self.shots = shots

    def _request(self, request: Any) -> None:
        where = urlsplit(request.url)
        if where.scheme in ("http", "https", "ws", "wss") and where.hostname != "127.0.0.1":
            self.outside.append(request.url)

    def open(self, path: str, shot: str | None = None) -> Any:
        self.page.goto(self.server.url + path)
        self.page.wait_for_selector("body[data-ready=true]", timeout=15_000)
        status = self.page.locator("#status")
        assert status.is_hidden() or status.inner_text() == "", status.inner_text()
        assert self.outside == [], self.outside
        if shot:
            self.page.screenshot(path=str(self.shots / f"{shot}.png"), full_page=True)
        return self.page


@pytest.fixture
def page(world: dict[str, Any], browser: Any, shots: Path) -> Iterator[Page]:
    p = Page(browser, world["server"], shots)
    yield p
    p.page.close()


def test_every_page_opens_without_console_errors(page: Page, world: dict[str, Any]) -> None:
    runs = [r.to_json() for r in world["led"].source("larimer").runs()]
    # the board, larimer's source page and both entity pages are opened (and their
    # screenshots taken) by the tests below, with their console checked there too
    pages = {
        "source-zoning": "/sources/zoning",
        "run": f"/runs/{runs[1]['run_id']}",
        "run-backfill": f"/runs/{world['backfill']}",
        "destination": "/destinations/search",
        "review": "/review",
    }
    for shot, path in pages.items():
        page.open(path, shot)
        assert page.errors == [], (path, page.errors)
    assert (page.shots / "review.png").stat().st_size > 0
    # an address naming no page: the dashboard's own not-found page (HTTP 404, the one
    # console line Chromium writes for it: the document's own status), with a way back
    missing = "/sources/larimer/no/such/page"
    loaded: list[str] = []
    page.page.on("console", lambda m: loaded.append(m.location.get("url", "")))
    p = page.open(missing, "not-found")
    assert missing in p.locator("#not-found").inner_text()
    assert p.locator("main a", has_text="board").count() == 1
    assert len(page.errors) == 1 and "status of 404" in page.errors[0], page.errors
    assert loaded == [page.server.url + missing]


def test_the_api_docs_work_with_no_internet(page: Page) -> None:
    """/docs (Swagger UI) with every request to anywhere but 127.0.0.1 refused: its
    script and stylesheet ship in the package, and it lists the API's operations."""
    outside: list[str] = []

    def only_here(route: Any) -> None:
        if urlsplit(route.request.url).hostname == "127.0.0.1":
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    p = page.page
    p.route("**/*", only_here)
    p.goto(page.server.url + "/docs")
    p.wait_for_selector(".opblock-summary-path", timeout=30_000)
    paths = p.locator(".opblock-summary-path").evaluate_all("ps => ps.map(p => p.dataset.path)")
    for path in ("/api/health", "/api/sources/{source}/entities/{key}/history",
                 "/api/runs/{run_id}/review", "/api/destinations/{name}"):  # fmt: skip
        assert path in paths, (path, paths)
    p.screenshot(path=str(page.shots / "docs.png"), full_page=True)
    assert outside == []
    assert page.errors == []


def test_board_lists_every_source_stale_first(page: Page, world: dict[str, Any]) -> None:
    p = page.open("/", "board")
    health = [h.to_json() for h in world["led"].health()]  # what `health --json` prints
    names = p.locator("#board tbody tr td:first-child").all_inner_texts()
    assert sorted(names) == sorted(s["source"] for s in health)
    stale = {s["source"] for s in health if s["stale"]}
    assert names[: len(stale)] == [n for n in names if n in stale]
    row = p.locator("#board tbody tr", has_text="permits")
    assert "held" in row.inner_text()  # a run held for review
    assert p.locator("#nav-review").is_visible()  # a token is configured
    # the shell's preload of /api/health is the response board.js renders: one request
    js = "performance.getEntriesByType('resource').map((e) => new URL(e.name).pathname)"
    assert p.evaluate(js).count("/api/health") == 1
    assert page.errors == []


def test_timeline_has_one_rectangle_per_version(page: Page, world: dict[str, Any]) -> None:
    led: fl.Ledger = world["led"]
    for source in ("larimer", "zoning"):
        if source == "larimer":  # the CLI itself once; the API's to_json() is its --json
            history = cli_json(world["config"], "history", source, PARCEL, "--all")
        else:
            found = led.source(source).history(PARCEL, include_retracted=True)
            history = json.loads(dumps([v.to_json() for v in found]))
        p = page.open(f"/sources/{source}/entities/{PARCEL}", f"entity-{source}")
        rects = p.locator("#timeline rect.version")
        assert rects.count() == len(history)
        ids = rects.evaluate_all("rs => rs.map(r => r.dataset.versionId)")
        assert ids == [str(i + 1) for i in range(len(history))]
        _assert_placed(rects, history)
        retracted = sum(1 for v in history if v["retracted_at"])
        assert p.locator("#timeline rect.version.retracted").count() == retracted
        assert p.locator("#history tbody tr").count() == len(history)
        # full attribute values, not cut: each version's every value is in its row
        for i, version in enumerate(history):
            row = p.locator(f"#version-{i + 1}").inner_text()
            for value in (version["attributes"] or {}).values():
                assert str(value) in row
        if source == "larimer":
            assert retracted == 1  # the retracted run's MU-9
            gaps = led.source(source).gaps()
            assert p.locator("#timeline rect.gap").count() == len(gaps) > 0
        else:  # the GIS source draws each version's geometry
            assert p.locator("#geometries svg.geometry").count() == len(history)
            assert p.locator("#geometries svg.geometry path").count() >= len(history)
    # as known at an earlier time (a stable URL): the versions recorded by then only
    history = cli_json(world["config"], "history", "larimer", PARCEL, "--all")
    known = history[1]["recorded_at"]
    then = cli_json(world["config"], "history", "larimer", PARCEL, "--all", "--known-at", known)
    assert 0 < len(then) < len(history)
    p = page.open(f"/sources/larimer/entities/{PARCEL}?known_at={quote(known)}")
    assert p.locator("#timeline rect.version").count() == len(then)
    assert p.locator("#history tbody tr").count() == len(then)
    # the as-of question with a stable URL: inside the gap, "not observed", with the
    # last version observed before it
    p = page.open(f"/sources/larimer/entities/{PARCEL}?valid=2026-08-21")
    assert "not observed" in p.locator("#asof-status").inner_text()
    assert "county portal down" in p.locator("#asof-status").inner_text()
    p = page.open(f"/sources/larimer/entities/{PARCEL}?valid=2026-08-14")
    assert '"MU-3"' in p.locator("#asof-version").inner_text()
    assert page.errors == []


def _assert_placed(rects: Any, history: list[dict[str, Any]]) -> None:
    """Valid time across, transaction time up: a version valid from later is to the
    right, one recorded later starts higher, one retracted ends where it was retracted
    (below the top of those still standing)."""
    from datetime import datetime

    boxes = rects.evaluate_all(
        "rs => rs.map(r => ['x', 'y', 'width', 'height'].map(a => +r.getAttribute(a)))"
    )
    at = lambda text: datetime.fromisoformat(text)  # noqa: E731
    for v, (x, y, _w, h) in zip(history, boxes, strict=True):
        for w, (x2, y2, _w2, h2) in zip(history, boxes, strict=True):
            if at(v["valid_from"]) < at(w["valid_from"]):
                assert x < x2, (v, w)
            if at(v["recorded_at"]) < at(w["recorded_at"]):
                assert y + h >= y2 + h2, (v, w)  # bottom edges: recorded_at
            if v["retracted_at"] and not w["retracted_at"]:
                assert y > y2, (v, w)  # top edges: retracted_at below now


def test_calendar_cells_agree_with_gaps_and_runs(page: Page, world: dict[str, Any]) -> None:
    larimer = world["led"].source("larimer")
    runs = {r.run_id: r.to_json() for r in world["led"].source("larimer").runs()}
    gaps = [g.to_json() for g in larimer.gaps()]
    archived = [a.to_json() for a in larimer.archive_list()]
    p = page.open("/sources/larimer", "source")
    cells = p.locator("#calendar .cal-cell").evaluate_all(
        "cs => cs.map(c => ({day: c.dataset.day, state: c.dataset.state, run: c.dataset.run,"
        " href: c.getAttribute('href')}))"
    )
    assert p.locator("#runs tbody tr").count() == min(25, len(runs))  # a page of runs
    by_day = {c["day"]: c for c in cells}
    assert len(by_day) == len(cells)
    # every archived publication's day is applied, by a live run or the backfill, or
    # was, by the run retracted since
    for payload in archived:
        day = _local_day(payload["published_at"])
        cell = by_day[day]
        assert cell["state"] in ("live", "backfill", "retracted"), cell
        run = runs[cell["run"]]
        kind = {"backfill": "backfill", "live": "live", "retracted": "live"}[cell["state"]]
        assert run["kind"] == kind
        assert cell["href"] == f"/runs/{cell['run']}"
    assert by_day["2026-08-19"]["run"] == world["backfill"]
    assert by_day["2026-08-23"]["state"] == "retracted"
    assert by_day["2026-08-23"]["run"] == world["retracted"]
    # the gap's days are "not observed", and only those
    gap_days = {c["day"] for c in cells if c["state"] == "gap"}
    assert gap_days == {d for g in gaps for d in _days(g["start"], g["end"])}
    assert {"2026-08-20", "2026-08-21", "2026-08-22"} <= gap_days  # the gap recorded by hand
    # a day nothing was archived for (nor a gap recorded) is missed, and links nowhere
    assert by_day["2026-08-04"]["state"] == "missed" and by_day["2026-08-04"]["href"] is None
    # a click on a cell opens its run
    p.locator('#calendar a.cal-cell[data-day="2026-08-19"]').click()
    # the new document, not the source page's (whose body is ready too) before it goes
    p.wait_for_url(f"**/runs/{world['backfill']}", timeout=15_000)
    p.wait_for_selector("body[data-ready=true]")
    assert "backfill" in p.locator("main dl").inner_text()
    assert page.errors == []


def _days(start: str, end: str) -> list[str]:
    """The local days of [start, end)."""
    from datetime import timedelta

    first, last = date.fromisoformat(_local_day(start)), date.fromisoformat(_local_day(end))
    return [(first + timedelta(days=i)).isoformat() for i in range((last - first).days)]


def _local_day(instant: str) -> str:
    from datetime import datetime
    from zoneinfo import ZoneInfo

    return datetime.fromisoformat(instant).astimezone(ZoneInfo("America/Denver")).date().isoformat()


def test_a_held_run_released_on_the_review_page_reaches_the_webhook(
    page: Page, world: dict[str, Any]
) -> None:
    burst = str(world["burst"])
    receiver: Receiver = world["receiver"]
    p = page.open("/review")
    row = p.locator("#held-runs tbody tr", has_text=burst[:8])
    release = row.locator("button[data-action=release]")
    assert release.is_disabled()  # no token given yet
    # a wrong token is refused (401) and nothing is released
    p.fill("#token", "not-the-token")
    p.click("#token-form button[type=submit]")
    release.click()
    p.wait_for_selector("#review-result.error")
    assert "token" in p.locator("#review-result").inner_text()
    assert receiver.mentioning(burst) == []
    # the right one: released, the run is no longer held
    p.fill("#token", TOKEN)
    p.click("#token-form button[type=submit]")
    p.locator("#held-runs tbody tr", has_text=burst[:8]).locator(
        "button[data-action=release]"
    ).click()
    p.wait_for_selector("#review-result.ok")
    assert "released" in p.locator("#review-result").inner_text()
    assert p.locator("#held-runs tbody tr", has_text=burst[:8]).count() == 0
    # the token was never stored by the page
    assert p.evaluate("() => localStorage.length + sessionStorage.length") == 0
    assert TOKEN not in p.evaluate("() => document.cookie")
    runs = {r.run_id: r for r in world["led"].source("permits").runs()}
    assert runs[burst].status is fl.RunStatus.SUCCEEDED
    # the notifications go out at the next dispatch: the webhook receiver gets them
    # (in this thread, which Playwright's sync API marks as running its event loop)
    report = world["led"].notify.dispatch(once=True)
    assert report.delivered > 0 and report.failed == report.dead == 0
    assert receiver.mentioning(burst)
    # the write shows on the run's page: who (the token's label) and what
    p = page.open(f"/runs/{burst}", "run-released")
    audit = p.locator("#audit").inner_text()
    assert LABEL in audit and "review" in audit


def test_the_destination_page_shows_rebuild_reconcile_and_the_guard(
    page: Page, world: dict[str, Any]
) -> None:
    """Rebuild progress (last key attempted = last acknowledged once finished), the
    last reconcile's report, outcomes per route and the guard's reason for a key."""
    p = page.open("/destinations/search", "destination-rebuilt")
    row = p.locator("#rebuilds tbody tr", has_text="m1")
    cells = row.locator("td").all_inner_texts()
    assert cells[1] == "finished" and cells[4] == cells[5] and cells[6] == "yes", cells
    assert "m1" in p.locator("section", has_text="Last reconcile").inner_text()
    assert p.locator("#outcomes tbody tr", has_text="m1").count() == 1
    p.fill("#guard-key", PARCEL)
    p.click("section:has(#guard-key) button[type=submit]")
    p.wait_for_selector("section:has(#guard-key) pre")
    assert PARCEL in p.locator("section:has(#guard-key) pre").inner_text()
    assert page.errors == []


def test_a_freeze_over_http_shows_on_the_source_page(page: Page, world: dict[str, Any]) -> None:
    """A write on a source (no run) is recorded with the token's label and shown on the
    source's page."""
    import httpx

    url, auth = world["server"].url, {"Authorization": f"Bearer {TOKEN}"}
    frozen = httpx.post(f"{url}/api/sources/permits/freeze", json={"reason": "audit check"},
                        headers=auth, timeout=30)  # fmt: skip
    assert frozen.status_code == 200, frozen.text
    try:
        p = page.open("/sources/permits", "source-audit")
        audit = p.locator("#source-audit").inner_text()
        assert LABEL in audit and "freeze" in audit and "audit check" in audit
        assert page.errors == []
    finally:
        thawed = httpx.post(f"{url}/api/sources/permits/thaw", headers=auth, timeout=30)
        assert thawed.status_code == 200, thawed.text


def test_a_read_only_server_offers_no_review(
    world: dict[str, Any], browser: Any, shots: Path
) -> None:
    with serve(world["config"], None, {}) as server:
        page = Page(browser, server, shots)
        p = page.open("/review", "review-read-only")
        assert p.locator("#nav-review").is_hidden()
        assert "read-only" in p.locator("main").inner_text()
        assert p.locator("button[data-action]").count() == 0
        assert page.errors == []
        page.page.close()
