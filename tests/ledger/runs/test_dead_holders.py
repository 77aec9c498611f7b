"""A holder that died is dead at once, whatever is left of its process: a run killed with
SIGKILL and not yet reaped by its parent (a zombie: `kill(pid, 0)` still succeeds for it)
blocks neither a rerun of its source nor the delivery of the messages it had claimed, and
a holder whose pid now belongs to another process (another start time) is dead too.
SQLite and PostgreSQL; the killed processes are real children of this test, left
unreaped until the end."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from fault_pause import FaultPause
from feedledger.ledger.runs import leases
from feedledger.ledger.runs.holders import holder_dead, new_holder
from feedledger.ledger.store import Store
from feedledger.model.timeutil import now_us
from feedledger.notify import fanout
from feedledger.notify.subscriptions import listing
from helpers import Cli, write_csv

SRC = "parcels"
LINUX = sys.platform.startswith("linux")


def state_of(pid: int) -> str:
    with open(f"/proc/{pid}/stat", "rb") as f:
        text = f.read().decode()
    return text[text.rfind(")") + 2 :].split()[0]


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[str]]]:
    """Child processes, reaped only when the test is over."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)


def kill_unreaped(proc: subprocess.Popen[str]) -> None:
    """SIGKILL, then wait until it is a zombie (Linux) -- never reaped here."""
    os.kill(proc.pid, signal.SIGKILL)
    if not LINUX:
        time.sleep(0.5)
        return
    deadline = time.monotonic() + 30
    while state_of(proc.pid) != "Z":
        assert time.monotonic() < deadline, "the killed child never became a zombie"
        time.sleep(0.01)
    os.kill(proc.pid, 0)  # what the old check looked at: it still "exists"


def lease_holder(url: str) -> str | None:
    """The holder of SRC's lease, read without waiting for a writer (SQLite: a plain
    reader of the WAL; the store's own connections begin IMMEDIATE)."""
    if url.startswith("sqlite"):
        import sqlite3

        with contextlib.closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as conn:
            row = conn.execute("SELECT holder FROM leases WHERE source = ?", (SRC,)).fetchone()
        return None if row is None else row[0]
    store = Store(url)
    try:
        with store.engine.connect() as conn:
            lease = leases.current(conn, SRC)
    finally:
        store.close()
    return None if lease is None else lease.holder


def csv_payload(tmp_path: Path, day: str, n: int) -> Path:
    return write_csv(tmp_path / f"{SRC}_{day}.csv", ["id", "v"], [[str(i), day] for i in range(n)])


def test_a_rerun_right_after_a_kill_proceeds_at_once(
    cli: Cli, tmp_path: Path, children: list[subprocess.Popen[str]]
) -> None:
    cli("source", "add", SRC, "--key", "id")
    path = csv_payload(tmp_path, "2026-08-01", 5)
    args = ["ingest", SRC, str(path), "--published-at", "2026-08-01"]
    # held inside its payload's transaction, the lease taken, until it is killed
    pause = FaultPause(tmp_path, "mid_transaction")
    proc = subprocess.Popen(
        [sys.executable, "-m", "feedledger", "--config", str(cli.ws.config_path), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, **pause.env()},
    )
    children.append(proc)
    pause.wait(proc)
    holder = lease_holder(cli.ws.store_url)
    assert holder is not None
    assert holder.split(":")[1] == str(proc.pid)
    kill_unreaped(proc)
    # the lease has not expired (600 s), yet the rerun takes it over and applies the payload
    rerun = cli.json(*args)
    assert rerun["status"] == "applied", rerun
    runs = {r["status"] for r in cli.json("runs", SRC)}
    assert "running" not in runs, runs


CLAIMER = """
import sys, time
from feedledger.ledger.runs.holders import new_holder
from feedledger.ledger.store import Store
from feedledger.model.timeutil import now_us
from feedledger.notify import deliveries
store = Store(sys.argv[1])
now = now_us()
got = deliveries.claim(store, "lines", new_holder(), now, now + 3_600_000_000, 1000)
print(len(got), flush=True)
time.sleep(600)
"""


def test_an_immediate_dispatch_delivers_what_a_killed_dispatcher_had_claimed(
    cli: Cli, tmp_path: Path, children: list[subprocess.Popen[str]]
) -> None:
    cli("source", "add", SRC, "--key", "id")
    path = csv_payload(tmp_path, "2026-08-01", 6)
    cli("ingest", SRC, str(path), "--published-at", "2026-08-01")
    out = tmp_path / "messages.jsonl"
    cli("subscriber", "add", "lines", "--file", str(out))
    store = Store(cli.ws.store_url)
    try:
        assert fanout.expand(store, listing(store), now_us()) == 6
    finally:
        store.close()
    proc = subprocess.Popen(
        [sys.executable, "-c", CLAIMER, cli.ws.store_url],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    children.append(proc)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "6"  # claimed for an hour
    kill_unreaped(proc)
    report = cli.json("notify", "dispatch", "--once")
    assert report["delivered"] == 6, report
    assert len(out.read_text().splitlines()) == 6


def _host() -> str:
    return socket.gethostname()


def test_a_pid_now_running_another_program_is_dead(cli: Cli) -> None:
    """A holder record naming a live pid (this very process) with another start time:
    the pid was reused, the holder is dead; with the right start time it is alive."""
    alive = new_holder()
    host, pid, _token, start = alive.split(":")
    assert (host, pid) == (_host(), str(os.getpid()))
    assert not holder_dead(alive)
    if LINUX:
        assert start, "the holder records its process's start time"
        reused = f"{host}:{pid}:0badc0de:{int(start) + 1}"
        assert holder_dead(reused)
    else:
        reused = alive
    assert not holder_dead(f"{host}:{pid}:0badc0de")  # an old holder: judged by the pid
    assert not holder_dead(f"elsewhere:{pid}:0badc0de:1")  # another host: not ours to judge
    store = Store(cli.ws.store_url)
    try:
        cli("source", "add", SRC, "--key", "id")
        leases.acquire(store, SRC, reused, str(uuid.uuid4()), run_kind="live")
        if LINUX:  # taken over at once, though its expiry is minutes away
            leases.acquire(store, SRC, new_holder(), str(uuid.uuid4()), run_kind="live")
            with store.engine.connect() as conn:
                lease = leases.current(conn, SRC)
            assert lease is not None and lease.holder != reused
    finally:
        store.close()
