"""`run` never collapses a missed week, `backfill` fetches and
`assess` tells fetchable from lost, one backfill keeps one run id across an error and a
kill, and "nothing to do" is a success everywhere. SQLite and PostgreSQL.

The week: `larimer` (America/Denver) applied 08-02 (R-0) live; its fetch folder then
collected one file a day, 08-03 ... 08-11, in which parcel 0714-22-1 goes R-1 (08-03 ..
08-05), MU-2 (08-06 .. 08-08), MU-3 (08-09 ..), and parcel 0714-22-2 changes every day.
"""

from __future__ import annotations

import json
import signal
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest

from feedledger.config import Workspace
from feedledger.context import Context
from feedledger.faults import ENV as FAULT_ENV
from feedledger.faults import InjectedFailure
from feedledger.model.timeutil import to_us
from helpers import Cli, write_csv
from pipeline.backfill_scenario import (
    at,
    dump,
    error_line,
    outbox_rows,
    runs_by_kind,
    verified,
    zonings,
)
from pipeline.missed_week import HEADER, KEY, SRC, WEEK, publish, setup

WHOLE_WEEK = [
    (at("2026-08-02"), "R-0"),
    (at("2026-08-03"), "R-1"),
    (at("2026-08-06"), "MU-2"),
    (at("2026-08-09"), "MU-3"),
]


# -- `run` with a missed week ---------------------------------------------------


def test_run_applies_every_waiting_publication_oldest_first_as_one_backfill(
    cli: Cli, workspace: Workspace, tmp_path: Path
) -> None:
    setup(cli, tmp_path)
    result = cli("run", SRC, "--json")
    out = json.loads(result.stdout)
    assert out["status"] == "recovered" and out["kind"] == "backfill"
    assert out["payloads"] == 9 and out["gaps_recorded"] == 0
    assert "were waiting" in result.stderr  # it says so
    assert zonings(cli) == WHOLE_WEEK  # MU-2 is not lost
    (run,) = runs_by_kind(cli, "backfill")
    assert run["run_id"] == out["run_id"] and run["payloads"] == 9
    assert [r.topic for r in outbox_rows(workspace) if r.topic == "summary"] == ["summary"]
    assert cli.json("watermark", SRC)["published_at"] == at("2026-08-11")
    # run again: nothing new, exit 0
    again = cli.json("run", SRC)
    assert again["status"] in ("already_applied", "nothing_to_do")
    assert len(runs_by_kind(cli, "backfill")) == 1 and verified(cli)


def test_run_no_recover_refuses_naming_the_waiting_publications(
    cli: Cli, workspace: Workspace, tmp_path: Path
) -> None:
    setup(cli, tmp_path)
    before = dump(workspace, skip=("payloads",))
    refused = cli("run", SRC, "--no-recover", expect=2)
    line = error_line(refused)
    assert "9 publications are waiting" in line and f"{SRC}_2026-08-03.csv" in line
    assert f"feedledger backfill {SRC} --from 2026-08-03 --to 2026-08-11" in line
    assert dump(workspace, skip=("payloads",)) == before


def test_run_source_recovers_a_date_template_with_gaps_for_what_is_not_served(
    cli: Cli, workspace: Workspace, tmp_path: Path
) -> None:
    """The Python entry point, a `{date}` location, and the scheduler's clock: the cadence
    says 08-03 .. 08-11 were missed; the publisher no longer serves 08-07."""
    from feedledger.pipeline.catchup.recovery import Recovery
    from feedledger.pipeline.intake.run import run_source

    feed = setup(cli, tmp_path, [d for d in WEEK if d != "2026-08-07"])
    template = str(feed / f"{SRC}_{{date}}.csv")
    cli(
        "source", "add", SRC, "--key", "parcel", "--timezone", "America/Denver",
        "--fetch", template, "--replace",
    )  # fmt: skip
    now = to_us(datetime(2026, 8, 11, 18, 0, tzinfo=UTC))
    with Context(Workspace.load(workspace.config_path)) as ctx:
        got = run_source(ctx, SRC, now=now)
    assert isinstance(got, Recovery) and got.report is not None
    assert len(got.report.steps) == 8 and got.report.missing_dates == [date(2026, 8, 7)]
    assert zonings(cli) == WHOLE_WEEK
    (gap,) = cli.json("gaps", SRC)
    assert (gap["start"], gap["end"]) == (at("2026-08-07"), at("2026-08-08"))


