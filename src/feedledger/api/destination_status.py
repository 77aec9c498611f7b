"""A destination's whole picture for the HTTP API's `/api/destinations/{name}`: its
declaration, the guard's outcome counts per scope (the live route, each manifest
rebuild), the unresolved records with their evidence, the live route's lag, and each
rebuild's progress (last key attempted vs acknowledged by the destination) and the
last reconcile's report."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from feedledger.api._deprecated import deprecated
from feedledger.api.results import DestinationLag
from feedledger.context import Context
from feedledger.model.timeutil import iso, now_us

if TYPE_CHECKING:
    from feedledger.model.destination import Destination as Declared

UNRESOLVED_SHOWN = 200


@dataclass(frozen=True)
class DestinationStatus:
    name: str
    source: str
    declaration: dict[str, Any]
    outcomes: dict[str, dict[str, int]]  # scope ("live" or a manifest's name) -> verdict counts
    unresolved: list[dict[str, Any]]  # scope, key, revision, generation, reason, evidence
    lag: DestinationLag | None
    rebuilds: list[dict[str, Any]]  # per manifest of the source: population, checkpoint
    last_reconcile: dict[str, Any] | None  # `reconcile --json` of the last one, and `at`

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "source": self.source,
            "declaration": self.declaration,
            "outcomes": self.outcomes,
            "unresolved": self.unresolved,
            "lag": None if self.lag is None else self.lag.to_json(),
            "rebuilds": self.rebuilds,
            "last_reconcile": self.last_reconcile,
        }


def lags(ctx: Context, sources: list[str] | None, when_us: int) -> list[DestinationLag]:
    """`Ledger.destination_lag`: per destination (of `sources`, default all) at
    `when_us`, its live route's lag."""
    from feedledger.pipeline.health import destination_lag  # lazy: SQLAlchemy, Arrow

    return [DestinationLag.of(d) for d in destination_lag(ctx, when_us, sources)]


def build(ctx: Context, dest: Declared) -> DestinationStatus:
    """`Destination.status`: the whole picture of the declared destination `dest`."""
    from feedledger.sync import manifests  # lazy: SQLAlchemy, Arrow
    from feedledger.sync import state as sync_state  # lazy: SQLAlchemy, Arrow
    from feedledger.sync.rebuild import resume_point  # lazy: SQLAlchemy, Arrow

    store = ctx.store
    mans = [m for m in manifests.listing(store) if m.source == dest.source]
    outcomes = {"live": sync_state.counts(store, dest.name, "live")}
    unresolved = [
        {"scope": "live", **u}
        for u in sync_state.of_verdict(store, dest.name, "live", "unresolved")[:UNRESOLVED_SHOWN]
    ]
    rebuilds = []
    for m in mans:
        counts = sync_state.counts(store, dest.name, m.manifest_id)
        outcomes[m.name] = counts
        room = UNRESOLVED_SHOWN - len(unresolved)
        if room > 0 and counts.get("unresolved"):
            found = sync_state.of_verdict(store, dest.name, m.manifest_id, "unresolved")
            unresolved += [{"scope": m.name, **u} for u in found[:room]]
        point = sync_state.checkpoint(store, dest.name, m.manifest_id)
        rebuilds.append(
            {
                "manifest": m.name,
                "population": m.population,
                "generation": m.generation,
                "judged": sum(counts.values()),
                "checkpoint": None if point is None else point.to_json(),
                # unfinished: where a rerun resumes (batch N of M), None otherwise
                "resume": None if (r := resume_point(store, dest.name, m)) is None else r.to_json(),
            }
        )
    lag = [d for d in lags(ctx, [dest.source], now_us()) if d.destination == dest.name]
    last = sync_state.last_reconcile(store, dest.name)
    reconciled = None if last is None else {"at": iso(last[0]), **last[1]}
    return DestinationStatus(
        dest.name,
        dest.source,
        dest.to_json(),
        outcomes,
        unresolved,
        lag[0] if lag else None,
        rebuilds,
        reconciled,
    )


def destination_status(led: Any, name: str) -> DestinationStatus:
    """Deprecated: `led.destination(name).status()` (`led` a `Ledger`; typed loosely so
    that this module does not import the one that imports it)."""
    deprecated(
        "feedledger.api.destination_status.destination_status(led, name)",
        "led.destination(name).status()",
    )
    found: DestinationStatus = led.destination(name).status()
    return found
