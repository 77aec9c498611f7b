"""Issue 13, the fetch limits, the environment failing, rejected payloads and the demo
install (items 14, 15, 16, 17, 30, 31)."""

from __future__ import annotations

import contextlib
import re
import threading
import time
import tomllib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from conftest import Cli
from feedledger.config import make_source
from feedledger.model.errors import BadPayloadError, ConfigError, FeedledgerError
from feedledger.model.source import SourceConfig
from feedledger.sources import fetch

ROOT = Path(__file__).resolve().parents[1]


# -- item 30: `make demo` installs quietly --------------------------------------------------


def test_pyproject_license_is_an_spdx_string_with_a_setuptools_that_reads_it() -> None:
    """A `license = {text = ...}` table makes setuptools >= 77 print a 15-line
    deprecation warning per build step (45 lines under `pip install -q -e .`)."""
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert meta["project"]["license"] == "Apache-2.0"
    requires = meta["build-system"]["requires"]
    setuptools = [r for r in requires if r.startswith("setuptools")]
    assert setuptools, requires
    match = re.fullmatch(r"setuptools>=(\d+)(?:\.\d+)*", setuptools[0])
    assert match is not None and int(match[1]) >= 77, setuptools
    assert "pip install -q" in (ROOT / "Makefile").read_text(encoding="utf-8")


# -- item 14: a fetch has a size limit and an overall deadline --------------------------

TRICKLE_GAP_S = 0.05  # the slow server's pause between bytes
SERVER_CAP_BYTES = 256 * 1024 * 1024  # the endless server stops by itself past this


class _FakeHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        stop: threading.Event = self.server.stop  # type: ignore[attr-defined]
        if path.endswith("/endless_2026-08-06.csv"):
            # chunked, never-ending body (bounded: stops at a cap or at teardown)
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            block = b"id,v\n" + b"1,x\n" * 16383
            sent = 0
            try:
                while sent < SERVER_CAP_BYTES and not stop.is_set():
                    self.wfile.write(f"{len(block):x}\r\n".encode() + block + b"\r\n")
                    sent += len(block)
            except OSError:
                pass  # the client hung up: what a size limit does
        elif path.endswith("/trickle_2026-08-06.csv"):
            body = b"id,v\n" + b"1,x\n" * 500
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                for i in range(len(body)):
                    if stop.wait(TRICKLE_GAP_S):
                        return
                    self.wfile.write(body[i : i + 1])
                    self.wfile.flush()
            except OSError:
                pass
        elif path.endswith("/declared_2026-08-06.csv"):
            self.send_response(200)
            self.send_header("Content-Length", str(10 * 1024**3))
            self.end_headers()
            with contextlib.suppress(OSError):
                self.wfile.write(b"id,v\n")
        elif path.endswith("/small_2026-08-06.csv"):
            body = b"id,v\n1,x\n2,y\n"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()


@pytest.fixture
def fake_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Misbehaving publishers on 127.0.0.1; each stops by itself at teardown."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _FakeHandler)
    httpd.daemon_threads = True
    httpd.stop = threading.Event()  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.stop.set()  # type: ignore[attr-defined]
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def _src(url: str, **values: Any) -> SourceConfig:
    return make_source("feed", key=("id",), fetch=url, **values)


def test_source_defaults_are_generous_limits() -> None:
    src = _src("http://127.0.0.1:1/x.csv")
    assert src.max_payload_bytes == 5 * 1024**3
    assert src.fetch_deadline_s == 1800.0
    with pytest.raises(ConfigError, match="max_payload_bytes"):
        _src("http://127.0.0.1:1/x.csv", max_payload_bytes=0)
    with pytest.raises(ConfigError, match="fetch_deadline_s"):
        _src("http://127.0.0.1:1/x.csv", fetch_deadline_s=-1)


def test_endless_stream_stops_at_max_payload_bytes(fake_server: str) -> None:
    url = f"{fake_server}/endless_2026-08-06.csv"
    src = _src(url, max_payload_bytes=3 * 1024 * 1024)
    started = time.monotonic()
    with pytest.raises(BadPayloadError) as info:
        fetch(src)
    assert time.monotonic() - started < 60  # a hang detector, not a timing assert
    message = str(info.value)
    assert "'feed'" in message and url in message
    assert "max_payload_bytes of 3,145,728 bytes" in message
    assert "\n" not in message


