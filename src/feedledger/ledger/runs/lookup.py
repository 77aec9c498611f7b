"""The `runs` table read: a source's runs, one run with its retraction, runs across
sources a page at a time (the HTTP API's runs page), held counts, and run ids as people
type them.

Run ids as people type them (`resolve_id`): the whole id or any unique prefix (as git
takes hashes). Tables show run ids cut short; every command that takes a RUN_ID resolves
it here, so what a table shows can be typed back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, and_, exists, func, or_, select

from feedledger.ledger.records import Run
from feedledger.ledger.schema import applications, gaps, runs
from feedledger.model.errors import ConfigError, NotFoundError

if TYPE_CHECKING:
    from feedledger.ledger.store import Store


@dataclass(frozen=True, slots=True)
class RunName:
    """A run as an ambiguous run-id prefix lists it."""

    run_id: str
    source: str
    kind: str


def _run(r: Any) -> Run:
    return Run(
        run_id=r.run_id,
        source=r.source,
        kind=r.kind,
        status=r.status,
        started_at=r.started_at,
        finished_at=r.finished_at,
        payloads=r.payloads,
        changes=r.changes,
        holder=r.holder,
        parent_run_id=r.parent_run_id,
        error=r.error,
        window_start=r.window_start,
        window_end=r.window_end,
        resumptions=r.resumptions,
    )


def list_runs(store: Store, source: str) -> list[Run]:
    """The source's runs, oldest first."""
    stmt = select(runs).where(runs.c.source == source).order_by(runs.c.started_at)
    with store.engine.connect() as conn:
        return with_retractions(conn, [_run(r) for r in conn.execute(stmt)])


def get_run(store: Store, run_id: str) -> Run | None:
    with store.engine.connect() as conn:
        row = conn.execute(select(runs).where(runs.c.run_id == run_id)).first()
    return _run(row) if row is not None else None


def get_run_shown(store: Store, run_id: str) -> Run | None:
    """`get_run` with the run's retraction (`with_retractions`), as pages show it."""
    with store.engine.connect() as conn:
        row = conn.execute(select(runs).where(runs.c.run_id == run_id)).first()
        return with_retractions(conn, [_run(row)])[0] if row is not None else None


def with_retractions(conn: Connection, found: list[Run]) -> list[Run]:
    """`found` with each run's retraction: `retracted_at` when everything it wrote (its
    applications and gap records) is retracted, the latest retraction's time; and
    `retracted_by`, the runs that retracted any of it (a replay may retract part of a
    backfill), in the order they did."""
    ids = [r.run_id for r in found]
    # run id -> [(retracted_by or None, rows, latest retracted_at)]
    groups: dict[str, list[tuple[str | None, int, int | None]]] = {}
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        for table in (applications, gaps):
            stmt = (
                select(
                    table.c.run_id,
                    table.c.retracted_by,
                    func.count(),
                    func.max(table.c.retracted_at),
                )
                .where(table.c.run_id.in_(chunk))
                .group_by(table.c.run_id, table.c.retracted_by)
            )
            for run_id, by, n, at in conn.execute(stmt):
                groups.setdefault(run_id, []).append((by, int(n), at))
    out = []
    for r in found:
        got = groups.get(r.run_id, [])
        hit = sorted((int(at or 0), by) for by, _n, at in got if by is not None)
        by_runs = tuple(dict.fromkeys(by for _at, by in hit))
        whole = bool(got) and all(by is not None for by, _n, _at in got)
        at_us = max(at for at, _by in hit) if whole and hit else None
        out.append(replace(r, retracted_at=at_us, retracted_by=by_runs) if got else r)
    return out


def run_exists(store: Store, run_id: str) -> bool:
    with store.engine.connect() as conn:
        found = conn.execute(select(runs.c.run_id).where(runs.c.run_id == run_id)).first()
    return found is not None


def with_prefix(store: Store, prefix: str, limit: int) -> list[RunName]:
    """Up to `limit` runs whose id starts with `prefix` (letters, digits and '-' only:
    no LIKE wildcard), oldest first."""
    stmt = (
        select(runs.c.run_id, runs.c.source, runs.c.kind)
        .where(runs.c.run_id.like(prefix + "%"))
        .order_by(runs.c.started_at, runs.c.run_id)
        .limit(limit)
    )
    with store.engine.connect() as conn:
        return [RunName(r.run_id, r.source, r.kind) for r in conn.execute(stmt)]


def recent_change_counts(store: Store, source: str, limit: int = 30) -> list[int]:
    """Change counts of the source's last `limit` finished live runs, newest first."""
    stmt = (
        select(runs.c.changes)
        .where(
            runs.c.source == source,
            runs.c.kind == "live",
            runs.c.status.in_(("succeeded", "held")),
        )
        .order_by(runs.c.started_at.desc())
        .limit(limit)
    )
    with store.engine.connect() as conn:
        return [int(r.changes) for r in conn.execute(stmt)]


