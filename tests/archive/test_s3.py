"""The archive on S3-compatible object storage: what only S3 has (conditional writes, the
claims that settle rival payloads without locks, endpoints, credentials, unreachable
stores) and the CLI end to end. Runs against moto's server on 127.0.0.1 (conftest).
The behaviour shared with the local archive is tested on both in
tests/archive/test_content_addressed.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from feedledger.archive import LocalArchive, open_archive
from feedledger.archive.objectstore import S3Archive
from feedledger.archive.s3client import (
    ArchiveUnavailableError,
    parse_s3_url,
    resolve_endpoint,
)
from feedledger.archive.sidecar import sidecar_bytes
from feedledger.cli.exit_codes import exit_code
from feedledger.config import Workspace
from feedledger.model.errors import AmbiguousPayloadError, ConfigError
from feedledger.model.payload import PayloadRef
from feedledger.model.timeutil import parse_instant, to_us
from helpers import Cli, payload_ref, write_csv

DAY1 = to_us(parse_instant("2026-08-06", "America/Denver"))
FETCHED = to_us(parse_instant("2026-08-09T10:00:00Z"))
CSV = b"parcel_id,zoning\n1,R1\n2,C2\n"


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A port on 127.0.0.1 that refuses connections: bound (so no other test, in this
    process or another, can take it meanwhile) but never listening."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        port: int = held.getsockname()[1]
        yield port


@pytest.fixture
def archive(s3_bucket: str) -> S3Archive:
    opened = open_archive(f"s3://{s3_bucket}/team/archive")
    assert isinstance(opened, S3Archive)
    return opened


def _key(archive: S3Archive, rel: str) -> str:
    return f"{archive.bucket}/{archive.prefix}/{rel}"


def _ref(source: str, data: bytes, published_at: int) -> PayloadRef:
    return payload_ref(source, data, published_at, FETCHED)


# -- write-once ---------------------------------------------------------------------------


def test_conditional_writes_never_overwrite(archive: S3Archive, s3_fs: Any) -> None:
    ref, _ = archive.put("larimer", CSV, published_at=DAY1, fetched_at=FETCHED)
    keys = {
        "object": f"objects/{ref.sha256[:2]}/{ref.sha256}",
        "sidecar": f"meta/larimer/{DAY1:020d}-{ref.payload_id}.json",
        "claim": f"claims/larimer/{DAY1:020d}.json",
    }
    before = {name: s3_fs.info(_key(archive, rel)) for name, rel in keys.items()}
    # the store itself refuses to replace a key (If-None-Match: *)
    client = archive._s3
    assert client.conditional_writes() is True
    for rel in keys.values():
        assert client.create(rel, b"something else") is False
    archive.put("larimer", CSV, published_at=DAY1, fetched_at=FETCHED + 1)
    archive.put("larimer", CSV, published_at=DAY1 + 1, fetched_at=FETCHED)
    for name, rel in keys.items():
        after = s3_fs.info(_key(archive, rel))
        assert (after["ETag"], after["LastModified"]) == (
            before[name]["ETag"],
            before[name]["LastModified"],
        ), name
    assert archive.get(ref.sha256) == CSV
    assert json.loads(s3_fs.cat_file(_key(archive, keys["claim"])))["payload_id"] == ref.payload_id


def test_store_ignoring_conditional_writes_is_detected(
    archive: S3Archive, s3_fs: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store that ignores If-None-Match gets a warning and a look before each write."""

    def overwrite(rel: str, data: bytes) -> bool:
        s3_fs.pipe_file(_key(archive, rel), data)
        return True

    monkeypatch.setattr(archive._s3, "_put_if_absent", overwrite)
    with pytest.warns(UserWarning, match="ignores conditional writes"):
        ref, created = archive.put("larimer", CSV, published_at=DAY1, fetched_at=FETCHED)
    assert created
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once per archive, not per write
        assert archive.put("larimer", CSV, published_at=DAY1, fetched_at=FETCHED + 1) == (
            ref,
            False,
        )
    sidecar = f"meta/larimer/{DAY1:020d}-{ref.payload_id}.json"
    assert archive._s3.create(sidecar, b"{}") is False
    assert json.loads(s3_fs.cat_file(_key(archive, sidecar)))["fetched_at_us"] == FETCHED


