"""Long commands say how far they are: `backfill` and `replay` log a progress line (counts,
rate) every `--progress-every` seconds when stderr is not a terminal, and a Rich bar with
the rate on a terminal; a rebuild that resumes an interrupted one says so ("resuming M at
batch N of M") and its report, `health` and the destination's status show where. Every
store backend (`cli`)."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from types import SimpleNamespace

import feedledger
from feedledger.cli.commands.sync_render import CountLog, rate_column
from feedledger.faults import ENV as FAULT_ENV
from helpers import Cli, write_csv

SRC = "larimer"
DAYS = (("2026-08-04", "R-1"), ("2026-08-06", "MU-2"), ("2026-08-09", "MU-3"))


def archive(cli: Cli, tmp_path: Path) -> None:
    cli("source", "add", SRC, "--key", "parcel", "--timezone", "America/Denver")
    first = write_csv(tmp_path / f"{SRC}_2026-08-02.csv", ["parcel", "zoning"], [["p", "R-0"]])
    cli("ingest", SRC, str(first), "--published-at", "2026-08-02")
    for day, zoning in DAYS:
        path = write_csv(tmp_path / f"{SRC}_{day}.csv", ["parcel", "zoning"], [["p", zoning]])
        cli("archive", "add", SRC, str(path), "--published-at", day)


def test_backfill_and_replay_log_progress_lines_when_not_a_terminal(
    cli: Cli, tmp_path: Path
) -> None:
    archive(cli, tmp_path)
    window = ["--from", "2026-08-03", "--to", "2026-08-11", "--no-fetch"]
    done = cli.proc("backfill", SRC, *window, "--progress-every", "1e-9", "--json")
    assert done.returncode == 0, done.stderr
    lines = [ln for ln in done.stderr.splitlines() if ln.startswith("backfill: ")]
    assert [ln.split(";")[0] for ln in lines] == [
        "backfill: 1 of 3 payloads (33%)",
        "backfill: 2 of 3 payloads (67%)",
        "backfill: 3 of 3 payloads (100%)",
    ], done.stderr
    assert all(" payloads/s" in ln and "s elapsed" in ln for ln in lines), lines
    assert lines[-1].endswith("2026-08-09 06:00:00Z applied"), lines
    json.loads(done.stdout)  # stdout stays JSON only
    again = cli.proc("replay", SRC, "--from", "2026-08-05", "--progress-every", "1e-9")
    assert again.returncode == 0, again.stderr
    assert "replay: 2 of 2 payloads (100%)" in again.stderr, again.stderr
    quiet = cli.proc("replay", SRC, "--from", "2026-08-05", "--progress-every", "0")
    assert quiet.returncode == 0 and "payloads/s" not in quiet.stderr, quiet.stderr


def test_count_log_and_rate_column() -> None:
    now = [0.0]
    lines: list[str] = []
    log = CountLog("backfill", "payloads", 10.0, lines.append, clock=lambda: now[0])
    for done, t in ((1, 4.0), (2, 12.0), (3, 13.0)):
        now[0] = t
        log(done, 3, f"day {done} applied")
    assert lines == [
        "backfill: 2 of 3 payloads (67%); 0.2 payloads/s; 12 s elapsed; day 2 applied",
        "backfill: 3 of 3 payloads (100%); 0.2 payloads/s; 13 s elapsed; day 3 applied",
    ]
    column = rate_column("keys")
    assert str(column.render(SimpleNamespace(finished_speed=None, speed=1234.5))) == (
        "1,234.5 keys/s"
    )
    assert str(column.render(SimpleNamespace(finished_speed=None, speed=None))) == ""


def test_a_resumed_rebuild_says_where_it_resumes(cli: Cli, tmp_path: Path) -> None:
    cli("source", "add", "sup", "--key", "id")
    rows = [[f"V-{i:02d}", f"name {i}"] for i in range(25)]
    cli("ingest", "sup", str(write_csv(tmp_path / "sup_2026-08-01.csv", ["id", "name"], rows)))
    dest = str(tmp_path / "dest.db")
    cli("destination", "add", "d", "--source", "sup", "--sqlite", dest, "--table", "t")
    cli("manifest", "create", "all", "--source", "sup")
    args = ["sync", "d", "--manifest", "all", "--batch", "10"]
    killed = cli.proc(*args, env={FAULT_ENV: "after_checkpoint:1:kill"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    where = {"manifest": "all", "keys_done": 10, "population": 25, "batch": 2, "batches": 3}
    health = json.loads(cli("health", "--json", expect=None).stdout)
    assert health["destinations"][0]["unfinished_rebuilds"] == [where]
    shown = cli("health", expect=None).stdout
    assert "all: resumes at batch 2 of 3 (10 of 25 keys)" in " ".join(shown.split()), shown
    with feedledger.open(cli.ws.config_path) as led:
        (rebuild,) = led.destination("d").status().to_json()["rebuilds"]
        assert rebuild["resume"] == where
        seen: list[tuple[str, int, int, int, int]] = []
        report = led.destination("d").rebuild("all", batch=10, on_resume=lambda *a: seen.append(a))
    assert seen == [("all", 2, 3, 10, 25)]
    assert report.resumed == where and report.to_json()["resumed"] == where
    # finished: nothing left to resume; the CLI says it when there is
    assert (
        json.loads(cli("health", "--json", expect=None).stdout)["destinations"][0][
            "unfinished_rebuilds"
        ]
        == []
    )
    cli("manifest", "create", "again", "--source", "sup")
    killed = cli.proc("sync", "d", "--manifest", "again", "--batch", "10",
                      env={FAULT_ENV: "after_checkpoint:2:kill"})  # fmt: skip
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    rerun = cli("sync", "d", "--manifest", "again", "--batch", "10")
    assert "resuming again at batch 3 of 3 (20 of 25 keys already acknowledged)" in rerun.stderr
    assert cli.json("reconcile", "d", "--manifest", "again")["complete"] is True


def test_on_a_terminal_the_backfill_bar_shows_counts_and_rate(cli: Cli, tmp_path: Path) -> None:
    archive(cli, tmp_path)
    window = ["--from", "2026-08-03", "--to", "2026-08-11", "--no-fetch", "--json"]
    done = cli.proc("backfill", SRC, *window, env={"TTY_COMPATIBLE": "1", "COLUMNS": "160"})
    assert done.returncode == 0, done.stderr
    assert "3/3" in done.stderr and " payloads/s" in done.stderr, done.stderr
    assert "backfill: " not in done.stderr  # the bar, not the log lines
    json.loads(done.stdout)


def test_on_a_terminal_the_rebuild_bar_shows_counts_and_rate(cli: Cli, tmp_path: Path) -> None:
    cli("source", "add", "sup", "--key", "id")
    rows = [[f"V-{i:02d}", f"name {i}"] for i in range(25)]
    cli("ingest", "sup", str(write_csv(tmp_path / "sup_2026-08-01.csv", ["id", "name"], rows)))
    dest = str(tmp_path / "dest.db")
    cli("destination", "add", "d", "--source", "sup", "--sqlite", dest, "--table", "t")
    cli("manifest", "create", "all", "--source", "sup")
    done = cli.proc("sync", "d", "--manifest", "all", "--batch", "10",
                    env={"TTY_COMPATIBLE": "1", "COLUMNS": "160"})  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "25/25" in done.stderr and " keys/s" in done.stderr, done.stderr
