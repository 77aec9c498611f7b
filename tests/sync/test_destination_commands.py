"""Destinations: a rebuild that fails recording verdicts loses no batch and reconcile
names the keys without a verdict, destination names validated, quoted table identifiers,
`sync-explain`, live lag in `health` and rebuild progress lines, human output of
reconcile / manifest show / sync --live --once, SIGTERM and failing transforms in `sync`,
a non-UTF-8 --keys-from.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from feedledger.faults import ENV as FAULT_ENV
from helpers import Cli
from sync.guard_destinations import PG_ENV, SRC, base, declare, held, supplier_day, target

# -- 19: destination names -------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["../../x", "a/b", "", "_x", ".hidden", "x" * 65, "a b"])
def test_destination_names_are_validated_like_source_names(
    cli: Cli, tmp_path: Path, bad: str
) -> None:
    cli("source", "add", SRC, "--key", "id")
    got = cli("destination", "add", bad, "--source", SRC, "--sqlite",
              str(tmp_path / "d.db"), "--table", "t", expect=2)  # fmt: skip
    assert "destination name" in got.stderr and "letters, digits" in got.stderr
    assert len(got.stderr.strip().splitlines()) == 1
    assert cli.json("destination", "list") == []
    assert not (tmp_path / "d.db").exists()


# -- 7: a failure recording verdicts stops every later acknowledgement ----------------------


def test_a_batch_whose_verdicts_fail_to_record_is_repeated_and_reconcile_names_it(
    cli: Cli,
    tmp_path: Path,
    place: tuple[str, str, str],
) -> None:
    cli("source", "add", SRC, "--key", "id", "--revision", "rev")
    supplier_day(cli, tmp_path, "2026-08-01", base(50))
    declare(cli, place)
    cli("manifest", "create", "X-18", "--source", SRC)
    # batch 3 is written, then recording its verdicts fails by an error (not a kill);
    # batch 4 was already in flight
    failed = cli.proc("sync", "search", "--manifest", "X-18", "--batch", "10",
                      env={FAULT_ENV: "after_destination_write:3"})  # fmt: skip
    assert failed.returncode not in (0, -signal.SIGKILL), failed.stderr
    batch3 = sorted(json.dumps([f"V-{i}"]) for i in range(50))[20:30]
    report = json.loads(cli("reconcile", "search", "--manifest", "X-18", "--json",
                            expect=1).stdout)  # fmt: skip
    assert report["complete"] is False
    assert report["missing_verdicts_count"] >= 10
    assert [json.dumps(k) for k in report["missing_verdicts"]][:10] == batch3
    human = cli("reconcile", "search", "--manifest", "X-18", expect=1).stdout
    assert "missing verdicts:" in human and "V-27" in human and "{'" not in human
    # the checkpoint never moved past batch 2: the resumed sync repeats batch 3
    done = cli.json("sync", "search", "--manifest", "X-18", "--batch", "10")
    assert done["status"] == "finished" and sum(done["outcomes"].values()) == 50
    assert done["outcomes"]["already_current"] in (10, 20)
    final = cli.json("reconcile", "search", "--manifest", "X-18")
    assert final["complete"] is True
    assert final["missing_verdicts"] == [] and final["missing_verdicts_count"] == 0


# -- 20: table names quoted everywhere ------------------------------------------------------


@pytest.fixture(params=["MyTable", "select"])
def odd_place(
    request: pytest.FixtureRequest,
    dest_kind: str,
    tmp_path: Path,
) -> Iterator[tuple[str, str, str]]:
    table = str(request.param)
    if dest_kind == "sqlite":
        yield "sqlite", str(tmp_path / "dest.db"), table
        return
    schema = f"t_{uuid.uuid4().hex[:12]}"
    base_url = os.environ[PG_ENV]
    engine = create_engine(base_url.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.begin() as conn:
        conn.execute(text(f"CREATE SCHEMA {schema}"))
    sep = "&" if "?" in base_url else "?"
    try:
        yield "postgres", f"{base_url}{sep}options=-csearch_path%3D{schema}", table
    finally:
        with engine.begin() as conn:
            conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        engine.dispose()


def test_mixed_case_and_reserved_table_names_work_on_both_destinations(
    cli: Cli, tmp_path: Path, odd_place: tuple[str, str, str]
) -> None:
    kind, url, table = odd_place
    cli("source", "add", SRC, "--key", "id", "--revision", "rev")
    supplier_day(cli, tmp_path, "2026-08-01", base(12))
    cli("destination", "add", "search", "--source", SRC, f"--{kind}", url, "--table", table,
        "--text-fields", "name,it's")  # fmt: skip
    # the same table again: found (not created twice), checked compatible
    cli("destination", "add", "again", "--source", SRC, f"--{kind}", url, "--table", table)
    cli("manifest", "create", "all", "--source", SRC)
    assert (
        cli.json("sync", "search", "--manifest", "all", "--batch", "5")["outcomes"]["accepted"]
        == 12
    )
    supplier_day(cli, tmp_path, "2026-08-02", [["V-3", "2", "changed"], *base(12)[:3],
                                               *base(12)[4:]])  # fmt: skip
    assert cli.json("sync", "search", "--live", "--once")["outcomes"]["accepted"] == 1
    assert cli.json("reconcile", "search", "--manifest", "all")["complete"] is True
    assert cli.json("sync-explain", "search", "V-3")["held"]["revision"] == 2
    cli("destination", "remove", "again")
    t = target((kind, url, table))
    try:
        assert held(t, "V-3") == (2, "M-1", False) and len(t.rows()) == 12
    finally:
        t.close()


# -- 23: why a destination holds what it holds ------------------------------------------------


def test_sync_explain_names_the_guards_reason_for_v404(
    cli: Cli,
    tmp_path: Path,
    place: tuple[str, str, str],
) -> None:
    cli("source", "add", SRC, "--key", "id", "--revision", "rev")
    supplier_day(cli, tmp_path, "2026-08-01", [*base(5), ["V-404", "7", "acme"]])
    declare(cli, place)
    cli("manifest", "create", "X-18", "--source", SRC)
    supplier_day(cli, tmp_path, "2026-08-02", [*base(5), ["V-404", "8", "acme 8"]])
    cli("sync", "search", "--live", "--once")
    cli("sync", "search", "--manifest", "X-18")
    got = cli.json("sync-explain", "search", "V-404")
    assert got["key"] == ["V-404"] and got["held"]["revision"] == 8
    assert got["held"]["generation"] == "M-1" and got["held"]["deleted"] is False
    last = got["last"]
    assert last["verdict"] == "superseded" and last["manifest"] == "X-18"
    assert last["incoming"]["revision"] == 7 and "older than the destination's 8" in last["reason"]
    assert [(v["scope"], v["verdict"]) for v in got["verdicts"]] == [
        ("manifest", "superseded"),
        ("live", "accepted"),
    ]
    human = cli("sync-explain", "search", "V-404").stdout
    assert "holds revision 8" in human and "superseded" in human and "{'" not in human
    missing = cli("sync-explain", "search", "V-999", expect=3)
    assert "V-999" in missing.stderr and len(missing.stderr.strip().splitlines()) == 1
    assert "no destination named" in cli("sync-explain", "nope", "V-1", expect=3).stderr


# -- 24: live lag in health; rebuild progress lines when stderr is not a terminal -------------


def test_health_shows_each_destinations_live_lag(cli: Cli, tmp_path: Path) -> None:
    cli("source", "add", SRC, "--key", "id")
    supplier_day(cli, tmp_path, "2026-08-01", base(3))
    cli("destination", "add", "search", "--source", SRC, "--sqlite", str(tmp_path / "d.db"),
        "--table", "t")  # fmt: skip
    first = json.loads(cli("health", "--json", expect=None).stdout)
    assert first["destinations"][0]["messages_behind"] == 0
    supplier_day(cli, tmp_path, "2026-08-02", [*base(3), ["V-9", "1", "new"]])
    supplier_day(cli, tmp_path, "2026-08-03", base(3))
    got = json.loads(cli("health", "--json", "--at", "2030-01-01T00:00:00Z", expect=None).stdout)
    lag = got["destinations"][0]
    assert lag["destination"] == "search" and lag["source"] == SRC and lag["paused"] is False
    assert lag["messages_behind"] == 2 and lag["changes_behind"] == 2
    assert lag["lag_s"] > 0 and lag["oldest_pending_at"]
    human = cli("health", expect=None).stdout
    assert "live route lag" in human and "search" in human
    cli("sync", "search", "--live", "--once")
    after = json.loads(cli("health", "--json", expect=None).stdout)["destinations"][0]
    assert after["messages_behind"] == 0 and after["lag_s"] == 0.0


def test_progress_log_writes_a_line_every_interval_by_its_clock() -> None:
    from feedledger.cli.commands.sync_render import ProgressLog

    now = [100.0]
    lines: list[str] = []
    log = ProgressLog("rebuild search / all", 10.0, lines.append, clock=lambda: now[0])
    for done, t in ((1000, 103.0), (2000, 109.0), (3000, 111.0), (4000, 115.0), (5000, 122.0)):
        now[0] = t
        log(done, 10_000, 0.5)
    assert lines == [
        "rebuild search / all: 3,000 of 10,000 keys (30%); live lag 0.5 s; 11 s elapsed",
        "rebuild search / all: 5,000 of 10,000 keys (50%); live lag 0.5 s; 22 s elapsed",
    ]
    log(10_000, 10_000, 0.0)  # the end is always logged
    assert lines[-1].startswith("rebuild search / all: 10,000 of 10,000 keys (100%)")


def test_a_rebuild_logs_progress_lines_when_stderr_is_not_a_terminal(
    cli: Cli, tmp_path: Path
) -> None:
    cli("source", "add", SRC, "--key", "id")
    supplier_day(cli, tmp_path, "2026-08-01", base(25))
    cli("destination", "add", "search", "--source", SRC, "--sqlite", str(tmp_path / "d.db"),
        "--table", "t")  # fmt: skip
    cli("manifest", "create", "all", "--source", SRC)
    got = cli("sync", "search", "--manifest", "all", "--batch", "10", "--progress-every", "1e-9",
              "--json")  # fmt: skip
    assert json.loads(got.stdout)["status"] == "finished"  # stdout stays JSON only
    lines = [x for x in got.stderr.splitlines() if x.startswith("rebuild search / all:")]
    assert lines[-1].startswith("rebuild search / all: 25 of 25 keys (100%)")
    assert len(lines) == 3
    quiet = cli("sync", "search", "--manifest", "all", "--progress-every", "0")
    assert "rebuild search" not in quiet.stderr


# -- 25: human output; --live --once reports what it did ------------------------------------


def test_human_output_of_reconcile_and_manifest_show_has_no_raw_dicts(
    cli: Cli, tmp_path: Path
) -> None:
    cli("source", "add", SRC, "--key", "id", "--revision", "rev")
    supplier_day(cli, tmp_path, "2026-08-01", base(4))
    cli("destination", "add", "search", "--source", SRC, "--sqlite", str(tmp_path / "d.db"),
        "--table", "t")  # fmt: skip
    cli("manifest", "create", "all", "--source", SRC)
    shown = cli("manifest", "show", "all").stdout
    assert "{" not in shown and "boundary payload" in shown and "reconstructible" in shown
    partial = cli("reconcile", "search", "--manifest", "all", expect=1).stdout
    assert "{" not in partial and "NOT complete" in partial
    assert "missing: 4" in partial and "V-0" in partial and "expected_revision" in partial
    cli("sync", "search", "--manifest", "all")
    done = cli("reconcile", "search", "--manifest", "all").stdout
    assert "{" not in done and "complete" in done and "accepted 4" in done


def test_sync_live_once_reports_what_that_call_did(cli: Cli, tmp_path: Path) -> None:
    cli("source", "add", SRC, "--key", "id", "--revision", "rev")
    supplier_day(cli, tmp_path, "2026-08-01", base(4))
    cli("destination", "add", "search", "--source", SRC, "--sqlite", str(tmp_path / "d.db"),
        "--table", "t")  # fmt: skip
    supplier_day(cli, tmp_path, "2026-08-02", [[f"V-{i}", "2", "x"] for i in range(4)])
    first = cli.json("sync", "search", "--live", "--once")
    assert first["outcomes"]["accepted"] == 4 and first["live_written"] == 4
    again = cli.json("sync", "search", "--live", "--once")
    assert sum(again["outcomes"].values()) == 0 and again["live_written"] == 0
    human = cli("sync", "search", "--live", "--once").stdout
    assert "accepted 0" in human and "live 0 key(s) written" in human


# -- 28: SIGTERM ends `sync --live` with its report; a raising transform warns ---------------


def test_sync_live_on_sigterm_finishes_and_reports(cli: Cli, tmp_path: Path) -> None:
    cli("source", "add", SRC, "--key", "id", "--revision", "rev")
    supplier_day(cli, tmp_path, "2026-08-01", base(3))
    dest_db = tmp_path / "d.db"
    cli("destination", "add", "search", "--source", SRC, "--sqlite", str(dest_db),
        "--table", "t")  # fmt: skip
    supplier_day(cli, tmp_path, "2026-08-02", [[f"V-{i}", "2", "x"] for i in range(3)])
    proc = subprocess.Popen(
        [sys.executable, "-m", "feedledger", "--config", str(cli.ws.config_path), "sync",
         "search", "--live", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60  # a hang detector, not a timing assertion
        while not _rows(dest_db):
            assert time.monotonic() < deadline and proc.poll() is None, proc.stderr
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    report = json.loads(out)
    assert report["status"] == "stopped" and report["outcomes"]["accepted"] == 3


def _rows(db: Path) -> int:
    import sqlite3

    if not db.exists():
        return 0
    with sqlite3.connect(db) as conn:
        try:
            return int(conn.execute("SELECT count(*) FROM t").fetchone()[0])
        except sqlite3.OperationalError:
            return 0


def failing_transform(version: dict[str, Any]) -> dict[str, Any]:
    if version["key"][0].endswith("1"):
        raise ValueError("no name for this one")
    return {"name": version["attributes"]["name"]}


def test_a_raising_transform_is_warned_about_with_count_and_first_error(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    cli("source", "add", SRC, "--key", "id", "--revision", "rev")
    supplier_day(cli, tmp_path, "2026-08-01", base(12))  # V-1 and V-11 fail
    cli("destination", "add", "search", "--source", SRC, "--sqlite", str(tmp_path / "d.db"),
        "--table", "t", "--transform", "test_destination_commands:failing_transform")  # fmt: skip
    cli("manifest", "create", "all", "--source", SRC)
    got = cli("sync", "search", "--manifest", "all", "--json")  # still exit 0
    assert json.loads(got.stdout)["rejected_before_write"] == 2
    assert "warning: destination search: 2 document(s) rejected" in got.stderr
    assert "V-1: transform failed: ValueError: no name for this one" in got.stderr
    supplier_day(cli, tmp_path, "2026-08-02", [[f"V-{i}", "2", "x"] for i in range(12)])
    live = cli("sync", "search", "--live", "--once")
    assert "2 document(s) rejected" in live.stderr and "ValueError" in live.stderr


# -- 15: --keys-from not UTF-8 ------------------------------------------------------------------


def test_keys_from_a_non_utf8_file_is_one_line_naming_the_path(cli: Cli, tmp_path: Path) -> None:
    cli("source", "add", SRC, "--key", "id")
    bad = tmp_path / "keys.txt"
    bad.write_bytes(b"V-1\n\xff\xfeV-2\n")
    got = cli("manifest", "create", "m", "--source", SRC, "--keys-from", str(bad), expect=2)
    assert str(bad) in got.stderr.replace("\n", "") and "UTF-8" in got.stderr
    assert got.stderr.startswith("error:") and "Traceback" not in got.stderr
    assert cli.json("manifest", "list") == []
