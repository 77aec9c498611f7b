"""`Ledger.destination(name)`: a downstream projection of a source's current state --
its live route, manifest rebuilds and reconciliation (the `sync/` feature)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from feedledger.api.reports import Reconciliation, SyncReport, _Raw
from feedledger.model.timeutil import from_us

if TYPE_CHECKING:
    from feedledger.api.explain import Explanation
    from feedledger.api.ledger import Ledger
    from feedledger.model.destination import Destination as Declared

# a rebuild's progress: (keys done, keys in the manifest, live route lag in seconds)
RebuildProgress = Callable[[int, int, float], None]
# an interrupted rebuild resuming: (manifest, batch it resumes at, batches in all, keys
# already acknowledged, keys in the manifest)
RebuildResume = Callable[[str, int, int, int, int], None]


class Destination:
    def __init__(self, ledger: Ledger, declared: Declared) -> None:
        self.ledger = ledger
        self.declared = declared
        self.name = declared.name
        self.source = declared.source

    def __repr__(self) -> str:
        return f"Destination({self.name!r}, source={self.source!r})"

    def to_json(self) -> dict[str, object]:
        """The declaration (the JSON of `destination add` and of `destination list`)."""
        return self.declared.to_json()

    def sync_live(
        self, *, once: bool = True, poll_s: float = 2.0, stop: threading.Event | None = None
    ) -> SyncReport:
        """Write the changed keys' current versions and move the cursor (`once`: drain
        what is waiting and return; otherwise keep draining until `stop` is set, then
        finish the step under way)."""
        from feedledger.sync.live import live

        report = live(self.ledger.context, self.name, once=once, poll_s=poll_s, stop=stop)
        return SyncReport.of(report)

    def create_manifest(
        self, name: str, *, generation: str | None = None, keys_from: Path | None = None
    ) -> Manifest:
        """Freeze the keys live now (or those of `keys_from`), the source boundary and the
        generation under `name` (`Ledger.create_manifest` for this destination's source;
        `to_json()` is the JSON of `manifest create`)."""
        return self.ledger.create_manifest(
            name, source=self.source, generation=generation, keys_from=keys_from
        )

    def rebuild(
        self,
        manifest: str,
        *,
        rate: float | None = None,
        maintenance: bool = False,
        live_reserve: float = 0.3,
        recovery_window_s: float = 60.0,
        batch: int | None = None,
        progress: RebuildProgress | None = None,
        on_resume: RebuildResume | None = None,
    ) -> SyncReport:
        """Write each manifest key's version as of its boundary, in checkpointed batches
        of `batch` documents (`rate`: documents/s in all, `live_reserve` of it kept for
        the live route; the rebuild waits while the live lag exceeds
        `recovery_window_s`; `maintenance` pauses the live route meanwhile). An
        interrupted rebuild of the same manifest resumes after its last acknowledged
        batch: `on_resume` is called first (the report's `resumed` says it too);
        `progress` after each acknowledged batch."""
        from feedledger.sync.live import BATCH
        from feedledger.sync.rebuild import rebuild

        report = rebuild(
            self.ledger.context,
            self.name,
            manifest,
            rate=rate,
            live_reserve=live_reserve,
            recovery_window_s=recovery_window_s,
            maintenance=maintenance,
            progress=progress,
            batch=BATCH if batch is None else batch,
            on_resume=None
            if on_resume is None
            else lambda r: on_resume(r.manifest, r.batch, r.batches, r.keys_done, r.population),
        )
        return SyncReport.of(report)

    def reconcile(self, manifest: str) -> Reconciliation:
        """Compare the destination with the ledger over a manifest's population."""
        from feedledger.sync.reconcile import reconcile

        return Reconciliation.of(reconcile(self.ledger.context, self.name, manifest))

    def explain(self, key: str) -> Explanation:
        """Why a key is what it is in the destination: the row held and each route's
        latest verdict (`to_json()` is the JSON of `sync-explain`)."""
        from feedledger.api.explain import Explanation
        from feedledger.sync.destinations import explain

        return Explanation.of(explain(self.ledger.context, self.name, key))


@dataclass(frozen=True)
class Manifest(_Raw):
    """A frozen population for rebuilds: its keys (`population`), the source boundary
    (watermark, payload, commit sequence, `created_at` as the transaction time) and the
    transform generation; `reconstructible`: its snapshot can be rebuilt exactly."""

    manifest_id: str
    name: str
    source: str
    created_at: datetime
    generation: str
    population: int
    reconstructible: bool
    keys_from: str | None
    _raw: Any = field(repr=False, compare=False)

    @classmethod
    def of(cls, m: Any) -> Manifest:
        return cls(
            m.manifest_id,
            m.name,
            m.source,
            from_us(m.created_at),
            m.generation,
            m.population,
            m.reconstructible,
            m.keys_from,
            m,
        )


@dataclass(frozen=True)
class DestinationLag:
    """How far a destination's live route is behind its source (`health`)."""

    destination: str
    source: str
    paused: bool
    cursor: int
    messages_behind: int
    changes_behind: int
    oldest_pending_at: datetime | None
    lag_s: float
    # rebuilds begun and not finished (running, or interrupted: a rerun resumes there):
    # {"manifest", "batch", "batches", "keys_done", "population"} each
    unfinished_rebuilds: list[dict[str, Any]]
    _raw: dict[str, Any] = field(repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        return self._raw

    @classmethod
    def of(cls, d: dict[str, Any]) -> DestinationLag:
        oldest = d["oldest_pending_at"]
        return cls(
            d["destination"],
            d["source"],
            d["paused"],
            d["cursor"],
            d["messages_behind"],
            d["changes_behind"],
            None if oldest is None else datetime.fromisoformat(oldest),
            d["lag_s"],
            d.get("unfinished_rebuilds", []),
            d,
        )
