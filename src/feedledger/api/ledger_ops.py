"""The Ledger's operations by source name, as the CLI takes them (a source named, dates
as text): ingest, backfill, replay, review, and the archive's refused payloads and index.
`Ledger` inherits them."""

from __future__ import annotations

import os
from datetime import date
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from feedledger.api.archive import (
        ArchiveCompacted,
        ArchiveVerified,
        OnArchiveProgress,
        Reindexed,
        Rejected,
    )
    from feedledger.api.reports import NothingToDo, WindowRun
    from feedledger.api.results import Ingested
    from feedledger.api.review import ReviewDecision
    from feedledger.api.windows import OnPlan, OnProgress, OnReplayPlan
    from feedledger.context import Context


class LedgerOperations:
    context: Context

    def ingest(
        self,
        source: str,
        payload: str | os.PathLike[str] | bytes,
        *,
        published_at: str | None = None,
        name: str | None = None,
        content_type: str | None = None,
        allow_mass_delete: bool = False,
        allow_future: bool = False,
    ) -> Ingested:
        """`source(name).ingest(...)` by name, `published_at` as text (the CLI's
        `ingest`): an unknown source or an unparseable date is refused naming the
        payload, whose bytes are kept in the archive for inspection."""
        from feedledger.api.source import ingest_payload

        return ingest_payload(
            self.context,
            source,
            payload,
            published_at=published_at,
            name=name,
            content_type=content_type,
            allow_mass_delete=allow_mass_delete,
            allow_future=allow_future,
        )

    def backfill(
        self,
        source: str | list[str],
        start: date | str,
        end: date | str,
        *,
        notify: bool = False,
        fetch: bool = True,
        allow_mass_delete: bool = False,
        on_plan: OnPlan | None = None,
        progress: OnProgress | None = None,
    ) -> WindowRun | NothingToDo:
        """`source(name).backfill(...)` by name, as the CLI's `backfill` takes it: ONE
        source (several are refused with the reason), bounds as dates or text."""
        from feedledger.api.windows import run_backfill

        return run_backfill(
            self.context,
            source,
            start,
            end,
            notify=notify,
            fetch=fetch,
            allow_mass_delete=allow_mass_delete,
            on_plan=on_plan,
            progress=progress,
        )

    def replay(
        self,
        source: str | list[str],
        start: date | str,
        *,
        notify: bool = False,
        allow_mass_delete: bool = False,
        on_plan: OnReplayPlan | None = None,
        progress: OnProgress | None = None,
    ) -> WindowRun | NothingToDo:
        """`source(name).replay(...)` by name, as the CLI's `replay` takes it."""
        from feedledger.api.windows import run_replay

        return run_replay(
            self.context,
            source,
            start,
            notify=notify,
            allow_mass_delete=allow_mass_delete,
            on_plan=on_plan,
            progress=progress,
        )

    # -- archive ------------------------------------------------------------------------
    def rejected_payloads(self, source: str) -> list[Rejected]:
        """Refused payloads of `source` kept for inspection (`archive list --rejected`;
        the source need not be declared, the store is not opened)."""
        from feedledger.api.archive import rejected

        return rejected(self.context, source)

    def reindex_archive(self) -> Reindexed:
        """Rebuild the store's payload index from the archive alone (`archive reindex`)."""
        from feedledger.api.archive import reindex

        return reindex(self.context)

    def compact_archive(
        self, source: str | None = None, progress: OnArchiveProgress | None = None
    ) -> ArchiveCompacted:
        """Compress the archive's raw payload objects in place, crash-safe (`archive
        compact`; the store is not opened)."""
        from feedledger.api.archive import compact

        return compact(self.context, source, progress)

    def verify_archive(
        self, source: str | None = None, progress: OnArchiveProgress | None = None
    ) -> ArchiveVerified:
        """Read back every archived payload and check its sha256 (`archive verify`)."""
        from feedledger.api.archive import verify

        return verify(self.context, source, progress)

    def review(
        self, run_id: str, *, release: bool = False, retract: bool = False
    ) -> ReviewDecision:
        """Decide on a live run held for review: `release` its notifications, or
        `retract` it (exactly one)."""
        from feedledger.api.review import review

        return review(self.context, run_id, release=release, retract=retract)
