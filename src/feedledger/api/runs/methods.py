"""Runs by id, `Ledger`'s methods on them (api/ledger.py): a whole run id from any
unique prefix, what a run changed, its retraction and review, the runs and changes
pages of the HTTP API, and the write audit about a run or a source."""

from __future__ import annotations

from typing import Any

from feedledger.api.results import Change, Retraction
from feedledger.api.runs import audit, pages, review
from feedledger.api.runs.audit import AuditEntry
from feedledger.api.runs.pages import ChangesPage, RunDetail, RunsPage
from feedledger.api.runs.review import ReviewDecision
from feedledger.context import Context
from feedledger.model.types import RunKind, RunStatus


class RunMethods:
    """`Ledger.resolve_run`, `changes`, `retract`, `review`, `runs_page`, `run_detail`,
    `changes_page`, `record_write`, `audit_entries`."""

    context: Context

    def resolve_run(self, run_id: str) -> str:
        """A whole run id from any unique prefix (ConfigError if ambiguous)."""
        return pages.resolve_run(self.context, run_id)

    def changes(self, run_id: str) -> list[Change]:
        """What a run changed (added/changed/deleted, before and after), then the records
        it did not apply (`outcome` unresolved or superseded)."""
        from feedledger.ledger import queries  # lazy: SQLAlchemy, Arrow

        run = self.resolve_run(run_id)
        store = self.context.store
        geo = pages.is_geo_run(self.context, run)
        return [Change.of(c) for c in queries.changes(store, run, geo=geo)] + [
            Change.held(o) for o in queries.run_outcomes(store, run, geo=geo)
        ]

    def retract(self, run_id: str, *, cascade: bool = False) -> Retraction:
        """Retract everything a run wrote, as a run of kind `retraction`
        (RetractConflictError if later runs depend on it, unless `cascade`)."""
        from feedledger.pipeline.retract import retract_run  # lazy: SQLAlchemy, Arrow

        run = self.resolve_run(run_id)
        return Retraction.of(retract_run(self.context, run, cascade=cascade))

    def review(
        self, run_id: str, *, release: bool = False, retract: bool = False
    ) -> ReviewDecision:
        """Decide on a live run held for review: `release` its notifications, or
        `retract` it (exactly one)."""
        return review.review(self.context, run_id, release=release, retract=retract)

    def runs_page(
        self,
        *,
        source: str | None = None,
        kind: str | RunKind | None = None,
        status: str | RunStatus | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> RunsPage:
        """A page of runs across sources, newest first (of `source`, `kind` and `status`
        when given) after `cursor` (the HTTP API's `/api/runs`)."""
        return pages.read_runs_page(
            self.context, source=source, kind=kind, status=status, limit=limit, cursor=cursor
        )

    def run_detail(self, run_id: str) -> RunDetail:
        """One run's whole picture: its row, retraction, notices and write audit (a
        unique prefix will do; NotFoundError if none)."""
        return pages.read_run_detail(self.context, run_id)

    def changes_page(
        self, run_id: str, *, limit: int = 200, cursor: str | None = None
    ) -> ChangesPage:
        """A page of `changes(run_id)`, in its order, after `cursor`."""
        return pages.read_changes_page(self.context, run_id, limit=limit, cursor=cursor)

    # -- the write audit ------------------------------------------------------------------
    def record_write(
        self,
        *,
        actor: str,
        action: str,
        source: str | None = None,
        run_id: str | None = None,
        detail: Any = None,
    ) -> AuditEntry:
        """Append an entry to the write audit (its own transaction): who (`actor`, a
        token's label), what, on which run or source, and `detail` (JSON)."""
        return audit.record(
            self.context, actor=actor, action=action, source=source, run_id=run_id, detail=detail
        )

    def audit_entries(
        self, *, run_id: str | None = None, source: str | None = None
    ) -> list[AuditEntry]:
        """The write audit's entries about a run or a source (either matches), oldest
        first."""
        return audit.entries(self.context, run_id=run_id, source=source)
