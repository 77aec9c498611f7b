"""Deciding on a live run held for review (an unusual burst of changes): release its
notifications, or retract it (`Ledger.review`, the CLI's `review`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from feedledger.api.results import plain
from feedledger.model.types import ReviewAction

if TYPE_CHECKING:
    from feedledger.context import Context


@dataclass(frozen=True)
class ReviewDecision:
    """`action` released (`notifications` sent on) or retracted (`notifications_cancelled`
    never go out)."""

    run_id: str
    source: str
    action: ReviewAction
    notifications: int = 0
    notifications_cancelled: int = 0
    _raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        return plain(self._raw)  # type: ignore[no-any-return]


def review(ctx: Context, run_id: str, *, release: bool, retract: bool) -> ReviewDecision:
    """Exactly one of `release` / `retract` (ConfigError otherwise); `run_id`: the run's
    id or any unique prefix of it."""
    from feedledger.ledger.runs import lookup  # lazy: SQLAlchemy, Arrow
    from feedledger.pipeline.review import review as decide  # lazy: SQLAlchemy, Arrow

    data = decide(ctx, lookup.resolve_id(ctx.store, run_id), release=release, retract=retract)
    return ReviewDecision(
        data["run_id"],
        data["source"],
        ReviewAction(data["action"]),
        data.get("notifications", 0),
        data.get("notifications_cancelled", 0),
        data,
    )
