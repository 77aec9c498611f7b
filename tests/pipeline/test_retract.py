"""Replay and retraction through the CLI (the seed's failure recovery), on SQLite and
PostgreSQL: a naive catch-up repaired by `replay`, retraction by run id (with and
without `--cascade`), late payloads, and bad requests that must change nothing.
Scenario and helpers: test_backfill.py.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from feedledger.config import Workspace
from feedledger.ledger.runs import holders, leases
from feedledger.ledger.store import Store
from helpers import Cli
from pipeline.backfill_scenario import (
    ARCHIVED,
    KEY,
    LIVE,
    MISSING,
    SRC,
    WINDOW,
    archive,
    at,
    backfill,
    declare,
    dump,
    error_line,
    ingest_args,
    normalised,
    outage,
    outbox_rows,
    runs_by_kind,
    verified,
    zonings,
)

# -- replay and retraction ------------------------------------------------------------------


def test_replay_repairs_a_naive_catch_up(cli: Cli, tmp_path: Path) -> None:
    declare(cli)
    cli(*ingest_args(tmp_path, *LIVE))
    naive = cli.json(*ingest_args(tmp_path, "2026-08-11", "MU-3"))  # the catch-up
    archive(cli, tmp_path, *ARCHIVED)  # fetched, but only now
    plan = cli.json("assess", SRC, *WINDOW)
    assert plan["replayable"] == []
    assert [p["published_at"] for p in plan["late"]] == [at(d) for d, _ in ARCHIVED]
    refused = cli("backfill", SRC, *WINDOW, expect=2)
    assert "late" in error_line(refused) and "replay" in error_line(refused)
    believed = cli.json("history", SRC, KEY)[-1]["recorded_at"]

    replay = cli.json("replay", SRC, "--from", "2026-08-03")
    assert (replay["retracted_payloads"], replay["retracted_versions"]) == (1, 1)
    assert [(s["published_at"], s["changes"]) for s in replay["steps"]] == [
        (at("2026-08-04"), 1),
        (at("2026-08-06"), 1),
        (at("2026-08-09"), 1),
        (at("2026-08-11"), 0),
    ]
    assert zonings(cli) == [(at(LIVE[0]), "R-0"), *[(at(d), z) for d, z in ARCHIVED]]
    assert replay["missing_dates"] == MISSING[:-1]  # up to the last payload only
    # the old belief is still queryable, and nothing was deleted
    assert zonings(cli, "--known-at", believed) == [
        (at(LIVE[0]), "R-0"),
        (at("2026-08-11"), "MU-3"),
    ]
    old = cli.json("asof", SRC, KEY, "--valid", "2026-08-06T12:00", "--known-at", believed)
    assert old["version"]["attributes"]["zoning"] == "R-0"
    now = cli.json("asof", SRC, KEY, "--valid", "2026-08-06T12:00")
    assert now["version"]["attributes"]["zoning"] == "MU-2"
    retracted = [h for h in cli.json("history", SRC, KEY, "--all") if h["retracted_at"]]
    assert [(h["valid_from"], h["run_id"]) for h in retracted] == [
        (at("2026-08-11"), naive["run_id"])
    ]
    assert cli.json("watermark", SRC)["published_at"] == at("2026-08-11")
    assert verified(cli)


def test_retracted_backfill_can_be_run_again(
    cli: Cli, workspace: Workspace, tmp_path: Path
) -> None:
    live = outage(cli, tmp_path)
    run = backfill(cli)
    standing = normalised(cli)
    believed = cli.json("gaps", SRC)[-1]["recorded_at"]
    out = cli.json("retract", run["run_id"])
    assert out["retracted_runs"] == [run["run_id"]]
    assert (out["payloads"], out["versions"], out["gaps"]) == (3, 3, 4)
    assert out["watermark"] == {"published_at": at(LIVE[0]), "payload_id": live["payload_id"]}
    assert zonings(cli) == [(at(LIVE[0]), "R-0")]
    assert cli.json("gaps", SRC) == []
    assert {g["retracted_at"] for g in cli.json("gaps", SRC, "--all")} == {out["retracted_at"]}
    assert len(cli.json("gaps", SRC, "--known-at", believed)) == 4  # the belief back then
    assert [h["retracted_at"] is not None for h in cli.json("history", SRC, KEY, "--all")] == [
        False,
        True,
        True,
        True,
    ]
    (retraction,) = runs_by_kind(cli, "retraction")
    assert retraction["run_id"] == out["run_id"] and retraction["status"] == "succeeded"
    (notice,) = [r for r in outbox_rows(workspace) if r.topic == "retraction"]
    assert (notice.run_id, notice.status) == (out["run_id"], "pending")
    assert verified(cli)

    again = backfill(cli)  # the archive still holds the week: same history again
    assert again["parent_run_id"] is None and len(again["steps"]) == 3
    assert normalised(cli) == standing
    later = cli.json(*ingest_args(tmp_path, "2026-08-12", "MU-4"))
    assert later["changes"] == 1 and zonings(cli)[-1] == (at("2026-08-12"), "MU-4")
    assert verified(cli)


def test_retraction_with_later_runs_needs_cascade(
    cli: Cli, workspace: Workspace, tmp_path: Path
) -> None:
    outage(cli, tmp_path)
    run = backfill(cli)
    later = cli.json(*ingest_args(tmp_path, "2026-08-12", "MU-4"))
    before = dump(workspace)
    refused = cli("retract", run["run_id"], expect=10)
    assert later["run_id"] in error_line(refused) and "--cascade" in error_line(refused)
    assert dump(workspace) == before

    out = cli.json("retract", run["run_id"], "--cascade")
    assert out["retracted_runs"] == [later["run_id"], run["run_id"]]  # newest first
    assert out["watermark"]["published_at"] == at(LIVE[0])
    assert zonings(cli) == [(at(LIVE[0]), "R-0")]
    gone = [
        h["attributes"]["zoning"]
        for h in cli.json("history", SRC, KEY, "--all")
        if h["retracted_at"]
    ]
    assert gone == ["R-1", "MU-2", "MU-3", "MU-4"]
    assert verified(cli)


def test_late_payload_is_only_folded_in_by_replay(
    cli: Cli, workspace: Workspace, tmp_path: Path
) -> None:
    declare(cli)
    cli(*ingest_args(tmp_path, *LIVE))
    cli(*ingest_args(tmp_path, "2026-08-06", "MU-2"))
    before = dump(workspace, skip=("payloads",))
    late = cli(*ingest_args(tmp_path, "2026-08-04", "R-1"), expect=6)
    assert "watermark" in error_line(late)
    assert dump(workspace, skip=("payloads",)) == before  # archived, never applied
    plan = cli.json("assess", SRC, "--from", "2026-08-01", "--to", "2026-08-10")
    assert [p["original_name"] for p in plan["late"]] == ["larimer_2026-08-04.csv"]
    assert "replay" in error_line(
        cli("backfill", SRC, "--from", "2026-08-01", "--to", "2026-08-10", expect=2)
    )
    assert dump(workspace, skip=("payloads",)) == before

    cli.json("replay", SRC, "--from", "2026-08-04")
    assert zonings(cli) == [
        (at(LIVE[0]), "R-0"),
        (at("2026-08-04"), "R-1"),
        (at("2026-08-06"), "MU-2"),
    ]
    assert cli.json("assess", SRC, "--from", "2026-08-01", "--to", "2026-08-10")["late"] == []
    assert verified(cli)


# -- bad requests ---------------------------------------------------------------------------


def test_bad_requests_fail_cleanly_and_change_nothing(
    cli: Cli, workspace: Workspace, tmp_path: Path, subtests: pytest.Subtests
) -> None:
    outage(cli, tmp_path)
    run = backfill(cli)
    later = cli.json(*ingest_args(tmp_path, "2026-08-12", "MU-4"))
    retraction = cli.json("retract", later["run_id"])
    cli("source", "add", "weld", "--key", "parcel")
    cases = [
        (["retract", "no-such-run"], 3, "unknown run id"),
        # nothing to do is a success (exit 0): see pipeline/test_missed_publications.py
        (["backfill", SRC, "--from", "2026-08-11", "--to", "2026-08-03"], 2, "is after --to"),
        (["assess", SRC, "--from", "2026-08-11", "--to", "2026-08-03"], 2, "is after --to"),
        (["backfill", SRC, "--from", "2026-13-45", "--to", "2026-08-11"], 2, "cannot parse --from"),
        (["replay", SRC, "--from", "last tuesday"], 2, "cannot parse --from"),
        (["retract", retraction["run_id"]], 2, "cannot be retracted"),
        (["retract", later["run_id"]], 2, "nothing standing"),
        (["backfill", SRC, "weld", *WINDOW], 2, "one source at a time"),
        (["backfill", f"{SRC},weld", *WINDOW], 2, "one source at a time"),
        (["backfill", "nosuch", *WINDOW], 3, "unknown source"),
    ]
    before = dump(workspace)
    for args, code, text in cases:
        with subtests.test(" ".join(args)):
            assert text in error_line(cli(*args, expect=code))
            assert dump(workspace) == before

    with subtests.test("retract while another process holds the lease"):
        store = Store(workspace.store_url)
        holder, other = holders.new_holder(), str(uuid.uuid4())
        try:
            leases.acquire(store, SRC, holder, other, run_kind="backfill")
            held = dump(workspace)
            refused = cli("retract", run["run_id"], expect=7)
            assert other in error_line(refused)
            assert dump(workspace) == held
            leases.release(store, SRC, holder, run_id=other, status="succeeded")
        finally:
            store.close()
