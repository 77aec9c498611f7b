"""Shared fixtures: every store test runs on SQLite and on PostgreSQL.

PostgreSQL tests use the server named by FEEDLEDGER_TEST_POSTGRES_URL (CI sets it);
each test gets its own schema (dropped afterwards). Where it is unset they skip with
one clear line.
"""

from __future__ import annotations

import functools
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main
import typer.testing

import pg_schemas
from feedledger import config
from feedledger.config import Workspace
from feedledger.model.source import SourceConfig
from helpers import BACKENDS, PG_ENV, Cli, MakeSource, backend_store, migrate

# -- the CLI's click command tree, built once per process ---------------------------------
#
# typer's CliRunner.invoke rebuilds the click command tree of the app on every call
# (typer.main.get_command inspects every command's signature and evaluates its string
# annotations: ~40 ms, more than many a command itself, thousands of times a run). The
# tree depends only on the app object, and a real `feedledger` process builds it once:
# so do the tests, per app and process.
typer.testing._get_command = functools.cache(typer.main.get_command)  # type: ignore[attr-defined]


# -- pytest-xdist workers see the terminal size pytest was started with -----------------
#
# pytest imports `readline` early (_pytest/capture.py, _readline_workaround), and GNU
# readline exports COLUMNS=80 and LINES=24 to the C environment: not to os.environ, but
# to every child process, xdist's workers included. The CLI sizes its tables by COLUMNS
# (cli/common.py), so in a worker they were squeezed to 80 columns and cut the ids that
# tests look for. Each worker gets the values os.environ had in the controller (usually
# none).

_TERMINAL = ("COLUMNS", "LINES")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    node.workerinput["terminal"] = {name: os.environ.get(name) for name in _TERMINAL}


def pytest_configure(config: pytest.Config) -> None:
    terminal = getattr(config, "workerinput", {}).get("terminal")
    for name, value in (terminal or {}).items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # this process's recycled PostgreSQL schemas (tests/pg_schemas.py) go with it (atexit
    # too, where a worker ends otherwise)
    base = os.environ.get(PG_ENV)
    if base:
        pg_schemas.drop_pool(base)


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with backend_store(request.param, tmp_path) as url:
        yield url


@pytest.fixture
def workspace(store_url: str, tmp_path: Path) -> Workspace:
    root = tmp_path / "ws"
    ws = Workspace.create(root, store_url=store_url, archive=None)
    migrate(ws.store_url)
    return ws


@pytest.fixture
def cli(workspace: Workspace) -> Cli:
    return Cli(workspace)


@pytest.fixture
def make_source(workspace: Workspace) -> MakeSource:
    """`make_source(name="larimer", key="parcel_id", **options)`: declares a source in
    the test's workspace (validated like `source add`; `key` a field, "a,b" or a tuple)
    and returns its SourceConfig. `replace=True` redeclares it."""

    def declare(
        name: str = "larimer",
        key: str | tuple[str, ...] = "parcel_id",
        *,
        replace: bool = False,
        **options: Any,
    ) -> SourceConfig:
        fields = tuple(key.split(",")) if isinstance(key, str) else key
        src = config.make_source(name, key=fields, **options)
        workspace.add_source(src, replace=replace)
        return workspace.source(name)

    return declare


# -- S3-compatible object storage: moto's standalone server on 127.0.0.1 -----------------


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    """moto's S3 server on 127.0.0.1 (a free port) for the session; its endpoint URL."""
    import logging
    import threading

    server_mod = pytest.importorskip("moto.server")
    from moto.s3.responses import S3Response

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no request log on stderr
    # moto checks If-None-Match, then stores the key, with nothing in between to stop a
    # second request doing the same: two racing conditional puts could both succeed,
    # which S3 never allows. One put at a time restores S3's per-request atomicity.
    lock = threading.Lock()
    unlocked = S3Response.put_object

    def put_object(self: Any) -> Any:
        with lock:
            return unlocked(self)

    # port 0: the kernel picks a free port as the server binds (no probe-then-bind race
    # with the other xdist workers, which start servers of their own)
    server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(S3Response, "put_object", put_object)
        server.start()
        try:
            _host, port = server.get_host_and_port()
            yield f"http://127.0.0.1:{port}"
        finally:
            server.stop()


@pytest.fixture
def s3_env(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """Fake AWS credentials and moto's endpoint in the environment, for this test only
    (no profile, no shared files, no instance metadata: nothing beyond 127.0.0.1)."""
    for var in (
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_SESSION_TOKEN",
        "AWS_SECURITY_TOKEN",
        "AWS_ENDPOINT_URL",
        "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_ROLE_ARN",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", moto_endpoint)
    return moto_endpoint


@pytest.fixture
def s3_fs(s3_env: str) -> Any:
    """An s3fs file system on moto, to set up and inspect buckets behind the archive."""
    s3fs = pytest.importorskip("s3fs")
    return s3fs.S3FileSystem(
        endpoint_url=s3_env, skip_instance_cache=True, use_listings_cache=False
    )


@pytest.fixture
def s3_bucket(s3_fs: Any) -> Iterator[str]:
    """A fresh, empty bucket on moto; emptied and removed afterwards."""
    name = f"fl-{uuid.uuid4().hex[:16]}"
    s3_fs.call_s3("create_bucket", Bucket=name)
    try:
        yield name
    finally:
        keys = s3_fs.find(name)
        if keys:
            s3_fs.rm(keys)
        s3_fs.call_s3("delete_bucket", Bucket=name)
