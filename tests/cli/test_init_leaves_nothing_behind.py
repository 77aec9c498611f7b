"""`init` writes feedledger.toml, the store's schema and the archive together or leaves
nothing: a store that refuses a statement (a PostgreSQL schema that does not exist) or
any other failure while creating the store removes the file again, so the same `init`
can be run once the cause is fixed."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest

from feedledger.api import workspace
from feedledger.ledger import engine as eng
from helpers import BACKENDS, PG_ENV, PG_SKIP, backend_store, pg_schema_url


def _init(folder: Path, store: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "feedledger", "init", "--store", store],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_schema_that_does_not_exist_leaves_no_config_and_init_runs_again(
    tmp_path: Path,
) -> None:
    base = os.environ.get(PG_ENV)
    if not base:
        pytest.skip(PG_SKIP)
    schema = f"t_{uuid.uuid4().hex[:12]}"
    url = pg_schema_url(base, schema)
    refused = _init(tmp_path, url)
    assert refused.returncode == 8, refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert not (tmp_path / "feedledger.toml").exists()
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        done = _init(tmp_path, url)
        assert done.returncode == 0, done.stderr
        assert (tmp_path / "feedledger.toml").exists()
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


@pytest.mark.parametrize("backend", BACKENDS)
def test_any_failure_while_creating_the_store_removes_the_config(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(_engine: object) -> None:
        raise RuntimeError("a failure that is not one of feedledger's own")

    monkeypatch.setattr(eng, "upgrade", broken)
    folder = tmp_path / "ws"
    folder.mkdir()
    with backend_store(backend, tmp_path) as url:
        with pytest.raises(RuntimeError):
            workspace.create(folder, store=url)
        assert not (folder / "feedledger.toml").exists()
