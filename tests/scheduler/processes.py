"""Real `feedledger scheduler` processes on one workspace, for the tests of
tests/scheduler/ (test_processes.py, test_fleet.py) and bench/fleet_bench.py: start one
(returned once it has logged its start), wait for the store to reach a state while every
scheduler stays alive, stop them (SIGTERM, exit 0, their JSON log lines), read a table.
No sleeping on the outcome: each wait polls the store and fails with what it saw."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import select

from feedledger.ledger.schema import watermarks
from feedledger.ledger.store import Store

Log = list[dict[str, Any]]


def spawn(
    config: Path,
    *args: str,
    env: dict[str, str] | None = None,
    tick: float = 0.2,
    lease_ttl: int = 5,
    dispatch: bool = False,
) -> subprocess.Popen[str]:
    """A scheduler process on the workspace `config`, returned once it has logged its
    start (it handles SIGTERM from then on)."""
    return started(
        launch(config, *args, env=env, tick=tick, lease_ttl=lease_ttl, dispatch=dispatch)
    )


def spawn_many(count: int, config: Path, *args: str, **options: Any) -> list[subprocess.Popen[str]]:
    """`count` schedulers started at once (each imports and opens the store meanwhile),
    returned once every one has logged its start."""
    return [started(p) for p in [launch(config, *args, **options) for _ in range(count)]]


def launch(
    config: Path,
    *args: str,
    env: dict[str, str] | None = None,
    tick: float = 0.2,
    lease_ttl: int = 5,
    dispatch: bool = False,
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "feedledger", "--config", str(config), "scheduler",
         "--tick", str(tick), "--lease-ttl", str(lease_ttl),
         "--dispatch" if dispatch else "--no-dispatch", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )  # fmt: skip


def started(proc: subprocess.Popen[str]) -> subprocess.Popen[str]:
    """`proc` once it has logged its start."""
    assert proc.stderr is not None
    for line in proc.stderr:
        if line.startswith("{") and json.loads(line)["event"] == "start":
            return proc
    raise AssertionError(f"the scheduler exited before it started: {proc.wait()}")


def select_all(store_url: str, table: Any) -> list[Any]:
    store = Store(store_url)
    try:
        with store.engine.connect() as conn:
            return list(conn.execute(select(table)))
    finally:
        store.close()


def marks(store_url: str) -> dict[str, int | None]:
    """source -> the publisher date (epoch us) of its watermark."""
    return {w.source: w.published_at for w in select_all(store_url, watermarks)}


def wait_until(
    done: Callable[[], bool],
    procs: list[subprocess.Popen[str]],
    *,
    timeout: float = 120,
    what: str | Callable[[], str] = "the schedulers' work",
    poll: float = 0.2,
) -> float:
    """Poll `done` until it holds; every scheduler in `procs` must stay alive meanwhile.
    Returns the seconds waited."""
    start = time.monotonic()
    while not done():
        for p in procs:
            assert p.poll() is None, p.communicate()[1]
        if time.monotonic() - start >= timeout:
            raise AssertionError(
                f"{what if isinstance(what, str) else what()}: not done in {timeout} s"
            )
        time.sleep(poll)
    return time.monotonic() - start


def stop(procs: list[subprocess.Popen[str]]) -> list[Log]:
    """SIGTERM every scheduler; each must exit 0. Returns their log lines."""
    for p in procs:
        p.send_signal(signal.SIGTERM)
    logs = []
    for p in procs:
        _out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        logs.append(parse_log(err))
    return logs


def kill(proc: subprocess.Popen[str]) -> Log:
    """SIGKILL a scheduler (no clean-up of any kind) and reap it; its log lines."""
    proc.send_signal(signal.SIGKILL)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL, err
    return parse_log(err)


def parse_log(err: str) -> Log:
    return [json.loads(x) for x in err.splitlines() if x.startswith("{")]


def run_events(logs: list[Log]) -> Log:
    """Every scheduler's `run` events (one per attempt)."""
    return [e for log in logs for e in log if e["event"] == "run"]
