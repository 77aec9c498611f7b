"""A replay retracts what it replaces: like `retract`, it cancels in the retraction's
transaction what it retracted and nobody was delivered yet (Invariant 11), tells whoever
was delivered any of it with ONE retraction notice, and sends everyone its one summary,
which says what was retracted first. SQLite and PostgreSQL.

The source is pipeline/test_backfill's `larimer` (America/Denver): 08-02 applied live and
delivered, 08-03 applied live and fanned out but not delivered, 08-04 applied live and
not fanned out; then `replay --from 08-02`.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

import feedledger as fl
from feedledger.faults import ENV as FAULT_ENV
from feedledger.ledger.schema import applications
from feedledger.ledger.store import Store
from feedledger.model.timeutil import now_us
from feedledger.notify import fanout
from feedledger.notify.subscriptions import listing
from feedledger.notify.tables import deliveries
from helpers import Cli
from notify.receivers import dispatch, file_lines
from notify.stale_news import deliverable, stale
from pipeline.backfill_scenario import SRC, archive, declare, fetch, ingest_args, outbox_rows


def fan_out(cli: Cli) -> int:
    """Fan the pending outbox rows out into messages, delivering none."""
    store = Store(cli.ws.store_url)
    try:
        return fanout.expand(store, listing(store), now_us())
    finally:
        store.close()


def three_runs(cli: Cli, tmp_path: Path) -> dict[str, Any]:
    """`early` was delivered 08-02 (2 changes); `late`, added after, was not. 08-03's
    change is fanned out to both, undelivered; 08-04's is still an outbox row."""
    declare(cli)
    cli("subscriber", "add", "early", "--file", str(tmp_path / "early.jsonl"))
    delivered = cli.json(*ingest_args(tmp_path, "2026-08-02", "R-0"))
    assert dispatch(cli)["delivered"] == 2
    cli("subscriber", "add", "late", "--file", str(tmp_path / "late.jsonl"))
    fanned = cli.json(*ingest_args(tmp_path, "2026-08-03", "R-1"))
    assert fan_out(cli) == 2  # 08-03's one change, to each subscriber
    pending = cli.json(*ingest_args(tmp_path, "2026-08-04", "R-2"))
    return {"delivered": delivered, "fanned": fanned, "pending": pending}


def test_a_replay_cancels_what_it_retracted_and_tells_only_who_heard(
    cli: Cli, tmp_path: Path
) -> None:
    runs = three_runs(cli, tmp_path)
    ids = {name: r["run_id"] for name, r in runs.items()}
    out = cli.json("replay", SRC, "--from", "2026-08-02")
    assert (out["retracted_payloads"], out["retracted_versions"]) == (3, 4)
    assert out["retracted_runs"] == [ids["pending"], ids["fanned"], ids["delivered"]]
    assert (out["notifications_cancelled"], out["messages_cancelled"]) == (1, 2)
    assert stale(cli) == []
    by_run = {r.run_id: r.status for r in outbox_rows(cli.ws) if r.topic == "changes"}
    assert by_run[ids["pending"]] == "cancelled" and by_run[ids["fanned"]] == "dispatched"
    cancelled = [d for d in fetch(cli.ws, select(deliveries))[0] if d.status == "cancelled"]
    assert len(cancelled) == 2
    assert all(f"retracted by replay {out['run_id']}" in d.last_error for d in cancelled)

    report = dispatch(cli)
    assert report["delivered"] == 3  # the retraction notice to `early`; the summary to both
    early = [line["body"] for line in file_lines(tmp_path / "early.jsonl")]
    late = [line["body"] for line in file_lines(tmp_path / "late.jsonl")]
    assert [b["type"] for b in early] == ["change", "change", "retraction", "summary"]
    assert [b["type"] for b in late] == ["summary"]
    assert {b["run_id"] for b in early[:2]} == {ids["delivered"]}  # nothing of 08-03, 08-04
    notice = early[2]
    assert notice["run_id"] == notice["retraction_run_id"] == out["run_id"]
    assert notice["retracted_runs"] == out["retracted_runs"]
    assert (notice["versions"], notice["payloads"]) == (4, 3)
    summary = late[0]
    assert summary == early[3] and summary["run_id"] == out["run_id"]
    assert summary["retracted_runs"] == out["retracted_runs"]
    assert (summary["retracted_versions"], summary["retracted_payloads"]) == (4, 3)
    assert "first retracted 4 version(s) of 3 payload(s)" in summary["text"]
    assert out["summary"] == summary["text"]
    assert dispatch(cli)["attempted"] == 0  # nothing else, ever


