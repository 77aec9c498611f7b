"""A successful fetch that finds nothing new is an observation (invariant 12): a portal
layer dated by its last edit, or a URL answering 304, is fresh right after its run,
the days it was polled and unchanged are neither missed nor gaps, and its next edit
is a live run (its changes announced), never a recovery backfill. The publisher's date
is checked where every date passes: one ahead of the clock is refused (nothing
applied) and one gone back before the watermark with other content is said, archived
and never applied; `health` fails while either stands. Both backends."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

import feedledger as fl
from fakes.arcgis import arcgis_fixture
from fakes.ckan import FakeCkan, ckan_fixture
from fakes.socrata import FakeSocrata, socrata_fixture
from feedledger.demo.featureserver import FakeArcGIS
from feedledger.ledger.schema import outbox
from feedledger.ledger.store import Store
from feedledger.model.timeutil import from_us, now_us
from feedledger.scheduler.loop import Options, Scheduler
from feedledger.server.app import create_app
from helpers import Cli

_ = (arcgis_fixture, socrata_fixture, ckan_fixture)

DAY_MS = 86_400_000
HOUR_US = 3_600_000_000
DAY_US = 24 * HOUR_US


def add(cli: Cli, fake: FakeArcGIS) -> None:
    cli("source", "add", "zoning", "--connector", "arcgis", "--fetch", fake.url,
        "--key", "PARCEL_ID")  # fmt: skip


def health(cli: Cli, *at: str) -> tuple[int, dict[str, Any]]:
    result = cli("health", "zoning", *at, "--json", expect=None)
    return result.exit_code, json.loads(result.stdout)


def one(data: dict[str, Any]) -> dict[str, Any]:
    (source,) = data["sources"]
    return source  # type: ignore[no-any-return]


class Clock:
    def __init__(self, at: int) -> None:
        self.now = at

    def now_us(self) -> int:
        return self.now

    def sleep(self, seconds: float, stop: threading.Event) -> None:
        self.now += int(seconds * 1e6)


def ticked(sched: Scheduler) -> list[dict[str, Any]]:
    assert hasattr(sched.log, "getvalue")
    before = len(sched.log.getvalue().splitlines())
    sched.tick(wait=True)
    lines = [json.loads(x) for x in sched.log.getvalue().splitlines()[before:]]
    return [x for x in lines if x["event"] == "run"]


# -- A2: a current layer is not an outage --------------------------------------------------


def test_a_layer_last_edited_days_ago_is_fresh_right_after_its_run(
    cli: Cli, arcgis: FakeArcGIS
) -> None:
    arcgis.edit_date = now_us() // 1000 - 4 * DAY_MS
    add(cli, arcgis)
    assert cli.json("run", "zoning")["status"] == "applied"
    code, data = health(cli)
    assert (code, data["ok"], one(data)["status"], one(data)["missed_publications"]) == (
        0, True, "ok", 0,
    )  # fmt: skip
    assert one(data)["last_observed_at"] is not None
    # polled again, unchanged: nothing new is an observation, still fresh, no gap
    assert cli.json("run", "zoning")["status"] == "nothing_to_do"
    code, data = health(cli)
    assert (code, one(data)["status"]) == (0, "ok")
    assert cli.json("gaps", "zoning") == []


def test_polled_unchanged_days_are_observed_and_the_next_edit_is_a_live_run(
    cli: Cli, arcgis: FakeArcGIS
) -> None:
    # the fake clock stays before the real one, at noon UTC six days ago: its steps of an
    # hour never cross a midnight, whatever time of day the test runs (from the real
    # clock's 23:00 on, 'an hour later' was the next day, a new publication due)
    start = (now_us() // DAY_US - 6) * DAY_US + 12 * HOUR_US
    arcgis.edit_date = (start - 4 * DAY_US) // 1000
    add(cli, arcgis)
    clock = Clock(start)
    log = io.StringIO()
    sched = Scheduler(cli.ws.config_path, Options(workers=1, dispatch=False), clock, log)
    try:
        assert [r["outcome"] for r in ticked(sched)] == ["applied"]
        clock.now = start + DAY_US
        [polled] = ticked(sched)
        assert (polled["action"], polled["outcome"]) == ("live", "unchanged")
        clock.now = start + DAY_US + HOUR_US
        assert ticked(sched) == []  # observed today: nothing due until tomorrow
        at = from_us(clock.now).isoformat()
        code, data = health(cli, "--at", at)
        assert (code, one(data)["missed_publications"]) == (0, 0)
        clock.now = start + 2 * DAY_US
        arcgis.republish()
        arcgis.edit_date = (clock.now - HOUR_US) // 1000
        [edit] = ticked(sched)
        assert (edit["action"], edit["outcome"], edit["changes"]) == ("live", "applied", 1)
    finally:
        sched.close()
    assert cli.json("gaps", "zoning") == []
    store = Store(cli.ws.store_url)
    try:
        with store.engine.connect() as conn:
            mine = select(outbox.c.topic).where(outbox.c.run_id == edit["run_id"])
            topics = [topic for (topic,) in conn.execute(mine)]
    finally:
        store.close()
    assert topics and "summary" not in topics  # announced as a live run's changes
    # a replay over the days polled unchanged records no gap for them either
    first_day = from_us(start - 4 * DAY_US).date().isoformat()
    replayed = cli.json("replay", "zoning", "--from", first_day)
    assert replayed["gaps_recorded"] == 0 and replayed["missing_dates"] == []
    assert cli.json("gaps", "zoning") == []


_SERVED: list[type[_Etagged]] = []  # the `etagged` fixture's handler class


class _Etagged(BaseHTTPRequestHandler):
    body = b"parcel,zoning\n0714-22-1,R-1\n"
    modified = "Mon, 30 Nov 2026 08:00:00 GMT"
    etag = '"v1"'

    def do_GET(self) -> None:
        if self.headers.get("If-None-Match") == self.etag:
            self.send_response(304)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/csv")
        self.send_header("ETag", self.etag)
        self.send_header("Last-Modified", self.modified)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def etagged() -> Iterator[str]:
    handler = type("Handler", (_Etagged,), {})  # its answers changed by the test alone
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        _SERVED[:] = [handler]
        yield f"http://127.0.0.1:{server.server_address[1]}/parcels.csv"
    finally:
        server.shutdown()
        server.server_close()


def test_an_http_source_answering_304_is_observed_fresh(cli: Cli, etagged: str) -> None:
    cli("source", "add", "zoning", "--key", "parcel", "--fetch", etagged,
        "--published-from", "header:Last-Modified")  # fmt: skip
    assert cli.json("run", "zoning")["status"] == "applied"
    assert cli.json("run", "zoning")["status"] == "not_modified"
    code, data = health(cli)
    assert (code, one(data)["status"], one(data)["missed_publications"]) == (0, "ok", 0)


def test_a_url_answering_an_older_date_with_other_content_is_said(cli: Cli, etagged: str) -> None:
    cli("source", "add", "zoning", "--key", "parcel", "--fetch", etagged,
        "--published-from", "header:Last-Modified")  # fmt: skip
    cli("run", "zoning")
    (handler,) = _SERVED
    handler.body, handler.etag = b"parcel,zoning\n0714-22-1,C-2\n", '"v0"'
    handler.modified = "Thu, 26 Nov 2026 08:00:00 GMT"  # four days before the watermark
    said = cli("run", "zoning", expect=6).stderr
    assert "went back" in said and "replay zoning --from 2026-11-26" in said
    code, data = health(cli)
    assert code == 1 and one(data)["status"] == "publisher_date"


# -- B17: a publisher date ahead of the clock ---------------------------------------------


def test_a_layer_dated_in_the_future_is_refused_and_fails_health(
    cli: Cli, arcgis: FakeArcGIS
) -> None:
    arcgis.edit_date = 4_102_444_800_000  # 2100-01-01
    add(cli, arcgis)
    refused = cli("run", "zoning", expect=2)
    line = refused.stderr.strip()
    assert len(line.splitlines()) == 1 and "2100-01-01" in line and "--allow-future" in line
    assert cli.json("runs", "zoning") == []
    assert cli.json("watermark", "zoning")["published_at"] is None
    code, data = health(cli)
    assert code == 1 and data["ok"] is False and one(data)["status"] == "publisher_date"
    assert "ahead of the clock" in one(data)["publisher_date_problem"]
    # the Python API and HTTP say the same
    with fl.open(cli.ws.config_path) as led:
        (seen,) = led.health(["zoning"])
        assert seen.failing and seen.status == fl.HealthStatus.PUBLISHER_DATE
    app = create_app(lambda: fl.open(cli.ws.config_path))
    with TestClient(app) as client:
        answer = client.get("/api/health", params={"strict": "1"})
    assert answer.status_code == 503 and answer.json()["publisher_date_problems"] == ["zoning"]
    # applied on purpose: the watermark then stands ahead of the clock, and health says so
    assert cli.json("run", "zoning", "--allow-future")["status"] == "applied"
    code, data = health(cli)
    assert code == 1 and "watermark" in one(data)["publisher_date_problem"]
    again = cli.json("run", "zoning", "--allow-future")  # nothing new: and it says why
    assert again["status"] == "nothing_to_do" and "ahead of the clock" in again["reason"]


def test_every_connector_refuses_a_future_date(
    cli: Cli, socrata: FakeSocrata, ckan: FakeCkan
) -> None:
    socrata.rows = [{":id": "row-1", "parcel_id": "1", "zoning": "R-1"}]
    socrata.rows_updated_at = 4_102_444_800
    cli("source", "add", "soda", "--connector", "socrata", "--format", "json",
        "--fetch", socrata.url, "--key", "parcel_id")  # fmt: skip
    ckan.resources = {"parcels.csv": ("CSV", b"parcel_id,zoning\n1,R-1\n", "2100-01-01T00:00:00")}
    cli("source", "add", "kan", "--connector", "ckan", "--format", "csv", "--fetch", ckan.url,
        "--resource", "parcels.csv", "--key", "parcel_id")  # fmt: skip
    for name in ("soda", "kan"):
        assert "2100-01-01" in cli("run", name, expect=2).stderr
        assert cli.json("runs", name) == []
    data = json.loads(cli("health", "--json", expect=1).stdout)
    assert sorted(data["publisher_date_problems"]) == ["kan", "soda"]


# -- B20: a publisher date gone back ------------------------------------------------------


def test_a_layer_restored_with_an_earlier_date_is_said_and_fails_health(
    cli: Cli, arcgis: FakeArcGIS
) -> None:
    edited = now_us() // 1000 - 2 * DAY_MS
    arcgis.edit_date = edited
    add(cli, arcgis)
    cli("run", "zoning")
    mark = cli.json("watermark", "zoning")
    # restored from a backup: dated 4 days before the watermark, its content differs
    arcgis.republish()
    arcgis.edit_date = edited - 4 * DAY_MS
    said = cli("run", "zoning", expect=6).stderr.strip()
    assert len(said.splitlines()) == 1
    assert "went back" in said and "replay zoning" in said and "--accept-restored" in said
    assert cli.json("watermark", "zoning") == mark  # nothing applied
    code, data = health(cli)
    assert code == 1 and "went back" in one(data)["publisher_date_problem"]
    # the operator accepts the restored layer as a correction dated now
    accepted = cli.json("run", "zoning", "--accept-restored")
    assert (accepted["status"], accepted["changes"]) == ("applied", 1)
    code, data = health(cli)
    assert (code, one(data)["status"]) == (0, "ok")


def test_an_earlier_date_with_the_same_content_is_nothing_new(cli: Cli, arcgis: FakeArcGIS) -> None:
    edited = now_us() // 1000 - 2 * DAY_MS
    arcgis.edit_date = edited
    add(cli, arcgis)
    cli("run", "zoning")
    arcgis.edit_date = edited - 4 * DAY_MS
    assert cli.json("run", "zoning")["status"] == "nothing_to_do"
    code, data = health(cli)
    assert (code, one(data)["status"]) == (0, "ok")
