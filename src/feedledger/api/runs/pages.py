"""Runs by id: a run id from a unique prefix, runs across sources a page at a time, one
run's whole picture (its notices, retraction state, write audit) and its changes a page
at a time -- what `Ledger.resolve_run`, `runs_page`, `run_detail` and `changes_page`
answer (the HTTP API's `/api/runs...`). Cursors are opaque texts (URL-safe base64 JSON)."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from feedledger.api.results import Change, Run, plain
from feedledger.api.runs import audit
from feedledger.api.runs.audit import AuditEntry
from feedledger.context import Context
from feedledger.model.errors import ConfigError, FeedledgerError, NotFoundError
from feedledger.model.timeutil import from_us, iso, to_us
from feedledger.model.types import RunKind, RunStatus

MAX_LIMIT = 1000


def encode_cursor(value: Any) -> str:
    text = json.dumps(value, separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def decode_cursor(cursor: str, what: str = "cursor") -> Any:
    """A cursor given back (ConfigError if it is not one of ours)."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        return json.loads(base64.urlsafe_b64decode(padded.encode()).decode())
    except (ValueError, UnicodeError):
        raise ConfigError(f"{what} {cursor!r} is not a cursor this server gave") from None


def check_limit(limit: int) -> int:
    if not 1 <= limit <= MAX_LIMIT:
        raise ConfigError(f"limit {limit} out of range: 1 to {MAX_LIMIT}")
    return limit


@dataclass(frozen=True)
class RunsPage:
    """Runs newest first (by start, then id); `next_cursor` None on the last page."""

    runs: list[Run]
    next_cursor: str | None

    def to_json(self) -> dict[str, Any]:
        return {"runs": [r.to_json() for r in self.runs], "next_cursor": self.next_cursor}


def resolve_run(ctx: Context, run_id: str) -> str:
    """`Ledger.resolve_run`: a whole run id from any unique prefix."""
    from feedledger.ledger.runs import lookup  # lazy: SQLAlchemy, Arrow

    return lookup.resolve_id(ctx.store, run_id)


def is_geo_run(ctx: Context, run_id: str) -> bool:
    """Whether the run's source is a GIS one (its changes say `geometry_changed`)."""
    from feedledger.ledger.runs.lookup import get_run  # lazy: SQLAlchemy, Arrow

    found = get_run(ctx.store, run_id)
    if found is None:
        return False
    try:
        return ctx.workspace.source(found.source).is_geo
    except FeedledgerError:  # a source since removed from the workspace
        return False


def read_runs_page(
    ctx: Context,
    *,
    source: str | None = None,
    kind: str | RunKind | None = None,
    status: str | RunStatus | None = None,
    limit: int = 50,
    cursor: str | None = None,
) -> RunsPage:
    """`Ledger.runs_page`: a page of runs (of `source`, `kind` and `status` when given)
    after `cursor`."""
    from feedledger.ledger.runs import lookup as pages  # lazy: SQLAlchemy, Arrow

    if source is not None:
        ctx.workspace.source(source)  # SourceNotFound
    kind_value = _enum(RunKind, kind, "kind")
    status_value = _enum(RunStatus, status, "status")
    after: tuple[int, str] | None = None
    if cursor:
        found = decode_cursor(cursor)
        if not (isinstance(found, list) and len(found) == 2 and isinstance(found[0], int)):
            raise ConfigError(f"cursor {cursor!r} is not a cursor this server gave")
        after = (found[0], str(found[1]))
    limit = check_limit(limit)
    rows = pages.page(
        ctx.store,
        sources=None if source is None else [source],
        kind=kind_value,
        status=status_value,
        after=after,
        limit=limit + 1,
    )
    more = len(rows) > limit
    rows = rows[:limit]
    nxt = encode_cursor([rows[-1].started_at, rows[-1].run_id]) if more and rows else None
    return RunsPage([Run.of(r) for r in rows], nxt)


def _enum(kind: Any, value: Any, what: str) -> str | None:
    if value is None or value == "":
        return None
    try:
        return str(kind(value).value)
    except ValueError:
        allowed = ", ".join(m.value for m in kind)
        raise ConfigError(f"unknown run {what} {value!r} (one of {allowed})") from None


@dataclass(frozen=True)
class RunNotice:
    """A notice the run queued (change set, summary, retraction, correction...), its
    status in the outbox (pending, held, cancelled, fanned out...) and, once fanned
    out, its messages per subscriber by delivery status (delivered, pending, dead...)."""

    outbox_id: int
    topic: str
    status: str
    changes: int
    created_at: datetime
    body: dict[str, Any]
    deliveries: dict[str, dict[str, int]]  # subscriber -> delivery status -> messages

    def to_json(self) -> dict[str, Any]:
        return {
            "outbox_id": self.outbox_id,
            "topic": self.topic,
            "status": self.status,
            "changes": self.changes,
            "created_at": iso(to_us(self.created_at)),
            "body": self.body,
            "deliveries": self.deliveries,
        }


