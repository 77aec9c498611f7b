"""A first `run` on a folder holding several dated files loads every one of them,
oldest first, as one backfill (Invariant 5: when several publications are waiting,
every one the source still serves is applied, never only the newest) -- and `assess`,
`backfill` and `replay` say the same thing about a file that turns up later with a date
not after the watermark: `backfill` only archives it, `replay --from` folds it in."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import Cli, write_csv


def _declare(cli: Cli, feed: Path) -> None:
    cli("source", "add", "larimer", "--key", "parcel_id", "--fetch", str(feed))


def _states(cli: Cli, key: str) -> list[tuple[str, str]]:
    return [
        (v["valid_from"][:10], v["attributes"]["z"]) for v in cli.json("history", "larimer", key)
    ]


def test_a_first_run_applies_every_dated_file_oldest_first(cli: Cli, tmp_path: Path) -> None:
    feed = tmp_path / "exports"
    feed.mkdir()
    for day, zone in (("2026-08-01", "R-1"), ("2026-08-03", "R-2"), ("2026-08-05", "MU-1")):
        write_csv(feed / f"larimer_{day}.csv", ["parcel_id", "z"], [["1", zone], ["2", "AG"]])
    _declare(cli, feed)

    result = cli("run", "larimer", "--json")
    assert "every one the source still serves was applied oldest first" in result.stderr
    out = json.loads(result.stdout)
    assert out["status"] == "recovered" and out["payloads"] == 3 and out["kind"] == "backfill"
    # the states in between are kept, each at its publisher date
    assert _states(cli, "1") == [("2026-08-01", "R-1"), ("2026-08-03", "R-2"),
                                 ("2026-08-05", "MU-1")]  # fmt: skip
    assert cli.json("watermark", "larimer")["published_at"].startswith("2026-08-05")
    # the days without a file are gaps, not silently "unchanged"
    gaps = [(g["start"][:10], g["end"][:10]) for g in cli.json("gaps", "larimer")]
    assert len(gaps) == 2, gaps
    # nothing is left for assess to call fetchable
    plan = cli.json("assess", "larimer", "--from", "2026-08-01", "--to", "2026-08-05")
    assert plan["fetchable_dates"] == [] and plan["replayable"] == []
    assert cli.json("run", "larimer")["status"] == "already_applied"


def test_a_served_file_before_the_watermark_is_archived_by_backfill_and_folded_in_by_replay(
    cli: Cli, tmp_path: Path
) -> None:
    feed = tmp_path / "exports"
    feed.mkdir()
    write_csv(feed / "larimer_2026-08-05.csv", ["parcel_id", "z"], [["1", "MU-1"]])
    _declare(cli, feed)
    assert cli.json("run", "larimer")["status"] == "applied"  # one file: a live run
    # the publisher posts an older day's file afterwards
    write_csv(feed / "larimer_2026-08-02.csv", ["parcel_id", "z"], [["1", "R-2"]])

    plan = cli.json("assess", "larimer", "--from", "2026-08-01", "--to", "2026-08-05")
    assert plan["fetchable_dates"] == ["2026-08-02"]
    assert plan["fetchable_late_dates"] == ["2026-08-02"]
    told = cli("assess", "larimer", "--from", "2026-08-01", "--to", "2026-08-05").stdout
    assert "`backfill` only archives them" in told
    assert "feedledger replay larimer --from 2026-08-02" in " ".join(told.split())

    refused = cli("backfill", "larimer", "--from", "2026-08-01", "--to", "2026-08-05", expect=2)
    line = " ".join(refused.stderr.split())
    assert "the 1 fetched now are archived" in line
    assert "feedledger replay larimer --from 2026-08-02" in line

    replayed = cli.json("replay", "larimer", "--from", "2026-08-02")
    assert replayed["kind"] == "replay"
    assert _states(cli, "1") == [("2026-08-02", "R-2"), ("2026-08-05", "MU-1")]


def test_a_first_run_with_no_recover_names_the_backfill_that_loads_them(
    cli: Cli, tmp_path: Path
) -> None:
    feed = tmp_path / "exports"
    feed.mkdir()
    for day, zone in (("2026-08-01", "R-1"), ("2026-08-03", "R-2")):
        write_csv(feed / f"larimer_{day}.csv", ["parcel_id", "z"], [["1", zone]])
    _declare(cli, feed)
    refused = cli("run", "larimer", "--no-recover", expect=2)
    line = " ".join(refused.stderr.split())
    assert "2 publications are waiting" in line
    assert "feedledger backfill larimer --from 2026-08-01 --to 2026-08-03" in line
    assert cli.json("runs", "larimer") == []
    # the command it names does what it says
    done = cli.json("backfill", "larimer", "--from", "2026-08-01", "--to", "2026-08-03")
    assert done["kind"] == "backfill" and len(done["steps"]) == 2
    assert _states(cli, "1") == [("2026-08-01", "R-1"), ("2026-08-03", "R-2")]
