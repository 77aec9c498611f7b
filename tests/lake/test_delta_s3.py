"""`export delta --to s3://...` on S3-compatible storage (moto's server on 127.0.0.1):
the archive's endpoint, credentials from the AWS environment, commits by conditional
put; read back by delta-rs and polars with their own S3 clients, first and incremental
export, on SQLite and PostgreSQL.

moto runs in a process of its own here, not in the tests' (the `moto_endpoint`
fixture's thread): delta-rs keeps the GIL while it waits on its S3 requests, so a
server on a thread of the same process would never answer them."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from helpers import Cli
from lake.delta_scenario import (
    SRC,
    assert_equals_history,
    declare,
    export,
    ingest,
    table_rows,
)


@pytest.fixture
def moto_process() -> Iterator[str]:
    """moto's S3 server in a child process on 127.0.0.1; its endpoint URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60  # a hang deadline, not a timing
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("moto's server did not start") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_export_to_s3_reads_back(
    cli: Cli, tmp_path: Path, s3_env: str, moto_process: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import boto3

    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", moto_process)
    bucket = f"fl-{uuid.uuid4().hex[:16]}"
    boto3.client("s3", endpoint_url=moto_process).create_bucket(Bucket=bucket)
    uri = f"s3://{bucket}/lake/{SRC}"
    options = {
        "AWS_ENDPOINT_URL": moto_process,
        "AWS_ALLOW_HTTP": "true",
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }
    declare(cli)
    ingest(cli, tmp_path, "2025-08-01")
    ingest(cli, tmp_path, "2025-08-02")
    assert export(cli, uri)["delta_version"] == 0
    run = ingest(cli, tmp_path, "2025-08-04")
    cli.json("retract", run["run_id"])
    ingest(cli, tmp_path, "2025-08-05")
    second = export(cli, uri)
    assert second["committed"] and second["delta_version"] == 1
    rows = table_rows(uri, options=options)
    assert any(r["retracted_at"] is not None for r in rows)
    assert_equals_history(cli, rows)
    frame = pl.read_delta(uri, storage_options=options)
    assert sorted(frame["version_id"].to_list()) == sorted(r["version_id"] for r in rows)
    status = cli.json("export", "status")
    assert [(p["target"], p["delta_version"]) for p in status] == [(uri, 1)]
