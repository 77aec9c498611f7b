"""Deprecated aliases (they go in the next release, docs/api.md): the module-level
calls of the runs pages, now `Ledger`'s methods. What the pages are: `api/runs/pages.py`."""

from __future__ import annotations

from typing import Any

from feedledger.api._deprecated import deprecated
from feedledger.api.runs.pages import ChangesPage, RunDetail, RunsPage
from feedledger.model.types import RunKind, RunStatus


# -- deprecated: the Ledger's methods (`led` typed loosely so that this module does not
# import the one that imports it) -----------------------------------------------------
def runs_page(
    led: Any,
    *,
    source: str | None = None,
    kind: str | RunKind | None = None,
    status: str | RunStatus | None = None,
    limit: int = 50,
    cursor: str | None = None,
) -> RunsPage:
    """Deprecated: `led.runs_page(source=, kind=, status=, limit=, cursor=)`."""
    deprecated("feedledger.api.runs_page.runs_page(led, ...)", "led.runs_page(...)")
    found: RunsPage = led.runs_page(
        source=source, kind=kind, status=status, limit=limit, cursor=cursor
    )
    return found


def run_detail(led: Any, run_id: str) -> RunDetail:
    """Deprecated: `led.run_detail(run_id)`."""
    deprecated("feedledger.api.runs_page.run_detail(led, run_id)", "led.run_detail(run_id)")
    found: RunDetail = led.run_detail(run_id)
    return found


def changes_page(
    led: Any, run_id: str, *, limit: int = 200, cursor: str | None = None
) -> ChangesPage:
    """Deprecated: `led.changes_page(run_id, limit=, cursor=)`."""
    deprecated("feedledger.api.runs_page.changes_page(led, run_id, ...)", "led.changes_page(...)")
    found: ChangesPage = led.changes_page(run_id, limit=limit, cursor=cursor)
    return found
