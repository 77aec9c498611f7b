"""What the scheduler remembers of each source between its runs (`schedule_state`):
attempts and their backoff, the last successful fetch, and which alert episodes are
open. An episode opens with a conditional update (`... WHERE <column> IS NULL`), in the
transaction that queues its notice, so however many scheduler processes notice the
same condition, subscribers hear of it once; closing it works the same way."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, select, update

from feedledger.ledger import notices
from feedledger.ledger.schema import observations, schedule_state
from feedledger.ledger.store import Store
from feedledger.model.timeutil import iso

EPISODES = ("stale_alerted_at", "failure_alerted_at", "hold_alerted_at")


@dataclass(frozen=True)
class State:
    source: str
    first_attempt_at: int | None = None
    last_attempt_at: int | None = None
    last_success_at: int | None = None
    last_outcome: str | None = None
    last_error: str | None = None
    failures: int = 0
    next_attempt_at: int | None = None
    stale_alerted_at: int | None = None
    failure_alerted_at: int | None = None
    hold_alerted_at: int | None = None
    observed_at: int | None = None
    observed_published_at: int | None = None
    date_problem: str | None = None


def _state(row: Any) -> State:
    return State(**{c.name: getattr(row, c.name) for c in schedule_state.columns})


def get(store: Store, source: str) -> State:
    with store.engine.connect() as conn:
        row = conn.execute(select(schedule_state).where(schedule_state.c.source == source)).first()
    return _state(row) if row is not None else State(source)


def _ensure(conn: Connection, source: str) -> None:
    """The source's row, created if missing. Schedulers race to create it (a new source's
    first attempts): the INSERT does nothing where another process's row came first --
    a plain INSERT after the check failed the loser's attempt record on PostgreSQL."""
    exists = conn.execute(
        select(schedule_state.c.source).where(schedule_state.c.source == source)
    ).first()
    if exists is None:
        if conn.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as dialect_insert  # lazy
        else:
            from sqlalchemy.dialects.sqlite import insert as dialect_insert  # type: ignore[assignment]  # lazy
        conn.execute(
            dialect_insert(schedule_state)
            .values(source=source, failures=0)
            .on_conflict_do_nothing()
        )


def attempted(
    store: Store,
    source: str,
    *,
    at: int,
    outcome: str,
    success: bool,
    failed: bool | None = None,
    error: str | None = None,
    next_attempt_at: int | None = None,
) -> State:
    """Record one attempt. `success`: it got the expected publication, or observed the
    source (`last_success_at`). `failed` (default: not `success`): it failed, one more
    of the consecutive failures; any other attempt -- a success, or a near miss (the
    publisher has nothing new yet: not a failure, invariant 12) -- resets that count."""
    if failed is None:
        failed = not success
    with store.begin() as conn:
        _ensure(conn, source)
        row = conn.execute(select(schedule_state).where(schedule_state.c.source == source)).one()
        values: dict[str, Any] = {
            "last_attempt_at": at,
            "last_outcome": outcome,
            "last_error": error,
            "next_attempt_at": next_attempt_at,
            "failures": int(row.failures) + 1 if failed else 0,
        }
        if row.first_attempt_at is None:
            values["first_attempt_at"] = at
        if success:
            values["last_success_at"] = at
        conn.execute(
            update(schedule_state).where(schedule_state.c.source == source).values(**values)
        )
        new = conn.execute(select(schedule_state).where(schedule_state.c.source == source)).one()
    return _state(new)


def observed(
    store: Store, source: str, *, at: int, published_at: int | None, held_since: int | None
) -> None:
    """A fetch at `at` succeeded (applied, or found nothing new): the source was
    observed (invariant 12). `observed_at` only moves forward (two processes may record
    theirs in any order: each was true when it was made); the publisher date stated
    then is kept and any open date problem is cleared. `held_since`: the publisher
    date of the state found (the watermark's on an HTTP 304), which held until `at`
    (the `observations` span; extended, never shortened)."""
    with store.begin() as conn:
        _ensure(conn, source)
        if held_since is not None and held_since <= at:
            _extend(store, conn, source, held_since, at)
        col = schedule_state.c.observed_at
        values: dict[str, Any] = {"observed_at": at, "date_problem": None}
        if published_at is not None:  # an HTTP 304 states none: the last one stays
            values["observed_published_at"] = published_at
        conn.execute(
            update(schedule_state)
            .where(schedule_state.c.source == source, (col.is_(None)) | (col <= at))
            .values(**values)
        )