def test_run_with_the_newest_file_behind_the_watermark_is_nothing_to_do(
    cli: Cli, tmp_path: Path
) -> None:
    setup(cli, tmp_path, [])
    later = write_csv(tmp_path / f"{SRC}_2026-08-20.csv", HEADER, [[KEY, "MU-9", "county"]])
    cli("ingest", SRC, str(later))
    publish(tmp_path / "exports", "2026-08-10")  # older than the watermark
    out = cli.json("run", SRC)
    assert out["status"] == "nothing_to_do" and "watermark" in out["reason"]
    assert zonings(cli)[-1] == (at("2026-08-20"), "MU-9")


# -- assess / backfill fetch / archive add --------------------------------------


def test_assess_tells_archived_fetchable_and_unrecoverable_apart(cli: Cli, tmp_path: Path) -> None:
    served = [d for d in WEEK if d not in ("2026-08-07", "2026-08-11")]  # seven files
    setup(cli, tmp_path, served)
    cli("archive", "add", SRC, str(tmp_path / "exports" / f"{SRC}_2026-08-03.csv"))
    plan = cli.json("assess", SRC, "--from", "2026-08-03", "--to", "2026-08-11")
    assert plan["archived_dates"] == ["2026-08-03"]
    assert plan["fetchable_dates"] == served[1:]
    assert plan["unrecoverable_dates"] == ["2026-08-07", "2026-08-11"]
    assert plan["unrecoverable_days"] == 2
    human = cli("assess", SRC, "--from", "2026-08-03", "--to", "2026-08-11").stdout
    assert "fetchable now" in human and "unrecoverable): 2" in human
    offline = cli.json("assess", SRC, "--from", "2026-08-03", "--to", "2026-08-11", "--no-fetch")
    assert offline["fetchable_dates"] == [] and offline["unrecoverable_days"] == 8


def test_backfill_fetches_what_is_served_first_unless_no_fetch(cli: Cli, tmp_path: Path) -> None:
    served = [d for d in WEEK if d not in ("2026-08-07", "2026-08-11")]
    setup(cli, tmp_path, served)
    window = ("--from", "2026-08-03", "--to", "2026-08-11")
    archive_only = cli.json("backfill", SRC, *window, "--no-fetch")
    assert archive_only["status"] == "nothing_to_do"
    report = cli.json("backfill", SRC, *window)
    assert len(report["fetched"]) == 7 and len(report["steps"]) == 7
    assert report["missing_dates"] == ["2026-08-07", "2026-08-11"]
    assert zonings(cli) == WHOLE_WEEK
    assert len(cli.json("gaps", SRC)) == 2


def test_archive_add_takes_several_files_or_a_folder_dated_by_name(
    cli: Cli, workspace: Workspace, tmp_path: Path
) -> None:
    feed = setup(cli, tmp_path, WEEK[:4])
    (feed / "README.txt").write_text("not a payload")
    two = [str(feed / f"{SRC}_{d}.csv") for d in WEEK[:2]]
    before = dump(workspace)
    refused = cli("archive", "add", SRC, *two, "--published-at", "2026-08-03", expect=2)
    assert "--published-at dates ONE file, but 2 were given" in error_line(refused)
    assert dump(workspace) == before
    added = cli.json("archive", "add", SRC, *two)
    assert [a["published_at"] for a in added] == [at(d) for d in WEEK[:2]]
    assert all(a["created"] for a in added)
    folder = cli("archive", "add", SRC, str(feed), "--json")
    items = json.loads(folder.stdout)
    assert [(a["published_at"], a["created"]) for a in items] == [
        (at(d), d not in WEEK[:2]) for d in WEEK[:4]
    ]
    assert "README.txt" in folder.stderr
    assert len(cli.json("archive", "list", SRC)) == 5  # with the 08-02 one
    undated = tmp_path / "parcels.csv"
    undated.write_text("parcel,zoning,owner\n1,A,x\n")
    assert "no date in their name" in error_line(cli("archive", "add", SRC, str(undated), expect=2))
    one = cli.json("archive", "add", SRC, str(undated), "--published-at", "2026-08-20")
    assert one["published_at"] == at("2026-08-20") and one["created"]


# -- one backfill, one run id ---------------------------------------------------


