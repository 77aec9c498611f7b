"""Queries and ledger command output (run id prefixes, changes, asof, gaps, snapshot -o,
the history table, snapshot column order, future dates), on SQLite and PostgreSQL.

The gap scenarios reuse test_backfill's outage: parcel 0714-22-1 of `larimer`
(America/Denver) R-0 live on 08-02, then archived 08-04 R-1, 08-06 MU-2, 08-09 MU-3;
a backfill of 08-03 .. 08-11 records gaps for the days the archive lacks.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import insert

from feedledger.config import Workspace
from feedledger.ledger.schema import runs
from feedledger.ledger.store import Store
from helpers import Cli, write_csv
from pipeline.backfill_scenario import (
    KEY,
    SRC,
    archive,
    at,
    backfill,
    error_line,
    ingest_args,
    outage,
)

# -- run ids by any unique prefix ------------------------------------------------


def _fake_runs(workspace: Workspace, *ids: str) -> None:
    store = Store(workspace.store_url)
    try:
        with store.begin() as conn:
            for i, run_id in enumerate(ids):
                conn.execute(
                    insert(runs).values(
                        run_id=run_id,
                        source=SRC,
                        kind="manual",
                        status="succeeded",
                        started_at=1_000 + i,
                        holder="test",
                    )
                )
    finally:
        store.close()


def test_run_id_prefix_is_accepted_everywhere_a_run_id_is_taken(
    cli: Cli, workspace: Workspace, tmp_path: Path
) -> None:
    live = outage(cli, tmp_path)
    run_id = live["run_id"]
    shown = cli("runs", SRC).stdout
    assert run_id in shown
    whole = cli.json("changes", "--run", run_id)
    assert cli.json("changes", "--run", run_id[:8]) == whole  # as tables show it
    assert cli.json("changes", "--run", run_id[:8].upper()) == whole
    assert f"changes of run {run_id}" in cli("changes", "--run", run_id[:8]).stdout

    _fake_runs(workspace, "abcd0000-1111", "abcd0000-2222")
    ambiguous = cli("changes", "--run", "abcd", expect=2)
    line = error_line(ambiguous)
    assert "ambiguous" in line and "abcd0000-1111" in line and "abcd0000-2222" in line
    assert cli("changes", "--run", "abcd0000-2").exit_code == 0
    unknown = cli("changes", "--run", "ffff9999", expect=3)
    assert "unknown run id 'ffff9999'" in error_line(unknown)
    assert "unknown run id" in error_line(cli("changes", "--run", "%", expect=3))

    assert "ambiguous" in error_line(cli("retract", "abcd", expect=2))
    assert "ambiguous" in error_line(cli("review", "abcd", "--release", expect=2))
    note = ["notify", "correction", "abcd", "--message", "x"]
    assert "ambiguous" in error_line(cli(*note, expect=2))

    # retract by the shown prefix: the whole run is named in the report
    backfilled = backfill(cli)
    report = cli.json("retract", backfilled["run_id"][:8])
    assert report["retracted_runs"] == [backfilled["run_id"]]


# -- changes --run lists held and superseded records ------------------------------


def test_changes_lists_unresolved_and_superseded_outcomes(cli: Cli, tmp_path: Path) -> None:
    cli("source", "add", "sup", "--key", "id", "--revision", "rev", "--kind", "changes")

    def ingest(day: str, rows: list[list[str]]) -> dict[str, Any]:
        path = write_csv(tmp_path / f"sup_{day}.csv", ["id", "rev", "name"], rows)
        result: dict[str, Any] = cli.json("ingest", "sup", str(path), "--published-at", day)
        return result

    ingest("2026-08-01", [["V-404", "8", "new"], ["V-500", "3", "a"]])
    run = ingest("2026-08-02", [["V-404", "8", "different"], ["V-500", "2", "older"]])
    assert run["unresolved"] == 1 and run["superseded"] == 1 and run["changes"] == 0
    items = cli.json("changes", "--run", run["run_id"])
    assert [(i["key"], i["change"], i["outcome"]) for i in items] == [
        (["V-404"], None, "unresolved"),
        (["V-500"], None, "superseded"),
    ]
    held = items[0]
    assert held["after"] == {"id": "V-404", "name": "different", "rev": "8"}
    assert (held["revision"], held["current_revision"]) == ("8", "8")
    assert held["valid_from"] == "2026-08-02T00:00:00+00:00"
    assert (items[1]["revision"], items[1]["current_revision"]) == ("2", "3")

    text = cli("changes", "--run", run["run_id"]).stdout
    assert "unresolved" in text and "superseded" in text and "different" in text

    mixed = ingest("2026-08-03", [["V-404", "9", "newest"], ["V-500", "3", "changed"]])
    items = cli.json("changes", "--run", mixed["run_id"])
    assert [(i["key"], i["change"], i.get("outcome")) for i in items] == [
        (["V-404"], "changed", None),
        (["V-500"], None, "unresolved"),
    ]


# -- asof before anything was recorded ------------------------------------------


def test_asof_before_anything_was_recorded_is_not_known(cli: Cli, tmp_path: Path) -> None:
    cli("source", "add", SRC, "--key", "parcel", "--timezone", "America/Denver")
    never = cli.json("asof", SRC, KEY, "--valid", "2026-08-02")
    assert never == {"status": "not_known", "version": None, "first_recorded_at": None}
    cli(*ingest_args(tmp_path, "2026-08-02", "R-0"))
    early = ["asof", SRC, KEY, "--valid", "2026-08-02", "--known-at", "2001-01-01T00:00:00Z"]
    answer = cli.json(*early)
    assert answer["status"] == "not_known" and answer["version"] is None
    assert answer["first_recorded_at"] > "2001"
    assert "not_known" in cli(*early).stdout
    unknown_key = ["asof", SRC, "no-such-parcel", "--valid", "2026-08-02"]
    assert cli.json(*unknown_key, "--known-at", "2001-01-01")["status"] == "not_known"
    # a key the source never had: as `history` answers it (exit 3)
    assert "has ever been recorded" in cli(*unknown_key, expect=3).stderr
    assert cli.json("asof", SRC, KEY, "--valid", "2026-08-02")["status"] == "present"
    # before the source's first observation nothing was observed
    assert cli.json("asof", SRC, KEY, "--valid", "2026-08-01")["status"] == "not_observed"
    # a snapshot of nothing says so on stderr (its stdout stays empty)
    for when in (["--known-at", "2001-01-01"], []):
        valid = "2026-08-02" if when else "2026-08-01"
        empty = cli("snapshot", SRC, "--valid", valid, *when)
        assert empty.stdout == "" and "no entity at --valid" in empty.stderr
        assert len(empty.stderr.strip().splitlines()) == 1
    assert "no entity" not in cli("snapshot", SRC, "--valid", "2026-08-02").stderr


# -- one rule for standing gaps; next observed; snapshot inside a gap -------------


def _spans(items: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(g["start"], g["end"]) for g in items]


def test_gaps_shrink_and_split_as_asof_judges_them(cli: Cli, tmp_path: Path) -> None:
    outage(cli, tmp_path)
    backfill(cli)
    assert (at("2026-08-10"), at("2026-08-12")) in _spans(cli.json("gaps", SRC))
    # the late 08-11 payload is applied: 08-11 was observed after all
    cli(*ingest_args(tmp_path, "2026-08-11", "MU-3"))
    found = cli.json("gaps", SRC)
    assert _spans(found)[-1] == (at("2026-08-10"), at("2026-08-11"))
    assert cli.json("asof", SRC, KEY, "--valid", "2026-08-11T12:00")["status"] == "present"
    # a gap split in two by a payload applied for a day inside it
    cli("gap", "add", SRC, "--from", "2026-08-12", "--to", "2026-08-14", "--reason", "down")
    cli(*ingest_args(tmp_path, "2026-08-13", "MU-4"))
    found = cli.json("gaps", SRC)
    assert _spans(found)[-2:] == [
        (at("2026-08-12"), at("2026-08-13")),
        (at("2026-08-14"), at("2026-08-15")),
    ]
    assert found[-1]["reason"] == found[-2]["reason"] == "down"
    # gaps and asof agree everywhere
    for day in range(3, 16):
        valid = f"2026-08-{day:02d}T12:00"
        status = cli.json("asof", SRC, KEY, "--valid", valid)["status"]
        inside = any(s <= at(f"2026-08-{day:02d}", 18) < e for s, e in _spans(found))
        assert (status == "not_observed") == inside, (valid, status)
    timeline = cli.json("history", SRC, KEY, "--with-gaps")
    assert [(i["start"], i["end"]) for i in timeline if i["type"] == "gap"] == _spans(found)
    # --known-at before the late payloads: the gaps stood whole
    before = cli.json("gaps", SRC, "--known-at", found[0]["recorded_at"])
    assert (at("2026-08-10"), at("2026-08-12")) in _spans(before)
    human = cli("gaps", SRC).stdout
    assert "2026-08-14" in human and "down" in human


def test_next_observed_is_the_next_payload_even_if_unchanged(cli: Cli, tmp_path: Path) -> None:
    outage(cli, tmp_path)
    backfill(cli)
    inside = cli.json("asof", SRC, KEY, "--valid", "2026-08-07T12:00")
    assert inside["next_observed"]["attributes"]["zoning"] == "MU-3"
    assert inside["next_observed_at"] == at("2026-08-09")
    # the late 08-08 payload (MU-2, unchanged) is folded in by a replay
    archive(cli, tmp_path, ("2026-08-08", "MU-2"))
    cli.json("replay", SRC, "--from", "2026-08-08")
    inside = cli.json("asof", SRC, KEY, "--valid", "2026-08-07T12:00")
    assert inside["status"] == "not_observed"
    assert (inside["gap"]["start"], inside["gap"]["end"]) == (at("2026-08-07"), at("2026-08-08"))
    assert inside["last_observed"]["attributes"]["zoning"] == "MU-2"
    assert inside["last_observed_at"] == at("2026-08-06")
    assert inside["next_observed"]["attributes"]["zoning"] == "MU-2"
    assert inside["next_observed_at"] == at("2026-08-08")
    text = cli("asof", SRC, KEY, "--valid", "2026-08-07T12:00").stdout
    assert "next observed" in text and "2026-08-08" in text


def test_snapshot_inside_a_gap_warns_and_strict_refuses(cli: Cli, tmp_path: Path) -> None:
    outage(cli, tmp_path)
    backfill(cli)
    warned = cli("snapshot", SRC, "--valid", "2026-08-08")
    assert warned.stdout.startswith("parcel,zoning,owner\n")
    assert "MU-2" in warned.stdout
    note = " ".join(warned.stderr.split())
    assert "warning" in note and "gap" in note
    assert at("2026-08-07") in note and at("2026-08-09") in note
    assert f"last observed {at('2026-08-06')}" in note
    assert f"next observed {at('2026-08-09')}" in note
    target = tmp_path / "out.csv"
    refused = cli("snapshot", SRC, "--valid", "2026-08-08", "--strict", "-o", str(target), expect=2)
    assert "gap" in error_line(refused) and refused.stdout == ""
    assert not target.exists() and list(tmp_path.glob(".out.csv*")) == []
    clean = cli("snapshot", SRC, "--valid", "2026-08-06", "--strict")
    assert "warning" not in clean.stderr and "MU-2" in clean.stdout


# -- snapshot -o a directory ----------------------------------------------


def test_snapshot_output_a_directory_is_one_line_exit_2(cli: Cli, tmp_path: Path) -> None:
    cli("source", "add", SRC, "--key", "parcel", "--timezone", "America/Denver")
    cli(*ingest_args(tmp_path, "2026-08-02", "R-0"))
    folder = tmp_path / "exports"
    folder.mkdir()
    result = cli("snapshot", SRC, "--valid", "2026-08-02", "-o", str(folder), expect=2)
    line = error_line(result)
    assert str(folder) in line and "directory" in line and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert list(folder.iterdir()) == [] and result.stdout == ""
    missing = tmp_path / "nowhere" / "s.csv"
    result = cli("snapshot", SRC, "--valid", "2026-08-02", "-o", str(missing), expect=2)
    assert str(missing) in error_line(result) and not missing.parent.exists()
    good = tmp_path / "s.csv"
    cli("snapshot", SRC, "--valid", "2026-08-02", "-o", str(good))
    assert good.read_text().startswith("parcel,zoning,owner\n")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".s.csv")] == []
    # `-o -` is stdout, as everywhere else; never a file named "-"
    dash = cli("snapshot", SRC, "--valid", "2026-08-02", "-o", "-")
    assert dash.stdout == good.read_text()
    assert not any(p.name == "-" for p in tmp_path.rglob("-")) and not Path("-").exists()
    parquet = cli(
        "snapshot", SRC, "--valid", "2026-08-02", "--format", "parquet", "-o", "-", expect=2
    )
    assert len(parquet.stderr.strip().splitlines()) == 1 and parquet.stdout == ""


# -- history shows attributes whole; snapshot keeps the source's order ----


def test_history_table_wraps_long_attributes_instead_of_cutting(cli: Cli, tmp_path: Path) -> None:
    cli("source", "add", "wide", "--key", "id")
    value = "-".join(f"w{i:03d}" for i in range(40)) + "-END"
    path = write_csv(tmp_path / "wide.csv", ["id", "note"], [["1", value]])
    cli("ingest", "wide", str(path), "--published-at", "2026-08-01")
    shown = cli.proc("history", "wide", "1", env={"COLUMNS": "80"})
    assert shown.returncode == 0, shown.stderr
    assert max(len(line) for line in shown.stdout.splitlines()) <= 80
    assert "…" not in shown.stdout
    # the attributes column, read down its folded lines, is the whole JSON
    body = [ln for ln in shown.stdout.splitlines() if ln.startswith("│")]  # header: ┃
    col = 4  # valid_from, valid_to, recorded_at, change, attributes, ...
    cells = [ln.strip("│").split("│")[col].strip() for ln in body]
    assert "".join(cells) == '{"id":"1","note":"' + value + '"}'


def test_snapshot_csv_columns_follow_the_source_order(cli: Cli, tmp_path: Path) -> None:
    cli("source", "add", "ord", "--key", "id")
    header = ["zeta", "id", "beta", "alpha"]
    day1 = write_csv(tmp_path / "o1.csv", header, [["z1", "1", "b1", "a1"], ["z2", "2", "b", "a"]])
    cli("ingest", "ord", str(day1), "--published-at", "2026-08-01")
    snap = cli("snapshot", "ord", "--valid", "2026-08-01").stdout
    rows = list(csv.reader(io.StringIO(snap)))
    assert rows[0] == header
    assert rows[1] == ["z1", "1", "b1", "a1"]
    # the source reorders its columns: the export follows the payload in force
    day2 = write_csv(
        tmp_path / "o2.csv", ["id", "alpha", "beta", "zeta"], [["1", "a1", "b1", "z1"]]
    )
    cli("ingest", "ord", str(day2), "--published-at", "2026-08-02")
    assert cli("snapshot", "ord", "--valid", "2026-08-02").stdout.splitlines()[0] == (
        "id,alpha,beta,zeta"
    )
    assert cli("snapshot", "ord", "--valid", "2026-08-01").stdout.splitlines()[0] == (
        "zeta,id,beta,alpha"
    )
    lines = cli("snapshot", "ord", "--valid", "2026-08-02", "--format", "jsonl").stdout
    assert lines.splitlines() == ['{"alpha":"a1","beta":"b1","id":"1","zeta":"z1"}']


def test_snapshot_json_sources_keep_the_payload_field_order(cli: Cli, tmp_path: Path) -> None:
    cli("source", "add", "js", "--key", "id", "--format", "jsonl")
    path = tmp_path / "js.jsonl"
    path.write_text('{"z":1,"id":"a","m":2.50}\n{"id":"b","z":3,"m":4,"extra":true}\n')
    cli("ingest", "js", str(path), "--published-at", "2026-08-01")
    out = cli("snapshot", "js", "--valid", "2026-08-01", "--format", "csv", expect=None)
    # records with different fields cannot be one CSV table: refused as before
    assert out.exit_code == 2
    path2 = tmp_path / "js2.jsonl"
    path2.write_text('{"z":1,"id":"a","m":2.50}\n{"id":"b","z":3,"m":4}\n')
    cli("ingest", "js", str(path2), "--published-at", "2026-08-02")
    snap = cli("snapshot", "js", "--valid", "2026-08-02").stdout.splitlines()
    assert snap == ["z,id,m", "1,a,2.50", "3,b,4"]


# -- future publisher dates and local times DST skips or repeats -----------------


def test_future_publisher_date_is_refused_unless_allowed(cli: Cli, tmp_path: Path) -> None:
    cli("source", "add", SRC, "--key", "parcel", "--timezone", "America/Denver")
    far = write_csv(tmp_path / "far.csv", ["parcel", "zoning", "owner"], [[KEY, "R-0", "c"]])
    for cmd in (["ingest"], ["archive", "add"]):
        refused = cli(*cmd, SRC, str(far), "--published-at", "9999-12-31", expect=2)
        line = error_line(refused)
        assert "9999-12-31" in line and "--allow-future" in line and "far.csv" in line
    named = write_csv(tmp_path / f"{SRC}_2099-12-30.csv", ["parcel", "zoning"], [[KEY, "R"]])
    line = error_line(cli("ingest", SRC, str(named), expect=2))
    assert "publisher date in the name" in line and "more than a day after now" in line
    assert cli.json("watermark", SRC)["published_at"] is None
    assert cli.json("archive", "list", SRC) == []
    # the seed's blocked live runs cannot happen by accident; on purpose they still can
    cli("archive", "add", SRC, str(far), "--published-at", "9999-12-31", "--allow-future")
    applied = cli.json("ingest", SRC, str(far), "--published-at", "9999-12-31", "--allow-future")
    assert applied["status"] == "applied"


def test_future_check_uses_the_callers_clock() -> None:
    from feedledger.model.errors import ConfigError
    from feedledger.model.source import SourceConfig
    from feedledger.model.timeutil import parse_instant, to_us
    from feedledger.pipeline.intake.archiving import resolve_published_at

    src = SourceConfig(name="s", key=("id",), timezone="America/Denver")
    now = to_us(parse_instant("2026-08-06T12:00:00Z"))
    within = resolve_published_at(src, "2026-08-07T11:00:00Z", None, now=now)
    assert within == to_us(parse_instant("2026-08-07T11:00:00Z"))
    with pytest.raises(ConfigError, match="more than a day after now"):
        resolve_published_at(src, "2026-08-08", None, now=now)
    with pytest.raises(ConfigError, match="more than a day after now"):
        resolve_published_at(src, None, "s_2026-08-09.csv", now=now)
    allowed = resolve_published_at(src, "2026-08-08", None, now=now, allow_future=True)
    assert allowed == to_us(parse_instant("2026-08-08", "America/Denver"))
    # no clock given (reading back archived payloads): no check
    assert resolve_published_at(src, "2026-08-08", None) == allowed


@pytest.mark.parametrize(
    ("local", "problem", "readings"),
    [
        (
            "2026-11-01T01:30",
            "occurs twice",
            ("2026-11-01T07:30:00+00:00", "2026-11-01T08:30:00+00:00"),
        ),
        (
            "2026-03-08T02:30",
            "does not exist",
            ("2026-03-08T08:30:00+00:00", "2026-03-08T09:30:00+00:00"),
        ),
    ],
)
def test_local_time_skipped_or_repeated_by_dst_is_refused(
    cli: Cli, tmp_path: Path, local: str, problem: str, readings: tuple[str, str]
) -> None:
    cli("source", "add", SRC, "--key", "parcel", "--timezone", "America/Denver")
    path = write_csv(tmp_path / "p.csv", ["parcel", "zoning"], [[KEY, "R-0"]])
    for cmd in (["ingest"], ["archive", "add"]):
        line = error_line(cli(*cmd, SRC, str(path), "--published-at", local, expect=2))
        assert problem in line and "America/Denver" in line and "offset" in line
        assert readings[0] in line and readings[1] in line
    assert cli.json("archive", "list", SRC) == []
    # the same wall time with its offset is one instant: accepted
    ok = cli.json("ingest", SRC, str(path), "--published-at", local + "-06:00")
    assert ok["published_at"] == readings[0]
    # other time arguments are read by the same rule
    asked = ["asof", SRC, KEY, "--valid", local]
    assert problem in error_line(cli(*asked, expect=2))
