"""Invariants of docs/architecture.md that no other test checks directly, on SQLite and
PostgreSQL.

Invariant 6 -- history is append-only: through live runs, a backfill that records gaps, a
retraction with `--cascade`, the backfill run again and a replay, no row of the history
tables (versions, applications, gaps, outcomes) is ever deleted, and no column of one
changes except its retraction mark (`retracted_at`, with `retracted_by` beside it where
the table has one), which goes once from empty to set and then stays. Scenario and
helpers: pipeline/test_backfill.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sqlalchemy import Table, select

from feedledger.config import Workspace
from feedledger.ledger.schema import applications, gaps, outcomes, versions
from helpers import Cli
from pipeline.backfill_scenario import backfill, fetch, ingest_args, outage

HISTORY = (versions, applications, gaps, outcomes)
MARKS = ("retracted_at", "retracted_by")

Rows = dict[str, dict[str, tuple[dict[str, Any], ...]]]


def _identity(table: Table, row: dict[str, Any]) -> str:
    """A row's identity: its primary key, or every column but the retraction marks for
    tables without one (applications, outcomes)."""
    pk = [c.name for c in table.primary_key.columns]
    names = pk or [c.name for c in table.columns if c.name not in MARKS]
    return json.dumps([row[n] for n in names], default=str)


def _marked_first(row: dict[str, Any]) -> tuple[bool, int]:
    at = row.get("retracted_at")
    return (at is None, at or 0)


def history(ws: Workspace) -> Rows:
    """Every row of every history table, grouped by identity."""
    found = fetch(ws, *(select(t) for t in HISTORY))
    out: Rows = {}
    for table, rows in zip(HISTORY, found, strict=True):
        grouped: dict[str, list[dict[str, Any]]] = {}
        for r in rows:
            row = dict(r._mapping)
            grouped.setdefault(_identity(table, row), []).append(row)
        # rows alike but for their marks: marked first, in marking order (a later
        # retraction marks later), so an old row is compared with its own later self
        out[table.name] = {k: tuple(sorted(v, key=_marked_first)) for k, v in grouped.items()}
    return out


def assert_appended_only(before: Rows, after: Rows, step: str) -> None:
    for name, rows in before.items():
        for ident, olds in rows.items():
            news = after[name].get(ident, ())
            assert len(news) >= len(olds), f"{step}: a {name} row was deleted: {ident}"
            for old, new in zip(olds, news, strict=False):
                for col, value in old.items():
                    if col in MARKS and value is None:
                        continue  # an empty mark may be set, once
                    assert new[col] == value, (
                        f"{step}: {name}.{col} of {ident} changed from {value!r} to {new[col]!r}"
                    )


def test_history_is_append_only_except_the_retraction_mark(
    cli: Cli, workspace: Workspace, tmp_path: Path
) -> None:
    outage(cli, tmp_path)  # a live run, then a week archived but not applied
    seen = history(workspace)
    steps: list[tuple[str, Any]] = [
        ("backfill", lambda: backfill(cli)),
        ("live", lambda: cli.json(*ingest_args(tmp_path, "2026-08-12", "MU-4"))),
    ]
    runs: dict[str, Any] = {}
    for step, act in steps:
        runs[step] = act()
        now = history(workspace)
        assert_appended_only(seen, now, step)
        seen = now
    assert seen["gaps"] and seen["versions"] and seen["applications"]

    retracted = cli.json("retract", runs["backfill"]["run_id"], "--cascade")
    assert retracted["versions"] > 0 and retracted["gaps"] > 0
    now = history(workspace)
    assert_appended_only(seen, now, "retract --cascade")
    marked = [r for rows in now["versions"].values() for r in rows if r["retracted_at"]]
    assert len(marked) == retracted["versions"]  # the retraction is the marks, nothing else
    seen = now

    backfill(cli)  # the archive still holds the week: applied again, as new rows
    now = history(workspace)
    assert_appended_only(seen, now, "backfill again")
    seen = now

    replay = cli.json("replay", "larimer", "--from", "2026-08-03")
    assert replay["retracted_versions"] > 0
    now = history(workspace)
    assert_appended_only(seen, now, "replay")
    assert sum(map(len, now["versions"].values())) > sum(map(len, seen["versions"].values()))
