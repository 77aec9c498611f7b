"""A `429` whose `Retry-After` is an HTTP date (RFC 9110 10.2.3 allows one, as well as
delay-seconds) past the fetch deadline is given up at once saying the server asked to
wait until that date -- not five attempts of backoff ending in "HTTP 429 ... after 5
attempts". A date a few seconds ahead is waited for, then the run succeeds. One line,
exit 11, nothing archived. The fake ArcGIS server of tests/fakes/ on 127.0.0.1; both
backends (`cli`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from fakes.arcgis import arcgis_fixture
from feedledger.demo.featureserver import FakeArcGIS
from feedledger.demo.local_server import Reply, Request
from helpers import Cli

_ = (arcgis_fixture,)  # the `arcgis` fixture

FAR = "Wed, 21 Oct 2099 07:28:00 GMT"


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Retries wait through an injectable sleep: recorded here, never slept."""
    waited: list[float] = []
    monkeypatch.setattr("feedledger.sources.portal.default_sleep", waited.append)
    return waited


def _busy(arcgis: FakeArcGIS, retry_after: str, times: int) -> None:
    """The first `times` queries answer 429 with this Retry-After."""
    assert arcgis.server is not None
    route = arcgis.route
    left = [times]

    def busy(request: Request) -> Reply:
        if request.path.endswith("/query") and left[0] > 0:
            left[0] -= 1
            return Reply(429, b"Too Many Requests", "text/plain", {"Retry-After": retry_after})
        return route(request)

    arcgis.server.route = busy


def _add(cli: Cli, arcgis: FakeArcGIS) -> None:
    cli("source", "add", "zoning", "--connector", "arcgis", "--fetch", arcgis.url,
        "--key", "PARCEL_ID", "--fetch-deadline", "30")  # fmt: skip


def test_a_retry_after_date_beyond_the_deadline_is_said_at_once(
    cli: Cli, arcgis: FakeArcGIS, sleeps: list[float]
) -> None:
    _busy(arcgis, FAR, times=100)
    _add(cli, arcgis)
    result = cli("run", "zoning", expect=11)
    message = result.stderr.strip()
    assert len(message.splitlines()) == 1, message
    assert f"the server asked to wait until {FAR} (Retry-After)" in message, message
    assert "fetch_deadline_s of 30 s" in message and "after 5 attempts" not in message
    assert sleeps == []  # given up at once
    assert cli.json("runs", "zoning") == []
    assert not [p for p in cli.ws.archive_root.rglob("*") if p.is_file()]


def test_a_retry_after_date_within_the_deadline_is_waited_for(
    cli: Cli, arcgis: FakeArcGIS, sleeps: list[float]
) -> None:
    soon = format_datetime(datetime.now(UTC) + timedelta(seconds=20), usegmt=True)
    _busy(arcgis, soon, times=1)
    _add(cli, arcgis)
    assert "added 25" in cli("run", "zoning").stdout
    (waited,) = sleeps
    assert 10 <= waited <= 20  # the date's distance (the first backoff would be 1 s)
