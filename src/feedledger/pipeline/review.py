"""Review of a live run held for an unusual burst of changes: release its notifications,
or retract the run so they never go out."""

from __future__ import annotations

from typing import Any

from feedledger.context import Context
from feedledger.ledger import notices, runs
from feedledger.ledger.retraction import standing
from feedledger.model.errors import ConfigError, NotFoundError
from feedledger.model.types import RunStatus
from feedledger.pipeline.retract import retract_run


def review(ctx: Context, run_id: str, *, release: bool, retract: bool) -> dict[str, Any]:
    if release == retract:
        raise ConfigError("give exactly one of --release or --retract")
    store = ctx.store
    run = runs.get_run(store, run_id)
    if run is None:
        raise NotFoundError(f"unknown run id {run_id!r}", hint="`feedledger runs SOURCE`")
    if run.status != RunStatus.HELD.value:
        raise ConfigError(
            f"run {run_id} is not held for review (status {run.status}); nothing changed",
            source=run.source,
        )
    if release:
        with store.begin() as conn:
            n = notices.move(conn, run_id, from_status="held", to_status="pending")
            runs.set_status(conn, run_id, RunStatus.SUCCEEDED.value)
        return {"run_id": run_id, "source": run.source, "action": "released", "notifications": n}
    retraction: Any = None
    with store.engine.connect() as conn:
        still_standing = any(a.run_id == run_id for a in standing(conn, run.source))
    if still_standing:
        # refuses (and changes nothing) if later runs were computed on top of this one
        retraction = retract_run(ctx, run_id)
    with store.begin() as conn:  # the retraction cancelled them already, if it ran
        n = notices.move(conn, run_id, from_status="held", to_status="cancelled")
        runs.set_status(conn, run_id, RunStatus.RETRACTED.value)
    if retraction is not None:
        n += retraction.notifications_cancelled
    return {
        "run_id": run_id,
        "source": run.source,
        "action": "retracted",
        "notifications_cancelled": n,
        "retraction": retraction,
    }
