"""Helpers shared by the tests (imported as `from helpers import ...`): the backends,
the PostgreSQL schema URL, the in-process / subprocess CLI runner, file writers.
Fixtures live in conftest.py, which builds on these."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from feedledger.config import Workspace
from feedledger.model.source import SourceConfig

# the `make_source` fixture (conftest.py): (name="larimer", key="parcel_id", **options)
MakeSource = Callable[..., SourceConfig]

PG_ENV = "FEEDLEDGER_TEST_POSTGRES_URL"
PG_SKIP = (
    f"PostgreSQL backend not tested: set {PG_ENV} (e.g. postgresql://postgres@127.0.0.1:5432/test)"
)
BACKENDS = ["sqlite", "postgresql"]


def pg_schema_url(base: str, schema: str) -> str:
    sep = "&" if "?" in base else "?"
    return f"{base}{sep}options=-csearch_path%3D{schema}"


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


def write_csv(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    import csv

    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)
    return path
