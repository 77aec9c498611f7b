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
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from sqlalchemy import select

from feedledger.ledger.schema import watermarks
from feedledger.ledger.store import Store

Log = list[dict[str, Any]]


def spawn(config: Path, *args: str, **options: Any) -> subprocess.Popen[str]:
    """A scheduler process on the workspace `config` (`launch`'s options), returned once
    it has logged its start (it handles SIGTERM from then on)."""
    return started(launch(config, *args, **options))


def spawn_many(count: int, config: Path, *args: str, **options: Any) -> list[subprocess.Popen[str]]:
    """`count` schedulers started at once (each imports and opens the store meanwhile),
    returned once every one has logged its start."""
    return [started(p) for p in [launch(config, *args, **options) for _ in range(count)]]


# each scheduler's stderr goes to a file of its own, read without moving its offset: a
# pipe would fill up (and block the scheduler) unless read all the time, and a line read
# ahead into a pipe reader's buffer would be lost to `communicate`
_LOGS: dict[int, IO[bytes]] = {}


def launch(
    config: Path,
    *args: str,
    env: dict[str, str] | None = None,
    tick: float = 0.2,
    lease_ttl: int = 5,
    dispatch: bool = False,
) -> subprocess.Popen[str]:
    log = tempfile.TemporaryFile()  # noqa: SIM115 -- closed by stop() or kill()
    proc = subprocess.Popen(
        [sys.executable, "-m", "feedledger", "--config", str(config), "scheduler",
         "--tick", str(tick), "--lease-ttl", str(lease_ttl),
         "--dispatch" if dispatch else "--no-dispatch", *args],
        stdout=subprocess.DEVNULL,
        stderr=log,
        text=True,
        env={**os.environ, **(env or {})},
    )  # fmt: skip
    _LOGS[proc.pid] = log
    return proc


def stderr_of(proc: subprocess.Popen[str]) -> str:
    """What the scheduler wrote on stderr so far."""
    log = _LOGS[proc.pid]
    size = os.fstat(log.fileno()).st_size
    return os.pread(log.fileno(), size, 0).decode("utf-8", "replace")


def started(proc: subprocess.Popen[str]) -> subprocess.Popen[str]:
    """`proc` once it has logged its start."""
    while not any(e["event"] == "start" for e in parse_log(stderr_of(proc))):
        assert proc.poll() is None, f"the scheduler exited before it started: {stderr_of(proc)}"
        time.sleep(0.05)
    return proc


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
            assert p.poll() is None, stderr_of(p)
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
        p.wait(timeout=120)
        err = stderr_of(p)
        assert p.returncode == 0, err
        logs.append(parse_log(err))
        _LOGS.pop(p.pid).close()
    return logs


def kill(proc: subprocess.Popen[str]) -> Log:
    """SIGKILL a scheduler (no clean-up of any kind) and reap it; its log lines."""
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    err = stderr_of(proc)
    assert proc.returncode == -signal.SIGKILL, err
    _LOGS.pop(proc.pid).close()
    return parse_log(err)


def ended(proc: subprocess.Popen[str], code: int, timeout: float = 120) -> Log:
    """Wait for a scheduler to exit by itself with `code`; its log lines."""
    proc.wait(timeout=timeout)
    err = stderr_of(proc)
    assert proc.returncode == code, err
    _LOGS.pop(proc.pid).close()
    return parse_log(err)


def parse_log(err: str) -> Log:
    return [json.loads(x) for x in err.splitlines() if x.startswith("{")]


def run_events(logs: list[Log]) -> Log:
    """Every scheduler's `run` events (one per attempt)."""
    return [e for log in logs for e in log if e["event"] == "run"]
