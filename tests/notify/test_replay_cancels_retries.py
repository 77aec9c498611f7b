"""A replay cancels the retracted runs' messages that are waiting for a retry (failed, in
backoff) or dead, not only those pending (Invariant 11), when it is called through the
Python API's `Source.replay`: `notify retry` then brings none of them back, and nothing
stale is ever sent. SQLite and PostgreSQL. (tests/notify/test_replay_notify.py covers pending
outbox rows, pending messages, digests and crashes, through the CLI and Ledger.replay.)"""

from __future__ import annotations

from datetime import date
from pathlib import Path

from sqlalchemy import select

import feedledger as fl
from feedledger.notify.tables import deliveries
from helpers import Cli
from notify.receivers import dispatch
from notify.stale_news import stale
from pipeline.backfill_scenario import SRC, declare, fetch, ingest_args

REFUSED = "http://127.0.0.1:9/hook"  # the discard port: nothing listens, refused at once


def hook_statuses(cli: Cli) -> list[str]:
    (rows,) = fetch(cli.ws, select(deliveries).where(deliveries.c.subscriber == "hook"))
    return sorted(r.status for r in rows)


def test_source_replay_cancels_messages_in_backoff_and_dead(cli: Cli, tmp_path: Path) -> None:
    declare(cli)
    cli("subscriber", "add", "hook", "--webhook", REFUSED)
    cli("subscriber", "add", "lines", "--file", str(tmp_path / "lines.jsonl"))
    cli.json(*ingest_args(tmp_path, "2026-08-02", "R-0"))
    first = dispatch(cli, backoff="3600")  # hook: failed, due again in an hour or more
    assert first["failed"] >= 1 and first["delivered"] >= 1, first
    cli.json(*ingest_args(tmp_path, "2026-08-03", "R-1"))
    assert dispatch(cli, "--max-attempts", "1")["dead"] >= 1  # hook: dead at once
    waiting = hook_statuses(cli)
    assert "failed" in waiting and "dead" in waiting and "delivered" not in waiting
    with fl.open(cli.ws.config_path) as led:
        got = led.source(SRC).replay(date(2026, 8, 2))
    assert isinstance(got, fl.WindowRun)
    assert got.retracted_payloads == 2
    assert got.messages_cancelled == len(waiting), (got.messages_cancelled, waiting)
    assert hook_statuses(cli) == ["cancelled"] * len(waiting)
    assert stale(cli) == []
    assert cli.json("notify", "retry")["requeued"] == 0  # cancelled is not dead
    assert stale(cli) == []
