"""One scheduler decision for one source at `now` (the scheduler's clock, a parameter):

* nothing due, frozen, no fetch location, or backing off  -> nothing to do
* one publication due (the normal day)  -> a live run: fetch the newest and ingest it;
  if the publisher has not published it yet (or is unreachable), try again with
  backoff from `retry_s`, doubling up to an hour, while the fetch window lasts
* more than one due (an outage, a stopped scheduler)  -> never a naive catch-up:
  `recovery = "auto"` fills the archive and backfills (pipeline/catchup/recovery.py);
  `"hold"` announces it once and waits for an operator

Schedulers race: two may find the same source due at once, and the one that reaches the
lease second finds, under it, that the other did the work (a backfill with nothing left:
NothingToDo; a live payload already applied). Its attempt is `done_elsewhere`, the
source caught up: neither a failure nor a reason to back off.

`alerts` opens and closes alert episodes (stale, failing, recovery on hold): each is
announced to the notification subscribers once when it opens and once when it clears.
"""

from __future__ import annotations

import contextlib
import math
import random
import time
from dataclasses import dataclass, field
from typing import Any

from feedledger.context import Context
from feedledger.ledger import schedule_state
from feedledger.ledger.records import Watermark
from feedledger.ledger.schedule_state import State
from feedledger.ledger.views.health import health_rows
from feedledger.model.cadence import due_at, next_due
from feedledger.model.errors import (
    FeedledgerError,
    FutureDateError,
    LeaseHeldError,
    SchemaTooNewError,
    StaleWatermarkError,
)
from feedledger.model.source import SourceConfig
from feedledger.model.timeutil import iso
from feedledger.pipeline.catchup.backfill import Progress
from feedledger.pipeline.catchup.recovery import recover, waiting
from feedledger.pipeline.health import SourceHealth, due_in
from feedledger.pipeline.intake import observing
from feedledger.pipeline.intake.observing import DateWentBackError, observes
from feedledger.pipeline.intake.run import live_run

MAX_BACKOFF_S = 3600.0


class Interrupted(Exception):
    """Raised by a progress callback to stop a backfill between two payloads (each
    payload's transaction is whole); the next attempt resumes it from the watermark."""


@dataclass
class Attempt:
    """What one scheduled attempt did: one structured log line."""

    source: str
    action: str  # live | recover | hold
    # applied | unchanged (observed: pipeline/intake/observing.py) | not_yet_published |
    # recovered | waiting | done_elsewhere | held | busy | failed | interrupted
    outcome: str
    at: int
    run_id: str | None = None
    changes: int = 0
    payloads: int = 0
    missed: int = 0
    seconds: float = 0.0
    error: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "event": "run",
            "source": self.source,
            "action": self.action,
            "outcome": self.outcome,
            "at": iso(self.at),
            "run_id": self.run_id,
            "changes": self.changes,
            "payloads": self.payloads,
            "missed": self.missed,
            "duration_s": round(self.seconds, 3),
            "error": self.error,
            **self.detail,
        }


def backoff_us(src: SourceConfig, failures: int, rng: random.Random) -> int:
    cap = min(MAX_BACKOFF_S, src.retry_s * (2 ** max(0, failures)))
    return int(rng.uniform(cap / 2, cap) * 1_000_000)


def _retry_at(src: SourceConfig, now: int, failures: int, due: int, rng: random.Random) -> int:
    """Next try after an unsuccessful one: backoff, but once the fetch window of the due
    publication has closed, not before the next publication is due."""
    at = now + backoff_us(src, failures, rng)
    if src.fetch_window_h is not None and at > due + int(src.fetch_window_h * 3.6e9):
        return max(at, next_due(src.cadence, src.timezone, now, src.publish_at))
    return at


# the publisher has nothing new yet (the fetch worked; the publication is late): a near
# miss, an observation that nothing new was published (invariant 12) -- never a failure.
# The source is still behind (health counts the publication missed), so it is tried
# again, less and less often while the publication stays away.
NEAR_MISSES = ("not_yet_published", "waiting")


def late_steps(src: SourceConfig, now: int, since: int) -> int:
    """The backoff's doublings for a near miss, from how long the publication has been
    waited for (`since`: its due time, or the source's last success if later -- not a
    count of attempts): tried then, then about `retry_s`, 2, 4, ... x `retry_s` after
    it (up to an hour apart), whichever process tries."""
    late_s = max(0.0, (now - since) / 1e6)
    return max(0, int(math.log2(late_s / src.retry_s))) if late_s >= src.retry_s else 0


