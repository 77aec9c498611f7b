"""The calls that moved to one door keep working for one release: each old call warns
(DeprecationWarning naming the new call) and gives what the new call gives."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest

import feedledger as fl
from feedledger.api import audit, calendar, destination_status, runs_page, snapshot_stream
from feedledger.model.jsonout import dumps


def _csv(*values: str) -> bytes:
    return ("id,v\n" + "".join(f"{i},{v}\n" for i, v in enumerate(values))).encode()


def _same(result: Any) -> Any:
    """A result's JSON without what differs between two workspaces doing the same."""
    if isinstance(result, list):
        return [_same(r) for r in result]
    data = result.to_json() if hasattr(result, "to_json") else result
    if isinstance(data, dict):
        drop = {"run_id", "parent_run_id", "started_at", "finished_at", "recorded_at",
                "fetched_at", "retracted_at", "retracted_runs", "applied_by", "location",
                "rejected_at", "note", "summary", "steps", "resumed", "retracted_by"}  # fmt: skip
        return {k: _same(v) for k, v in data.items() if k not in drop}
    return data


def _text(result: Any) -> Any:
    """A result as the CLI writes it (its JSON text; chunks as they are)."""
    return dumps(result.to_json()) if hasattr(result, "to_json") else result


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[fl.Ledger, fl.Ledger]]:
    """Two like workspaces: one driven by the old calls, one by the new."""
    with fl.init(tmp_path / "old") as old, fl.init(tmp_path / "new") as new:
        for led in (old, new):
            led.add_source("s", key=["id"], cadence="daily")
        yield old, new


def test_the_ledgers_old_source_calls_warn_and_match_the_new_ones(
    pair: tuple[fl.Ledger, fl.Ledger],
) -> None:
    old, new = pair
    with pytest.warns(DeprecationWarning, match=r"Ledger\.source\(source\)\.ingest"):
        was = old.ingest("s", _csv("a", "b"), published_at="2026-08-01", name="s1.csv")
    now = new.source("s").ingest(_csv("a", "b"), published_at="2026-08-01", name="s1.csv")
    assert _same(was) == _same(now)
    for led in (old, new):
        led.source("s").archive_add(_csv("a", "c"), published_at="2026-08-03", name="s3.csv")
    with pytest.warns(DeprecationWarning, match=r"Ledger\.source\(source\)\.backfill"):
        was = old.backfill("s", "2026-08-02", "2026-08-04", fetch=False)
    now = new.source("s").backfill("2026-08-02", "2026-08-04", fetch=False)
    assert isinstance(was, fl.WindowRun) and _same(was) == _same(now)
    several = pytest.raises(fl.ConfigError, match="one source at a time")
    with pytest.warns(DeprecationWarning, match=r"source\(source\)\.backfill"), several:
        old.backfill(["s", "t"], "2026-08-02", "2026-08-04")
    with pytest.warns(DeprecationWarning, match=r"Ledger\.source\(source\)\.replay"):
        was = old.replay("s", "2026-08-03")
    now = new.source("s").replay("2026-08-03")
    assert isinstance(was, fl.WindowRun) and _same(was) == _same(now)
    with pytest.warns(DeprecationWarning, match=r"Ledger\.source\(source\)\.runs\(\)"):
        was_runs = old.runs("s")
    assert [(r.kind, r.status, r.changes) for r in was_runs] == [
        (r.kind, r.status, r.changes) for r in new.source("s").runs()
    ]
    for led in (old, new):  # bytes under an undeclared name are kept for inspection
        with pytest.warns(DeprecationWarning), pytest.raises(fl.NotFoundError):
            led.ingest("t", _csv("x"), published_at="2026-08-05", name="t.csv")
    with pytest.warns(DeprecationWarning, match=r"rejected_payloads\(\)"):
        was = old.rejected_payloads("t")
    now = new.source("t", require_declared=False).rejected_payloads()
    assert len(was) == len(now) == 1 and _same(was) == _same(now)


def test_the_old_module_functions_warn_and_match_the_new_methods(tmp_path: Path) -> None:
    with fl.init(tmp_path / "w") as led:
        src = led.add_source("s", key=["id"], cadence="daily")
        run_id = src.ingest(_csv("a", "b"), published_at="2026-08-01", name="s1.csv").run_id
        assert run_id is not None
        led.add_destination("d", source="s", table="t", sqlite=tmp_path / "d.sqlite")
        cases: list[tuple[str, Any, Any]] = [
            (
                r"led.source\(source\).calendar",
                lambda: calendar.calendar(led, "s", date(2026, 8, 1), date(2026, 8, 3)),
                lambda: src.calendar(date(2026, 8, 1), date(2026, 8, 3)),
            ),
            (
                r"led.runs_page\(",
                lambda: runs_page.runs_page(led, source="s", limit=5),
                lambda: led.runs_page(source="s", limit=5),
            ),
            (
                r"led.run_detail\(",
                lambda: runs_page.run_detail(led, run_id),
                lambda: led.run_detail(run_id),
            ),
            (
                r"led.changes_page\(",
                lambda: runs_page.changes_page(led, run_id, limit=1),
                lambda: led.changes_page(run_id, limit=1),
            ),
            (
                r"led.destination\(name\).status\(\)",
                lambda: destination_status.destination_status(led, "d"),
                lambda: led.destination("d").status(),
            ),
            (
                r"led.audit_entries\(",
                lambda: audit.audit_entries(led, source="s"),
                lambda: led.audit_entries(source="s"),
            ),
            (
                r"src.snapshot_chunks\(",
                lambda: "".join(snapshot_stream.snapshot_chunks(src, valid=date(2026, 8, 2))),
                lambda: "".join(src.snapshot_chunks(valid=date(2026, 8, 2))),
            ),
            (
                r"src.snapshot_bytes\(",
                lambda: b"".join(snapshot_stream.snapshot_bytes(src, valid=date(2026, 8, 2))),
                lambda: b"".join(src.snapshot_bytes(valid=date(2026, 8, 2))),
            ),
        ]
        for new_call, old_way, new_way in cases:
            with pytest.warns(DeprecationWarning, match=new_call):
                was = old_way()
            now = new_way()
            assert _text(was) == _text(now), new_call
        with pytest.warns(DeprecationWarning, match=r"led.record_write\("):
            was = audit.record_write(led, actor="a", action="x", source="s", detail={"n": 1})
        now = led.record_write(actor="a", action="x", source="s", detail={"n": 1})
        assert _same({**was.to_json(), "audit_id": 0, "at": 0}) == _same(
            {**now.to_json(), "audit_id": 0, "at": 0}
        )
        assert [e.audit_id for e in led.audit_entries(source="s")] == [
            was.audit_id,
            now.audit_id,
        ]
