"""Review of a live run held for an unusual burst of changes: release its notifications,
or retract the run so they never go out."""

from __future__ import annotations

from typing import Any

from feedledger.context import Context
from feedledger.ledger import notices
from feedledger.ledger.runs import lookup
from feedledger.ledger.runs.retraction import stands
from feedledger.model.errors import ConfigError, NotFoundError
from feedledger.model.types import RunStatus
from feedledger.pipeline.retract import retract_run


def review(ctx: Context, run_id: str, *, release: bool, retract: bool) -> dict[str, Any]:
    if release == retract:
        raise ConfigError("give exactly one of --release or --retract")
    store = ctx.store
    run = lookup.get_run(store, run_id)
    if run is None:
        raise NotFoundError(f"unknown run id {run_id!r}", hint="`feedledger runs SOURCE`")
    if run.status != RunStatus.HELD.value:
        raise ConfigError(
            f"run {run_id} is not held for review (status {run.status}); nothing changed",
            source=run.source,
        )
    if release:
        n = notices.settle(
            store,
            run_id,
            notifications_to="pending",
            run_status=RunStatus.SUCCEEDED.value,
            still_held=True,
        )
        if n is None:  # settled by another reviewer since the look above
            now = lookup.get_run(store, run_id)
            raise ConfigError(
                f"run {run_id} is no longer held for review (status "
                f"{now.status if now is not None else 'gone'}); nothing changed",
                source=run.source,
            )
        return {"run_id": run_id, "source": run.source, "action": "released", "notifications": n}
    retraction: Any = None
    if stands(store, run.source, run_id):
        # refuses (and changes nothing) if later runs were computed on top of this one
        retraction = retract_run(ctx, run_id)
    # the retraction cancelled them already, if it ran
    moved = notices.settle(
        store, run_id, notifications_to="cancelled", run_status=RunStatus.RETRACTED.value
    )
    n = moved or 0
    if retraction is not None:
        n += retraction.notifications_cancelled
    return {
        "run_id": run_id,
        "source": run.source,
        "action": "retracted",
        "notifications_cancelled": n,
        "retraction": retraction,
    }
