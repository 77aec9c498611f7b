"""`Ledger.destination(name)`: a downstream projection of a source's current state --
its live route, manifest rebuilds and reconciliation (the `sync/` feature)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from feedledger.api import destination_status
from feedledger.api.destination_status import DestinationStatus
from feedledger.api.explain import Explanation
from feedledger.api.results import DestinationLag, Manifest, Reconciliation, SyncReport
from feedledger.api.search import SearchHit, SearchResults, search
from feedledger.context import Context

if TYPE_CHECKING:
    from feedledger.model.destination import Destination as Declared

__all__ = [
    "Destination",
    "DestinationLag",
    "Manifest",
    "RebuildProgress",
    "RebuildResume",
    "SearchHit",
    "SearchResults",
]

# a rebuild's progress: (keys done, keys in the manifest, live route lag in seconds)
RebuildProgress = Callable[[int, int, float], None]
# an interrupted rebuild resuming: (manifest, batch it resumes at, batches in all, keys
# already acknowledged, keys in the manifest)
RebuildResume = Callable[[str, int, int, int, int], None]


def create_manifest(
    ctx: Context,
    name: str,
    *,
    source: str,
    generation: str | None = None,
    keys_from: str | os.PathLike[str] | None = None,
) -> Manifest:
    """`Ledger.create_manifest` and `Destination.create_manifest`."""
    from feedledger.sync.reconcile import create_manifest as create  # lazy: SQLAlchemy, Arrow

    keys = Path(keys_from) if keys_from is not None else None
    return Manifest.of(create(ctx, name, source, generation=generation, keys_from=keys))


class Destination:
    """`led.destination(name)`: one declared destination of the workspace `context`."""

    def __init__(self, context: Context, declared: Declared) -> None:
        self.context = context
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
        from feedledger.sync.live import live  # lazy: SQLAlchemy, Arrow

        report = live(self.context, self.name, once=once, poll_s=poll_s, stop=stop)
        return SyncReport.of(report)

    def create_manifest(
        self, name: str, *, generation: str | None = None, keys_from: Path | None = None
    ) -> Manifest:
        """Freeze the keys live now (or those of `keys_from`), the source boundary and the
        generation under `name` (`Ledger.create_manifest` for this destination's source;
        `to_json()` is the JSON of `manifest create`)."""
        return create_manifest(
            self.context, name, source=self.source, generation=generation, keys_from=keys_from
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
        from feedledger.sync.live import BATCH  # lazy: SQLAlchemy, Arrow
        from feedledger.sync.rebuild import rebuild  # lazy: SQLAlchemy, Arrow

        report = rebuild(
            self.context,
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
        from feedledger.sync.reconcile import reconcile  # lazy: SQLAlchemy, Arrow

        return Reconciliation.of(reconcile(self.context, self.name, manifest))

    def explain(self, key: str) -> Explanation:
        """Why a key is what it is in the destination: the row held and each route's
        latest verdict (`to_json()` is the JSON of `sync-explain`)."""
        from feedledger.sync.destinations import explain  # lazy: SQLAlchemy, Arrow

        return Explanation.of(explain(self.context, self.name, key))

    def search(self, query: str, *, limit: int = 10) -> SearchResults:
        """A tantivy destination's present documents matching `query` (tantivy's query
        language: words, `field:word`, phrases, AND/OR/NOT), best first by BM25; a
        ConfigError for another kind of destination or a query that does not parse."""
        return search(self.declared, query, limit)

    def status(self) -> DestinationStatus:
        """Its whole picture (the HTTP API's `/api/destinations/{name}`): declaration,
        the guard's outcome counts per scope, the unresolved records, the live route's
        lag, each rebuild's progress and the last reconcile's report."""
        return destination_status.build(self.context, self.declared)
