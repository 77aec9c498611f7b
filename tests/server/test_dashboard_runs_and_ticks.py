"""The dashboard in Debian's Chromium (Playwright) over `feedledger serve` (SQLite; the
API tests run both backends): the source page's runs table marks a retracted run
`retracted` with when and by which run; the entity timeline's valid-time ticks fall on
the source's local midnights (day ticks for a span under ~60 days, so a gap band starts
exactly at its day's tick) and on the first of a month for a longer span. Screenshots
under tests/artefacts/dashboard/."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, date, datetime
from itertools import pairwise
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

import feedledger as fl
from browser_support import ARTEFACTS, SKIP_NO_CHROMIUM, chromium, serve

CHROMIUM = chromium()
if CHROMIUM is None and os.environ.get("FEEDLEDGER_REQUIRE_BROWSER"):
    raise RuntimeError(SKIP_NO_CHROMIUM)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason=SKIP_NO_CHROMIUM)

DENVER = ZoneInfo("America/Denver")


def _csv(v: str) -> bytes:
    return f"id,v\na,{v}\nb,{v}\n".encode()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """`s` (America/Denver): a on 7 days of August with a gap 08-05 .. 08-06 and the
    last run retracted; `long` (UTC): a over five months."""
    root = tmp_path_factory.mktemp("ticks")
    with fl.init(root / "ws") as led:
        s = led.add_source("s", key=["id"], timezone="America/Denver")
        for day in (1, 2, 3, 4, 7, 8):
            s.ingest(_csv(str(day)), published_at=date(2026, 8, day))
        s.add_gap(date(2026, 8, 5), date(2026, 8, 6), "portal down")
        wrong = s.ingest(_csv("9"), published_at=date(2026, 8, 9))
        undo = led.retract(str(wrong.run_id))
        long = led.add_source("long", key=["id"], timezone="UTC")
        for month in (3, 5, 7, 8):
            long.ingest(_csv(str(month)), published_at=date(2026, month, 17))
        config = led.workspace.config_path
    with serve(config, None, {}) as server:
        yield {"server": server, "wrong": str(wrong.run_id), "undo": undo.run_id}


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM)
        yield b
        b.close()


@pytest.fixture
def open_page(world: dict[str, Any], browser: Any) -> Iterator[Any]:
    shots = Path(os.environ.get("FEEDLEDGER_TEST_ARTEFACTS") or ARTEFACTS) / "dashboard"
    shots.mkdir(parents=True, exist_ok=True)
    pages: list[Any] = []
    errors: list[str] = []

    def go(path: str, shot: str) -> Any:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("console", lambda m: m.type == "error" and errors.append(m.text))
        page.on("pageerror", lambda e: errors.append(f"uncaught: {e}"))
        pages.append(page)
        page.goto(world["server"].url + path)
        page.wait_for_selector("body[data-ready=true]", timeout=15_000)
        page.screenshot(path=str(shots / f"{shot}.png"), full_page=True)
        return page

    yield go
    for page in pages:
        page.close()
    assert errors == []


def test_the_runs_table_marks_a_retracted_run(open_page: Any, world: dict[str, Any]) -> None:
    page = open_page("/sources/s", "runs-retracted")
    page.wait_for_selector("#runs tbody tr")
    rows = page.locator("#runs tbody tr")
    texts = [rows.nth(i).inner_text() for i in range(rows.count())]
    hit = [t for t in texts if world["wrong"][:8] in t]
    assert hit and "retracted" in hit[0] and world["undo"][:8] in hit[0], texts
    others = [t for t in texts if world["wrong"][:8] not in t and "retraction" not in t]
    assert others and not any("retracted" in t for t in others), texts


def _ticks(page: Any) -> list[tuple[datetime, str, float]]:
    found = page.locator("#timeline line.valid-tick").evaluate_all(
        "ls => ls.map(l => [l.dataset.t, +l.getAttribute('x1')])"
    )
    labels = page.locator("#timeline text.valid-label").evaluate_all(
        "ts => ts.map(t => t.textContent)"
    )
    return [
        (datetime.fromisoformat(t.replace("Z", "+00:00")), label, x)
        for (t, x), label in zip(found, labels, strict=True)
    ]


def test_valid_time_ticks_fall_on_local_days_and_months(open_page: Any) -> None:
    page = open_page("/sources/s/entities/a", "timeline-day-ticks")
    ticks = _ticks(page)
    assert len(ticks) >= 5
    for at, label, _x in ticks:
        local = at.astimezone(DENVER)
        assert (local.hour, local.minute) == (0, 0), (at, label)  # a local midnight
        assert label == local.date().isoformat()  # labelled with its own day
    steps = {(b[0] - a[0]).days for a, b in pairwise(ticks)}
    assert steps == {1}  # one tick a day over nine days
    # the gap band starts exactly at its first day's tick
    gap_x = float(page.locator("#timeline rect.gap").first.get_attribute("x"))
    start = [x for at, _l, x in ticks if at == datetime(2026, 8, 5, 6, tzinfo=UTC)]
    assert start and abs(start[0] - gap_x) < 0.01, (ticks, gap_x)

    page = open_page("/sources/long/entities/a", "timeline-month-ticks")
    ticks = _ticks(page)
    assert len(ticks) >= 4
    for at, label, _x in ticks:
        assert (at.day, at.hour, at.minute) == (1, 0, 0), (at, label)
        assert label == f"{at.year}-{at.month:02d}"


def test_the_entity_page_says_before_the_first_observation(open_page: Any) -> None:
    page = open_page("/sources/s/entities/a?valid=2026-07-20", "asof-before-first")
    said = page.locator("#asof-status").inner_text()
    assert "not observed" in said and "before the source's first observation" in said, said
    assert "2026-08-01" in said  # the first observation, next
