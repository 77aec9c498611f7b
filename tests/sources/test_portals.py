"""Portal connectors: Socrata and CKAN, through the CLI (`source add` + `run`)
and the API (`src.run()`), against local fake portals (tests/fakes), on both backends."""

from __future__ import annotations

import io
import json
import threading
from pathlib import Path
from typing import Any

import pytest

import feedledger as fl
from fakes.ckan import FakeCkan, ckan_fixture  # noqa: F401 (the `ckan` fixture)
from fakes.socrata import FakeSocrata, socrata_fixture  # noqa: F401 (the `socrata` fixture)
from feedledger.model.timeutil import parse_instant, to_us
from feedledger.scheduler.loop import Options, Scheduler
from helpers import Cli


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Retries wait through an injectable sleep: recorded here, never slept."""
    waited: list[float] = []
    monkeypatch.setattr("feedledger.sources.portal.default_sleep", waited.append)
    return waited


def _rows(n: int, zoning: str = "R-1") -> list[dict[str, str]]:
    return [{":id": f"row-{i:04d}", "parcel_id": f"P{i:03d}", "zoning": zoning} for i in range(n)]


def _add_socrata(cli: Cli, fake: FakeSocrata, *extra: str) -> None:
    cli("source", "add", "parcels", "--connector", "socrata", "--format", "json",
        "--fetch", fake.url, "--key", "parcel_id", *extra)  # fmt: skip


def _live(cli: Cli) -> dict[str, str]:
    rows = cli.json("export", "parcels")
    return {r["parcel_id"]: r["zoning"] for r in rows}


# -- Socrata ---------------------------------------------------------------------------


def test_socrata_pages_then_nothing_new(cli: Cli, socrata: FakeSocrata) -> None:
    socrata.rows = _rows(7)
    _add_socrata(cli, socrata, "--page-size", "3")
    first = cli.json("run", "parcels")
    assert first["changes"] == 7
    offsets = [r.query["$offset"] for r in socrata.row_requests]
    assert offsets == ["0", "3", "6"]  # a short page (1 row) ends the paging
    assert {r.query["$limit"] for r in socrata.row_requests} == {"3"}

    before = len(socrata.row_requests)
    again = cli("run", "parcels")
    assert "nothing new" in again.stdout
    assert len(socrata.row_requests) == before  # no row was asked for

    socrata.rows = _rows(7, zoning="MU-2")
    socrata.rows_updated_at += 3600
    assert cli.json("run", "parcels")["changes"] == 7


def test_socrata_declaration_in_toml(cli: Cli, socrata: FakeSocrata) -> None:
    _add_socrata(cli, socrata)
    text = cli.ws.config_path.read_text(encoding="utf-8")
    assert 'connector = "socrata"' in text
    listed = cli.json("source", "list")
    assert listed[0]["connector"] == "socrata" and listed[0]["resource"] is None


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--connector", "arcgis-ish"], "connector"),
        (["--connector", "socrata", "--resource", "x"], "only for --connector ckan"),
        (["--resource", "x"], "only for --connector ckan"),
        (["--connector", "socrata", "--fetch", "https://h/api/views/abcd-1234.json"],
         "/resource/<4x4 id>.json"),
        (["--connector", "socrata", "--fetch", "https://h/resource/abcd-1234.json",
          "--format", "csv"], "--format json"),
        (["--connector", "ckan", "--fetch", "https://h/dataset/parcels"], "--resource"),
        (["--connector", "ckan", "--fetch", "https://h/nope", "--resource", "r"],
         "/dataset/NAME"),
    ],
)  # fmt: skip
def test_connector_declarations_refused(cli: Cli, args: list[str], needle: str) -> None:
    result = cli("source", "add", "parcels", "--key", "parcel_id", *args, expect=2)
    message = result.stderr.strip()
    assert needle in message and len(message.splitlines()) <= 2
    assert "parcels" not in cli.ws.config_path.read_text(encoding="utf-8").split("[sources")[-1]


def test_socrata_republished_mid_download_restarts_once(cli: Cli, socrata: FakeSocrata) -> None:
    socrata.rows = _rows(5)
    socrata.republish_during_paging = 1
    _add_socrata(cli, socrata, "--page-size", "2")
    assert cli.json("run", "parcels")["changes"] == 5
    assert [r.query["$offset"] for r in socrata.row_requests] == ["0", "2", "4"] * 2


def test_socrata_republished_twice_fails_nothing_applied(cli: Cli, socrata: FakeSocrata) -> None:
    socrata.rows = _rows(5)
    socrata.republish_during_paging = 2
    _add_socrata(cli, socrata, "--page-size", "2")
    result = cli("run", "parcels", expect=11)
    assert "republished while it was downloaded, twice" in result.stderr
    assert cli.json("runs", "parcels") == []


def test_socrata_429_then_success(cli: Cli, socrata: FakeSocrata, sleeps: list[float]) -> None:
    socrata.rows = _rows(3)
    socrata.fail_first = [429, 503]
    _add_socrata(cli, socrata)
    assert cli.json("run", "parcels")["changes"] == 3
    assert sleeps == [2.0, 2.0]  # the server's Retry-After


def test_socrata_keeps_failing_gives_up(
    cli: Cli, socrata: FakeSocrata, sleeps: list[float]
) -> None:
    socrata.rows = _rows(3)
    socrata.fail_first = [503] * 10
    _add_socrata(cli, socrata)
    result = cli("run", "parcels", expect=11)
    assert "HTTP 503" in result.stderr and "after 5 attempts" in result.stderr
    assert len(sleeps) == 4


def test_socrata_html_login_page(cli: Cli, socrata: FakeSocrata) -> None:
    socrata.html = True
    _add_socrata(cli, socrata)
    result = cli("run", "parcels", expect=4)
    assert "HTML page" in result.stderr
    assert cli.json("runs", "parcels") == []


def test_socrata_limits_bound_the_whole_download(cli: Cli, socrata: FakeSocrata) -> None:
    socrata.rows = _rows(7)
    _add_socrata(cli, socrata, "--page-size", "3", "--max-payload-bytes", "200")
    result = cli("run", "parcels", expect=4)
    assert "max_payload_bytes" in result.stderr and cli.json("runs", "parcels") == []
    socrata.hang_s = 3.0  # a portal that does not answer: given up at the deadline
    _add_socrata(cli, socrata, "--fetch-deadline", "0.5", "--replace")
    result = cli("run", "parcels", expect=11)
    assert "fetch_deadline_s" in result.stderr and cli.json("runs", "parcels") == []


def test_socrata_through_the_api(cli: Cli, socrata: FakeSocrata) -> None:
    socrata.rows = _rows(4)
    with fl.open(cli.ws.config_path) as led:
        src = led.add_source(
            "parcels", key=["parcel_id"], format="json", connector="socrata", fetch=socrata.url,
            page_size=2,
        )  # fmt: skip
        first = src.run()
        assert isinstance(first, fl.Ingested) and first.counts.added == 4
        again = src.run()
        assert isinstance(again, fl.NothingToDo) and "nothing new" in again.reason


def test_socrata_missed_days_are_unrecoverable(cli: Cli, socrata: FakeSocrata) -> None:
    socrata.rows = _rows(2)
    socrata.rows_updated_at = 1_780_000_000  # 2026-05-28
    _add_socrata(cli, socrata)
    cli("run", "parcels")
    rows_before = len(socrata.row_requests)
    report = cli.json("assess", "parcels", "--from", "2026-05-25", "--to", "2026-05-28")
    # the portal serves only "now": the days before its current publication are lost
    assert report["fetch_checked"] is True
    assert report["unrecoverable_dates"] == ["2026-05-25", "2026-05-26", "2026-05-27"]
    assert report["archived_dates"] == ["2026-05-28"]
    assert len(socrata.row_requests) == rows_before + 1  # what it serves now: asked once
    # days after the portal's publication, up to the run that found it unchanged: observed
    # (invariant 12), neither missing nor unrecoverable, and no row is downloaded
    later = cli.json("assess", "parcels", "--from", "2026-05-29", "--to", "2026-05-30")
    assert later["unrecoverable_dates"] == [] and later["missing_dates"] == []
    assert len(socrata.row_requests) == rows_before + 1


# -- CKAN ------------------------------------------------------------------------------


def _csv(*rows: tuple[str, str]) -> bytes:
    return ("parcel_id,zoning\n" + "".join(f"{a},{b}\n" for a, b in rows)).encode()


def _add_ckan(cli: Cli, fake: FakeCkan, resource: str, fmt: str = "csv", expect: int = 0) -> None:
    cli("source", "add", "parcels", "--connector", "ckan", "--format", fmt, "--fetch",
        fake.url, "--resource", resource, "--key", "parcel_id", expect=expect)  # fmt: skip


def test_ckan_downloads_resource_then_nothing_new(cli: Cli, ckan: FakeCkan) -> None:
    ckan.resources = {
        "parcels.csv": ("CSV", _csv(("P1", "R-1"), ("P2", "A")), "2026-06-02T09:30:00"),
        "readme": ("PDF", b"%PDF", None),
    }
    _add_ckan(cli, ckan, "parcels.csv")
    first = cli.json("run", "parcels")
    assert first["changes"] == 2
    assert first["published_at"].startswith("2026-06-02T09:30:00")  # no offset: UTC
    assert len(ckan.downloads) == 1
    again = cli("run", "parcels")
    assert "nothing new" in again.stdout and len(ckan.downloads) == 1


def test_ckan_resource_by_id_and_metadata_modified(cli: Cli, ckan: FakeCkan) -> None:
    ckan.resources = {"rows": ("JSON", b'[{"parcel_id": "P1", "zoning": "R-1"}]', None)}
    _add_ckan(cli, ckan, "res-0", fmt="json")
    first = cli.json("run", "parcels")
    assert first["changes"] == 1 and first["published_at"].startswith("2026-06-01T08:00:00")


def test_ckan_success_false(cli: Cli, ckan: FakeCkan) -> None:
    ckan.fail = True
    _add_ckan(cli, ckan, "parcels.csv")
    result = cli("run", "parcels", expect=11)
    assert "CKAN refused package_show" in result.stderr and "Not Found Error" in result.stderr


def test_ckan_ambiguous_or_missing_resource(cli: Cli, ckan: FakeCkan) -> None:
    ckan.resources = {"parcels.csv": ("CSV", _csv(("P1", "R-1")), None)}
    ckan.duplicate_name = "parcels.csv"
    _add_ckan(cli, ckan, "parcels.csv")
    result = cli("run", "parcels", expect=2)
    assert "2 resources of the dataset are named 'parcels.csv'" in result.stderr
    assert "res-dup" in result.stderr
    cli("source", "add", "parcels", "--connector", "ckan", "--fetch", ckan.url,
        "--resource", "nope", "--key", "parcel_id", "--replace")  # fmt: skip
    result = cli("run", "parcels", expect=2)
    assert "no resource named or with id 'nope'" in result.stderr and "res-0" in result.stderr
    assert ckan.downloads == []


def test_ckan_format_must_match(cli: Cli, ckan: FakeCkan) -> None:
    ckan.resources = {"parcels": ("JSON", b"[]", None)}
    _add_ckan(cli, ckan, "parcels", fmt="csv")
    result = cli("run", "parcels", expect=2)
    assert "is JSON but the source's format is csv" in result.stderr
    assert "--format json" in result.stderr


def test_ckan_through_the_api(tmp_path: Path, cli: Cli, ckan: FakeCkan) -> None:
    ckan.resources = {"parcels.csv": ("CSV", _csv(("P1", "R-1")), "2026-06-02T09:30:00Z")}
    with fl.open(cli.ws.config_path) as led:
        src = led.add_source(
            "parcels", key=["parcel_id"], connector="ckan", fetch=ckan.url,
            resource="parcels.csv",
        )  # fmt: skip
        first = src.run()
        assert isinstance(first, fl.Ingested) and first.counts.added == 1
        assert isinstance(src.run(), fl.NothingToDo)


def test_ckan_html_login_page_instead_of_the_file(cli: Cli, ckan: FakeCkan) -> None:
    login = b"<!DOCTYPE html><html><body>Sign in</body></html>"
    ckan.resources = {"parcels.csv": ("CSV", login, "2026-06-02T09:30:00")}
    ckan.html_downloads = True
    _add_ckan(cli, ckan, "parcels.csv")
    result = cli("run", "parcels", expect=4)
    assert "HTML page" in result.stderr and cli.json("runs", "parcels") == []


# -- the scheduler fetches through the connector --------------------------------------


class _Clock:
    def __init__(self, when: str) -> None:
        self.now = to_us(parse_instant(when))

    def now_us(self) -> int:
        return self.now

    def sleep(self, seconds: float, stop: threading.Event) -> None:
        self.now += int(seconds * 1e6)


def _tick(sched: Scheduler) -> list[dict[str, Any]]:
    assert isinstance(sched.log, io.StringIO)
    before = len(sched.log.getvalue().splitlines())
    sched.tick(wait=True)
    lines = [json.loads(x) for x in sched.log.getvalue().splitlines()[before:]]
    return [x for x in lines if x["event"] == "run"]


def test_scheduler_runs_socrata_and_waits_while_nothing_new(cli: Cli, socrata: FakeSocrata) -> None:
    socrata.rows = _rows(3)
    socrata.rows_updated_at = to_us(parse_instant("2026-08-01T12:00:00Z")) // 1_000_000
    _add_socrata(cli, socrata)
    clock = _Clock("2026-08-01T13:00:00Z")
    sched = Scheduler(cli.ws.config_path, Options(workers=1, dispatch=False), clock, io.StringIO())
    assert [r["outcome"] for r in _tick(sched)] == ["applied"]
    rows_asked = len(socrata.row_requests)
    clock.now = to_us(parse_instant("2026-08-02T01:00:00Z"))  # 08-02 is due: unchanged
    # nothing new is an observation (invariant 12): 08-02 observed, the next poll is 08-03's
    assert [r["outcome"] for r in _tick(sched)] == ["unchanged"]
    assert len(socrata.row_requests) == rows_asked  # no row was downloaded
    socrata.rows = _rows(3, zoning="MU-2")
    socrata.rows_updated_at += 86_400
    clock.now = to_us(parse_instant("2026-08-02T05:00:00Z"))
    assert _tick(sched) == []
    clock.now = to_us(parse_instant("2026-08-03T01:00:00Z"))
    [run] = _tick(sched)
    assert (run["action"], run["outcome"], run["changes"]) == ("live", "applied", 3)
