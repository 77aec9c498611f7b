"""A resident scheduler keeps each source's diff state in memory between payloads, and
uses it only while the ledger says it is current: a payload another process applied, a
retraction and a replay each move the source's commit sequence on, and the scheduler's
next payload is diffed against the state reloaded from the ledger, never the stale one.
Real processes (a `feedledger scheduler` beside this test's own CLI calls), real clock.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import select

from feedledger.ledger.runs import leases
from feedledger.ledger.schema import applications, watermarks
from feedledger.ledger.store import Store
from feedledger.model.errors import LeaseHeldError
from feedledger.model.timeutil import parse_instant, to_us
from helpers import Cli

# key -> value per day: each day changes what the previous one stated, so a diff
# against a stale state gives other changes than the right one (d1 -> d3: keys 2 and 3;
# d2 -> d3: key 3 only)
ROWS = [
    {"1": "a0", "2": "b", "3": "c", "4": "x", "5": "y"},
    {"1": "a1", "2": "b", "3": "c", "4": "x", "5": "y"},
    {"1": "a1", "2": "B2", "3": "c", "4": "x", "5": "y"},
    {"1": "a1", "2": "B2", "3": "C3", "4": "x", "5": "y"},
    {"1": "a1", "2": "B2", "3": "C3", "4": "X4", "5": "Y4"},
]
NAME = "parcels"


def days() -> list[date]:
    today = datetime.now(UTC).date()
    return [today - timedelta(days=len(ROWS) - 1 - i) for i in range(len(ROWS))]


def write_day(folder: Path, i: int) -> Path:
    path = folder / f"{NAME}_{days()[i]}.csv"
    path.write_text("id,v\n" + "".join(f"{k},{v}\n" for k, v in ROWS[i].items()))
    return path


def day_us(i: int) -> int:
    return to_us(parse_instant(days()[i].isoformat(), "UTC"))


def rows(cli: Cli, table: Any) -> list[Any]:
    store = Store(cli.ws.store_url)
    try:
        with store.engine.connect() as conn:
            return list(conn.execute(select(table)))
    finally:
        store.close()


def standing(cli: Cli) -> dict[int, int]:
    """published_at -> changes of the source's standing applications."""
    return {
        a.published_at: a.changes
        for a in rows(cli, applications)
        if a.source == NAME and a.retracted_at is None
    }


def commit_seq(cli: Cli) -> int:
    return next(w.txn_seq for w in rows(cli, watermarks) if w.source == NAME)


def warm(cli: Cli) -> dict[str, Any]:
    """What the one scheduler holds for the source, as `health --json` shows it (a
    stale state it has met since is dropped: then only its counters)."""
    report = json.loads(cli("health", "--json", expect=None).stdout)
    (proc,) = report["resident"]
    held = [s for s in proc["sources"] if s["source"] == NAME]
    found = held[0] if held else {"commit_seq": None, "current": False}
    return {**found, "reloads": proc["reloads"], "max": proc["max_warm_sources"]}


def spawn(cli: Cli, *args: str) -> subprocess.Popen[str]:
    """A scheduler process, returned once it has logged its start; its log is drained
    by a thread (a full pipe would stall it)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "feedledger", "--config", str(cli.ws.config_path), "scheduler",
         "--tick", "0.1", "--lease-ttl", "5", "--no-dispatch", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )  # fmt: skip
    assert proc.stderr is not None
    for line in proc.stderr:
        if line.startswith("{") and json.loads(line)["event"] == "start":
            break
    threading.Thread(target=proc.stderr.read, daemon=True).start()
    return proc


def wait_for(what: str, ready: Callable[[], bool], proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 90
    while not ready():
        assert proc.poll() is None, f"the scheduler exited {proc.returncode}"
        assert time.monotonic() < deadline, f"the scheduler did not get there: {what}"
        time.sleep(0.1)


def when_free(cli: Cli, *args: str) -> Any:
    """`cli(*args)` as an operator runs it beside a running scheduler: the source's
    lease claimed first (`leases.claimed`; refused while the scheduler's own attempt
    holds it: one run per source at a time, the product's rule), then the command, whose
    run goes on under that claim -- so the scheduler cannot take up the payload an
    `ingest` archived before the command applies it. Other refusals fail the test."""
    deadline = time.monotonic() + 120  # only detects a hang
    store = Store(cli.ws.store_url)
    try:
        while True:
            try:
                with leases.claimed(store, NAME):
                    return cli(*args)
            except LeaseHeldError as exc:
                assert time.monotonic() < deadline, str(exc)
                time.sleep(0.05)
    finally:
        store.close()


def test_a_warm_scheduler_reloads_a_state_another_process_made_stale(
    cli: Cli, tmp_path: Path
) -> None:
    feed = tmp_path / "feed"
    feed.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    cli("source", "add", NAME, "--key", "id", "--fetch", str(feed), "--retry", "0.05")
    cli("ingest", NAME, str(write_day(feed, 0)))
    write_day(feed, 1)
    proc = spawn(cli, "--max-warm-sources", "4")
    try:
        # the scheduler recovers day 1 and keeps the state it committed
        wait_for("day 1", lambda: day_us(1) in standing(cli), proc)
        wait_for("day 1 warm", lambda: warm(cli)["commit_seq"] == commit_seq(cli), proc)
        assert warm(cli)["current"] and warm(cli)["rows"] == 5 and warm(cli)["max"] == 4
        shown = cli("health", expect=None).stdout  # the human form shows it too
        assert "resident" in shown and NAME in shown and "yes" in shown

        # another process applies day 2: the scheduler's state is no longer current
        when_free(cli, "ingest", NAME, str(write_day(elsewhere, 2)))
        assert not warm(cli)["current"]
        reloads = warm(cli)["reloads"]
        write_day(feed, 3)  # the scheduler's next payload is diffed against day 2
        wait_for("day 3", lambda: day_us(3) in standing(cli), proc)
        assert standing(cli)[day_us(3)] == 1  # key 3 only (a stale day-1 state: 2 and 3)
        wait_for("day 3 warm", lambda: warm(cli)["commit_seq"] == commit_seq(cli), proc)
        assert warm(cli)["reloads"] > reloads

        # a retraction of the scheduler's day-3 run: it applies day 3 again, from day 2
        run_id = next(
            a.run_id
            for a in rows(cli, applications)
            if a.published_at == day_us(3) and a.retracted_at is None
        )
        when_free(cli, "retract", run_id)
        wait_for("day 3 again", lambda: day_us(3) in standing(cli), proc)
        assert standing(cli)[day_us(3)] == 1  # the stale day-3 state would give none
        wait_for("day 3 warm again", lambda: warm(cli)["commit_seq"] == commit_seq(cli), proc)

        # a replay from day 2 moves the sequence on; day 4 is diffed against its state
        reloads = warm(cli)["reloads"]
        when_free(cli, "replay", NAME, "--from", days()[2].isoformat())
        assert not warm(cli)["current"]
        write_day(feed, 4)
        wait_for("day 4", lambda: day_us(4) in standing(cli), proc)
        assert standing(cli)[day_us(4)] == 2  # keys 4 and 5
        wait_for("day 4 warm", lambda: warm(cli)["commit_seq"] == commit_seq(cli), proc)
        assert warm(cli)["current"] and warm(cli)["reloads"] > reloads
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    assert proc.returncode == 0
    assert cli.json("verify", NAME)["ok"]
    # a stopped scheduler holds nothing: health shows no resident process
    assert json.loads(cli("health", "--json", expect=None).stdout)["resident"] == []
