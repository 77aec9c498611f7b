"""`Ledger.destination(name)`: a downstream projection of a source's current state --
its live route, manifest rebuilds and reconciliation (the `sync/` feature)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from feedledger.api.reports import Reconciliation, SyncReport

if TYPE_CHECKING:
    from feedledger.api.ledger import Ledger
    from feedledger.model.destination import Destination as Declared


class Destination:
    def __init__(self, ledger: Ledger, declared: Declared) -> None:
        self.ledger = ledger
        self.declared = declared
        self.name = declared.name
        self.source = declared.source

    def __repr__(self) -> str:
        return f"Destination({self.name!r}, source={self.source!r})"

    def sync_live(self, *, once: bool = True, poll_s: float = 2.0) -> SyncReport:
        """Write the changed keys' current versions and move the cursor (`once`: drain
        what is waiting and return)."""
        from feedledger.sync.live import live

        return SyncReport.of(live(self.ledger.context, self.name, once=once, poll_s=poll_s))

    def create_manifest(
        self, name: str, *, generation: str | None = None, keys_from: Path | None = None
    ) -> dict[str, Any]:
        """Freeze the keys live now (or those of `keys_from`), the source boundary and the
        generation under `name` (the JSON of `manifest create`)."""
        from feedledger.api.results import plain
        from feedledger.sync.reconcile import create_manifest

        man = create_manifest(
            self.ledger.context, name, self.source, generation=generation, keys_from=keys_from
        )
        return plain(man)  # type: ignore[no-any-return]

    def rebuild(
        self, manifest: str, *, rate: float | None = None, maintenance: bool = False
    ) -> SyncReport:
        """Write each manifest key's version as of its boundary, in checkpointed batches."""
        from feedledger.sync.rebuild import rebuild

        report = rebuild(
            self.ledger.context, self.name, manifest, rate=rate, maintenance=maintenance
        )
        return SyncReport.of(report)

    def reconcile(self, manifest: str) -> Reconciliation:
        """Compare the destination with the ledger over a manifest's population."""
        from feedledger.sync.reconcile import reconcile

        return Reconciliation.of(reconcile(self.ledger.context, self.name, manifest))

    def explain(self, key: str) -> dict[str, Any]:
        """Why a key is what it is in the destination (the JSON of `sync-explain`)."""
        from feedledger.sync.destinations import explain

        return explain(self.ledger.context, self.name, key)
