"""Read endpoints of runs: `/api/runs` (paged, opaque cursor), `/api/runs/{run_id}`
(with retraction state, notices and the write audit), `/api/runs/{run_id}/changes`
(paged; held `unresolved` and `superseded` records included) and `/api/review` (the
live runs held for review)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query

import feedledger as fl
from feedledger.server.deps import JSONText, ledger

router = APIRouter(prefix="/api", tags=["runs"])


@router.get("/runs", response_class=JSONText, summary="Runs, newest first, paged")
def runs(
    source: str | None = Query(None),
    kind: str | None = Query(None, description="live, backfill, replay, retraction, ..."),
    status: str | None = Query(None, description="succeeded, failed, held, ..."),
    limit: int = Query(50, ge=1, le=1000),
    cursor: str | None = Query(None, description="`next_cursor` of the previous page"),
    led: fl.Ledger = Depends(ledger),
) -> JSONText:
    page = led.runs_page(source=source, kind=kind, status=status, limit=limit, cursor=cursor)
    return JSONText(page.to_json())


@router.get("/review", response_class=JSONText, summary="Runs held for review")
def review(
    limit: int = Query(200, ge=1, le=1000),
    cursor: str | None = Query(None),
    led: fl.Ledger = Depends(ledger),
) -> JSONText:
    """The live runs held for review (an unusual burst), newest first: release or
    retract each with `POST /api/runs/{run_id}/review`."""
    page = led.runs_page(status="held", limit=limit, cursor=cursor)
    return JSONText(page.to_json())


@router.get("/runs/{run_id}", response_class=JSONText, summary="One run")
def run(run_id: str, led: fl.Ledger = Depends(ledger)) -> JSONText:
    return JSONText(led.run_detail(run_id).to_json())


@router.get("/runs/{run_id}/changes", response_class=JSONText, summary="A run's changes, paged")
def changes(
    run_id: str,
    limit: int = Query(200, ge=1, le=1000),
    cursor: str | None = Query(None),
    led: fl.Ledger = Depends(ledger),
) -> JSONText:
    return JSONText(led.changes_page(run_id, limit=limit, cursor=cursor).to_json())
