"""Shared fixtures: every store test runs on SQLite and on PostgreSQL.

PostgreSQL tests use the server named by FEEDLEDGER_TEST_POSTGRES_URL (CI sets it);
each test gets its own schema (dropped afterwards). Where it is unset they skip with
one clear line.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from feedledger.config import Workspace
from feedledger.ledger import engine as eng
from feedledger.model.jsonout import dumps  # noqa: F401  (re-exported for tests)

PG_ENV = "FEEDLEDGER_TEST_POSTGRES_URL"
PG_SKIP = (
    f"PostgreSQL backend not tested: set {PG_ENV} (e.g. postgresql://postgres@127.0.0.1:5432/test)"
)
BACKENDS = ["sqlite", "postgresql"]


def _pg_schema_url(base: str, schema: str) -> str:
    sep = "&" if "?" in base else "?"
    return f"{base}{sep}options=-csearch_path%3D{schema}"


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'ledger.db'}"
        return
    base = os.environ.get(PG_ENV)
    if not base:
        pytest.skip(PG_SKIP)
    import psycopg

    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield _pg_schema_url(base, schema)
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


@pytest.fixture
def workspace(store_url: str, tmp_path: Path) -> Workspace:
    root = tmp_path / "ws"
    ws = Workspace.create(root, store_url=store_url, archive=None)
    engine = eng.make_engine(ws.store_url)
    eng.upgrade(engine)
    engine.dispose()
    return ws


class Cli:
    """Runs `feedledger` in-process (fast) or as a real subprocess (crash tests)."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self.runner = CliRunner()

    def __call__(self, *args: str, expect: int | None = 0) -> Any:
        from feedledger.cli.main import app

        result = self.runner.invoke(app, ["--config", str(self.ws.config_path), *args])
        if expect is not None and result.exit_code != expect:
            raise AssertionError(
                f"feedledger {' '.join(args)} exited {result.exit_code}, expected {expect}\n"
                f"stdout: {result.stdout}\nstderr: {result.stderr}\n{result.exception!r}"
            )
        return result

    def json(self, *args: str) -> Any:
        import json

        return json.loads(self(*args, "--json").stdout)

    def proc(
        self, *args: str, env: dict[str, str] | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        full_env = {**os.environ, **(env or {})}
        return subprocess.run(
            [sys.executable, "-m", "feedledger", "--config", str(self.ws.config_path), *args],
            capture_output=True,
            text=True,
            env=full_env,
            timeout=timeout,
            check=False,
        )


@pytest.fixture
def cli(workspace: Workspace) -> Cli:
    return Cli(workspace)


def write_csv(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    import csv

    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)
    return path
