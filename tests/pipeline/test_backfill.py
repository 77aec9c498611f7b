"""Recovering a missed week through the CLI (the seed's backfill procedure), on SQLite
and PostgreSQL: backfill in publisher order, resume after an interruption or a kill,
gaps for the days the archive lacks, freezes, leases. Replay and retraction (and bad
requests): test_retract.py, which shares the helpers of backfill_scenario.py.

The scenario is the seed's: parcel 0714-22-1 of `larimer` (America/Denver) was R-0 when
the 2026-08-02 payload was applied live; the scheduler was then down, and the archive
holds the payloads of 08-04 (R-1), 08-06 (MU-2) and 08-09 (MU-3) only.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from feedledger.config import Workspace
from feedledger.faults import ENV as FAULT_ENV
from feedledger.faults import InjectedFailure
from feedledger.ledger import engine as eng
from feedledger.ledger.runs import holders, leases
from feedledger.ledger.schema import versions
from feedledger.ledger.store import Store
from feedledger.notify import tables as _notify_tables  # noqa: F401  (its tables in `metadata`)
from feedledger.sync import tables as _sync_tables  # noqa: F401  (its tables in `metadata`)
from helpers import Cli, backend_store, write_csv
from pipeline.backfill_scenario import (
    ARCHIVED,
    KEY,
    LIVE,
    MISSING,
    OTHER,
    SRC,
    WINDOW,
    archive,
    at,
    backfill,
    declare,
    dump,
    error_line,
    fetch,
    ingest_args,
    normalised,
    outage,
    outbox_rows,
    runs_by_kind,
    verified,
    zonings,
)

# -- helpers ---------------------------------------------------------------------------


_REFERENCE: dict[str, dict[str, Any]] = {}


@contextmanager
def _second_store(backend: str, tmp: Path) -> Iterator[str]:
    """A store of the same backend for the reference workspace (own PG schema)."""
    with backend_store(backend, tmp, "reference.db") as url:
        yield url


@pytest.fixture
def reference(store_url: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """`normalised` of an uninterrupted backfill in a second workspace on the same
    backend (built once per backend)."""
    backend = store_url.partition(":")[0]
    if backend not in _REFERENCE:
        tmp = tmp_path_factory.mktemp("reference")
        with _second_store(backend, tmp) as url:
            ws = Workspace.create(tmp / "ws", store_url=url, archive=None)
            engine = eng.make_engine(ws.store_url)
            eng.upgrade(engine)
            engine.dispose()
            cli = Cli(ws)
            outage(cli, tmp)
            backfill(cli)
            _REFERENCE[backend] = normalised(cli)
    return _REFERENCE[backend]


# -- the seed's three tests --------------------------------------------------------------


def test_backfill_keeps_intermediate_states_with_their_publisher_dates(
    cli: Cli, tmp_path: Path
) -> None:
    started = datetime.now().astimezone()
    live = outage(cli, tmp_path)
    plan = cli.json("assess", SRC, *WINDOW)
    assert plan["watermark_at"] == at(LIVE[0]) and plan["archived_payloads"] == 3
    assert plan["publisher_dates"] == [d for d, _ in ARCHIVED]
    assert [p["published_at"] for p in plan["replayable"]] == [at(d) for d, _ in ARCHIVED]
    assert plan["late"] == [] and plan["missing_dates"] == MISSING
    assert plan["unrecoverable_days"] == 6

    run = backfill(cli)
    assert run["kind"] == "backfill" and run["parent_run_id"] is None
    assert [(s["published_at"], s["changes"]) for s in run["steps"]] == [
        (at(d), 1) for d, _ in ARCHIVED
    ]
    hist = cli.json("history", SRC, KEY)
    assert [(h["valid_from"], h["attributes"]["zoning"], h["backfill"]) for h in hist] == [
        (at(LIVE[0]), "R-0", False),
        *[(at(d), z, True) for d, z in ARCHIVED],
    ]
    assert [h["run_id"] for h in hist] == [live["run_id"]] + [run["run_id"]] * 3
    # learned today (transaction time), valid on the publisher's dates
    assert all(datetime.fromisoformat(h["recorded_at"]) > started for h in hist)
    assert len(cli.json("history", SRC, OTHER)) == 1  # unchanged all week: one version
    assert cli.json("watermark", SRC)["published_at"] == at("2026-08-09")
    on_the_6th = cli.json("asof", SRC, KEY, "--valid", "2026-08-06T12:00")
    assert on_the_6th["status"] == "present"
    assert on_the_6th["version"]["attributes"]["zoning"] == "MU-2"
    (done,) = runs_by_kind(cli, "backfill")
    assert (done["status"], done["payloads"], done["changes"]) == ("succeeded", 3, 3)
    assert verified(cli)


def test_live_run_after_backfill_does_not_double_count(
    cli: Cli, workspace: Workspace, tmp_path: Path
) -> None:
    outage(cli, tmp_path)
    run = backfill(cli)
    rows = outbox_rows(workspace)
    mine = [(r.topic, r.status, r.payload_id) for r in rows if r.run_id == run["run_id"]]
    steps = [s["payload_id"] for s in run["steps"]]
    assert mine == [("changes", "suppressed", p) for p in steps] + [
        ("summary", "pending", steps[-1])
    ]
    body = json.loads(rows[-1].body)
    assert body["text"] == run["summary"] and body["run_id"] == run["run_id"]
    assert (body["changes"], body["publication_days"], body["unrecoverable_days"]) == (3, 3, 6)
    assert run["summary"].startswith(
        "Backfill for larimer: 3 changes recovered across 3 publication day(s) "
        "(2026-08-04 to 2026-08-09). 6 day(s) had no archived payload"
    )
    assert run["run_id"] in run["summary"]

    # the normal run the next day finds the state the backfill left: nothing to announce
    normal = cli.json(*ingest_args(tmp_path, "2026-08-12", "MU-3"))
    assert normal["status"] == "applied" and normal["changes"] == 0
    assert normal["unchanged"] == 2
    assert outbox_rows(workspace) == rows
    assert zonings(cli)[-1] == (at("2026-08-09"), "MU-3")
    assert cli.json("watermark", SRC)["published_at"] == at("2026-08-12")


def test_interrupted_backfill_resumes_from_the_watermark(
    cli: Cli,
    workspace: Workspace,
    tmp_path: Path,
    reference: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    outage(cli, tmp_path)
    monkeypatch.setenv(FAULT_ENV, "after_payload:2")
    failed = cli("backfill", SRC, *WINDOW, "--json", expect=None)
    monkeypatch.delenv(FAULT_ENV)
    assert failed.exit_code != 0 and isinstance(failed.exception, InjectedFailure)
    assert cli.json("watermark", SRC)["published_at"] == at("2026-08-06")  # advanced twice
    (first,) = runs_by_kind(cli, "backfill")
    assert (first["status"], first["payloads"]) == ("failed", 2)
    assert [z for _d, z in zonings(cli)] == ["R-0", "R-1", "MU-2"]
    assert cli.json("gaps", SRC) == [] and verified(cli)

    second = backfill(cli)
    # the resumed backfill continues under the run id it started with
    assert second["run_id"] == first["run_id"] and second["resumed"] == 1
    assert [s["published_at"] for s in second["steps"]] == [at("2026-08-09")]
    assert cli.json("watermark", SRC)["published_at"] == at("2026-08-09")
    # ONE summary, for the whole logical backfill
    assert (
        "3 changes recovered across 3 publication day(s) (2026-08-04 to 2026-08-09)"
        in (second["summary"])
    )
    assert "resumed after 1 interruption(s)" in second["summary"]
    (summary,) = [r for r in outbox_rows(workspace) if r.topic == "summary"]
    assert summary.run_id == first["run_id"] and json.loads(summary.body)["changes"] == 3
    (only,) = runs_by_kind(cli, "backfill")
    assert (only["status"], only["payloads"], only["changes"]) == ("succeeded", 3, 3)
    assert [r["status"] for r in only["resumed"]] == ["failed"]
    assert normalised(cli) == reference
    assert verified(cli)


@pytest.mark.parametrize("killed_at", [2, 3])
def test_killed_backfill_is_finished_by_the_same_command(
    cli: Cli, tmp_path: Path, reference: dict[str, Any], killed_at: int
) -> None:
    """SIGKILL after payload 2, or after the last one (before gaps and summary)."""
    outage(cli, tmp_path)
    killed = cli.proc("backfill", SRC, *WINDOW, env={FAULT_ENV: f"after_payload:{killed_at}:kill"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    (dead,) = runs_by_kind(cli, "backfill")
    assert dead["status"] == "running"
    assert cli.json("watermark", SRC)["published_at"] == at(ARCHIVED[killed_at - 1][0])

    rerun = backfill(cli)
    # one backfill, one run id (the killed one, resumed)
    assert rerun["run_id"] == dead["run_id"] and rerun["parent_run_id"] is None
    assert len(rerun["steps"]) == 3 - killed_at
    assert "resumed after 1 interruption(s)" in rerun["summary"]
    (only,) = runs_by_kind(cli, "backfill")
    assert (only["run_id"], only["status"], only["payloads"]) == (dead["run_id"], "succeeded", 3)
    assert [r["status"] for r in only["resumed"]] == ["abandoned"]
    assert normalised(cli) == reference
    assert verified(cli)


# -- gaps --------------------------------------------------------------------------------


def test_missing_days_become_gaps_that_answer_not_observed(
    cli: Cli, workspace: Workspace, tmp_path: Path
) -> None:
    outage(cli, tmp_path)
    run = backfill(cli, "--notify")
    assert run["notified"] is True and run["gaps_recorded"] == 4
    assert run["missing_dates"] == MISSING and run["unrecoverable_days"] == 6
    statuses = [(r.topic, r.status) for r in outbox_rows(workspace) if r.run_id == run["run_id"]]
    assert statuses == [("changes", "pending")] * 3 + [("summary", "pending")]
    found = cli.json("gaps", SRC)
    assert [(g["start"], g["end"]) for g in found] == [
        (at("2026-08-03"), at("2026-08-04")),
        (at("2026-08-05"), at("2026-08-06")),
        (at("2026-08-07"), at("2026-08-09")),  # consecutive days: one gap
        (at("2026-08-10"), at("2026-08-12")),
    ]
    assert {g["run_id"] for g in found} == {run["run_id"]}

    inside = cli.json("asof", SRC, KEY, "--valid", "2026-08-08T12:00")
    assert inside["status"] == "not_observed" and inside["version"] is None
    assert (inside["gap"]["start"], inside["gap"]["end"]) == (at("2026-08-07"), at("2026-08-09"))
    assert inside["last_observed"]["attributes"]["zoning"] == "MU-2"
    assert inside["next_observed"]["attributes"]["zoning"] == "MU-3"
    assert cli.json("asof", SRC, KEY, "--valid", "2026-08-07")["status"] == "not_observed"
    observed = cli.json("asof", SRC, KEY, "--valid", "2026-08-09T00:00")  # end: exclusive
    assert observed["status"] == "present" and observed["version"]["attributes"]["zoning"] == "MU-3"
    timeline = cli.json("history", SRC, KEY, "--with-gaps")
    assert [(i["type"], i.get("valid_from") or i["start"]) for i in timeline] == [
        ("version", at("2026-08-02")),
        ("gap", at("2026-08-03")),
        ("version", at("2026-08-04")),
        ("gap", at("2026-08-05")),
        ("version", at("2026-08-06")),
        ("gap", at("2026-08-07")),
        ("version", at("2026-08-09")),
        ("gap", at("2026-08-10")),
    ]

    gap_args = ["gap", "add", SRC, "--from", "2026-08-13", "--to", "2026-08-14"]
    manual = cli.json(*gap_args, "--reason", "county portal down")
    assert (manual["start"], manual["end"]) == (at("2026-08-13"), at("2026-08-15"))
    assert manual["reason"] == "county portal down"
    assert runs_by_kind(cli, "manual")[0]["run_id"] == manual["run_id"]
    assert cli.json("asof", SRC, KEY, "--valid", "2026-08-14")["status"] == "not_observed"
    before = dump(workspace)
    again = cli(*gap_args, "--reason", "again", expect=2)
    assert "already recorded" in error_line(again)
    seen = cli(
        "gap", "add", SRC, "--from", "2026-08-05", "--to", "2026-08-06", "--reason", "x", expect=2
    )
    assert "2026-08-06" in error_line(seen) and "observed" in error_line(seen)
    assert dump(workspace) == before


def test_gaps_follow_the_cadence_and_the_source_timezone(cli: Cli, tmp_path: Path) -> None:
    """Weekdays only, across the end of daylight saving time (Sunday 2026-11-01)."""
    cadence = ["--timezone", "America/Denver", "--cadence", "weekdays"]
    cli("source", "add", "weld", "--key", "id", *cadence)

    def payload(day: str) -> str:
        return str(write_csv(tmp_path / f"weld_{day}.csv", ["id", "v"], [["1", day]]))

    cli("ingest", "weld", payload("2026-10-29"), "--published-at", "2026-10-29")  # Thursday
    cli("archive", "add", "weld", payload("2026-11-03"), "--published-at", "2026-11-03")
    run = cli.json("backfill", "weld", "--from", "2026-10-30", "--to", "2026-11-04")
    assert run["missing_dates"] == ["2026-10-30", "2026-11-02", "2026-11-04"]  # no weekend
    assert [(g["start"], g["end"]) for g in cli.json("gaps", "weld")] == [
        (at("2026-10-30"), at("2026-10-31")),
        (at("2026-11-02", 7), at("2026-11-03", 7)),
        (at("2026-11-04", 7), at("2026-11-05", 7)),
    ]


def test_live_payload_for_a_day_recorded_as_gap_is_observed(cli: Cli, tmp_path: Path) -> None:
    """README's procedure: backfill 03..11, then the normal run applies the 11th's
    payload. The 11th was observed after all; asof must not answer not_observed."""
    outage(cli, tmp_path)
    backfill(cli)
    normal = cli.json(*ingest_args(tmp_path, "2026-08-11", "MU-3"))
    assert normal["status"] == "applied" and normal["changes"] == 0
    assert cli.json("asof", SRC, KEY, "--valid", "2026-08-10T12:00")["status"] == "not_observed"
    answer = cli.json("asof", SRC, KEY, "--valid", "2026-08-11T12:00")
    assert answer["status"] == "present", answer
    assert answer["version"]["attributes"]["zoning"] == "MU-3"


# -- freezes, leases, concurrency ----------------------------------------------------------


def test_frozen_source_refuses_live_runs_but_backfills(
    cli: Cli, workspace: Workspace, tmp_path: Path
) -> None:
    outage(cli, tmp_path)
    ice = cli.json("freeze", SRC, "--reason", "outage recovery")
    assert ice["frozen"] is True and ice["changed"] is True
    before = dump(workspace, skip=("payloads",))
    refused = cli(*ingest_args(tmp_path, "2026-08-12", "MU-4"), expect=9)
    assert "frozen" in error_line(refused) and "outage recovery" in error_line(refused)
    assert dump(workspace, skip=("payloads",)) == before  # no run row, nothing applied

    assert len(backfill(cli)["steps"]) == 3
    assert cli.json("thaw", SRC)["changed"] is True
    live = cli.json(*ingest_args(tmp_path, "2026-08-12", "MU-4"))
    assert live["status"] == "applied" and live["changes"] == 1
    assert [r["kind"] for r in cli.json("runs", SRC)] == ["live", "backfill", "live"]


def test_live_run_refused_while_another_process_holds_the_lease(
    cli: Cli, workspace: Workspace, tmp_path: Path
) -> None:
    outage(cli, tmp_path)
    store = Store(workspace.store_url)
    holder, run_id = holders.new_holder(), str(uuid.uuid4())
    try:
        leases.acquire(store, SRC, holder, run_id, run_kind="backfill")  # a running backfill
        before = dump(workspace, skip=("payloads",))
        refused = cli.proc(*ingest_args(tmp_path, "2026-08-12", "MU-4"))
        assert refused.returncode == 7, refused.stderr
        assert run_id in error_line(refused)
        assert dump(workspace, skip=("payloads",)) == before
        leases.release(store, SRC, holder, run_id=run_id, status="succeeded")
    finally:
        store.close()
    assert cli.json(*ingest_args(tmp_path, "2026-08-12", "MU-4"))["changes"] == 1


def test_concurrent_backfill_and_live_run_never_interleave(
    cli: Cli, workspace: Workspace, tmp_path: Path
) -> None:
    declare(cli)
    cli(*ingest_args(tmp_path, *LIVE))
    archive(cli, tmp_path, *[(f"2026-08-{d:02d}", f"Z-{d}") for d in range(3, 11)])
    base = [sys.executable, "-m", "feedledger", "--config", str(workspace.config_path)]
    commands = [
        ["backfill", SRC, "--from", "2026-08-03", "--to", "2026-08-10"],
        ingest_args(tmp_path, "2026-08-12", "MU-4"),
    ]
    procs = [
        subprocess.Popen(base + c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for c in commands
    ]
    (_o, bf_err), (_o, live_err) = [p.communicate(timeout=120) for p in procs]
    bf, live = (p.returncode for p in procs)
    # each either ran or was refused cleanly (the backfill also finds nothing left to
    # replay if the live run finished before it looked)
    assert bf in (0, 2, 7) and live in (0, 6, 7), (bf, bf_err, live, live_err)
    assert 0 in (bf, live)
    for code, err in ((bf, bf_err), (live, live_err)):
        assert code != 7 or "holds this source's lease" in err
    assert verified(cli)
    # commit order == publisher order: no payload was applied over a newer one
    (order,) = fetch(
        workspace,
        select(versions.c.valid_from)
        .where(versions.c.retracted_at.is_(None))
        .order_by(versions.c.txn_seq),
    )
    assert [r.valid_from for r in order] == sorted(r.valid_from for r in order)
    assert not [r for r in cli.json("runs", SRC) if r["status"] == "running"]
