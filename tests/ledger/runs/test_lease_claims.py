"""A claim (`leases.claimed`): the source's lease held with no run, what a scheduler's
attempt takes before it fetches anything. Another holder is refused at once; a run the
claim's block starts goes on under the claim's holder and hands the lease back to the
claim when it ends (finished, never released from under the block); the block's end
frees the source; a claim whose process was killed (SIGKILL) is taken over at once,
with no run to abandon. SQLite and PostgreSQL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from sqlalchemy import select

from feedledger.ledger.runs import holders, leases
from feedledger.ledger.schema import runs
from feedledger.ledger.store import Store
from feedledger.model.errors import LeaseHeldError
from helpers import Cli, write_csv

SRC = "parcels"


def lease_of(store: Store) -> leases.LeaseState | None:
    with store.engine.connect() as conn:
        return leases.current(conn, SRC)


def run_rows(store: Store) -> list[tuple[str, str, str]]:
    with store.engine.connect() as conn:
        rows = conn.execute(select(runs.c.run_id, runs.c.status, runs.c.holder))
        return [(r.run_id, r.status, r.holder) for r in rows]


def test_a_run_under_a_claim_keeps_the_source_claimed_until_the_block_ends(
    cli: Cli,
) -> None:
    store = Store(cli.ws.store_url)
    try:
        with leases.claimed(store, SRC) as holder:
            held = lease_of(store)
            assert held is not None and held.holder == holder and held.run_id is None
            with pytest.raises(LeaseHeldError):  # another worker: refused, no run
                leases.acquire(store, SRC, holders.new_holder(), str(uuid.uuid4()))
            with leases.leased_run(store, SRC, "live") as run:
                assert run.holder == holder  # the claim's holder, not a new one
                during = lease_of(store)
                assert during is not None and during.run_id == run.run_id
            after = lease_of(store)
            assert after is not None and after.holder == holder and after.run_id is None
            with pytest.raises(LeaseHeldError):  # still claimed between two runs
                leases.acquire(store, SRC, holders.new_holder(), str(uuid.uuid4()))
            assert run_rows(store) == [(run.run_id, "succeeded", holder)]
            # the heartbeat keeps the claim alive
            assert leases.renew(store) == 1
        free = lease_of(store)
        assert free is not None and free.holder is None
        leases.acquire(store, SRC, holders.new_holder(), str(uuid.uuid4()))  # free again
    finally:
        store.close()


def test_a_failed_run_under_a_claim_is_finished_failed_and_the_claim_freed(
    cli: Cli,
) -> None:
    store = Store(cli.ws.store_url)
    try:
        with (
            pytest.raises(RuntimeError),
            leases.claimed(store, SRC) as holder,
            leases.leased_run(store, SRC, "live"),
        ):
            raise RuntimeError("the read failed")
        ((_run_id, status, by),) = run_rows(store)
        assert (status, by) == ("failed", holder)
        free = lease_of(store)
        assert free is not None and free.holder is None
    finally:
        store.close()


CLAIMER = """
import sys, time
from feedledger.ledger.runs import holders, leases
from feedledger.ledger.store import Store
with leases.claimed(Store(sys.argv[1]), sys.argv[2]):
    print("claimed", flush=True)
    time.sleep(600)
"""


def test_a_claim_whose_process_was_killed_is_taken_over_at_once(cli: Cli, tmp_path: Path) -> None:
    write_csv(tmp_path / "a.csv", ["parcel_id", "zoning"], [["1", "R-1"]])
    cli("source", "add", SRC, "--key", "parcel_id")
    proc = subprocess.Popen(
        [sys.executable, "-c", CLAIMER, cli.ws.store_url, SRC],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ},
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "claimed"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=60)
        if proc.stdout is not None:
            proc.stdout.close()  # else the collector finds it open in a later test
    # no expiry waited for: the claimer is gone, so the next run takes the source now
    cli("ingest", SRC, str(tmp_path / "a.csv"), "--published-at", "2026-08-01")
    store = Store(cli.ws.store_url)
    try:
        assert [status for _r, status, _h in run_rows(store)] == ["succeeded"]
    finally:
        store.close()
