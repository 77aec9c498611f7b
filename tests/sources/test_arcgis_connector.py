"""The ArcGIS REST connector end to end: `source add --connector arcgis`, then
`run` (and the scheduler) fetch the layer from the fake FeatureServer of
feedledger/demo/featureserver.py at its three flavours, archive it as ONE GeoJSON sequence
with the layer's metadata in its sidecar, and apply it through the geo reader; bad
answers fail in one line with the ledger untouched; replay and reindex need the archive
alone."""

from __future__ import annotations

import io
import json
import logging
import threading
from typing import Any

import pytest

from fakes.arcgis import arcgis_fixture
from feedledger.archive import LocalArchive
from feedledger.config import Workspace
from feedledger.demo.featureserver import FLAVOURS, SERVICE, FakeArcGIS, parcels, running, to_wgs84
from feedledger.demo.local_server import Reply, Request
from feedledger.model.timeutil import parse_instant, to_us
from feedledger.scheduler.loop import Options, Scheduler
from helpers import Cli

_ = arcgis_fixture  # the `arcgis` fixture

TOKEN = "s3cret-T0ken-abc123"
EDIT_DAY = "2026-05-28"  # FakeArcGIS.edit_date 1_780_000_000_000 ms, in UTC


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Retries wait through an injectable sleep: recorded here, never slept."""
    waited: list[float] = []
    monkeypatch.setattr("feedledger.sources.portal.default_sleep", waited.append)
    return waited


def add(cli: Cli, fake: FakeArcGIS, *extra: str, expect: int = 0) -> Any:
    return cli("source", "add", "zoning", "--connector", "arcgis", "--fetch", fake.url,
               "--key", "PARCEL_ID", *extra, expect=expect)  # fmt: skip


def sidecars(ws: Workspace) -> list[dict[str, Any]]:
    folder = ws.archive_root / "meta" / "zoning"
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]


def archived(ws: Workspace, sha: str) -> bytes:
    return LocalArchive(ws.archive_root).get(sha)  # stored compressed: read back whole


def payload_crs(ws: Workspace) -> list[str | None]:
    from sqlalchemy import select

    from feedledger.ledger.schema import payloads
    from feedledger.ledger.store import Store

    store = Store(ws.store_url)
    try:
        with store.begin() as conn:
            return [row.crs for row in conn.execute(select(payloads.c.crs))]
    finally:
        store.close()


def untouched(cli: Cli) -> None:
    assert cli.json("runs", "zoning") == []
    assert sidecars(cli.ws) == []


# -- declaration -------------------------------------------------------------------------


def test_add_sets_geojsonseq_and_refuses_what_is_not_a_layer(cli: Cli) -> None:
    url = "https://gis.example.gov/arcgis/rest/services/Zoning/FeatureServer/0"
    cli("source", "add", "zoning", "--connector", "arcgis", "--fetch", url, "--key", "PARCEL_ID",
        "--token-env", "ZONING_TOKEN")  # fmt: skip
    (listed,) = cli.json("source", "list")
    assert (listed["connector"], listed["format"]) == ("arcgis", "geojsonseq")
    assert listed["token_env"] == "ZONING_TOKEN"
    for args, needle in [
        (["--fetch", "https://gis.example.gov/arcgis/rest/services/Zoning/FeatureServer"],
         "FeatureServer/N"),
        (["--fetch", url, "--format", "csv"], "--format geojsonseq"),
    ]:  # fmt: skip
        result = cli("source", "add", "other", "--connector", "arcgis", "--key", "PARCEL_ID",
                     *args, expect=2)  # fmt: skip
        assert needle in result.stderr and len(result.stderr.strip().splitlines()) <= 2
    assert [s["name"] for s in cli.json("source", "list")] == ["zoning"]


# -- run, at every flavour -----------------------------------------------------------------


@pytest.mark.parametrize("arcgis", FLAVOURS, indirect=True)
def test_run_archives_one_sequence_then_nothing_new(cli: Cli, arcgis: FakeArcGIS) -> None:
    add(cli, arcgis)
    first = cli.json("run", "zoning")
    assert first["status"] == "applied" and first["changes"] == 25
    assert first["published_at"].startswith(EDIT_DAY)

    (sidecar,) = sidecars(cli.ws)
    assert sidecar["content_type"] == "application/geo+json-seq"
    meta = sidecar["metadata"]
    assert meta["count"] == 25 and meta["wkid"] == 2227 and meta["out_wkid"] == 4326
    assert meta["editing_info"]["lastEditDate"] == arcgis.edit_date
    assert [f["name"] for f in meta["fields"]] == ["OBJECTID", "PARCEL_ID", "ZONING"]
    assert meta["server_version"] == {"10.3": 10.3, "10.8": 10.81, "11.1": 11.1}[arcgis.flavour]
    assert (meta["query_format"], meta["paging"]) == (
        ("json", "object-ids") if arcgis.flavour == "10.3" else ("geojson", "offset")
    )
    lines = archived(cli.ws, sidecar["sha256"]).decode().splitlines()
    assert len(lines) == 25 and all(json.loads(x)["type"] == "Feature" for x in lines)
    # asked in WGS84 (outSR=4326), the layer's CRS as read is EPSG:4326, not its wkid 2227
    assert payload_crs(cli.ws) == ["EPSG:4326"]

    (version,) = cli.json("history", "zoning", "P0000001")
    assert version["attributes"]["ZONING"] == "R-2"
    x, y = 6_000_100.0, 2_000_000.0
    ring = [[x, y], [x + 90.0, y], [x + 90.0, y + 90.0], [x, y + 90.0], [x, y]]
    assert version["geometry"] == {
        "type": "Polygon",
        "coordinates": [[to_wgs84(px, py) for px, py in ring]],
    }

    log = arcgis.server.log  # type: ignore[union-attr]
    asked = len(log)
    again = cli("run", "zoning")
    assert again.exit_code == 0 and "nothing new" in again.stdout
    # the layer's metadata only (asked by the catch-up check, then the live fetch)
    assert {r.path for r in log[asked:]} == {SERVICE + "/FeatureServer/0"}

    arcgis.republish()  # parcel 1 rezoned and moved by one foot
    second = cli.json("run", "zoning")
    assert second["changes"] == 1
    changes = cli.json("changes", "--run", second["run_id"])
    assert [(c["key"], c["change"]) for c in changes] == [(["P0000001"], "changed")]
    assert changes[0].get("geometry_changed", True) is True
    assert len(cli.json("history", "zoning", "P0000001")) == 2


def test_through_the_scheduler(cli: Cli, arcgis: FakeArcGIS) -> None:
    arcgis.edit_date = to_us(parse_instant("2026-08-01T12:00:00Z")) // 1000
    add(cli, arcgis)

    class Clock:
        now = to_us(parse_instant("2026-08-01T13:00:00Z"))

        def now_us(self) -> int:
            return self.now

        def sleep(self, seconds: float, stop: threading.Event) -> None:
            self.now += int(seconds * 1e6)

    clock = Clock()
    sched = Scheduler(cli.ws.config_path, Options(workers=1, dispatch=False), clock, io.StringIO())

    def tick() -> list[str]:
        assert isinstance(sched.log, io.StringIO)
        before = len(sched.log.getvalue().splitlines())
        sched.tick(wait=True)
        lines = [json.loads(x) for x in sched.log.getvalue().splitlines()[before:]]
        return [x["outcome"] for x in lines if x["event"] == "run"]

    assert tick() == ["applied"]
    queries = len(arcgis.query_requests)
    clock.now = to_us(parse_instant("2026-08-02T01:00:00Z"))  # due, not yet republished
    assert tick() == ["unchanged"]  # an observation (invariant 12): 08-02 is not missed
    assert len(arcgis.query_requests) == queries  # no feature was asked for

    # the scheduler was down for days; the layer now serves only its 08-04 state: the
    # days nobody looked at (08-03) are recorded as gaps, the 08-04 state is applied
    arcgis.republish()
    arcgis.edit_date = to_us(parse_instant("2026-08-04T12:00:00Z")) // 1000
    clock.now = to_us(parse_instant("2026-08-04T13:00:00Z"))
    tick()
    (gap,) = cli.json("gaps", "zoning")
    assert (gap["start"][:10], gap["end"][:10]) == ("2026-08-03", "2026-08-04")
    runs = cli.json("runs", "zoning")
    assert [(r["kind"], r["changes"]) for r in runs] == [("live", 25), ("backfill", 1)]
    asof = cli.json("asof", "zoning", "P0000001", "--valid", "2026-08-04T13:00:00Z")
    assert asof["version"]["attributes"]["ZONING"].startswith("MU-")
    # the catch-up archived the layer with its metadata too
    assert [s["metadata"]["count"] for s in sidecars(cli.ws)] == [25, 25]


# -- the token --------------------------------------------------------------------------------


def test_token_from_env_used_and_never_shown(
    cli: Cli, arcgis: FakeArcGIS, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    arcgis.token = TOKEN
    add(cli, arcgis, "--token-env", "ZONING_TOKEN")

    monkeypatch.delenv("ZONING_TOKEN", raising=False)
    unset = cli("run", "zoning", expect=2)
    assert "ZONING_TOKEN" in unset.stderr and "not set" in unset.stderr
    assert arcgis.server.log == []  # type: ignore[union-attr]  # nothing was asked

    monkeypatch.setenv("ZONING_TOKEN", "wr0ng-t0ken")
    wrong = cli("run", "zoning", expect=11)
    assert "ArcGIS error 498" in wrong.stderr and "wr0ng-t0ken" not in wrong.stderr
    untouched(cli)

    monkeypatch.setenv("ZONING_TOKEN", TOKEN)
    ran = cli("run", "zoning", "--json")
    assert json.loads(ran.stdout)["changes"] == 25
    served = arcgis.server.log[-3:]  # type: ignore[union-attr]
    assert all(r.query.get("token") == TOKEN for r in served)
    shown = [
        ran.stdout,
        ran.stderr,
        cli("run", "zoning").stdout,
        cli.ws.config_path.read_text(),
        json.dumps(sidecars(cli.ws)),
        json.dumps(cli.json("source", "list")),
        json.dumps(cli.json("runs", "zoning")),
        caplog.text,
    ]
    assert not any(TOKEN in text for text in shown)
    assert "token=***" in caplog.text  # httpx logged the requests, masked


# -- bad answers: one clear line, the ledger untouched -----------------------------------------


def login_page(request: Request) -> Reply:
    return Reply(200, b"<!DOCTYPE html><html><body>Sign in</body></html>", "text/html")


@pytest.mark.parametrize(
    ("case", "exit_code", "needle"),
    [
        ("error_as_200", 11, "ArcGIS error 500 'Error performing query operation.'"),
        ("error_on_a_page", 11, "ArcGIS error 400 'Unable to complete operation.'"),
        ("html_login", 4, "HTML page"),
        ("hang", 11, "fetch_deadline_s of 0.5 s"),
        ("republished_twice", 11, "republished while it was downloaded, twice"),
        ("keeps_failing", 11, "HTTP 503 Service Unavailable"),
        ("token_required", 11, "ArcGIS error 499 'Token Required.'"),
    ],
)
def test_bad_answers_fail_in_one_line(
    cli: Cli, arcgis: FakeArcGIS, sleeps: list[float], case: str, exit_code: int, needle: str
) -> None:
    extra: list[str] = []
    route = arcgis.route
    if case == "error_as_200":
        arcgis.errors_first = [500]
    elif case == "error_on_a_page":

        def fails_second_page(request: Request) -> Reply:
            if request.query.get("resultOffset") == "10":
                return Reply(200, b'{"error": {"code": 400, "message": '
                             b'"Unable to complete operation.", "details": []}}')  # fmt: skip
            return route(request)

        arcgis.server.route = fails_second_page  # type: ignore[union-attr]
    elif case == "html_login":
        arcgis.server.route = login_page  # type: ignore[union-attr]
    elif case == "hang":
        arcgis.hang = True
        extra = ["--fetch-deadline", "0.5"]
    elif case == "republished_twice":

        def republish_at_each_download(request: Request) -> Reply:
            if request.query.get("returnCountOnly") == "true":
                arcgis.republish()
            return route(request)

        arcgis.server.route = republish_at_each_download  # type: ignore[union-attr]
    elif case == "keeps_failing":
        arcgis.fail_first = [503] * 10
    elif case == "token_required":  # a secured layer declared without --token-env
        arcgis.token = TOKEN
    add(cli, arcgis, *extra)
    result = cli("run", "zoning", expect=exit_code)
    message = result.stderr.strip()
    assert needle in message and "zoning" in message
    assert len(message.splitlines()) <= 2  # the problem, and at most a hint
    untouched(cli)


def test_429_then_success_and_republish_restarts_once(
    cli: Cli, arcgis: FakeArcGIS, sleeps: list[float]
) -> None:
    arcgis.fail_first = [429, 503]
    arcgis.republish_after_pages = 1
    add(cli, arcgis)
    assert cli.json("run", "zoning")["changes"] == 25
    assert sleeps == [1.0, 1.0]  # the fake's Retry-After
    assert len(arcgis.feature_requests) == 3 + 3  # 3 pages discarded, 3 again
    (version,) = cli.json("history", "zoning", "P0000001")
    assert version["attributes"]["ZONING"].startswith("MU-")  # the republished state


def test_layer_without_the_key_field_lists_the_fields(cli: Cli, arcgis: FakeArcGIS) -> None:
    cli("source", "add", "zoning", "--connector", "arcgis", "--fetch", arcgis.url,
        "--key", "APN")  # fmt: skip
    result = cli("run", "zoning", expect=4)
    assert "APN" in result.stderr and "PARCEL_ID" in result.stderr
    assert cli.json("runs", "zoning") == []
    assert cli.json("archive", "list", "zoning", "--rejected")  # the bytes are kept


# -- the archive alone ---------------------------------------------------------------------


def test_replay_and_reindex_need_only_the_archive(cli: Cli, workspace: Workspace) -> None:
    with running("11.1") as fake:
        fake.features = parcels(12)
        add(cli, fake)
        cli("run", "zoning")
        fake.republish()
        cli("run", "zoning")
    # the server is gone from here on
    history = cli.json("history", "zoning", "P0000001")
    assert len(history) == 2
    from sqlalchemy import delete

    from feedledger.ledger.schema import payloads
    from feedledger.ledger.store import Store

    listed = cli.json("archive", "list", "zoning")
    store = Store(workspace.store_url)
    with store.begin() as conn:
        conn.execute(delete(payloads).where(payloads.c.payload_id.notin_(
            [p["payload_id"] for p in listed[:1]])))  # fmt: skip
    store.close()
    rebuilt = cli.json("archive", "reindex")
    assert rebuilt["added"] == 1 and rebuilt["present"] == 1
    assert cli.json("archive", "list", "zoning") == listed

    replayed = cli.json("replay", "zoning", "--from", EDIT_DAY)
    assert replayed["retracted_versions"] > 0
    again = cli.json("history", "zoning", "P0000001")
    assert [(v["attributes"], v.get("geometry")) for v in again] == [
        (v["attributes"], v.get("geometry")) for v in history
    ]


def test_assess_reports_past_days_unrecoverable(cli: Cli, arcgis: FakeArcGIS) -> None:
    add(cli, arcgis)
    cli("run", "zoning")
    queries = len(arcgis.feature_requests)
    report = cli.json("assess", "zoning", "--from", "2026-05-25", "--to", EDIT_DAY)
    # the layer serves only its current state: the days before it are lost
    assert report["fetch_checked"] is True
    assert report["unrecoverable_dates"] == ["2026-05-25", "2026-05-26", "2026-05-27"]
    assert report["archived_dates"] == [EDIT_DAY]
    later = cli.json("assess", "zoning", "--from", "2026-05-29", "--to", "2026-05-30")
    # after its edit: the run (today) found the layer still in its 05-28 state, so those
    # days are observed, neither missing nor unrecoverable (invariant 12)
    assert later["unrecoverable_dates"] == [] and later["missing_dates"] == []
    assert len(arcgis.feature_requests) <= queries + 3  # at most today's layer, once


def test_layer_without_a_date_fails_then_is_dated_by_a_field(cli: Cli, arcgis: FakeArcGIS) -> None:
    arcgis.editing_info = False  # and no Last-Modified header
    for f in arcgis.features:
        f["attributes"]["EDITED"] = "2026-06-01T08:00:00Z"
    add(cli, arcgis)
    result = cli("run", "zoning", expect=4)
    assert "dataLastEditDate" in result.stderr and "--published-from field:NAME" in result.stderr
    assert arcgis.query_requests == []  # nothing downloaded
    untouched(cli)
    add(cli, arcgis, "--published-from", "field:EDITED", "--replace")
    first = cli.json("run", "zoning")
    assert first["changes"] == 25 and first["published_at"].startswith("2026-06-01T08:00:00")
    again = cli.json("run", "zoning")  # downloaded again: the same payload, not re-applied
    assert again["status"] == "already_applied"
