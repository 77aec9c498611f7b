"""The fetch limits, the environment failing, rejected payloads and the demo install."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import threading
import time
import tomllib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from fault_pause import FaultPause
from feedledger.config import make_source
from feedledger.model.errors import BadPayloadError, ConfigError, FeedledgerError
from feedledger.model.source import SourceConfig
from feedledger.sources import fetch
from helpers import PG_ENV, PG_SKIP, Cli

ROOT = Path(__file__).resolve().parents[2]


# -- `make demo` installs quietly --------------------------------------------------


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


# -- a fetch has a size limit and an overall deadline --------------------------

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


# -- only `init` and `db upgrade` create a store ------------------------------


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


# -- refused payloads are listed, and the refusal says where the bytes are ---------


@pytest.fixture(params=["local", "s3"])
def any_archive(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    from feedledger.archive import open_archive

    if request.param == "local":
        return open_archive(tmp_path / "archive")
    bucket = request.getfixturevalue("s3_bucket")
    return open_archive(f"s3://{bucket}/archive")


def _write_raw(archive: Any, rel: str, data: bytes, request: pytest.FixtureRequest) -> None:
    from feedledger.archive import LocalArchive

    if isinstance(archive, LocalArchive):
        path = archive.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    else:
        fs = request.getfixturevalue("s3_fs")
        fs.pipe_file(f"{archive.bucket}/{archive.prefix}/{rel}", data)


def test_archive_lists_refused_payloads_of_a_source(
    any_archive: Any, request: pytest.FixtureRequest
) -> None:
    import hashlib
    import json

    bad, other, typo = b"\x00\x01 not a csv", b"id\n1\n", b"id,v\n9,z\n"
    where = any_archive.keep_rejected("p", bad, original_name="bad.csv", reason="unreadable")
    any_archive.keep_rejected("q", other, reason="another source's")
    any_archive.keep_rejected("p", typo, reason="unknown source", filed=False)
    # a note written by an older feedledger: unfiled, no time recorded
    old_sha = hashlib.sha256(b"old").hexdigest()
    any_archive.put_object(b"old")
    old_note = {"format": 1, "source": "p", "sha256": old_sha, "size": 3,
                "original_name": "old.csv", "reason": "no publisher date"}  # fmt: skip
    _write_raw(any_archive, f"rejected/_unfiled/{old_sha[:16]}-00000000.json",
               json.dumps(old_note).encode(), request)  # fmt: skip
    # an ambiguous payload: different bytes for a taken publisher timestamp
    any_archive.put("p", b"id\n1\n", published_at=1_000_000, fetched_at=2_000_000)
    with pytest.raises(BadPayloadError):
        any_archive.put("p", b"id\n2\n", published_at=1_000_000, fetched_at=3_000_000)

    found = any_archive.rejected("p")
    by_sha = {item.sha256: item for item in found}
    assert set(by_sha) == {
        hashlib.sha256(bad).hexdigest(),
        hashlib.sha256(typo).hexdigest(),
        old_sha,
        hashlib.sha256(b"id\n2\n").hexdigest(),
    }
    first = by_sha[hashlib.sha256(bad).hexdigest()]
    assert (first.kind, first.reason, first.original_name, first.size) == (
        "unreadable", "unreadable", "bad.csv", len(bad)
    )  # fmt: skip
    assert first.location == where and first.rejected_at is not None
    assert "/rejected/p/" in first.note
    assert "/rejected/_unfiled/" in by_sha[hashlib.sha256(typo).hexdigest()].note
    old = by_sha[old_sha]
    assert (old.rejected_at, old.reason, old.kind) == (None, "no publisher date", "unreadable")
    assert found[0] is old  # unknown times first
    ambiguous = by_sha[hashlib.sha256(b"id\n2\n").hexdigest()]
    assert (ambiguous.kind, ambiguous.published_at) == ("ambiguous", 1_000_000)
    assert ambiguous.payload_id is not None
    assert [i.sha256 for i in any_archive.rejected("q")] == [hashlib.sha256(other).hexdigest()]
    assert any_archive.rejected("nothing") == []
    assert any_archive.get(first.sha256) == bad


def test_refusals_say_where_the_bytes_are_and_archive_list_rejected_shows_them(
    cli: Cli, tmp_path: Path
) -> None:
    cli("source", "add", "p", "--key", "id")
    bad = tmp_path / "p_2026-08-06.csv"
    bad.write_bytes(b"other,v\n1,a\n")  # no key column
    result = cli("ingest", "p", str(bad), expect=4)
    line = result.stderr.strip()
    match = re.search(r"the bytes are kept at (\S+)", line)
    assert match is not None and "\n" not in line, line
    kept = Path(match[1])
    assert kept.read_bytes() == bad.read_bytes()
    assert kept.is_relative_to(cli.ws.archive_root / "objects")

    undated = tmp_path / "undated.csv"
    undated.write_bytes(b"id,v\n1,a\n")
    line = cli("ingest", "p", str(undated), expect=2).stderr
    assert "no publisher date" in line and "the bytes are kept at " in line
    line = cli("ingest", "nosuch", str(undated), expect=3).stderr
    assert "unknown source" in line and "the bytes are kept at " in line

    listed = cli.json("archive", "list", "p", "--rejected")
    assert [(r["kind"], r["original_name"]) for r in listed] == [
        ("unreadable", "p_2026-08-06.csv"),
        ("unreadable", "undated.csv"),
    ]
    assert listed[0]["location"] == str(kept)
    assert "/rejected/p/" in listed[0]["note"]
    assert set(listed[0]) >= {"source", "sha256", "size", "reason", "rejected_at"}
    # bytes sent under a mistyped name are unfiled, and listed under that name
    [typo] = cli.json("archive", "list", "nosuch", "--rejected")
    assert "/rejected/_unfiled/" in typo["note"] and "unknown source" in typo["reason"]
    human = cli("archive", "list", "p", "--rejected").stdout
    assert "p_2026-08-06.csv" in human and "unreadable" in human
    # the accepted listing is unchanged
    assert cli.json("archive", "list", "p") == []
    cli("archive", "list", "p", "--rejected", "--from", "2026-08-01", expect=2)


# -- the environment failing: one line naming the path and the fix ---------------


def _one_line(result: Any) -> str:
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert lines[0].startswith("error: "), lines[0]
    return lines[0]


def _payload(tmp_path: Path, day: int, rows: int, width: int = 10) -> Path:
    path = tmp_path / f"p_2026-08-{day:02d}.csv"
    with path.open("w", encoding="utf-8") as fh:
        fh.write("id,v\n")
        fh.writelines(f"{i},{'v' * width}{day}\n" for i in range(rows))
    return path


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (errno.ENOSPC, ("the disk is full", "free space on the disk holding")),
        (errno.EROFS, ("the file system is read-only", "read-write")),
    ],
)
def test_archive_write_failure_is_one_line_and_the_ledger_untouched(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int, words: tuple[str, str]
) -> None:
    """Tests run as root, where chmod stops nothing: the OS error is injected at the
    archive's fsync (what a full disk or a file system remounted read-only answers)."""
    cli("source", "add", "p", "--key", "id")
    real_fsync = os.fsync

    def failing_fsync(fd: int) -> None:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "fsync", failing_fsync)
    result = cli("ingest", "p", str(_payload(tmp_path, 6, 3)), expect=8)
    monkeypatch.setattr(os, "fsync", real_fsync)
    line = _one_line(result)
    assert f"cannot write the archive at {cli.ws.archive_root}" in line
    assert words[0] in line and words[1] in line and "the ledger is unchanged" in line
    assert cli.json("runs", "p") == [] and cli.json("archive", "list", "p") == []