def test_declared_content_length_over_the_limit_is_refused_before_download(
    fake_server: str,
) -> None:
    url = f"{fake_server}/declared_2026-08-06.csv"
    with pytest.raises(BadPayloadError, match=r"declares 10,737,418,240 bytes"):
        fetch(_src(url, max_payload_bytes=1024))


def test_slow_trickle_stops_at_the_fetch_deadline(fake_server: str) -> None:
    """1 byte every 50 ms never trips the per-read timeout; the overall deadline does."""
    url = f"{fake_server}/trickle_2026-08-06.csv"
    started = time.monotonic()
    with pytest.raises(FeedledgerError) as info:
        fetch(_src(url, fetch_deadline_s=0.5))
    assert time.monotonic() - started < 30  # the body alone would take 100 s
    message = str(info.value)
    assert "'feed'" in message and url in message
    assert "fetch_deadline_s of 0.5 s" in message


def test_a_payload_within_the_limits_is_fetched_whole(fake_server: str) -> None:
    got = fetch(_src(f"{fake_server}/small_2026-08-06.csv", max_payload_bytes=13))
    assert got.data == b"id,v\n1,x\n2,y\n"
    with pytest.raises(BadPayloadError):
        fetch(_src(f"{fake_server}/small_2026-08-06.csv", max_payload_bytes=12))


def test_a_local_file_over_the_limit_is_not_read(tmp_path: Path) -> None:
    folder = tmp_path / "exports"
    folder.mkdir()
    (folder / "feed_2026-08-06.csv").write_bytes(b"id,v\n1,x\n")
    with pytest.raises(BadPayloadError, match="max_payload_bytes of 4 bytes"):
        fetch(_src(str(folder), max_payload_bytes=4))
    assert fetch(_src(str(folder), max_payload_bytes=9)).data == b"id,v\n1,x\n"


def test_run_refuses_an_endless_stream_and_keeps_the_ledger_untouched(
    cli: Cli, fake_server: str
) -> None:
    url = f"{fake_server}/endless_2026-08-06.csv"
    cli("source", "add", "feed", "--key", "id", "--fetch", url,
        "--max-payload-bytes", "2000000", "--fetch-deadline", "120")  # fmt: skip
    declared = cli.json("source", "list")[0]
    assert declared["max_payload_bytes"] == 2_000_000
    assert declared["fetch_deadline_s"] == 120.0
    toml = cli.ws.config_path.read_text(encoding="utf-8")
    assert "max_payload_bytes = 2000000" in toml and "fetch_deadline_s = 120.0" in toml
    result = cli("run", "feed", expect=4)
    assert "max_payload_bytes of 2,000,000 bytes" in result.stderr
    assert url in result.stderr
    assert cli.json("archive", "list", "feed") == []
    assert cli.json("runs", "feed") == []


# -- item 16: only `init` and `db upgrade` create a store ------------------------------


def test_a_mistyped_sqlite_store_path_creates_nothing(tmp_path: Path) -> None:
    from feedledger.config import Workspace

    ws = Workspace.create(tmp_path / "ws", store_url=None, archive=None)
    missing = tmp_path / "nonexistent" / "dir" / "l.db"
    text = ws.config_path.read_text(encoding="utf-8")
    ws.config_path.write_text(
        text.replace("sqlite:///.feedledger/ledger.db", f"sqlite:///{missing}"), encoding="utf-8"
    )
    cli = Cli(ws)
    cli("source", "add", "p", "--key", "id")
    payload = tmp_path / "p_2026-08-06.csv"
    payload.write_text("id,v\n1,a\n", encoding="utf-8")
    for args in (
        ("db", "current"),
        ("runs", "p"),
        ("watermark", "p"),
        ("history", "p", "1"),
        ("archive", "list", "p"),
        ("ingest", "p", str(payload)),
        ("health",),
    ):
        result = cli(*args, expect=8)
        line = result.stderr.strip()
        assert line.count("\n") == 0, (args, line)
        assert f"no store at {missing}" in line, (args, line)
        assert "feedledger init" in line and "db upgrade" in line, (args, line)
        assert not missing.parent.parent.exists(), args
    # `db upgrade` is how an operator creates it there on purpose
    cli("db", "upgrade")
    assert missing.is_file()
    assert cli.json("runs", "p") == []