def due_now(ctx: Context, src: SourceConfig, now: int) -> bool:
    """Whether the scheduler should attempt `src` now (`health.due_in`, its rows read
    now)."""
    if src.fetch is None:
        return False
    return due_in(src, health_rows(ctx.store, [src.name])[src.name], now)


def attempt(
    ctx: Context,
    src: SourceConfig,
    now: int,
    rng: random.Random,
    progress: Progress | None = None,
) -> Attempt:
    """Run what is due for `src` (see the module docstring) and record the attempt.
    Errors are recorded and returned, never raised (the scheduler must go on), but for
    SchemaTooNewError: the store's schema was upgraded past this release."""
    started = time.perf_counter()
    store = ctx.store
    state = schedule_state.get(store, src.name)
    before = store.watermark(src.name)
    # the one decision `feedledger run` makes too: several publications waiting (cadence
    # days missed, or dated files after the watermark) -> recover, never the newest only
    missed = waiting(ctx, src, now)
    action = "recover" if len(missed) > 1 else "live"
    if action == "recover" and src.recovery == "hold":
        action = "hold"
    result = Attempt(src.name, action, "failed", now, missed=len(missed))
    # nothing new from a source serving its current state is an observation (a success:
    # pipeline/intake/observing.py); from dated files, the publication has not come yet
    unchanged = "unchanged" if observes(src) else "not_yet_published"
    due = due_at(src.cadence, src.timezone, missed[-1], src.publish_at) if missed else now
    try:
        if action == "hold":
            result.outcome = "held"
            result.detail["hint"] = (
                f"recovery = hold: `feedledger backfill {src.name} --from "
                f"{missed[0]} --to {missed[-1]}` (after filling the archive), then "
                "the scheduler resumes"
            )
        elif action == "recover":
            rec = recover(ctx, src, missed, progress=progress, now=now)
            if rec.report is None and observes(src):
                # a portal or URL serves its current state, not the missed days: it is
                # looked at as on a normal day (an unchanged one is an observation)
                action = result.action = "live"
            elif rec.report is None:
                result.outcome = "waiting"  # the publisher serves none of them yet
            else:
                result.outcome = "recovered"
                result.run_id = rec.report.run_id
                result.changes = rec.report.changes
                result.payloads = len(rec.report.steps)
                result.detail["gaps_recorded"] = rec.report.gaps_recorded
                if rec.report.invalid_geometries:  # GIS: kept as stated, said in the log
                    result.detail["invalid_geometries"] = rec.report.invalid_geometries
            result.detail["archived_now"] = len(rec.archived)
        if action == "live":
            got = live_run(ctx, src.name, now=now)
            if got is None or got.status == "already_applied":
                result.outcome = unchanged
            else:
                result.outcome = "applied"
                result.run_id = got.run_id
                result.changes = got.changes
                result.payloads = 1
                if got.held:
                    result.detail["held_for_review"] = True
                if got.invalid_geometries:  # GIS: kept as stated, said in the log
                    result.detail["invalid_geometries"] = got.invalid_geometries
    except LeaseHeldError as exc:
        result.outcome, result.error = "busy", exc.problem
    except DateWentBackError as exc:
        result.error = str(exc)  # kept as the source's date problem: health fails
    except StaleWatermarkError:
        result.outcome = unchanged  # the newest there is not after what we have
    except FutureDateError as exc:
        result.error = str(exc)
        with contextlib.suppress(Exception):
            observing.future(ctx, src, exc)
    except SchemaTooNewError:
        raise  # not this source's problem: this release may no longer run (the loop stops)
    except FeedledgerError as exc:
        result.error = str(exc)
    except Interrupted:
        result.outcome, result.error = "interrupted", "stopped between two payloads"
    except Exception as exc:  # a bug or an unexpected library error: record, go on
        result.error = f"{type(exc).__name__}: {exc}"
    if result.outcome in ("waiting", "not_yet_published") and result.error is None:
        # the store gone away just now: the outcome stands as it was
        with contextlib.suppress(Exception):
            _done_elsewhere(ctx, src, before, result)
    result.seconds = time.perf_counter() - started
    success = result.outcome in ("applied", "recovered", "done_elsewhere", "unchanged")
    near_miss = result.outcome in NEAR_MISSES
    if result.outcome in ("busy", "interrupted"):
        next_at: int | None = state.next_attempt_at
    elif result.outcome == "held":
        next_at = next_due(src.cadence, src.timezone, now, src.publish_at)
    elif success:
        next_at = None
    elif near_miss:
        since = max(due, state.last_success_at or due)  # waited for since then
        next_at = _retry_at(src, now, late_steps(src, now, since), due, rng)
    else:
        next_at = _retry_at(src, now, state.failures, due, rng)
    if result.outcome not in ("busy", "interrupted"):
        try:
            schedule_state.attempted(
                store,
                src.name,
                at=now,
                outcome=result.outcome,
                success=success,
                failed=not (success or near_miss),
                error=result.error,
                next_attempt_at=next_at,
            )
        except SchemaTooNewError:
            raise
        except Exception as exc:  # what the attempt did stands; its log line says both
            result.detail["not_recorded"] = f"{type(exc).__name__}: {exc}"
    return result


