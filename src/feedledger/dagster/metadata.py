"""feedledger's results as Dagster materialisation metadata: the run id, its kind, the
counts, the publisher date and a link to the dashboard's run page."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import dagster as dg

import feedledger as fl

RunResult = fl.Ingested | fl.Recovered | fl.NothingToDo | fl.NotModified


def _stamp(value: datetime | None) -> dg.MetadataValue | None:
    return None if value is None else dg.MetadataValue.timestamp(value)


def _clean(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if v is not None}


def _link(page: str | None) -> dict[str, Any]:
    return {} if page is None else {"run_page": dg.MetadataValue.url(page)}


def of_run(result: RunResult, page: str | None) -> dict[str, Any]:
    """A `Source.run()` result: a live run, a catch-up, or nothing new."""
    if isinstance(result, fl.Ingested):
        c = result.counts
        return _clean(
            {
                "status": result.status.value,
                "run_id": result.run_id or result.applied_by_run,
                "kind": fl.RunKind.LIVE.value,
                "publisher_date": _stamp(result.published_at),
                "payload_id": result.payload_id,
                "changes": result.changes,
                "added": c.added,
                "changed": c.changed,
                "deleted": c.deleted,
                "unchanged": c.unchanged,
                "held_back": c.superseded + c.unresolved,
                "held_for_review": result.held_for_review,
                **_link(page),
            }
        )
    if isinstance(result, fl.Recovered):
        return {
            **of_window(result.backfill, page),
            "status": "recovered",
            "missed_dates": [d.isoformat() for d in result.missed_dates],
            "archived_now": result.archived_now,
        }
    if isinstance(result, fl.NotModified):
        return {"status": "not_modified", "changes": 0}
    return of_nothing(result)


def of_window(result: fl.WindowRun, page: str | None) -> dict[str, Any]:
    """A backfill (or catch-up) as ONE run: its payloads in publisher order."""
    newest = result.steps[-1].published_at if result.steps else None
    return _clean(
        {
            "status": "applied",
            "run_id": result.run_id,
            "kind": result.kind.value,
            "publisher_date": _stamp(newest),
            "payloads": len(result.steps),
            "publisher_order": [s.published_at.isoformat() for s in result.steps],
            "changes": result.changes,
            "missing_dates": [d.isoformat() for d in result.missing_dates],
            "gaps_recorded": result.gaps_recorded,
            "fetched": result.fetched,
            "resumed": result.resumed,
            "summary": result.summary,
            **_link(page),
        }
    )


def of_nothing(result: fl.NothingToDo) -> dict[str, Any]:
    return _clean({"status": "nothing_to_do", "changes": 0, "reason": result.reason,
                   "hint": result.hint})  # fmt: skip


def run_id_of(result: RunResult | fl.WindowRun) -> str | None:
    if isinstance(result, fl.Ingested):
        return result.run_id or result.applied_by_run
    if isinstance(result, fl.Recovered):
        return result.backfill.run_id
    if isinstance(result, fl.WindowRun):
        return result.run_id
    return None
