"""A scheduler's attempt claims the source's lease before it fetches (scheduler/loop.py,
`leases.claimed`): a source another process holds costs a losing worker nothing -- no
fetch, no read, no attempt recorded -- and a tick leaves it alone while it is held;
once it is free, the next tick applies it. SQLite and PostgreSQL."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from feedledger.ledger import schedule_state
from feedledger.ledger.runs import holders, leases
from feedledger.model.timeutil import now_us
from feedledger.pipeline.intake import run as run_module
from feedledger.scheduler.loop import Options, Scheduler
from helpers import Cli

NAMES = [f"s{i}" for i in range(4)]


def declare(cli: Cli, feed: Path) -> None:
    today = datetime.now(UTC).date()
    for n in NAMES:
        (feed / n).mkdir(parents=True)
        (feed / n / f"{n}_{today}.csv").write_text("id,v\n1,a\n")
        cli("source", "add", n, "--key", "id", "--fetch", str(feed / n))


def runs_logged(sched: Scheduler) -> list[dict[str, Any]]:
    assert isinstance(sched.log, io.StringIO)
    lines = [json.loads(x) for x in sched.log.getvalue().splitlines()]
    return [e for e in lines if e["event"] == "run"]


def test_a_source_another_process_holds_costs_a_worker_no_fetch(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    declare(cli, tmp_path / "feed")
    fetched: list[str] = []
    real = run_module.fetch

    def spy(src: Any, **kwargs: Any) -> Any:
        fetched.append(src.name)
        return real(src, **kwargs)

    monkeypatch.setattr(run_module, "fetch", spy)
    sched = Scheduler(cli.ws.config_path, Options(workers=1, dispatch=False), log=io.StringIO())
    other = holders.new_holder()  # another worker, alive, holding s0 (its attempt's claim)
    try:
        leases.acquire(sched.store, "s0", other, None)
        # a worker that took s0 up before it was claimed: busy, at the cost of a claim
        got = sched._run_one(sched._context(), "s0", now_us())
        assert got is not None and got.outcome == "busy"
        assert fetched == []
        assert schedule_state.get(sched.store, "s0").last_outcome is None  # nothing recorded
        # a tick leaves the held source alone and applies the others
        for future in sched.tick(wait=True):
            future.result()
        assert sorted(fetched) == NAMES[1:]
        assert {e["source"]: e["outcome"] for e in runs_logged(sched)} == {
            "s0": "busy",
            **dict.fromkeys(NAMES[1:], "applied"),
        }
        # freed: the next tick applies it, once
        leases.release(sched.store, "s0", other)
        for future in sched.tick(wait=True):
            future.result()
        assert sorted(fetched) == NAMES
        applied = [e["source"] for e in runs_logged(sched) if e["outcome"] == "applied"]
        assert sorted(applied) == NAMES
    finally:
        sched.close()