def _extend(store: Store, conn: Connection, source: str, since: int, until: int) -> None:
    """The span of the state dated `since` reaches `until` at least."""
    key = (observations.c.source == source) & (observations.c.published_at == since)
    conn.execute(
        store._insert_new(observations).values(
            source=source, published_at=since, observed_until=until
        )
    )
    conn.execute(
        update(observations)
        .where(key, observations.c.observed_until < until)
        .values(observed_until=until)
    )


def observed_spans(store: Store, source: str) -> list[tuple[int, int]]:
    """The spans [publisher date, observed until] the source's fetches observed."""
    with store.engine.connect() as conn:
        rows = conn.execute(
            select(observations.c.published_at, observations.c.observed_until)
            .where(observations.c.source == source)
            .order_by(observations.c.published_at)
        )
        return [(int(a), int(b)) for a, b in rows]


def date_problem(store: Store, source: str, *, problem: str, published_at: int | None) -> None:
    """The publisher's date is wrong (ahead of the clock, or gone back before the
    watermark with other content): kept, one line, until a good fetch clears it."""
    with store.begin() as conn:
        _ensure(conn, source)
        conn.execute(
            update(schedule_state)
            .where(schedule_state.c.source == source)
            .values(date_problem=problem, observed_published_at=published_at)
        )


def open_episode(conn: Connection, source: str, column: str, at: int) -> bool:
    """Mark the episode open; True if this call opened it (then announce it)."""
    assert column in EPISODES
    _ensure(conn, source)
    col = schedule_state.c[column]
    result = conn.execute(
        update(schedule_state)
        .where(schedule_state.c.source == source, col.is_(None))
        .values({column: at})
    )
    return bool(result.rowcount)


def close_episode(conn: Connection, source: str, column: str) -> int | None:
    """Close the episode; returns when it opened if this call closed it (announce the
    recovery), else None."""
    assert column in EPISODES
    col = schedule_state.c[column]
    row = conn.execute(
        select(col).where(schedule_state.c.source == source, col.is_not(None))
    ).first()
    if row is None:
        return None
    result = conn.execute(
        update(schedule_state)
        .where(schedule_state.c.source == source, col == row[0])
        .values({column: None})
    )
    return int(row[0]) if result.rowcount else None


def alert_episode(
    store: Store,
    source: str,
    column: str,
    topic: str,
    *,
    active: bool,
    now: int,
    opened_body: dict[str, Any],
    cleared_body: dict[str, Any],
) -> str | None:
    """In one transaction: open the alert episode `column` when `active` and queue its
    notice `topic`, or close an open one and queue `TOPIC_cleared` (with `since`);
    returns the topic queued, if any. Each episode's notice is keyed by its start."""
    with store.begin() as conn:
        if active:
            if open_episode(conn, source, column, now):
                _episode_notice(conn, source, topic, now, now, opened_body)
                return topic
            return None
        opened = close_episode(conn, source, column)
        if opened is None:
            return None
        body = {**cleared_body, "since": iso(opened)}
        _episode_notice(conn, source, f"{topic}_cleared", opened, now, body)
        return f"{topic}_cleared"


def _episode_notice(
    conn: Connection, source: str, topic: str, episode: int, now: int, body: Any
) -> None:
    notices.queue(
        conn,
        source=source,
        run_id=f"episode-{episode}",
        topic=topic,
        payload_id="",
        changes=0,
        body=body,
        at_us=now,
        key=f"{source}:{topic}:{episode}",
    )
