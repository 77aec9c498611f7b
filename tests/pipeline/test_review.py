"""Bursts held for review: a live run far outside the source's normal volume is
applied but its notifications are held; `review --release` sends them, `review --retract`
retracts the run and they never go out. SQLite and PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from helpers import Cli
from pipeline.held_burst import held_burst, ingest_day, setup


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def test_held_run_sends_nothing_until_released(cli: Cli, tmp_path: Path) -> None:
    out = setup(cli, tmp_path)
    burst = held_burst(cli, tmp_path)
    # its versions are written (current state moved) ...
    assert cli.json("asof", "s", "5", "--valid", "2026-08-04")["version"]["attributes"]["v"] == "z"
    cli("notify", "dispatch", "--once")
    sent = _lines(out)
    assert len(sent) == 32  # 30 + 1 + 1 of the earlier runs, nothing of the burst
    assert all(m["body"]["run_id"] != burst["run_id"] for m in sent)
    released = cli.json("review", burst["run_id"], "--release")
    assert released["action"] == "released"
    cli("notify", "dispatch", "--once")
    mine = [m for m in _lines(out) if m["body"]["run_id"] == burst["run_id"]]
    assert len(mine) == 30 and {m["body"]["change"] for m in mine} == {"changed"}
    assert {r["run_id"]: r for r in cli.json("runs", "s")}[burst["run_id"]]["status"] == (
        "succeeded"
    )
    # reviewing it again is refused
    again = cli("review", burst["run_id"], "--release", expect=2)
    assert "not held" in again.stderr


def test_held_run_retracted_from_review_never_notifies(cli: Cli, tmp_path: Path) -> None:
    out = setup(cli, tmp_path)
    burst = held_burst(cli, tmp_path)
    retracted = cli.json("review", burst["run_id"], "--retract")
    assert retracted["action"] == "retracted" and retracted["notifications_cancelled"] == 1
    cli("notify", "dispatch", "--once")
    assert all(m["body"]["run_id"] != burst["run_id"] for m in _lines(out))
    # the burst's versions are retracted: the state is back to day 3's
    assert cli.json("asof", "s", "5", "--valid", "2026-08-04")["version"]["attributes"]["v"] == "a"
    assert cli.json("watermark", "s")["published_at"].startswith("2026-08-03")
    statuses = {r["run_id"]: r["status"] for r in cli.json("runs", "s")}
    assert statuses[burst["run_id"]] == "retracted"
    # nobody heard of the held run, so nobody hears of its retraction
    assert [m["body"]["type"] for m in _lines(out)].count("retraction") == 0
    assert cli.json("notify", "status")["subscribers"][0]["cancelled"] == 30


def test_review_bad_requests(cli: Cli, tmp_path: Path) -> None:
    setup(cli, tmp_path)
    burst = held_burst(cli, tmp_path)
    assert "exactly one" in cli("review", burst["run_id"], expect=2).stderr
    both = cli("review", burst["run_id"], "--release", "--retract", expect=2)
    assert "exactly one" in both.stderr
    assert cli("review", "no-such-run", "--release", expect=3).stderr
    ordinary = cli.json("runs", "s")[1]["run_id"]
    assert "not held" in cli("review", ordinary, "--release", expect=2).stderr
    # nothing changed by the refusals
    assert {r["run_id"]: r for r in cli.json("runs", "s")}[burst["run_id"]]["status"] == "held"


def test_digest_subscriber_gets_one_message_per_window(
    cli: Cli, tmp_path: Path, workspace: Any
) -> None:
    """--digest hourly: the changes fanned out in one UTC hour travel as ONE message, sent
    once the hour has closed; a per-change subscriber still gets them one by one."""
    from sqlalchemy import update

    from feedledger.ledger.store import Store
    from feedledger.notify.tables import deliveries

    cli("source", "add", "s", "--key", "id")
    digest_out, each_out = tmp_path / "digest.jsonl", tmp_path / "each.jsonl"
    cli("subscriber", "add", "d", "--file", str(digest_out), "--digest", "hourly")
    cli("subscriber", "add", "e", "--file", str(each_out))
    cli.json(*ingest_day(tmp_path, 1, {}))  # 30 added
    cli("notify", "dispatch", "--once")
    cli.json(*ingest_day(tmp_path, 2, {0: "b", 1: "b"}))  # 2 changed
    cli("notify", "dispatch", "--once")
    assert len(_lines(each_out)) == 32
    assert _lines(digest_out) == []  # the hour is still open
    status = {s["subscriber"]: s for s in cli.json("notify", "status")["subscribers"]}
    assert status["d"]["pending"] == 1
    store = Store(workspace.store_url)
    try:
        with store.begin() as conn:  # let the window close
            conn.execute(
                update(deliveries).where(deliveries.c.topic == "digest").values(next_attempt_at=0)
            )
    finally:
        store.close()
    cli("notify", "dispatch", "--once")
    (digest,) = _lines(digest_out)
    assert digest["body"]["type"] == "digest" and digest["body"]["count"] == 32
    assert {c["change"] for c in digest["body"]["changes"]} == {"added", "changed"}
    assert sorted(c["key"][0] for c in digest["body"]["changes"] if c["change"] == "changed") == [
        "0",
        "1",
    ]
    # changes fanned out after the window's digest went out get a digest of their own
    cli.json(*ingest_day(tmp_path, 3, {0: "c"}))
    cli("notify", "dispatch", "--once")
    rows = {s["subscriber"]: s for s in cli.json("notify", "status")["subscribers"]}
    assert rows["d"]["delivered"] == 1 and rows["d"]["pending"] == 1
