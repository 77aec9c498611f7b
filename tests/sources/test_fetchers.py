"""Fetchers: dates in file names, the directory fetcher and the HTTP fetcher."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from feedledger.model.errors import (
    BadPayloadError,
    ConfigError,
    FeedledgerError,
    NotFoundError,
)
from feedledger.model.source import SourceConfig
from feedledger.model.timeutil import parse_instant, to_us
from feedledger.sources import Fetched, FetchState, date_in_name, fetch, list_dated


def us(text: str, tz: str = "UTC") -> int:
    return to_us(parse_instant(text, tz))


def source(fetch_at: str | Path, **kw: Any) -> SourceConfig:
    return SourceConfig(name="larimer", key=("parcel_id",), fetch=str(fetch_at), **kw)


# -- date_in_name ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "tz", "expected"),
    [
        ("larimer_2026-08-06.csv", "UTC", "2026-08-06T00:00:00Z"),
        ("larimer_2026-08-06.csv", "America/Denver", "2026-08-06T06:00:00Z"),
        ("larimer_2026-01-06.csv", "America/Denver", "2026-01-06T07:00:00Z"),  # MST
        ("20260806", "UTC", "2026-08-06T00:00:00Z"),
        ("parcels_20260806.csv.gz", "America/Denver", "2026-08-06T06:00:00Z"),
        ("parcels_2026_08_06.jsonl", "UTC", "2026-08-06T00:00:00Z"),
        ("feed-20260806T143000.csv", "UTC", "2026-08-06T14:30:00Z"),
        ("feed-20260806T1430.csv", "America/Denver", "2026-08-06T20:30:00Z"),
        ("feed-2026-08-06T143000Z.csv", "America/Denver", "2026-08-06T14:30:00Z"),
        ("feed-2026-08-06T14:30:00Z.csv", "Europe/Berlin", "2026-08-06T14:30:00Z"),
        ("from_2026-08-01_to_2026-08-06.csv", "UTC", "2026-08-06T00:00:00Z"),  # last wins
        ("v2_2026-08-06_2026-13-45.csv", "UTC", "2026-08-06T00:00:00Z"),  # bad one ignored
        ("2024-02-29.csv", "UTC", "2024-02-29T00:00:00Z"),  # leap day
    ],
)
def test_date_in_name(name: str, tz: str, expected: str) -> None:
    assert date_in_name(name, tz) == us(expected)


@pytest.mark.parametrize(
    "name",
    [
        "larimer.csv",
        "larimer_2026-13-45.csv",  # impossible month and day
        "larimer_2026-02-30.csv",
        "larimer_2025-02-29.csv",  # not a leap year
        "20261301.csv",
        "larimer_2026-08_06.csv",  # mixed separators
        "export_202608061.csv",  # part of a longer number
        "id_1234567890.csv",
        "report_2026-8-6.csv",
        "0000-01-01.csv",
        "feed-20260806T2561.csv",  # impossible time
    ],
)
def test_date_in_name_rejects(name: str) -> None:
    assert date_in_name(name, "UTC") is None


def test_date_in_name_unknown_timezone() -> None:
    with pytest.raises(ConfigError, match="Mars/Olympus"):
        date_in_name("larimer_2026-08-06.csv", "Mars/Olympus")


# -- directory fetcher -------------------------------------------------------------------


def test_directory_picks_newest_dated_file(tmp_path: Path) -> None:
    (tmp_path / "larimer_2026-08-04.csv").write_bytes(b"old")
    (tmp_path / "larimer_2026-08-06.csv").write_bytes(b"newest")
    (tmp_path / "larimer_20260805.csv").write_bytes(b"middle")
    (tmp_path / "README.txt").write_text("not a payload")
    (tmp_path / ".larimer_2026-08-09.csv").write_bytes(b"hidden")
    (tmp_path / "larimer_2026-08-09.csv.tmp").write_bytes(b"partial")
    (tmp_path / "larimer_2026-08-09.csv.part").write_bytes(b"partial")
    (tmp_path / "sub_2026-08-10").mkdir()
    got = fetch(source(tmp_path, timezone="America/Denver"))
    assert got == Fetched(
        data=b"newest",
        published_at=us("2026-08-06T06:00:00Z"),
        original_name="larimer_2026-08-06.csv",
        content_type="text/csv",
    )


def test_directory_field_mode_leaves_published_at_open(tmp_path: Path) -> None:
    (tmp_path / "larimer_2026-08-06.jsonl").write_bytes(b"{}\n")
    got = fetch(source(tmp_path, published_from="field:as_of"))
    assert got.data == b"{}\n"
    assert got.published_at is None


def test_directory_file_url(tmp_path: Path) -> None:
    (tmp_path / "larimer_2026-08-06.csv").write_bytes(b"x")
    got = fetch(source(tmp_path.as_uri()))
    assert got.data == b"x"
    assert got.published_at == us("2026-08-06")


def test_list_dated(tmp_path: Path) -> None:
    for name in ("b_2026-08-06.csv", "a_2026-08-06.csv", "c_2026-08-01.csv", "notes.txt"):
        (tmp_path / name).write_bytes(b"")
    listed = list_dated(tmp_path, "UTC")
    assert [(ts, p.name) for ts, p in listed] == [
        (us("2026-08-01"), "c_2026-08-01.csv"),
        (us("2026-08-06"), "a_2026-08-06.csv"),
        (us("2026-08-06"), "b_2026-08-06.csv"),
    ]
    assert all(p.parent == tmp_path for _, p in listed)


def test_directory_missing(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="larimer") as info:
        fetch(source(tmp_path / "nope"))
    assert "does not exist" in str(info.value)


def test_directory_is_a_file(tmp_path: Path) -> None:
    target = tmp_path / "larimer_2026-08-06.csv"
    target.write_bytes(b"x")
    with pytest.raises(ConfigError, match="not a directory"):
        fetch(source(target))


def test_directory_without_dated_files_lists_names(tmp_path: Path) -> None:
    for i in range(7):
        (tmp_path / f"parcels_{i}.csv").write_bytes(b"")
    with pytest.raises(NotFoundError) as info:
        fetch(source(tmp_path))
    message = str(info.value)
    assert "'larimer'" in message
    assert "parcels_0.csv" in message and "and 2 more" in message
    assert "2026-08-06" in message  # the hint shows an example


def test_directory_empty(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="no payload files"):
        fetch(source(tmp_path))


def test_directory_tie_is_refused(tmp_path: Path) -> None:
    (tmp_path / "larimer_2026-08-06.csv").write_bytes(b"a")
    (tmp_path / "larimer_20260806.csv").write_bytes(b"b")
    (tmp_path / "larimer_2026-08-01.csv").write_bytes(b"old")
    with pytest.raises(BadPayloadError) as info:
        fetch(source(tmp_path))
    message = str(info.value)
    assert "larimer_2026-08-06.csv" in message and "larimer_20260806.csv" in message
    assert "larimer_2026-08-01.csv" not in message


def test_directory_rejects_header_mode(tmp_path: Path) -> None:
    (tmp_path / "larimer_2026-08-06.csv").write_bytes(b"a")
    with pytest.raises(ConfigError, match="HTTP"):
        fetch(source(tmp_path, published_from="header:Last-Modified"))


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root ignores permissions")
def test_directory_unreadable(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "larimer_2026-08-06.csv").write_bytes(b"a")
    locked.chmod(0)
    try:
        with pytest.raises(ConfigError, match="permission denied"):
            fetch(source(locked))
    finally:
        locked.chmod(0o755)


def test_fetch_without_location_or_unknown_scheme() -> None:
    with pytest.raises(ConfigError, match="no fetch location"):
        fetch(SourceConfig(name="larimer", key=("parcel_id",)))
    with pytest.raises(ConfigError, match="scheme 'ftp'"):
        fetch(source("ftp://example.org/larimer.csv"))


# -- HTTP fetcher ------------------------------------------------------------------------

LAST_MODIFIED = "Thu, 06 Aug 2026 14:30:00 GMT"
ETAG = '"v1-abc"'
BODY = b"parcel_id,zoning\n1,R1\n"


@dataclass
class Server:
    base: str
    requests: list[dict[str, str]] = field(default_factory=list)


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        state: Server = self.server.state  # type: ignore[attr-defined]
        state.requests.append({"path": self.path, **dict(self.headers.items())})
        path = self.path.split("?", 1)[0]
        if path == "/feed.csv":
            if self.headers.get("If-None-Match") == ETAG:
                self._send(304, headers={"ETag": ETAG})
                return
            self._send(
                200,
                BODY,
                {"Content-Type": "text/csv", "Last-Modified": LAST_MODIFIED, "ETag": ETAG},
            )
        elif path == "/since.csv":
            if self.headers.get("If-Modified-Since") == LAST_MODIFIED:
                self._send(304)
                return
            self._send(200, BODY, {"Last-Modified": LAST_MODIFIED})
        elif path == "/plain.csv":
            self._send(200, BODY, {"Content-Type": "text/csv"})
        elif path == "/published.csv":
            self._send(200, BODY, {"X-Published": "2026-08-06T09:15:00Z"})
        elif path == "/exports/larimer_2026-08-06.csv":
            self._send(200, BODY, {"Content-Type": "text/csv"})
        elif path == "/latest":
            self._send(302, headers={"Location": "/exports/larimer_2026-08-06.csv"})
        elif path == "/download":
            self._send(
                200, BODY, {"Content-Disposition": 'attachment; filename="parcels_20260805.csv"'}
            )
        elif path == "/missing":
            self._send(404, b"not here")
        elif path == "/boom":
            self._send(500, b"oops")
        else:
            self._send(404)


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def _http_server() -> Iterator[Server]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    state = Server(base=f"http://127.0.0.1:{httpd.server_address[1]}")
    httpd.state = state  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


@pytest.fixture
def server(_http_server: Server) -> Server:
    """A real HTTP server on 127.0.0.1 (one per module); its request log starts empty."""
    _http_server.requests.clear()
    return _http_server


def test_http_200_with_last_modified(server: Server) -> None:
    src = source(f"{server.base}/feed.csv", published_from="header:Last-Modified")
    got = fetch(src)
    assert got.data == BODY
    assert got.published_at == us("2026-08-06T14:30:00Z")
    assert got.original_name == f"{server.base}/feed.csv"
    assert got.content_type == "text/csv"
    assert got.etag == ETAG
    assert got.last_modified == LAST_MODIFIED
    assert "If-None-Match" not in server.requests[0]


def test_http_304_on_second_fetch_with_etag(server: Server) -> None:
    url = f"{server.base}/feed.csv"
    src = source(url, published_from="header:Last-Modified")
    first = fetch(src)
    state = FetchState(etag=first.etag, last_modified=first.last_modified, url=url)
    second = fetch(src, previous=state)
    assert second.data is None
    assert second.published_at is None
    assert second.etag == ETAG
    assert second.last_modified == LAST_MODIFIED  # kept from the previous state
    assert server.requests[1]["If-None-Match"] == ETAG
    assert server.requests[1]["If-Modified-Since"] == LAST_MODIFIED


def test_http_304_with_if_modified_since(server: Server) -> None:
    url = f"{server.base}/since.csv"
    src = source(url, published_from="header:Last-Modified")
    first = fetch(src)
    assert first.etag is None
    second = fetch(src, previous=FetchState(etag=None, last_modified=first.last_modified, url=url))
    assert second.data is None
    assert "If-None-Match" not in server.requests[1]


def test_http_previous_state_for_another_url_is_ignored(server: Server) -> None:
    src = source(f"{server.base}/feed.csv", published_from="header:Last-Modified")
    old = FetchState(etag=ETAG, last_modified=LAST_MODIFIED, url=f"{server.base}/old.csv")
    got = fetch(src, previous=old)
    assert got.data == BODY
    assert "If-None-Match" not in server.requests[0]


def test_http_missing_header(server: Server) -> None:
    src = source(f"{server.base}/plain.csv", published_from="header:Last-Modified")
    with pytest.raises(BadPayloadError, match="no Last-Modified header") as info:
        fetch(src)
    assert "larimer" in str(info.value)


def test_http_other_header_in_iso_form(server: Server) -> None:
    src = source(f"{server.base}/published.csv", published_from="header:X-Published")
    assert fetch(src).published_at == us("2026-08-06T09:15:00Z")


def test_http_filename_date_from_url(server: Server) -> None:
    src = source(
        f"{server.base}/exports/larimer_2026-08-06.csv?token=abc", timezone="America/Denver"
    )
    got = fetch(src)
    assert got.data == BODY
    assert got.published_at == us("2026-08-06T06:00:00Z")


def test_http_filename_date_after_redirect(server: Server) -> None:
    got = fetch(source(f"{server.base}/latest"))
    assert got.published_at == us("2026-08-06")
    assert got.original_name == f"{server.base}/latest"


def test_http_filename_from_content_disposition(server: Server) -> None:
    got = fetch(source(f"{server.base}/download"))
    assert got.published_at == us("2026-08-05")


def test_http_filename_without_date(server: Server) -> None:
    with pytest.raises(BadPayloadError, match="no date in the file name"):
        fetch(source(f"{server.base}/plain.csv"))


def test_http_field_mode(server: Server) -> None:
    got = fetch(source(f"{server.base}/plain.csv", published_from="field:as_of"))
    assert got.data == BODY
    assert got.published_at is None


@pytest.mark.parametrize(("path", "status"), [("/missing", 404), ("/boom", 500)])
def test_http_error_status(server: Server, path: str, status: int) -> None:
    url = f"{server.base}{path}"
    with pytest.raises(FeedledgerError) as info:
        fetch(source(url, published_from="header:Last-Modified"))
    message = str(info.value)
    assert f"HTTP {status}" in message
    assert url in message
    assert "larimer" in message


def test_http_unreachable_port() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/feed.csv"
    with pytest.raises(FeedledgerError, match="cannot reach") as info:
        fetch(source(url))
    assert url in str(info.value)


def test_http_password_is_masked(server: Server) -> None:
    url = server.base.replace("http://", "http://reader:s3cret@") + "/missing"
    with pytest.raises(FeedledgerError) as info:
        fetch(source(url))
    assert "s3cret" not in str(info.value)
    assert "reader:***@" in str(info.value)


def test_http_with_caller_client(server: Server) -> None:
    with httpx.Client() as client:
        got = fetch(
            source(f"{server.base}/feed.csv", published_from="header:Last-Modified"),
            client=client,
        )
        assert got.data == BODY
        assert not client.is_closed  # a caller's client is left open