def _changed_keys(cli: Cli, run_id: str) -> list[tuple[str, str]]:
    return sorted(
        (json.dumps(c["key"]), c["valid_from"]) for c in cli.json("changes", "--run", run_id)
    )


def test_an_error_then_a_kill_mid_backfill_leave_one_run_that_covers_everything(
    cli: Cli, workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    setup(cli, tmp_path)
    window = ("--from", "2026-08-03", "--to", "2026-08-11")
    monkeypatch.setenv(FAULT_ENV, "after_payload:3")
    failed = cli("backfill", SRC, *window, "--json", expect=None)
    monkeypatch.delenv(FAULT_ENV)
    assert isinstance(failed.exception, InjectedFailure)
    (run,) = runs_by_kind(cli, "backfill")
    assert (run["status"], run["payloads"]) == ("failed", 3)

    killed = cli.proc("backfill", SRC, *window, env={FAULT_ENV: "after_payload:2:kill"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    (dead,) = runs_by_kind(cli, "backfill")
    assert (dead["run_id"], dead["status"], dead["payloads"]) == (run["run_id"], "running", 5)

    final = cli.json("backfill", SRC, *window)
    assert final["run_id"] == run["run_id"] and final["resumed"] == 2
    assert len(final["steps"]) == 4  # 3 + 2 + 4 = 9: nothing lost, nothing repeated
    (only,) = runs_by_kind(cli, "backfill")
    assert (only["status"], only["payloads"], only["changes"]) == ("succeeded", 9, 12)
    assert [r["status"] for r in only["resumed"]] == ["failed", "abandoned"]
    assert "resumed after 2 interruption(s)" in final["summary"]
    assert "12 changes recovered across 9 publication day(s)" in final["summary"]
    summaries = [r for r in outbox_rows(workspace) if r.topic == "summary"]
    assert [(s.run_id, json.loads(s.body)["changes"]) for s in summaries] == [(run["run_id"], 12)]
    # changes --run sees every change: 0714-22-1 three times, 0714-22-2 every day
    changes = _changed_keys(cli, run["run_id"])
    assert len(changes) == 12 and len(set(changes)) == 12
    assert zonings(cli) == WHOLE_WEEK and verified(cli)

    # retract takes back the whole backfill, not part of it
    retraction = cli.json("retract", run["run_id"])
    assert retraction["payloads"] == 9
    assert cli.json("watermark", SRC)["published_at"] == at("2026-08-02")
    assert zonings(cli) == WHOLE_WEEK[:1] and verified(cli)


def test_a_request_beyond_the_interrupted_window_starts_a_new_run(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    setup(cli, tmp_path)
    monkeypatch.setenv(FAULT_ENV, "after_payload:2")
    cli("backfill", SRC, "--from", "2026-08-03", "--to", "2026-08-08", expect=None)
    monkeypatch.delenv(FAULT_ENV)
    (first,) = runs_by_kind(cli, "backfill")
    wider = cli.json("backfill", SRC, "--from", "2026-08-03", "--to", "2026-08-11")
    assert wider["run_id"] != first["run_id"] and wider["parent_run_id"] == first["run_id"]
    assert wider["resumed"] == 0 and zonings(cli) == WHOLE_WEEK


# -- nothing to do is a success -------------------------------------------------


def test_reruns_are_idempotent_successes(cli: Cli, workspace: Workspace, tmp_path: Path) -> None:
    setup(cli, tmp_path)
    window = ("--from", "2026-08-03", "--to", "2026-08-11")
    cli("backfill", SRC, *window)
    before = dump(workspace)
    for _attempt in range(2):  # a retry loop around each command is safe
        again: dict[str, Any] = cli.json("backfill", SRC, *window)
        assert again["status"] == "nothing_to_do" and again["kind"] == "backfill"
        empty = cli.json("backfill", SRC, "--from", "2026-07-01", "--to", "2026-07-05")
        assert empty["status"] == "nothing_to_do" and "archive holds no" in empty["reason"]
        assert cli.json("replay", SRC, "--from", "2026-09-01")["status"] == "nothing_to_do"
        human = cli("backfill", SRC, *window)
        assert "nothing to do" in human.stdout
        applied = cli.json("ingest", SRC, str(tmp_path / "exports" / f"{SRC}_2026-08-05.csv"))
        assert applied["status"] == "already_applied"
        assert cli.json("run", SRC)["status"] in ("already_applied", "nothing_to_do")
    assert dump(workspace) == before
