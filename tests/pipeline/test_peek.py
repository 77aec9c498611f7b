"""`Source.peek()`: the newest publication as the publisher states it now, asked as
cheaply as the location allows, nothing archived or applied -- a folder's newest dated
file, an HTTP HEAD's ETag or Last-Modified (a GET's hash when it states neither), a
portal connector's metadata alone (no row downloaded)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, date, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import feedledger as fl
from fakes.socrata import FakeSocrata, socrata_fixture  # noqa: F401 (the `socrata` fixture)


@pytest.fixture
def led(tmp_path: Path) -> Iterator[fl.Ledger]:
    with fl.init(tmp_path / "ws") as ledger:
        yield ledger


class Publisher:
    """A county's web server: one CSV, its ETag and Last-Modified as set."""

    def __init__(self) -> None:
        self.body = b"parcel_id,zoning\n1,R-1\n"
        self.etag: str | None = '"v1"'
        self.modified: str | None = "Tue, 04 Aug 2026 06:00:00 GMT"
        self.gets = 0


@pytest.fixture
def publisher() -> Iterator[tuple[Publisher, str]]:
    state = Publisher()

    class Handler(BaseHTTPRequestHandler):
        def _head(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/csv")
            self.send_header("Content-Length", str(len(state.body)))
            if state.etag:
                self.send_header("ETag", state.etag)
            if state.modified:
                self.send_header("Last-Modified", state.modified)
            self.end_headers()

        def do_HEAD(self) -> None:
            self._head()

        def do_GET(self) -> None:
            state.gets += 1
            self._head()
            self.wfile.write(state.body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state, f"http://127.0.0.1:{server.server_port}/parcels.csv"
    finally:
        server.shutdown()
        server.server_close()


def test_a_folder_is_peeked_by_its_newest_dated_file(led: fl.Ledger, tmp_path: Path) -> None:
    feed = tmp_path / "feed"
    feed.mkdir()
    (feed / "larimer_2026-08-01.csv").write_text("parcel_id\n1\n")
    (feed / "larimer_2026-08-03.csv").write_text("parcel_id\n1\n")
    (feed / "notes.txt").write_text("no date")
    src = led.add_source("larimer", key=["parcel_id"], timezone="America/Denver", fetch=str(feed))
    pub = src.peek()
    assert pub.via == "listing"
    assert pub.published_at == datetime(2026, 8, 3, 6, tzinfo=UTC)
    assert "larimer_2026-08-03.csv" in pub.version
    assert src.archive_list() == []  # nothing archived
    (feed / "larimer_2026-08-04.csv").write_text("parcel_id\n2\n")
    assert src.peek().version != pub.version


def test_an_http_source_is_peeked_by_head_never_downloaded(
    led: fl.Ledger, publisher: tuple[Publisher, str]
) -> None:
    state, url = publisher
    src = led.add_source(
        "county", key=["parcel_id"], fetch=url, published_from="header:Last-Modified"
    )
    pub = src.peek()
    assert (pub.via, pub.etag, pub.version) == ("head", '"v1"', 'etag:"v1"')
    assert pub.published_at == datetime(2026, 8, 4, 6, tzinfo=UTC)
    assert state.gets == 0
    state.etag = None  # Last-Modified alone
    assert src.peek().version == "last-modified:2026-08-04T06:00:00+00:00"
    state.modified = None  # neither: the body is fetched and hashed, then dropped
    dated = url.replace("parcels.csv", "larimer_2026-08-05.csv")
    named = led.add_source("named", key=["parcel_id"], fetch=dated)  # dated by its name
    first = named.peek()
    assert first.via == "fetched" and state.gets == 1
    assert first.published_at == datetime(2026, 8, 5, tzinfo=UTC)
    state.body = b"parcel_id,zoning\n1,MU-2\n"
    assert named.peek().version != first.version
    for each in (src, named):
        assert each.archive_list() == [] and each.runs() == []


def test_a_connector_is_peeked_by_its_metadata_alone(led: fl.Ledger, socrata: FakeSocrata) -> None:
    socrata.rows = [{":id": "row-1", "parcel_id": "P1", "zoning": "R-1"}]
    socrata.rows_updated_at = 1_785_801_600  # 2026-08-04T00:00:00Z
    src = led.add_source(
        "parcels", key=["parcel_id"], connector="socrata", format="json", fetch=socrata.url
    )
    pub = src.peek()
    assert pub.via == "metadata"
    assert pub.published_at == datetime(2026, 8, 4, tzinfo=UTC)
    assert pub.version == "socrata:2026-08-04T00:00:00+00:00"
    assert socrata.row_requests == []  # no row downloaded
    assert pub.to_json()["published_at"] == "2026-08-04T00:00:00+00:00"
    assert date(2026, 8, 4) == pub.published_at.date()
