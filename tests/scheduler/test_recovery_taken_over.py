"""A recovery taken over by another scheduler is run once: three schedulers (threads,
each with its own context and store connections, calling the scheduler's `attempt`)
race for one source's missed week, in this order, forced with events (no sleeps):

1. scheduler 1 takes the lease and starts the recovery, then stalls before its first
   payload (its progress callback waits) until its lease has expired (a missed
   heartbeat);
2. scheduler 2 takes the expired lease over and recovers the week;
3. scheduler 1 wakes up: its first payload is refused (the watermark moved on, the
   lease is not its own), and it must not finish the run scheduler 2 now holds;
4. scheduler 3, which looked at the ledger while the week was still missing (before
   taking the lease), takes the lease last: the week is recovered, so it ends without a
   run and without a summary (`done_elsewhere`).

Scheduler 2 looks either before scheduler 1 started its run or while it holds it.
Every payload is applied once, by one recovery run that ends `succeeded`, and no
summary says 0 changes. SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from feedledger.config import Workspace
from feedledger.context import Context
from feedledger.ledger.runs import leases
from feedledger.ledger.schema import applications, runs
from feedledger.ledger.schema import leases as lease_table
from feedledger.model.timeutil import now_us
from feedledger.pipeline.scheduling import Attempt, attempt
from helpers import Cli
from ledger.runs.lease_rival import NOW
from pipeline.backfill_scenario import at, fetch, outbox_rows
from pipeline.missed_week import SRC, WEEK, setup

WAIT_S = 120  # a bound on each wait, never a pace: every step waits for an event


class Race:
    """Holds schedulers 2 and 3 just before they take the lease (their look at the
    ledger done), each until released."""

    def __init__(self) -> None:
        self.looked = {n: threading.Event() for n in ("s2", "s3")}
        self.go = {n: threading.Event() for n in ("s2", "s3")}

    def patch(self, monkeypatch: pytest.MonkeyPatch) -> None:
        real = leases.leased_run

        @contextmanager
        def leased_run(*args: Any, **kwargs: Any) -> Iterator[leases.LeasedRun]:
            name = threading.current_thread().name
            if name in self.looked:
                self.looked[name].set()
                assert self.go[name].wait(WAIT_S)
            with real(*args, **kwargs) as run:
                yield run

        monkeypatch.setattr(leases, "leased_run", leased_run)


def scheduler(
    ws: Workspace, name: str, out: dict[str, Attempt], progress: Any = None
) -> threading.Thread:
    def work() -> None:
        with Context(Workspace.load(ws.config_path)) as ctx:
            src = ctx.workspace.source(SRC)
            out[name] = attempt(ctx, src, NOW, random.Random(0), progress=progress)

    thread = threading.Thread(target=work, name=name, daemon=True)
    thread.start()
    return thread


def stalled_at_first_payload(
    holding: threading.Event, wake: threading.Event
) -> Callable[..., None]:
    def progress(done: int, _total: int, _ref: object) -> None:
        if done == 0:  # the lease held and the run started, nothing applied yet
            holding.set()
            assert wake.wait(WAIT_S)

    return progress


def wait_lease_expired(ws: Workspace) -> None:
    """Until scheduler 1's lease (a 1 s time-to-live, no heartbeat) has expired."""
    deadline = time.monotonic() + WAIT_S
    while True:
        (lease,) = fetch(ws, select(lease_table).where(lease_table.c.source == SRC))[0]
        if lease.expires_at is not None and lease.expires_at < now_us():
            return
        assert time.monotonic() < deadline
        time.sleep(0.05)


@pytest.mark.parametrize("second_looks", ["before_the_first_run", "during_the_first_run"])
def test_a_recovery_taken_over_is_run_once_and_announced_once(
    cli: Cli,
    workspace: Workspace,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    second_looks: str,
) -> None:
    setup(cli, tmp_path)
    monkeypatch.setattr(leases, "_ttl_s", 1)  # scheduler 1's lease runs out while it stalls
    race = Race()
    race.patch(monkeypatch)
    got: dict[str, Attempt] = {}
    holding, wake = threading.Event(), threading.Event()
    threads: list[threading.Thread] = []
    if second_looks == "before_the_first_run":
        threads.append(scheduler(workspace, "s2", got))
        assert race.looked["s2"].wait(WAIT_S)
    threads.append(scheduler(workspace, "s1", got, stalled_at_first_payload(holding, wake)))
    assert holding.wait(WAIT_S)
    (first_run,) = fetch(workspace, select(lease_table.c.run_id))[0]
    if second_looks == "during_the_first_run":
        threads.append(scheduler(workspace, "s2", got))
        assert race.looked["s2"].wait(WAIT_S)
    threads.append(scheduler(workspace, "s3", got))
    assert race.looked["s3"].wait(WAIT_S)
    wait_lease_expired(workspace)
    # scheduler 2 takes the expired lease over and recovers, then 1 wakes up, then 3 goes
    for name, step in (("s2", race.go["s2"]), ("s1", wake), ("s3", race.go["s3"])):
        step.set()
        (thread,) = [t for t in threads if t.name == name]
        thread.join(WAIT_S)
        assert not thread.is_alive()

    s1, s2, s3 = got["s1"], got["s2"], got["s3"]
    assert (s2.action, s2.outcome, s2.payloads) == ("recover", "recovered", len(WEEK))
    # scheduler 1 was refused its first payload (the watermark has moved on under it)
    assert (s1.outcome, s1.run_id, s1.changes) == ("done_elsewhere", None, 0)
    assert (s3.action, s3.outcome, s3.run_id, s3.error) == ("recover", "done_elsewhere", None, None)
    assert s3.detail["done_by_run"] == s2.run_id
    assert cli.json("watermark", SRC)["published_at"] == at(WEEK[-1])
    apps, backfills = fetch(
        workspace,
        select(applications).where(applications.c.source == SRC),
        select(runs).where(runs.c.source == SRC, runs.c.kind == "backfill"),
    )
    # every payload applied once (the 08-02 live run, then the week), by one run: the
    # one scheduler 1 started, taken over
    assert len(apps) == 1 + len(WEEK) == len({a.payload_id for a in apps})
    live = min(a.published_at for a in apps)
    assert {a.run_id for a in apps if a.published_at > live} == {s2.run_id} == {first_run.run_id}
    (run,) = backfills
    assert (run.run_id, run.status, run.payloads) == (s2.run_id, "succeeded", len(WEEK))
    assert [r["status"] for r in json.loads(run.resumptions)] == ["abandoned"]
    summaries = [r for r in outbox_rows(workspace) if r.topic == "summary"]
    assert [(s.run_id, s.changes) for s in summaries] == [(s2.run_id, run.changes)]
    assert run.changes > 0