def test_a_run_replayed_in_part_keeps_announcing_its_earlier_payloads(
    cli: Cli, tmp_path: Path
) -> None:
    """A backfill (notifications on) over 08-03..08-05, fanned out, nothing delivered;
    a replay from 08-04 takes back 08-04 and 08-05: their messages and the backfill's
    summary (it counts them) are cancelled, a digest keeps 08-03's change, and 08-03's
    own message is still delivered."""
    declare(cli)
    cli.json(*ingest_args(tmp_path, "2026-08-02", "R-0"))
    archive(cli, tmp_path, ("2026-08-03", "R-1"), ("2026-08-04", "R-2"), ("2026-08-05", "R-3"))
    lines = tmp_path / "lines.jsonl"
    cli("subscriber", "add", "lines", "--file", str(lines))
    cli("subscriber", "add", "dg", "--file", str(tmp_path / "dg.jsonl"), "--digest", "daily")
    filled = cli.json("backfill", SRC, "--from", "2026-08-03", "--to", "2026-08-05", "--notify")
    assert [s["changes"] for s in filled["steps"]] == [1, 1, 1]
    fan_out(cli)
    bf = filled["run_id"]
    payloads = [s["payload_id"] for s in filled["steps"]]
    with fl.open(cli.ws.config_path) as led:  # the public API's report says the same
        got = led.source(SRC).replay("2026-08-04")
    assert isinstance(got, fl.WindowRun)
    out = got.to_json()
    assert (got.retracted_runs, got.retracted_payloads) == ([bf], 2)
    assert out["retracted_runs"] == [bf] and out["retracted_payloads"] == 2
    # lines: 08-04's and 08-05's change, the summary; dg: the summary (its digest loses
    # two of its three backfilled changes, and stays)
    assert (got.notifications_cancelled, got.messages_cancelled) == (0, 4)
    assert (out["notifications_cancelled"], out["messages_cancelled"]) == (0, 4)
    assert stale(cli) == []
    (digest,) = [d for d in fetch(cli.ws, select(deliveries))[0] if d.topic == "digest"]
    body = json.loads(digest.body)
    assert digest.status == "pending" and body["count"] == 3  # the live run's two, 08-03's
    assert [(c["run_id"], c["payload_id"]) for c in body["changes"]][2:] == [(bf, payloads[0])]

    dispatch(cli)
    got = [line["body"] for line in file_lines(lines)]
    # the live run's two changes, 08-03's change, the replay's summary; nobody had been
    # delivered anything of the backfill, so nobody gets a retraction notice
    assert [b["type"] for b in got] == ["change", "change", "change", "summary"]
    assert (got[2]["run_id"], got[2]["payload_id"]) == (bf, payloads[0])
    assert got[3]["run_id"] == out["run_id"]
    assert not [r for r in outbox_rows(cli.ws) if r.topic == "retraction" and r.status == "pending"]


@pytest.mark.parametrize(
    "fault", ["replay_before_cancel", "replay_before_cancel:kill", "after_retraction:kill"]
)
def test_a_crash_around_the_replays_retraction_leaves_nothing_stale(
    cli: Cli, tmp_path: Path, fault: str
) -> None:
    """Killed (or failing) after retracting and before cancelling, nothing of either
    is committed; killed once the retraction committed, its cancellations are committed
    with it. Either way no deliverable message announces what the ledger no longer
    holds, and the replay run again completes: `early` hears of the retraction once."""
    runs = three_runs(cli, tmp_path)
    crashed = cli.proc("replay", SRC, "--from", "2026-08-02", env={FAULT_ENV: fault})
    if fault.endswith(":kill"):
        assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    else:
        assert crashed.returncode not in (0, -signal.SIGKILL), crashed.stderr
    assert stale(cli) == []
    committed = fault.startswith("after_retraction")
    (apps,) = fetch(cli.ws, select(applications))
    assert all((a.retracted_at is not None) == committed for a in apps)
    still = sorted(m[1] for m in deliverable(cli) if m[0] == "changes")
    expected = (
        [] if committed else sorted([runs["fanned"]["run_id"]] * 2 + [runs["pending"]["run_id"]])
    )
    assert still == expected

    again = cli.json("replay", SRC, "--from", "2026-08-02")
    assert again["retracted_payloads"] == (0 if committed else 3)
    assert stale(cli) == []
    dispatch(cli)
    early = [line["body"] for line in file_lines(tmp_path / "early.jsonl")]
    late = [line["body"] for line in file_lines(tmp_path / "late.jsonl")]
    assert [b["type"] for b in early] == ["change", "change", "retraction", "summary"]
    assert [b["type"] for b in late] == ["summary"]
    assert early[3]["run_id"] == again["run_id"]


def test_who_heard_only_of_a_runs_payloads_still_standing_is_not_told(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A backfill (notifications on) interrupted after 08-03: `early` is delivered
    08-03's change; resumed, it applies 08-04 and 08-05 under the same run id. A replay
    from 08-04 takes back only those two, which nobody was delivered: nobody is sent its
    retraction notice (08-03's change, all `early` heard of the run, still stands)."""
    declare(cli)
    cli.json(*ingest_args(tmp_path, "2026-08-02", "R-0"))
    archive(cli, tmp_path, ("2026-08-03", "R-1"), ("2026-08-04", "R-2"), ("2026-08-05", "R-3"))
    early = tmp_path / "early.jsonl"
    cli("subscriber", "add", "early", "--file", str(early))
    window = ("backfill", SRC, "--from", "2026-08-03", "--to", "2026-08-05", "--notify")
    monkeypatch.setenv(FAULT_ENV, "after_payload:1")
    assert cli(*window, "--json", expect=None).exit_code != 0
    monkeypatch.delenv(FAULT_ENV)
    assert dispatch(cli)["delivered"] == 3  # the live run's two changes, 08-03's one
    resumed = cli.json(*window)
    assert resumed["resumed"] == 1 and len(resumed["steps"]) == 2
    out = cli.json("replay", SRC, "--from", "2026-08-04")
    assert out["retracted_runs"] == [resumed["run_id"]] and out["retracted_payloads"] == 2
    assert out["messages_cancelled"] == 0 and out["notifications_cancelled"] == 3
    assert stale(cli) == []
    dispatch(cli)
    got = [line["body"] for line in file_lines(early)]
    assert [b["type"] for b in got] == ["change", "change", "change", "summary"]
    assert got[2]["run_id"] == resumed["run_id"] and got[3]["run_id"] == out["run_id"]
    (notice,) = [r for r in outbox_rows(cli.ws) if r.topic == "retraction"]
    assert notice.status == "dispatched"  # fanned out to nobody
