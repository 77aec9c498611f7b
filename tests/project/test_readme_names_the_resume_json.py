"""The README's "JSON output" section names every member `health --json` gives a
destination (its `unfinished_rebuilds` and their members) and every member of a
rebuild's `sync --json` report (its `resumed` and their members), as the commands print
them after an interrupted rebuild. Every store backend (`cli`)."""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path

from feedledger.faults import ENV as FAULT_ENV
from helpers import Cli, write_csv

README = Path(__file__).resolve().parents[2] / "README.md"


def _bullet(name: str) -> str:
    """The README's JSON bullet of command `name` (`* \\`name\\`: ...` up to the next)."""
    text = README.read_text(encoding="utf-8")
    found = re.search(rf"^\* `{re.escape(name)}`: (.*?)(?=^\* |^#)", text, re.M | re.S)
    assert found, name
    return found.group(1)


def test_the_readme_names_the_members_of_a_resumed_rebuild(cli: Cli, tmp_path: Path) -> None:
    cli("source", "add", "sup", "--key", "id")
    rows = [[f"V-{i:02d}", f"name {i}"] for i in range(25)]
    cli("ingest", "sup", str(write_csv(tmp_path / "sup_2026-08-01.csv", ["id", "name"], rows)))
    cli("destination", "add", "d", "--source", "sup", "--sqlite", str(tmp_path / "d.db"),
        "--table", "t")  # fmt: skip
    cli("manifest", "create", "all", "--source", "sup")
    args = ["sync", "d", "--manifest", "all", "--batch", "10"]
    killed = cli.proc(*args, env={FAULT_ENV: "after_checkpoint:1:kill"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    health = json.loads(cli("health", "--json", expect=None).stdout)
    (lag,) = health["destinations"]
    (where,) = lag["unfinished_rebuilds"]
    report = cli.json(*args)
    assert report["resumed"] == where
    documented_health, documented_sync = _bullet("health"), _bullet("sync")
    for members, doc in (
        (list(lag) + list(where), documented_health),
        (list(report) + list(report["resumed"]), documented_sync),
    ):
        missing = [m for m in members if f'"{m}"' not in doc]
        assert missing == [], (missing, doc)