def _done_elsewhere(
    ctx: Context, src: SourceConfig, before: Watermark | None, result: Attempt
) -> None:
    """The attempt found nothing to do because another worker did it meanwhile (the
    watermark moved on during the attempt, not by this one): `done_elsewhere`, naming
    the run that applied the source's latest payload."""
    after = ctx.store.watermark(src.name)
    if after is None or after.published_at is None or after.payload_id is None:
        return
    was = before.published_at if before is not None else None
    if was is not None and after.published_at <= was:
        return
    result.outcome = "done_elsewhere"
    done = ctx.store.application_of(after.payload_id)
    result.detail["done_by_run"] = done.run_id if done is not None else None
    result.detail["watermark_at"] = iso(after.published_at)


def _episodes(health: SourceHealth, state: State) -> list[tuple[str, bool]]:
    """(episode column, whether its condition holds now) of each alert episode."""
    failing = state.failures > 0 and state.last_outcome == "failed" and not health.frozen
    return [
        ("stale_alerted_at", health.stale),
        ("failure_alerted_at", failing),
        ("hold_alerted_at", state.last_outcome == "held" and health.missed > 1),
    ]


def alerts_due(health: SourceHealth, state: State) -> bool:
    """Whether an alert episode of the source opens or closes now (`alerts` has work):
    the conditions depend only on the missed days, frozen and the scheduler's state, so
    a light health (no last fetch, no notification counts) can tell."""
    return any(active != (getattr(state, c) is not None) for c, active in _episodes(health, state))


def alerts(ctx: Context, health: SourceHealth, now: int, state: State | None = None) -> list[str]:
    """Open or close the source's alert episodes; returns the notices queued. `state`:
    the source's scheduler state as just read (default: read here). An episode already
    as it should be (open while active, closed while not) is left without a transaction:
    opening and closing are conditional updates, so the next look settles a race."""
    store = ctx.store
    if state is None:
        state = schedule_state.get(store, health.source)
    (_, stale), (_, failing), (_, holding) = _episodes(health, state)
    queued: list[str] = []
    body: dict[str, Any] = {
        "missed_publications": health.missed,
        "missed_dates": [d.isoformat() for d in health.missed_dates[-31:]],
        "last_publisher_date": iso(health.last_publisher_at),
        "last_successful_fetch": iso(health.last_success_at),
        "last_error": state.last_error,
    }
    for column, active, topic, text in (
        (
            "stale_alerted_at",
            stale,
            "stale",
            f"{health.source} is stale: {health.missed} expected publication(s) missing",
        ),
        (
            "failure_alerted_at",
            failing,
            "failing",
            f"{health.source}: scheduled runs are failing: {state.last_error}",
        ),
        (
            "hold_alerted_at",
            holding,
            "recovery_held",
            f"{health.source} missed {health.missed} publication(s); recovery is on hold "
            "for an operator (recovery = hold)",
        ),
    ):
        if active == (getattr(state, column) is not None):
            continue  # already open while active, or closed while not: nothing to do
        done = f"{health.source}: {topic.replace('_', ' ')} cleared"
        sent = schedule_state.alert_episode(
            store,
            health.source,
            column,
            topic,
            active=active,
            now=now,
            opened_body={**body, "text": text},
            cleared_body={**body, "text": done},
        )
        if sent is not None:
            queued.append(sent)
    return queued
