"""Dispatchers side by side, on SQLite and PostgreSQL: claims keep two dispatchers from
sending one message, a claim of a dead process is void at once and any other lapses at
its expiry, a slow subscriber's backlog delays no other subscriber, and a dispatcher
without --once keeps delivering until SIGTERM, then records what it sent and releases
the rest. Receivers are real HTTP servers on 127.0.0.1.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any

from feedledger.ledger.runs.holders import new_holder
from feedledger.ledger.store import Store
from feedledger.model.timeutil import now_us
from feedledger.notify import deliveries, fanout
from feedledger.notify.deliveries import Outcome
from feedledger.notify.dispatch import dispatch
from feedledger.notify.subscriptions import listing
from helpers import Cli, write_csv
from notify.gated_dispatch import Gated, finish, receiver, spawn, wait_until

SRC = "parcels"


def ingest(cli: Cli, tmp_path: Path, day: str, n: int, value: str = "a") -> None:
    path = write_csv(
        tmp_path / f"{SRC}_{day}.csv", ["id", "v"], [[str(i), value] for i in range(n)]
    )
    cli("ingest", SRC, str(path), "--published-at", day)


def status_of(cli: Cli) -> dict[str, dict[str, Any]]:
    return {s["subscriber"]: s for s in cli.json("notify", "status")["subscribers"]}


def test_two_dispatchers_at_once_send_each_message_once(
    cli: Cli, tmp_path: Path, started: list[Gated]
) -> None:
    cli("source", "add", SRC, "--key", "id")
    ingest(cli, tmp_path, "2026-08-01", 40)
    # answers wait until requests came over two connections (one per dispatcher, at
    # --concurrency 1): both dispatchers are sending at the same time
    hook = receiver(started, gate=lambda r: len(r.ports()) >= 2)
    cli("subscriber", "add", "hook", "--webhook", hook.url)
    lines = tmp_path / "lines.jsonl"
    cli("subscriber", "add", "lines", "--file", str(lines))

    args = ("notify", "dispatch", "--once", "--batch", "4", "--concurrency", "1", "--json")
    first, second = spawn(cli, *args), spawn(cli, *args)
    reports = [finish(first), finish(second)]

    assert sum(r["messages_created"] for r in reports) == 80  # one fan-out
    assert sum(r["delivered"] for r in reports) == 80
    assert all(r["delivered"] > 0 for r in reports)  # both sent
    assert sum(r["attempted"] for r in reports) == 80
    counted = Counter(hook.ids())
    assert len(counted) == 40 and set(counted.values()) == {1}
    written = [json.loads(x)["webhook-id"] for x in lines.read_text().splitlines()]
    assert len(written) == 40 and set(written) == set(counted)
    status = status_of(cli)
    for name in ("hook", "lines"):
        assert (status[name]["delivered"], status[name]["pending"], status[name]["claimed"]) == (
            40,
            0,
            0,
        )


def test_a_slow_subscribers_backlog_holds_up_no_other(
    cli: Cli, tmp_path: Path, started: list[Gated]
) -> None:
    cli("source", "add", SRC, "--key", "id")
    ingest(cli, tmp_path, "2026-08-01", 30)
    fast = receiver(started)
    released = threading.Event()
    slow = receiver(started, gate=lambda _r: released.is_set())
    cli("subscriber", "add", "fast", "--webhook", fast.url)
    cli("subscriber", "add", "slow", "--webhook", slow.url)

    proc = spawn(
        cli, "notify", "dispatch", "--once", "--batch", "4", "--concurrency", "1",
        "--timeout", "60", "--json",
    )  # fmt: skip
    try:
        # the slow receiver answers nothing until the fast one has had all 30 messages,
        # many more than one batch
        wait_until(lambda: len(fast.ids()) == 30, "the fast subscriber's 30 messages")
        assert len(slow.ids()) == 1  # its first request is still waiting
    finally:
        released.set()
    report = finish(proc)
    assert (report["delivered"], report["failed"]) == (60, 0)
    assert sorted(slow.ids()) == sorted(fast.ids())
    assert len(set(slow.ids())) == 30


def test_without_once_it_keeps_delivering_until_sigterm(
    cli: Cli, tmp_path: Path, started: list[Gated]
) -> None:
    cli("source", "add", SRC, "--key", "id")
    hook = receiver(started)
    cli("subscriber", "add", "hook", "--webhook", hook.url)
    proc = spawn(cli, "notify", "dispatch", "--poll", "0.1", "--json")
    try:
        ingest(cli, tmp_path, "2026-08-01", 3)
        wait_until(lambda: len(hook.ids()) == 3, "the first payload's messages")
        ingest(cli, tmp_path, "2026-08-02", 5, value="b")  # 3 changed, 2 added
        wait_until(lambda: len(hook.ids()) == 8, "the second payload's messages")
        # the receiver has them; the dispatcher records each answer just after, and a
        # request cut short by SIGTERM is unrecorded by design (it goes again, same id)
        wait_until(lambda: status_of(cli)["hook"]["delivered"] == 8, "the deliveries recorded")
    finally:
        proc.send_signal(signal.SIGTERM)
    report = finish(proc)
    assert (report["messages_created"], report["delivered"], report["attempted"]) == (8, 8, 8)
    assert len(set(hook.ids())) == 8
    entry = status_of(cli)["hook"]
    assert (entry["delivered"], entry["pending"], entry["claimed"]) == (8, 0, 0)


# -- claims in the store ------------------------------------------------------------------


def dead_holder() -> str:
    """The holder name of a process that has ended, on this host."""
    code = "import os; print(os.getpid())"
    ended = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    host, _pid, token = new_holder().split(":")[:3]
    return f"{host}:{int(ended.stdout)}:{token}"


def fanned_out(cli: Cli, tmp_path: Path, n: int) -> Store:
    cli("source", "add", SRC, "--key", "id")
    ingest(cli, tmp_path, "2026-08-01", n)
    cli("subscriber", "add", "lines", "--file", str(tmp_path / "x.jsonl"))
    store = Store(cli.ws.store_url)
    assert fanout.expand(store, listing(store), now_us()) == n
    return store


def test_claims_exclude_other_live_holders_until_they_lapse(cli: Cli, tmp_path: Path) -> None:
    store = fanned_out(cli, tmp_path, 6)
    try:
        now = now_us()
        ours, theirs = new_holder(), new_holder()  # both alive (this process)
        first = deliveries.claim(store, "lines", ours, now, now + 10_000_000, 4)
        assert len(first) == 4
        # another live dispatcher gets only what is left, and nothing twice
        rest = deliveries.claim(store, "lines", theirs, now, now + 10_000_000, 10)
        assert len(rest) == 2
        assert not {d.delivery_id for d in first} & {d.delivery_id for d in rest}
        assert deliveries.claim(store, "lines", theirs, now, now + 10_000_000, 10) == []
        # a lapsed claim can be taken over
        later = now + 10_000_001
        again = deliveries.claim(store, "lines", theirs, later, later + 10_000_000, 10)
        assert {d.delivery_id for d in again} == {d.delivery_id for d in first + rest}
        # a failure recorded by a holder that lost its claim changes nothing
        lost = Outcome(first[0].delivery_id, False, 500, "HTTP 500", later, False)
        deliveries.record(store, ours, [lost], later)
        assert status_claimed(store, later) == 6
        # a delivery is recorded whoever reports it, and clears the claim
        done = Outcome(first[0].delivery_id, True, 204, None, 0, False)
        deliveries.record(store, ours, [done], later)
        assert status_claimed(store, later) == 5
        assert deliveries.release(store, theirs) == 5
        assert status_claimed(store, later) == 0
    finally:
        store.close()


def test_claims_of_a_dead_process_are_void_at_once(cli: Cli, tmp_path: Path) -> None:
    store = fanned_out(cli, tmp_path, 3)
    try:
        now = now_us()
        hour = 3_600_000_000
        assert len(deliveries.claim(store, "lines", dead_holder(), now, now + hour, 10)) == 3
        taken = deliveries.claim(store, "lines", new_holder(), now, now + hour, 10)
        assert len(taken) == 3
    finally:
        store.close()


def status_claimed(store: Store, now: int) -> int:
    entries = deliveries.status(store, now)["subscribers"]
    return int(sum(e["claimed"] for e in entries))


def test_progress_counts_attempts_against_what_was_due(cli: Cli, tmp_path: Path) -> None:
    cli("source", "add", SRC, "--key", "id")
    ingest(cli, tmp_path, "2026-08-01", 7)
    cli("subscriber", "add", "lines", "--file", str(tmp_path / "x.jsonl"))
    calls: list[tuple[int, int | None, int]] = []
    store = Store(cli.ws.store_url)
    try:
        report = dispatch(store, progress=lambda n, total, r: calls.append((n, total, r.delivered)))
    finally:
        store.close()
    assert report.delivered == 7
    assert calls and calls[-1] == (7, 7, 7)
    assert [n for n, _t, _d in calls] == sorted(n for n, _t, _d in calls)