def held_count(conn: Connection, source: str) -> int:
    """How many of the source's runs are held for review."""
    stmt = select(func.count()).where(runs.c.source == source, runs.c.status == "held")
    return int(conn.execute(stmt).scalar_one())


def held_counts(conn: Connection, sources: list[str]) -> dict[str, int]:
    """How many runs of each of `sources` are held for review (sources with none are
    left out), in one statement."""
    stmt = (
        select(runs.c.source, func.count())
        .where(runs.c.source.in_(sources), runs.c.status == "held")
        .group_by(runs.c.source)
    )
    return {str(source): int(n) for source, n in conn.execute(stmt)}


def page(
    store: Store,
    *,
    sources: list[str] | None,
    kind: str | None,
    status: str | None,
    after: tuple[int, str] | None,
    limit: int,
) -> list[Run]:
    """Runs across sources, newest first, a page at a time (the HTTP API's `/api/runs`):
    up to `limit` runs older than `after` ((started_at, run_id) of the last run of the
    previous page), of `sources` (None: all), of `kind` and `status` (`retracted`: also
    the runs shown as retracted, every write of theirs retracted, as `with_retractions`
    judges). Keyset paging on (started_at, run_id), so a page is stable while runs are
    added."""
    stmt = select(runs)
    if sources is not None:
        stmt = stmt.where(runs.c.source.in_(sources))
    if kind is not None:
        stmt = stmt.where(runs.c.kind == kind)
    if status == "retracted":
        stmt = stmt.where(or_(runs.c.status == status, _wholly_retracted()))
    elif status is not None:
        stmt = stmt.where(runs.c.status == status)
    if after is not None:
        started, run_id = after
        stmt = stmt.where(
            or_(
                runs.c.started_at < started,
                and_(runs.c.started_at == started, runs.c.run_id < run_id),
            )
        )
    stmt = stmt.order_by(runs.c.started_at.desc(), runs.c.run_id.desc()).limit(limit)
    with store.engine.connect() as conn:
        return with_retractions(conn, [_run(r) for r in conn.execute(stmt)])


def _wholly_retracted() -> Any:
    """A run wrote something (an application or a gap record) and all of it is retracted
    (`with_retractions`' `retracted_at` not null), as an SQL condition on `runs`."""
    wrote = [exists().where(t.c.run_id == runs.c.run_id) for t in (applications, gaps)]
    stands = [
        exists().where(t.c.run_id == runs.c.run_id, t.c.retracted_by.is_(None))
        for t in (applications, gaps)
    ]
    return and_(or_(*wrote), *[~x for x in stands])


def retracted_by(store: Store, run_id: str) -> list[tuple[str, int]]:
    """(run id, started_at) of the retraction runs whose parent is `run_id`."""
    stmt = (
        select(runs.c.run_id, runs.c.started_at)
        .where(runs.c.parent_run_id == run_id, runs.c.kind == "retraction")
        .order_by(runs.c.started_at)
    )
    with store.engine.connect() as conn:
        return [(r.run_id, int(r.started_at)) for r in conn.execute(stmt)]


def kinds_and_statuses(conn: Connection, run_ids: list[str]) -> dict[str, tuple[str, str]]:
    """run id -> (kind, status) of the given runs."""
    found: dict[str, tuple[str, str]] = {}
    for start in range(0, len(run_ids), 500):
        chunk = run_ids[start : start + 500]
        stmt = select(runs.c.run_id, runs.c.kind, runs.c.status).where(runs.c.run_id.in_(chunk))
        found.update({r.run_id: (r.kind, r.status) for r in conn.execute(stmt)})
    return found


_SHOWN = 10  # matches named in an "ambiguous" error
_PREFIX = re.compile(r"^[0-9A-Za-z-]+$")


def resolve_id(store: Store, text: str) -> str:
    """The full run id `text` names: itself, or the one run id it is a prefix of.

    Unknown: NotFoundError (exit 3). A prefix of several: ConfigError (exit 2) listing
    the matches (source, kind, run id) so the user can pick one."""
    wanted = text.strip()
    if not wanted or not _PREFIX.match(wanted):
        raise NotFoundError(
            f"unknown run id {text!r}", hint="list runs with `feedledger runs SOURCE`"
        )
    if run_exists(store, wanted):
        return wanted
    # run ids are letters, digits and '-': no LIKE wildcard can occur in the prefix
    rows = with_prefix(store, wanted.lower(), _SHOWN + 1)
    if not rows:
        raise NotFoundError(
            f"unknown run id {text!r}", hint="list runs with `feedledger runs SOURCE`"
        )
    if len(rows) == 1:
        return str(rows[0].run_id)
    named = ", ".join(f"{r.run_id} ({r.source} {r.kind})" for r in rows[:_SHOWN])
    more = " and more" if len(rows) > _SHOWN else ""
    raise ConfigError(
        f"run id prefix {text!r} is ambiguous: it matches {named}{more}",
        hint="give more characters of the run id",
    )