def _fill_sqlite_store_at_its_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every new connection of the store may not grow its file: SQLite's own 'database
    or disk is full' (SQLITE_FULL), as on a full disk."""
    from feedledger.ledger import engine as eng

    real = eng._sqlite_pragmas

    def limited(conn: Any, record: Any) -> None:
        real(conn, record)
        cur = conn.cursor()
        pages = cur.execute("PRAGMA page_count").fetchone()[0]
        cur.execute(f"PRAGMA max_page_count={pages}")
        cur.close()

    monkeypatch.setattr(eng, "_sqlite_pragmas", limited)


def test_store_disk_full_is_one_line_stored_on_the_run_and_nothing_applied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from feedledger.config import Workspace

    ws = Workspace.create(tmp_path / "ws", store_url=None, archive=None)
    cli = Cli(ws)
    cli("db", "upgrade")
    cli("source", "add", "p", "--key", "id")
    cli("ingest", "p", str(_payload(tmp_path, 6, 10)))
    db = ws.root / ".feedledger" / "ledger.db"
    with monkeypatch.context() as patch:
        _fill_sqlite_store_at_its_size(patch)
        result = cli("ingest", "p", str(_payload(tmp_path, 7, 3000, width=200)), expect=8)
    line = _one_line(result)
    assert f"cannot write the store at {db}: the disk is full (database or disk is full)" in line
    assert "free space on the disk holding" in line and "schema" not in line
    runs = cli.json("runs", "p")
    assert [r["status"] for r in runs] == ["succeeded", "failed"]
    assert "database or disk is full" in runs[1]["error"]
    assert "cannot rollback" not in runs[1]["error"]
    assert cli.json("watermark", "p")["published_at"].startswith("2026-08-06")
    # space again: the same command applies it
    cli("ingest", "p", str(_payload(tmp_path, 7, 3000, width=200)))


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 3 MiB tmpfs, where it can be mounted (root with CAP_SYS_ADMIN); else skip."""
    import shutil
    import subprocess

    mount = shutil.which("mount")
    point = tmp_path / "tiny"
    point.mkdir()
    if mount is None or os.geteuid() != 0:
        pytest.skip("needs root to mount a small tmpfs")
    done = subprocess.run(
        [mount, "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(point)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield point
    finally:
        subprocess.run(["umount", "-l", str(point)], check=False)


def test_staged_scratch_file_on_a_full_disk_names_the_cause(tiny_disk: Path) -> None:
    """The bulk-staging driver (ADBC) used to report its own failed ROLLBACK, 'cannot
    rollback - no transaction is active', instead of the full disk, and escaped as a
    traceback."""
    from feedledger.ledger import staging

    data = pl.DataFrame({"a": list(range(200_000)), "b": ["x" * 40] * 200_000})
    with pytest.raises(Exception, match="database or disk is full") as info:
        staging.write_file(tiny_disk / "scratch", [data])
    assert "cannot rollback" not in str(info.value)


def test_config_file_a_folder_a_repeated_key_and_an_archive_file(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from feedledger.cli.main import app

    runner = CliRunner()

    def run(config: Path, *args: str) -> str:
        result = runner.invoke(app, ["--config", str(config), *args])
        assert result.exit_code == 2, (result.exit_code, result.stderr, result.exception)
        return _one_line(result)

    folder = tmp_path / "feedledger.toml"
    folder.mkdir()
    line = run(folder, "runs", "p")
    assert f"{folder} is a folder, not a feedledger.toml file" in line and "--config" in line

    repeated = tmp_path / "repeated.toml"
    repeated.write_text(
        '[store]\nurl = "sqlite:///a.db"\nurl = "sqlite:///b.db"\n', encoding="utf-8"
    )
    line = run(repeated, "runs", "p")
    assert str(repeated) in line and "Cannot overwrite a value (at line 3" in line
    assert "once per table" in line

    inline = tmp_path / "inline.toml"  # tomllib words this one otherwise
    inline.write_text("[store]\nx = {a = 1, a = 2}\n", encoding="utf-8")
    line = run(inline, "runs", "p")
    assert "Duplicate inline table key 'a' (at line 2" in line and "once per table" in line

    a_file = tmp_path / "not-a-folder"
    a_file.write_text("x", encoding="utf-8")
    archive = tmp_path / "archive-file.toml"
    archive.write_text(f'[archive]\npath = "{a_file}"\n', encoding="utf-8")
    line = run(archive, "runs", "p")
    assert f"[archive] path {a_file} is a file, not a folder" in line


# -- a PostgreSQL backend terminated mid-COPY: "connection lost", one line ---------


def test_postgresql_backend_terminated_mid_copy_says_the_connection_was_lost(
    tmp_path: Path,
) -> None:
    import subprocess
    import sys
    import uuid

    base = os.environ.get(PG_ENV)
    if not base:
        pytest.skip(PG_SKIP)
    import psycopg

    from feedledger.config import Workspace
    from feedledger.ledger import engine as eng

    schema, app = f"t_{uuid.uuid4().hex[:12]}", f"fl_i13_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(base, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
    try:
        sep = "&" if "?" in base else "?"
        url = f"{base}{sep}options=-csearch_path%3D{schema}&application_name={app}"
        ws = Workspace.create(tmp_path / "ws", store_url=url, archive=None)
        engine = eng.make_engine(url)
        eng.upgrade(engine)
        engine.dispose()
        cli = Cli(ws)
        cli("source", "add", "p", "--key", "id")
        # two COPY chunks (50,000 versions each), so the loss is met inside the COPY
        payload = _payload(tmp_path, 6, 60_000, width=1)
        # held inside the COPY (its first chunk sent) until the test has ended exactly
        # that connection's backend (published by the pause; no timed pause, no guess)
        pause = FaultPause(tmp_path, "mid_copy")
        command = [sys.executable, "-m", "feedledger", "--config", str(ws.config_path)]
        proc = subprocess.Popen(
            [*command, "ingest", "p", str(payload)],
            env={**os.environ, **pause.env()},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            held = pause.wait(proc)
            with psycopg.connect(base, autocommit=True) as admin:
                row = admin.execute(
                    "SELECT application_name, query FROM pg_stat_activity WHERE pid = %s",
                    (held["backend_pid"],),
                ).fetchone()
                assert row is not None and row[0] == app, row
                assert row[1].startswith("COPY versions"), row
                # ended, and waited for until gone (a hang detector's timeout, in ms)
                (terminated,) = admin.execute(
                    "SELECT pg_terminate_backend(%s, 300000)", (held["backend_pid"],)
                ).fetchone()
            pause.resume()
            out, err = proc.communicate(timeout=300)  # only detects a hang
        finally:
            pause.resume()
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        assert terminated, err
        assert proc.returncode == 8, (proc.returncode, err)
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert len(lines) == 1, err  # no stray "error ignored terminating <psycopg.Copy>"
        assert lines[0].startswith("error: lost the connection to the store at "), lines[0]
        assert "schema" not in lines[0] and out == ""
        [run] = cli.json("runs", "p")
        assert run["status"] == "failed" and "lost the connection" in run["error"]
        assert cli.json("archive", "list", "p")  # archived first, as ever
        # nothing applied: the same command applies the payload now
        cli("ingest", "p", str(payload))
    finally:
        with psycopg.connect(base, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
