"""How one scheduler among several takes up its due sources (scheduler/loop.py): each
tick goes down the sources from a random place, so schedulers started together do not
work on the same source in step; and a worker looks again as it takes a source up, so
a source another scheduler applied since the tick queued it is neither fetched nor
recorded as an attempt."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from pathlib import Path

from feedledger.ledger import schedule_state
from feedledger.model.timeutil import now_us
from feedledger.scheduler.loop import Options, Scheduler
from helpers import Cli

NAMES = [f"s{i}" for i in range(6)]


def declare(cli: Cli, feed: Path) -> None:
    today = datetime.now(UTC).date()
    for n in NAMES:
        (feed / n).mkdir(parents=True)
        (feed / n / f"{n}_{today}.csv").write_text("id,v\n1,a\n")
        cli("source", "add", n, "--key", "id", "--fetch", str(feed / n))


def test_each_tick_goes_down_the_sources_from_a_random_place(cli: Cli, tmp_path: Path) -> None:
    declare(cli, tmp_path / "feed")
    firsts = set()
    for seed in range(8):
        sched = Scheduler(cli.ws.config_path, Options(dispatch=False, seed=seed), log=io.StringIO())
        try:
            order = [name for name, _src in sched._in_turn(sched._context())]
        finally:
            sched.close()
        start = NAMES.index(order[0])  # every source once, by name from where it started
        assert order == NAMES[start:] + NAMES[:start]
        firsts.add(order[0])
    assert len(firsts) > 1


def test_a_source_applied_elsewhere_since_the_tick_is_not_taken_up(
    cli: Cli, tmp_path: Path
) -> None:
    declare(cli, tmp_path / "feed")
    sched = Scheduler(cli.ws.config_path, Options(workers=1, dispatch=False), log=io.StringIO())
    try:
        ctx = sched._context()
        now = now_us()
        cli("run", "s0")  # another scheduler, after this one's tick found s0 due
        assert sched._run_one(ctx, "s0", now) is None
        assert schedule_state.get(sched.store, "s0").last_outcome is None  # no attempt
        got = sched._run_one(ctx, "s1", now)  # still due: attempted
        assert got is not None and got.outcome == "applied"
    finally:
        sched.close()
    assert sched.log.getvalue().count('"event": "run"') == 1
