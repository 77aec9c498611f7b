"""The writes, each only with `Authorization: Bearer <token>` (auth.writer) and each
recorded in the write audit (who: the token's label; when; what; run or source):
release or retract a held run, freeze or thaw a source, retract a run."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field

import feedledger as fl
from feedledger.server.auth import writer
from feedledger.server.deps import JSONText, ledger

router = APIRouter(prefix="/api", tags=["writes"])


class ReviewBody(BaseModel):
    action: Literal["release", "retract"]


class RetractBody(BaseModel):
    cascade: bool = False


class FreezeBody(BaseModel):
    reason: str | None = Field(default=None, max_length=500)


def _audited(
    led: fl.Ledger,
    actor: str,
    action: str,
    result: Any,
    *,
    source: str,
    run_id: str | None,
    asked: dict[str, Any],
) -> JSONText:
    data = result.to_json()
    entry = led.record_write(
        actor=actor, action=action, source=source, run_id=run_id,
        detail={"request": asked, "result": data},
    )  # fmt: skip
    return JSONText({"result": data, "audit": entry.to_json()})


@router.post("/runs/{run_id}/review", response_class=JSONText, summary="Release or retract")
def review(
    run_id: str,
    body: ReviewBody,
    actor: str = Depends(writer),
    led: fl.Ledger = Depends(ledger),
) -> JSONText:
    """Decide on a run held for review: `release` its notifications or `retract` it."""
    whole = led.resolve_run(run_id)
    decision = led.review(whole, release=body.action == "release", retract=body.action == "retract")
    return _audited(
        led, actor, f"review-{body.action}", decision, source=decision.source, run_id=whole,
        asked=body.model_dump(),
    )  # fmt: skip


@router.post("/runs/{run_id}/retract", response_class=JSONText, summary="Retract a run")
def retract(
    run_id: str,
    body: RetractBody | None = None,
    actor: str = Depends(writer),
    led: fl.Ledger = Depends(ledger),
) -> JSONText:
    """Retract everything a run wrote (`cascade`: and the later runs built on it)."""
    asked = body or RetractBody()
    whole = led.resolve_run(run_id)
    done = led.retract(whole, cascade=asked.cascade)
    return _audited(
        led, actor, "retract", done, source=done.source, run_id=whole, asked=asked.model_dump()
    )


@router.post("/sources/{source}/freeze", response_class=JSONText, summary="Freeze a source")
def freeze(
    source: str,
    body: FreezeBody | None = None,
    actor: str = Depends(writer),
    led: fl.Ledger = Depends(ledger),
) -> JSONText:
    """Refuse the source's live runs until thawed (backfill, replay, retract allowed)."""
    asked = body or FreezeBody()
    state = led.source(source).freeze(reason=asked.reason)
    return _audited(
        led, actor, "freeze", state, source=source, run_id=None, asked=asked.model_dump()
    )


@router.post("/sources/{source}/thaw", response_class=JSONText, summary="Thaw a source")
def thaw(source: str, actor: str = Depends(writer), led: fl.Ledger = Depends(ledger)) -> JSONText:
    state = led.source(source).thaw()
    return _audited(led, actor, "thaw", state, source=source, run_id=None, asked={})
