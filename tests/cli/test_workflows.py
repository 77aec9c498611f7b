"""CLI workflows end to end: init, sources, archive, run (directory and HTTP), demo."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from feedledger.cli.main import app
from feedledger.config import Workspace
from feedledger.ledger import engine as eng
from helpers import Cli, write_csv


def test_init_creates_workspace_and_schema(store_url: str, tmp_path: Path) -> None:
    runner = CliRunner()
    root = tmp_path / "fresh"
    root.mkdir()
    result = runner.invoke(app, ["init", "--dir", str(root), "--store", store_url, "--json"])
    assert result.exit_code == 0, result.output
    info = json.loads(result.stdout)
    assert info["schema"] == eng.HEAD
    assert (root / "feedledger.toml").exists() and Path(info["archive"]).is_dir()
    again = runner.invoke(app, ["init", "--dir", str(root)])
    assert again.exit_code == 2 and "already exists" in again.stderr
    cur = runner.invoke(app, ["--config", str(root / "feedledger.toml"), "db", "current", "--json"])
    assert json.loads(cur.stdout)["current"] == eng.HEAD


def test_init_default_is_sqlite_under_dot_feedledger(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["init", "--dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert (tmp_path / ".feedledger" / "ledger.db").exists()
    assert (tmp_path / ".feedledger" / "archive").is_dir()


def test_unreachable_store_at_init_is_clear(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["init", "--dir", str(tmp_path), "--store", "postgresql://postgres@127.0.0.1:1/nope"]
    )
    assert result.exit_code == 8 and "cannot reach the store" in result.stderr
    assert not (tmp_path / "feedledger.toml").exists()


def test_source_add_and_list(cli: Cli) -> None:
    out = cli.json(
        "source",
        "add",
        "sup",
        "--key",
        "vendor,site",
        "--format",
        "jsonl",
        "--kind",
        "changes",
        "--revision",
        "rev",
        "--cadence",
        "0 6 * * 1-5",
        "--timezone",
        "Europe/Berlin",
    )
    assert out["key"] == ["vendor", "site"] and out["cadence"] == "0 6 * * 1-5"
    listed = cli.json("source", "list")
    assert [s["name"] for s in listed] == ["sup"] and listed[0]["kind"] == "changes"
    text = cli.ws.config_path.read_text()
    assert "[sources.sup]" in text and 'revision = "rev"' in text
    dup = cli("source", "add", "sup", "--key", "x", expect=2)
    assert "already declared" in dup.stderr


def test_archive_add_list_reindex(cli: Cli, tmp_path: Path, workspace: Workspace) -> None:
    cli("source", "add", "larimer", "--key", "parcel_id")
    f = write_csv(tmp_path / "larimer_2026-08-06.csv", ["parcel_id", "z"], [["1", "R-1"]])
    first = cli.json("archive", "add", "larimer", str(f), "--published-at", "2026-08-06")
    again = cli.json("archive", "add", "larimer", str(f), "--published-at", "2026-08-06")
    assert first["created"] is True and again["created"] is False
    assert first["content_type"] == "text/csv" and first["original_name"] == f.name
    assert first["payload_id"] == again["payload_id"]
    g = write_csv(tmp_path / "larimer_2026-08-07.csv", ["parcel_id", "z"], [["1", "R-2"]])
    cli("archive", "add", "larimer", str(g))  # date from the file name
    listed = cli.json("archive", "list", "larimer")
    assert [p["published_at"][:10] for p in listed] == ["2026-08-06", "2026-08-07"]
    window = cli.json("archive", "list", "larimer", "--from", "2026-08-06", "--to", "2026-08-06")
    assert len(window) == 1
    sidecars = list((workspace.archive_root / "meta" / "larimer").glob("*.json"))
    assert len(sidecars) == 2
    meta = json.loads(sidecars[0].read_text())
    assert {
        "source",
        "published_at",
        "fetched_at",
        "size",
        "original_name",
        "content_type",
        "sha256",
    } <= set(meta)
    # the index is rebuilt from the archive folder alone (here: into a fresh store)
    from feedledger.ledger.schema import payloads
    from feedledger.ledger.store import Store

    store = Store(workspace.store_url)
    with store.begin() as conn:
        conn.execute(payloads.delete())
    store.close()
    assert cli.json("archive", "list", "larimer") == []
    rebuilt = cli.json("archive", "reindex")
    assert rebuilt["added"] == 2 and rebuilt["scanned"] == 2
    assert cli.json("archive", "list", "larimer") == listed


def test_run_from_directory_picks_newest_dated_file(cli: Cli, tmp_path: Path) -> None:
    feed = tmp_path / "exports"
    feed.mkdir()
    write_csv(feed / "larimer_2026-08-04.csv", ["parcel_id", "z"], [["1", "R-1"]])
    write_csv(feed / "larimer_2026-08-06.csv", ["parcel_id", "z"], [["1", "MU-2"]])
    (feed / "notes.txt").write_text("no date here")
    cli(
        "source",
        "add",
        "larimer",
        "--key",
        "parcel_id",
        "--fetch",
        str(feed),
        "--timezone",
        "America/Denver",
    )
    out = cli.json("run", "larimer")
    # a first run on a folder of several dated files loads them all, oldest first, as
    # one backfill (Invariant 5); the newest is the watermark
    assert out["status"] == "recovered" and out["payloads"] == 2
    assert cli.json("watermark", "larimer")["published_at"] == "2026-08-06T06:00:00+00:00"
    again = cli.json("run", "larimer")
    assert again["status"] == "already_applied"


class _Handler(http.server.BaseHTTPRequestHandler):
    body = b"parcel_id,z\n1,R-1\n"
    etag = '"v1"'

    def do_GET(self) -> None:
        if self.headers.get("If-None-Match") == self.etag:
            self.send_response(304)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/csv")
        self.send_header("ETag", self.etag)
        self.send_header("Last-Modified", "Thu, 06 Aug 2026 14:30:00 GMT")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def http_url() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/parcels.csv"
    server.shutdown()


def test_run_from_http_uses_last_modified_and_etag(cli: Cli, http_url: str) -> None:
    cli(
        "source",
        "add",
        "web",
        "--key",
        "parcel_id",
        "--fetch",
        http_url,
        "--published-from",
        "header:Last-Modified",
    )
    out = cli.json("run", "web")
    assert out["status"] == "applied" and out["published_at"] == "2026-08-06T14:30:00+00:00"
    assert cli.json("run", "web") == {"source": "web", "status": "not_modified"}


def test_demo_builds_workspace(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["demo", "--dir", str(tmp_path / "demo")])
    assert result.exit_code == 0, result.output
    assert "MU-3" in result.stdout and "Try next" in result.stdout
    assert "serve\n" in result.stdout and "/sources/larimer/entities/0714-22-1" in result.stdout
    ws = tmp_path / "demo" / "feedledger.toml"
    hist = CliRunner().invoke(
        app, ["--config", str(ws), "history", "larimer", "0714-22-1", "--json"]
    )
    zonings = [v["attributes"]["zoning"] for v in json.loads(hist.stdout)]
    assert zonings == ["R-1", "MU-2", "MU-3"]
    # rerunning the demo rebuilds it from scratch
    assert CliRunner().invoke(app, ["demo", "--dir", str(tmp_path / "demo")]).exit_code == 0


def test_every_query_command_has_json_and_help() -> None:
    runner = CliRunner()
    for cmd in (
        ["history"],
        ["asof"],
        ["runs"],
        ["changes"],
        ["watermark"],
        ["ingest"],
        ["run"],
        ["verify"],
        ["archive", "list"],
        ["archive", "add"],
        ["archive", "reindex"],
        ["source", "list"],
        ["source", "add"],
    ):
        result = runner.invoke(app, [*cmd, "--help"])
        assert result.exit_code == 0 and "--json" in result.stdout, cmd


def test_version_flag_prints_the_package_version() -> None:
    from feedledger import __version__

    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.strip() == f"feedledger {__version__}"
