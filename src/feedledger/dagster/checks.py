"""The asset checks of a source's ledger asset, and of a destination's.

* `fresh`: the source is not stale by its cadence, and its publisher date has no
  problem standing (`Ledger.health`: what `feedledger health` fails on).
* `no_unrecorded_gaps`: no expected publication day of the calendar is `missed` --
  every day is applied, waiting, late or inside a recorded gap (`Source.calendar`).
* `no_held_burst` (blocking): no live run waits for review after an unusual burst of
  changes; while one does, Dagster runs nothing downstream of the source (its
  notifications are held too, until `feedledger review`).
* `reconciled` (per destination): the destination agrees with the ledger over a named
  manifest's population (`Destination.reconcile`): every key of it judged by a sync
  over the manifest (`feedledger sync --manifest`, `Destination.rebuild`), nothing
  missing, extra, stale or unresolved.
"""

from collections.abc import Callable
from typing import Any

import dagster as dg
from dagster import AssetCheckExecutionContext

import feedledger as fl
from feedledger.api.calendar import DayState
from feedledger.dagster.resource import FeedledgerResource

RESOURCE_KEY = "feedledger"
SHOWN = 20  # dates and run ids listed in a check's metadata at most


def _feedledger(context: AssetCheckExecutionContext) -> FeedledgerResource:
    got: FeedledgerResource = getattr(context.resources, RESOURCE_KEY)
    return got


def fresh(source: str, key: dg.AssetKey) -> dg.AssetChecksDefinition:
    @dg.asset_check(
        asset=key,
        name="fresh",
        description=f"{source} is not stale by its cadence (feedledger health).",
        required_resource_keys={RESOURCE_KEY},
    )
    def _fresh(context: AssetCheckExecutionContext) -> dg.AssetCheckResult:
        with _feedledger(context).ledger() as led:
            (h,) = led.health([source])
        data: dict[str, Any] = {
            "status": h.status.value,
            "missed_publications": h.missed_publications,
            "missed_dates": [d.isoformat() for d in h.missed_dates[:SHOWN]],
            "frozen": h.frozen,
        }
        if h.last_publisher_date is not None:
            data["last_publisher_date"] = dg.MetadataValue.timestamp(h.last_publisher_date)
        if h.publisher_date_problem is not None:
            data["publisher_date_problem"] = h.publisher_date_problem
        return dg.AssetCheckResult(passed=not h.failing, metadata=data)

    return _fresh


def no_unrecorded_gaps(source: str, key: dg.AssetKey) -> dg.AssetChecksDefinition:
    @dg.asset_check(
        asset=key,
        name="no_unrecorded_gaps",
        description=f"Every expected publication day of {source} is applied, waiting or "
        "inside a recorded gap: none is simply missed.",
        required_resource_keys={RESOURCE_KEY},
    )
    def _gaps(context: AssetCheckExecutionContext) -> dg.AssetCheckResult:
        with _feedledger(context).ledger() as led:
            cal = led.source(source).calendar()
        missed = [d.day for d in cal.days if d.state is DayState.MISSED]
        recorded = sum(1 for d in cal.days if d.state is DayState.GAP)
        return dg.AssetCheckResult(
            passed=not missed,
            metadata={
                "calendar": f"{cal.start.isoformat()}..{cal.end.isoformat()}",
                "missed_days": len(missed),
                "missed": [d.isoformat() for d in missed[:SHOWN]],
                "days_in_recorded_gaps": recorded,
            },
        )

    return _gaps


def no_held_burst(source: str, key: dg.AssetKey) -> dg.AssetChecksDefinition:
    @dg.asset_check(
        asset=key,
        name="no_held_burst",
        blocking=True,
        description=f"No live run of {source} waits for review after an unusual burst "
        "of changes (blocking: nothing downstream runs while one does).",
        required_resource_keys={RESOURCE_KEY},
    )
    def _held(context: AssetCheckExecutionContext) -> dg.AssetCheckResult:
        res = _feedledger(context)
        with res.ledger() as led:
            page = led.runs_page(source=source, status=fl.RunStatus.HELD, limit=SHOWN)
        held = [r.run_id for r in page.runs]
        data: dict[str, Any] = {"held_runs": held}
        link = res.run_page(held[0]) if held else None
        if link is not None:
            data["review"] = dg.MetadataValue.url(link)
        if held:
            data["fix"] = f"feedledger review {held[0]} --release (or --retract)"
        return dg.AssetCheckResult(passed=not held, metadata=data)

    return _held


def reconciled(destination: str, manifest: str, key: dg.AssetKey) -> dg.AssetChecksDefinition:
    @dg.asset_check(
        asset=key,
        name="reconciled",
        description=f"Destination {destination} agrees with the ledger over manifest "
        f"{manifest} (feedledger reconcile).",
        required_resource_keys={RESOURCE_KEY},
    )
    def _reconciled(context: AssetCheckExecutionContext) -> dg.AssetCheckResult:
        try:
            with _feedledger(context).ledger() as led:
                rec = led.destination(destination).reconcile(manifest)
        except fl.NotFoundError as exc:  # no such manifest (yet): not reconciled
            return dg.AssetCheckResult(passed=False, metadata={"problem": str(exc)})
        report = rec.to_json()
        findings = ("missing", "extra", "duplicates", "stale", "wrong_generation", "unresolved")
        return dg.AssetCheckResult(
            passed=rec.complete,
            metadata={
                "manifest": rec.manifest,
                "population": rec.population,
                "outcomes": {o.value: n for o, n in rec.outcomes.items()},
                "findings": {f: len(report.get(f) or []) for f in findings},
                "keys_without_verdict": report.get("missing_verdicts_count", 0),
            },
        )

    return _reconciled


SOURCE_CHECKS: tuple[Callable[[str, dg.AssetKey], dg.AssetChecksDefinition], ...] = (
    fresh,
    no_unrecorded_gaps,
    no_held_burst,
)


def source_checks(cfg: fl.SourceConfig, key: dg.AssetKey) -> list[dg.AssetChecksDefinition]:
    """`fresh`, `no_unrecorded_gaps` and `no_held_burst` on the source's ledger asset."""
    return [make(cfg.name, key) for make in SOURCE_CHECKS]