@dataclass(frozen=True)
class RunDetail:
    """One run: its row, whether its writes still stand (`retracted`, by which runs),
    its notices and the writes made on it over the HTTP API."""

    run: Run
    retracted: bool
    retracted_by: list[str]
    notices: list[RunNotice]
    audit: list[AuditEntry]

    def to_json(self) -> dict[str, Any]:
        return {
            **self.run.to_json(),
            "retracted": self.retracted,
            "retracted_by": self.retracted_by,
            "notices": [n.to_json() for n in self.notices],
            "audit": [a.to_json() for a in self.audit],
        }


def read_run_detail(ctx: Context, run_id: str) -> RunDetail:
    """`Ledger.run_detail`: the run `run_id` (or a unique prefix; NotFoundError if none)."""
    from feedledger.ledger.runs import lookup  # lazy: SQLAlchemy, Arrow
    from feedledger.ledger.views import run_page as run_view  # lazy: SQLAlchemy, Arrow
    from feedledger.notify.run_deliveries import by_notice  # lazy: SQLAlchemy, Arrow

    whole = resolve_run(ctx, run_id)
    store = ctx.store
    found = lookup.get_run_shown(store, whole)
    if found is None:
        raise NotFoundError(f"no run {run_id!r}")
    by = [r for r, _at in lookup.retracted_by(store, whole)]
    by += [r for r in found.retracted_by if r not in by]
    retracted = found.status == RunStatus.RETRACTED or bool(by)
    rows = run_view.notices(store, whole)
    sent = by_notice(store, [n.outbox_id for n in rows])
    notices = [
        RunNotice(
            n.outbox_id, n.topic, n.status, n.changes, from_us(n.created_at), n.body,
            sent.get(n.outbox_id, {}),
        )
        for n in rows
    ]  # fmt: skip
    return RunDetail(Run.of(found), retracted, by, notices, audit.entries(ctx, run_id=whole))


@dataclass(frozen=True)
class ChangesPage:
    """A run's changes (then the records it did not apply: `outcome` unresolved or
    superseded), `limit` at a time; each item is `Change.to_json()`."""

    run_id: str
    changes: list[Change]
    next_cursor: str | None
    total: int

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "total": self.total,
            "changes": plain([c.to_json() for c in self.changes]),
            "next_cursor": self.next_cursor,
        }


def read_changes_page(
    ctx: Context, run_id: str, *, limit: int = 200, cursor: str | None = None
) -> ChangesPage:
    """`Ledger.changes_page`: a page of `Ledger.changes(run_id)`, in its order (the
    changes, then the held records), read after the cursor's keyset bound: a page costs
    its own rows."""
    from feedledger.ledger.views import run_page as pages  # lazy: SQLAlchemy, Arrow

    whole = resolve_run(ctx, run_id)
    limit = check_limit(limit)
    phase, after = "c", None
    if cursor:
        found = decode_cursor(cursor)
        ok = (
            isinstance(found, list)
            and len(found) == 3
            and found[0] in ("c", "o")
            and isinstance(found[1], int)
            and isinstance(found[2], str)
        )
        if not ok:
            raise ConfigError(f"cursor {cursor!r} is not a cursor this server gave")
        phase, after = found[0], (found[1], found[2])
    store = ctx.store
    geo = is_geo_run(ctx, whole)
    n_changes, n_held = pages.count(store, whole)
    items: list[Change] = []
    last: list[Any] | None = None
    if phase == "c":
        got = pages.changes(store, whole, after, limit + 1, geo=geo)
        items = [Change.of(c) for c in got[:limit]]
        if got:
            tail = got[:limit][-1]
            last = ["c", tail.valid_from, tail.key]
        if len(got) > limit:
            return ChangesPage(whole, items, encode_cursor(last), n_changes + n_held)
        phase, after = "o", None
    room = limit - len(items)
    if room > 0:
        got_o = pages.held(store, whole, after, room + 1, geo=geo)
        items += [Change.held(o) for o in got_o[:room]]
        if len(got_o) > room:
            tail_o = got_o[:room][-1]
            last = ["o", tail_o.valid_from, tail_o.key]
            return ChangesPage(whole, items, encode_cursor(last), n_changes + n_held)
        return ChangesPage(whole, items, None, n_changes + n_held)
    # the page is full of changes and none are left: the held records may follow
    nxt = encode_cursor(["o", -(2**62), ""]) if n_held else None
    return ChangesPage(whole, items, nxt, n_changes + n_held)