# -- rival payloads without locks -----------------------------------------------------------


def test_threads_racing_on_one_publication(s3_bucket: str) -> None:
    """Each round, six workers (own archive objects, as on six machines) put two different
    payloads for one timestamp: exactly one payload wins, once."""
    location = f"s3://{s3_bucket}/race"
    workers = [open_archive(location) for _ in range(6)]
    rounds = 8
    barrier = threading.Barrier(len(workers))
    outcomes: list[tuple[int, bytes, str, bool]] = []
    lock = threading.Lock()

    def work(index: int, archive: Any) -> None:
        for r in range(rounds):
            data = f"round {r} version {'ab'[index % 2]}\n".encode()
            barrier.wait(timeout=60)
            try:
                _, created = archive.put("larimer", data, published_at=DAY1 + r, fetched_at=FETCHED)
                result = ("ok", created)
            except AmbiguousPayloadError:
                result = ("ambiguous", False)
            with lock:
                outcomes.append((r, data, *result))

    threads = [threading.Thread(target=work, args=(i, w)) for i, w in enumerate(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert len(outcomes) == rounds * len(workers)
    accepted = open_archive(location).scan("larimer")
    assert [r.published_at for r in accepted] == [DAY1 + r for r in range(rounds)]
    for r in range(rounds):
        mine = [o for o in outcomes if o[0] == r]
        winners = {data for _, data, kind, _ in mine if kind == "ok"}
        assert len(winners) == 1, mine
        (winner,) = winners
        assert hashlib.sha256(winner).hexdigest() == accepted[r].sha256
        assert all(kind == "ambiguous" for _, data, kind, _ in mine if data != winner)
        assert sum(created for *_, created in mine) == 1, mine


def test_claim_without_sidecar_is_completed(archive: S3Archive, s3_fs: Any) -> None:
    """A writer that stopped between its claim and its sidecar: whoever comes next writes
    the sidecar from the claim, so the first payload stays the accepted one."""
    first = _ref("larimer", CSV, DAY1)
    archive.put_object(CSV)
    s3_fs.pipe_file(_key(archive, f"claims/larimer/{DAY1:020d}.json"), sidecar_bytes(first))
    assert archive.scan() == []  # claimed, not yet recorded
    with pytest.raises(AmbiguousPayloadError, match=first.payload_id):
        archive.put("larimer", CSV + b"3,R2\n", published_at=DAY1, fetched_at=FETCHED)
    assert archive.scan() == [first]
    assert archive.put("larimer", CSV, published_at=DAY1, fetched_at=FETCHED + 5) == (first, False)


def test_same_bytes_retry_completes_its_own_claim(archive: S3Archive, s3_fs: Any) -> None:
    first = _ref("larimer", CSV, DAY1)
    archive.put_object(CSV)
    s3_fs.pipe_file(_key(archive, f"claims/larimer/{DAY1:020d}.json"), sidecar_bytes(first))
    assert archive.put("larimer", CSV, published_at=DAY1, fetched_at=FETCHED + 5) == (first, False)
    assert archive.scan() == [first]


def test_archive_copied_from_a_local_folder(archive: S3Archive, s3_fs: Any, tmp_path: Path) -> None:
    """Same layout: a local archive uploaded as is reads the same, and its sidecars (it
    has no claims) still hold their publication slots."""
    local = LocalArchive(tmp_path / "local")
    a, _ = local.put("larimer", CSV, published_at=DAY1, fetched_at=FETCHED)
    b, _ = local.put("boulder", b"x\n", published_at=DAY1, fetched_at=FETCHED)
    for path in sorted(p for p in local.root.rglob("*") if p.is_file()):
        if not path.name.startswith("."):
            rel = path.relative_to(local.root).as_posix()
            s3_fs.pipe_file(_key(archive, rel), path.read_bytes())
    assert archive.scan() == local.scan() == sorted([a, b], key=lambda r: r.payload_id)
    assert archive.get(a.sha256) == CSV
    with pytest.raises(AmbiguousPayloadError):
        archive.put("larimer", b"other\n", published_at=DAY1, fetched_at=FETCHED)
    assert archive.put("larimer", CSV, published_at=DAY1, fetched_at=FETCHED) == (a, False)


# -- endpoint, credentials, unreachable stores --------------------------------------------


def test_endpoint_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"):
        monkeypatch.delenv(var, raising=False)
    assert resolve_endpoint(None) is None
    assert resolve_endpoint("http://toml:9000") == "http://toml:9000"
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://general:9000")
    assert resolve_endpoint("http://toml:9000") == "http://general:9000"
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "https://s3-only:9000")
    assert resolve_endpoint("http://toml:9000") == "https://s3-only:9000"
    monkeypatch.setenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true")
    assert resolve_endpoint("http://toml:9000") == "http://toml:9000"
    with pytest.raises(ConfigError, match="endpoint_url 'minio:9000' is not an http"):
        resolve_endpoint("minio:9000")


def test_archive_urls() -> None:
    assert parse_s3_url("s3://bucket") == ("bucket", "")
    assert parse_s3_url("s3://my.bucket/a/b/") == ("my.bucket", "a/b")
    for bad in ("s3://", "s3://b/x", "s3://bucket//x", "s3://bucket/../x", "s3://bucket/x?y=1"):
        with pytest.raises(ConfigError, match="is not s3://BUCKET/PREFIX"):
            parse_s3_url(bad)
    assert open_archive("s3://bucket").location == "s3://bucket"
    assert open_archive("s3://bucket/a/b/").location == "s3://bucket/a/b"


def test_endpoint_from_feedledger_toml(
    s3_bucket: str, s3_env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3")
    archive = open_archive(f"s3://{s3_bucket}/p", endpoint_url=s3_env)
    ref, created = archive.put("larimer", CSV, published_at=DAY1, fetched_at=FETCHED)
    assert created and archive.get(ref.sha256) == CSV


def test_unreachable_endpoint_is_clear(
    s3_env: str, monkeypatch: pytest.MonkeyPatch, closed_port: int
) -> None:
    endpoint = f"http://127.0.0.1:{closed_port}"
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", endpoint)
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")  # botocore's standard setting, honoured
    archive = open_archive("s3://somewhere/feeds")
    started = time.monotonic()
    for attempt in (
        lambda: archive.put("larimer", CSV, published_at=DAY1, fetched_at=FETCHED),
        lambda: archive.scan(),
        lambda: archive.prepare(),
    ):
        with pytest.raises(ArchiveUnavailableError) as info:
            attempt()
        message = str(info.value)
        assert "archive s3://somewhere/feeds" in message
        assert f"cannot reach the object store at {endpoint}" in message
        assert "Traceback" not in message and exit_code(info.value) == 8
    assert time.monotonic() - started < 60


def test_missing_bucket_is_clear(s3_env: str) -> None:
    archive = open_archive("s3://no-such-bucket-here/feeds")
    with pytest.raises(ArchiveUnavailableError, match="bucket 'no-such-bucket-here' does not"):
        archive.put("larimer", CSV, published_at=DAY1, fetched_at=FETCHED)
    with pytest.raises(ArchiveUnavailableError, match="s3://no-such-bucket-here/feeds"):
        archive.get(hashlib.sha256(CSV).hexdigest())


def test_missing_credentials_are_clear(s3_bucket: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    archive = open_archive(f"s3://{s3_bucket}/feeds")
    with pytest.raises(ArchiveUnavailableError) as info:
        archive.put("larimer", CSV, published_at=DAY1, fetched_at=FETCHED)
    message = str(info.value)
    assert f"archive s3://{s3_bucket}/feeds: no usable AWS credentials" in message
    assert "AWS_ACCESS_KEY_ID" in message and "never from feedledger.toml" in message


def test_credentials_are_refused_in_feedledger_toml(tmp_path: Path) -> None:
    ws = Workspace.create(tmp_path, store_url=None, archive="s3://bucket/feeds")
    assert ws.archive_location == "s3://bucket/feeds" and not ws.archive_is_local
    with pytest.raises(ConfigError, match="not a local folder"):
        _ = ws.archive_root
    text = ws.config_path.read_text()
    ws.config_path.write_text(text.replace('path = "s3', 'aws_secret_access_key = "x"\npath = "s3'))
    with pytest.raises(ConfigError, match=r"credentials are never read from feedledger\.toml"):
        Workspace.load(ws.config_path)


def test_s3fs_is_imported_only_when_an_s3_archive_is_used(s3_bucket: str) -> None:
    code = (
        "import sys\n"
        "import feedledger.cli.main, feedledger.context\n"
        "from feedledger.archive import open_archive\n"
        f"archive = open_archive('s3://{s3_bucket}/lazy')\n"
        "assert not {'s3fs', 'botocore', 'aiobotocore'} & set(sys.modules), sys.modules\n"
        "archive.scan()\n"
        "assert 's3fs' in sys.modules\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=os.environ, timeout=120
    )
    assert done.returncode == 0, done.stderr


# -- the CLI end to end ---------------------------------------------------------------------


def test_cli_on_an_s3_archive(s3_bucket: str, s3_fs: Any, tmp_path: Path) -> None:
    root = tmp_path / "ws"
    url = f"s3://{s3_bucket}/feeds"
    store = f"sqlite:///{tmp_path / 'ledger.db'}"
    runner = CliRunner()
    made = runner.invoke(
        app_(), ["init", "--dir", str(root), "--store", store, "--archive", url, "--json"]
    )
    assert made.exit_code == 0, made.output
    assert json.loads(made.stdout)["archive"] == url
    assert 'path = "s3://' in (root / "feedledger.toml").read_text()
    assert not (root / ".feedledger" / "archive").exists()
    cli = Cli(Workspace.load(root / "feedledger.toml"))
    cli("source", "add", "larimer", "--key", "parcel_id")

    def payload(day: str, zoning: str) -> str:
        rows = [["1", zoning], ["2", "A"]]
        return str(write_csv(tmp_path / f"larimer_{day}.csv", ["parcel_id", "z"], rows))

    first = cli.json(
        "ingest", "larimer", payload("2026-08-06", "R-1"), "--published-at", "2026-08-06"
    )
    assert first["archived"] is True and first["changes"] == 2
    again = cli.json(
        "ingest", "larimer", payload("2026-08-06", "R-1"), "--published-at", "2026-08-06"
    )
    assert again["archived"] is False
    cli("ingest", "larimer", payload("2026-08-07", "R-2"), "--published-at", "2026-08-07")
    cli("archive", "add", "larimer", payload("2026-08-08", "R-3"))  # archived, not applied
    rival = cli(
        "ingest", "larimer", payload("2026-08-07", "C-9"), "--published-at", "2026-08-07", expect=4
    )
    assert "ambiguous" in rival.stderr and f"{url}/rejected/larimer/" in rival.stderr
    listed = cli.json("archive", "list", "larimer")
    assert [p["published_at"][:10] for p in listed] == ["2026-08-06", "2026-08-07", "2026-08-08"]
    # the archived-only payload is read back from the bucket and applied
    cli.json("backfill", "larimer", "--from", "2026-08-08", "--to", "2026-08-08")
    assert cli.json("watermark", "larimer")["published_at"][:10] == "2026-08-08"
    assert cli.json("verify", "larimer")["ok"] is True
    stored = s3_fs.find(f"{s3_bucket}/feeds/meta/larimer")
    assert len(stored) == 3
    assert len(s3_fs.find(f"{s3_bucket}/feeds/rejected/larimer")) == 1
    assert cli.json("archive", "reindex")["scanned"] == 3


def test_cli_init_with_missing_bucket_is_clear(s3_env: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app_(), ["init", "--dir", str(tmp_path), "--archive", "s3://no-such-bucket-here/x"]
    )
    assert result.exit_code == 8, result.output
    assert "archive s3://no-such-bucket-here/x: bucket 'no-such-bucket-here'" in result.stderr
    assert "Traceback" not in result.output
    assert not (tmp_path / "feedledger.toml").exists()


def app_() -> Any:
    from feedledger.cli.main import app

    return app
