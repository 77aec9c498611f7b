"""A destination's PostgreSQL connection that dies in the middle of a rebuild
(`pg_terminate_backend` from another connection, while a batch is staged and not yet
upserted): `sync DEST --manifest M` says so in one line and exits 8 (store or
destination unreachable, README), and the same command run again resumes from the last
acknowledged batch and leaves the destination complete. Every store backend."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

import feedledger
from fault_pause import FaultPause
from helpers import Cli, write_csv

PG_ENV = "FEEDLEDGER_TEST_POSTGRES_URL"


@pytest.fixture
def pg_dest() -> Iterator[tuple[str, str, str]]:
    """(url with an application_name of its own, that name, table); dropped afterwards."""
    url = os.environ.get(PG_ENV)
    if not url:
        pytest.skip(f"PostgreSQL destination not tested: set {PG_ENV}")
    tag = uuid.uuid4().hex[:12]
    app_name, table = f"fl_dest_{tag}", f"lost_{tag}"
    sep = "&" if "?" in url else "?"
    yield f"{url}{sep}application_name={app_name}", app_name, table
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.begin() as conn:
        conn.execute(text(f"DROP TABLE IF EXISTS {table}"))
    engine.dispose()


def test_a_destination_connection_killed_mid_rebuild_is_one_line_and_the_rerun_resumes(
    cli: Cli, tmp_path: Path, pg_dest: tuple[str, str, str]
) -> None:
    url, app_name, table = pg_dest
    cli("source", "add", "sup", "--key", "id")
    rows = [[f"V-{i:02d}", f"name {i}"] for i in range(35)]
    cli("ingest", "sup", str(write_csv(tmp_path / "sup_2026-08-01.csv", ["id", "name"], rows)))
    cli("destination", "add", "d", "--source", "sup", "--postgres", url, "--table", table)
    cli("manifest", "create", "all", "--source", "sup")
    args = ["sync", "d", "--manifest", "all", "--batch", "10"]
    # held with the second batch staged in its open transaction, until the test has
    # ended exactly that batch's backend (published by the pause: batch 1's connection
    # may look the same in pg_stat_activity for a moment)
    pause = FaultPause(tmp_path, "destination_staged:2")
    proc = subprocess.Popen(
        # no timed progress lines: stderr must hold the error's one line only
        [
            sys.executable,
            "-m",
            "feedledger",
            "--config",
            str(cli.ws.config_path),
            *args,
            "--progress-every",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **pause.env()},
    )
    admin = create_engine(os.environ[PG_ENV].replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        held = pause.wait(proc)
        assert held["count"] == 2 and held["backend_pid"], held
        with admin.begin() as conn:
            # that backend, and it is the destination's, in its open transaction
            state = conn.execute(
                text("SELECT application_name, state FROM pg_stat_activity WHERE pid = :p"),
                {"p": held["backend_pid"]},
            ).one()
            assert tuple(state) == (app_name, "idle in transaction"), state
            # ended, and waited for until it is gone (a hang detector's timeout, in ms)
            killed = conn.execute(
                text("SELECT pg_terminate_backend(:p, 300000)"), {"p": held["backend_pid"]}
            ).scalar_one()
        pause.resume()
        out, err = proc.communicate(timeout=300)  # only detects a hang
    finally:
        pause.resume()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        admin.dispose()
    assert killed, (out, err)
    lines = err.strip().splitlines()
    assert proc.returncode == 8, err
    assert len(lines) == 1 and "destination d" in lines[0], err
    assert "lost the connection" in lines[0] and "Traceback" not in err, err
    # health and the destination's status say where a rerun resumes
    where = {"manifest": "all", "keys_done": 10, "population": 35, "batch": 2, "batches": 4}
    result = cli("health", "--json", expect=None)
    (lag,) = json.loads(result.stdout)["destinations"]
    assert lag["unfinished_rebuilds"] == [where], lag
    with feedledger.open(cli.ws.config_path) as led:
        (rebuild,) = led.destination("d").status().to_json()["rebuilds"]
    assert rebuild["resume"] == where, rebuild
    # the rerun says it resumes after the first batch (acknowledged), and finishes
    rerun = cli(*args)
    assert "resuming all at batch 2 of 4 (10 of 35 keys already acknowledged)" in rerun.stderr
    result = cli("health", "--json", expect=None)  # exit 1: the source is stale by now
    assert json.loads(result.stdout)["destinations"][0]["unfinished_rebuilds"] == []
    done = cli.json(*args)  # a repeat of a finished rebuild starts afresh
    assert done["resumed"] is None and done["status"] == "finished", done
    assert sum(done["outcomes"].values()) == 35, done
    report = cli.json("reconcile", "d", "--manifest", "all")
    assert report["complete"] is True, report
