"""Keeping destinations in step with the ledger: the live route and the rebuild.

* Live route: every payload application writes an outbox row in its own transaction;
  each destination keeps a cursor over its source's rows (whatever their notification
  status: a backfill's rows are suppressed as news, not as state). `live` reads the
  keys those rows changed, their CURRENT versions, transforms them and writes them
  through the guard, then moves the cursor -- after the destination acknowledged, so a
  crash repeats (harmlessly: `already_current`) and never loses.
* Rebuild: the manifest's keys in key order, a batch at a time, each key's version AS
  OF the manifest's boundary, through the same guard. The checkpoint records the batch
  as attempted before writing and as acknowledged after the destination committed; a
  crash repeats at most the unacknowledged batches (IN_FLIGHT). A token bucket leaves `live_reserve`
  of `rate` to the live route, which runs between batches; when the live lag exceeds
  the recovery window the rebuild waits for it. `maintenance` instead pauses the live
  route to that destination for the rebuild (its rows wait; nothing is lost).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from sqlalchemy import func, select, text

from feedledger import faults
from feedledger.ledger import destinations as registry
from feedledger.ledger import manifests, sync_state
from feedledger.ledger.schema import applications, outbox
from feedledger.ledger.sync_state import Verdict
from feedledger.model.destination import Destination
from feedledger.model.errors import ConfigError
from feedledger.model.timeutil import now_us
from feedledger.pipeline.context import Context
from feedledger.sync.target import Target
from feedledger.sync.transform import Doc, build, default_doc, load

BATCH = 20_000
IN_FLIGHT = 2  # rebuild batches sent and not yet acknowledged, at most
LIVE_ROWS = 200  # outbox rows per live step

# progress(done, population, live lag seconds)
Progress = Callable[[int, int, float], None]


@dataclass
class SyncReport:
    destination: str
    manifest: str | None
    status: str = "running"
    outcomes: dict[str, int] = field(default_factory=dict)
    checkpoint: dict[str, Any] | None = None
    live_written: int = 0
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "destination": self.destination,
            "manifest": self.manifest,
            "status": self.status,
            "outcomes": self.outcomes,
            "checkpoint": self.checkpoint,
            "live_written": self.live_written,
            "seconds": round(self.seconds, 3),
        }


# -- reading the ledger --------------------------------------------------------------------


class VersionRow(NamedTuple):
    key: str
    attributes: str | None
    revision: str | None
    deleted: bool
    version_id: int
    valid_from: int


def _versions_sql(dialect: str, known_at: int | None, keys: int = 0) -> str:
    """Versions of a key range, in the driver's own parameter style (rows come back as
    plain tuples: on the rebuild's hot path SQLAlchemy's Row objects cost more than
    the query)."""

    def p(name: str) -> str:
        return f"%({name})s" if dialect == "postgresql" else f":{name}"

    visible = (
        "v.retracted_at IS NULL"
        if known_at is None
        else f"v.recorded_at <= {p('k')} AND (v.retracted_at IS NULL OR v.retracted_at > {p('k')})"
    )
    where = (
        f"v.key IN ({', '.join(p(f'k{i}') for i in range(keys))})"
        if keys
        else f"v.key >= {p('lo')} AND v.key <= {p('hi')}"
    )
    return (
        "SELECT v.key, v.attributes, v.revision, v.deleted, v.version_id, v.valid_from "
        f"FROM versions v WHERE v.source = {p('s')} AND {where} AND {visible} "
        "ORDER BY v.key, v.valid_from, v.version_id"
    )


def latest(
    ctx: Context, source: str, keys: Sequence[str], known_at: int | None, *, dense: bool = False
) -> dict[str, Any]:
    """The latest version of each key (valid-time order) visible at `known_at` (None:
    now), as (key, attributes, revision, deleted, version_id, valid_from) tuples; keys
    must be sorted. `dense`: the keys are (nearly) every key of their range -- a
    manifest's batch -- so one range scan reads them; otherwise (the live route's
    scattered keys) they are looked up."""
    if not keys:
        return {}
    wanted = set(keys)
    out: dict[str, Any] = {}
    dialect = ctx.store.dialect
    with ctx.store.engine.connect() as conn:
        if dense:
            parts = [(_versions_sql(dialect, known_at), {"lo": keys[0], "hi": keys[-1]})]
        else:
            parts = [
                (
                    _versions_sql(dialect, known_at, len(chunk)),
                    {f"k{i}": k for i, k in enumerate(chunk)},
                )
                for chunk in (keys[i : i + 500] for i in range(0, len(keys), 500))
            ]
        for sql, params in parts:
            for r in conn.exec_driver_sql(sql, {"s": source, "k": known_at, **params}).all():
                if r[0] in wanted:
                    out[r[0]] = r  # ordered: the last one wins
    return out


class Builder:
    """Docs for one destination: its transform, generation and revision rule."""

    def __init__(self, ctx: Context, dest: Destination, generation: str | None = None) -> None:
        from feedledger.model.destination import generation_rank

        self.transform = load(dest.transform)
        self.generation = generation or dest.generation
        self.rank = generation_rank(self.generation)
        self.use_revision = ctx.workspace.source(dest.source).revision is not None

    def docs(self, rows: dict[str, Any], keys: Sequence[str]) -> tuple[list[Doc], list[Verdict]]:
        docs: list[Doc] = []
        rejected: list[Verdict] = []
        fast = self.transform is None and not self.use_revision
        gen, rank = self.generation, self.rank
        for key in keys:
            row = rows.get(key)
            if row is None:
                rejected.append(
                    Verdict(key, "rejected", None, self.generation, None, "not in the ledger")
                )
                continue
            if fast:
                docs.append(default_doc(row, gen, rank))
                continue
            try:
                docs.append(
                    build(
                        VersionRow(*row),
                        transform=self.transform,
                        generation=self.generation,
                        rank=self.rank,
                        use_revision_field=self.use_revision,
                    )
                )
            except Exception as exc:
                reason = f"transform failed: {type(exc).__name__}: {exc}"
                rejected.append(Verdict(key, "rejected", None, self.generation, None, reason))
        return docs, rejected


# -- the live route -------------------------------------------------------------------------


def live_lag_s(ctx: Context, dest: Destination, now: int | None = None) -> float:
    """Seconds since the oldest ledger commit the destination has not had yet."""
    cursor = registry.cursor(ctx.store, dest.name)
    with ctx.store.engine.connect() as conn:
        oldest = conn.execute(
            select(func.min(outbox.c.created_at)).where(
                outbox.c.source == dest.source,
                outbox.c.topic == "changes",
                outbox.c.outbox_id > cursor,
            )
        ).scalar()
    if oldest is None:
        return 0.0
    return max(0.0, ((now or now_us()) - int(oldest)) / 1e6)


def _changed_keys(ctx: Context, rows: Sequence[Any]) -> list[str]:
    keys: set[str] = set()
    with ctx.store.engine.connect() as conn:
        for row in rows:
            app = conn.execute(
                select(applications.c.first_version_id, applications.c.changes).where(
                    applications.c.run_id == row.run_id,
                    applications.c.payload_id == row.payload_id,
                )
            ).first()
            if app is None or not app.changes:
                continue
            keys.update(
                conn.execute(
                    text("SELECT key FROM versions WHERE version_id >= :a AND version_id < :b"),
                    {"a": app.first_version_id, "b": app.first_version_id + app.changes},
                ).scalars()
            )
    return sorted(keys)


def live_step(ctx: Context, dest: Destination, target: Target, builder: Builder) -> int:
    """Apply the next outbox rows of the destination's source; returns how many keys
    were written through the guard (0: up to date, or paused for maintenance)."""
    current = registry.get(ctx.store, dest.name)
    if current.paused_at is not None:
        return 0
    cursor = registry.cursor(ctx.store, dest.name)
    with ctx.store.engine.connect() as conn:
        rows = conn.execute(
            select(outbox.c.outbox_id, outbox.c.run_id, outbox.c.payload_id)
            .where(
                outbox.c.source == dest.source,
                outbox.c.topic == "changes",
                outbox.c.outbox_id > cursor,
            )
            .order_by(outbox.c.outbox_id)
            .limit(LIVE_ROWS)
        ).all()
    if not rows:
        return 0
    keys = _changed_keys(ctx, rows)
    written = 0
    for start in range(0, len(keys), BATCH):
        part = keys[start : start + BATCH]
        docs, rejected = builder.docs(latest(ctx, dest.source, part, None), part)
        verdicts = target.write(docs)
        sync_state.record(ctx.store, dest.name, "live", verdicts + rejected, now_us())
        written += len(part)
    registry.advance(ctx.store, dest.name, int(rows[-1].outbox_id), now_us())
    return written or 1


def live(ctx: Context, name: str, *, once: bool = True, poll_s: float = 2.0,
         should_stop: Callable[[], bool] = lambda: False) -> SyncReport:  # fmt: skip
    """Drain the live route (once), or keep draining until `should_stop`."""
    dest = registry.get(ctx.store, name)
    report = SyncReport(dest.name, None)
    started = time.perf_counter()
    target = Target(dest)
    try:
        target.ensure()
        builder = Builder(ctx, dest)
        while True:
            while n := live_step(ctx, dest, target, builder):
                report.live_written += n
            if once or should_stop():
                break
            time.sleep(poll_s)
    finally:
        target.close()
    report.status = "up_to_date"
    report.outcomes = sync_state.counts(ctx.store, dest.name, "live")
    report.seconds = time.perf_counter() - started
    return report


# -- the rebuild ------------------------------------------------------------------------------


class TokenBucket:
    """`rate` tokens a second, bursts up to one second's worth."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.tokens = rate
        self.at = time.monotonic()

    def take(self, n: int) -> None:
        while True:
            now = time.monotonic()
            self.tokens = min(self.rate, self.tokens + (now - self.at) * self.rate)
            self.at = now
            if self.tokens >= min(n, self.rate):
                self.tokens -= n
                return
            time.sleep((min(n, self.rate) - self.tokens) / self.rate)


def rebuild(
    ctx: Context,
    name: str,
    manifest_name: str,
    *,
    rate: float | None = None,
    live_reserve: float = 0.3,
    recovery_window_s: float = 60.0,
    maintenance: bool = False,
    progress: Progress | None = None,
    batch: int = BATCH,
) -> SyncReport:
    dest = registry.get(ctx.store, name)
    man = manifests.get(ctx.store, manifest_name)
    if man.source != dest.source:
        raise ConfigError(
            f"manifest {man.name} is a population of source {man.source}, but destination "
            f"{dest.name} projects source {dest.source}",
            hint="create a manifest of the destination's source",
        )
    report = SyncReport(dest.name, man.name)
    started = time.perf_counter()
    target = Target(dest)
    target.ensure()
    builder = Builder(ctx, dest, man.generation)
    live_builder = Builder(ctx, dest)
    bucket = TokenBucket(rate * (1 - live_reserve)) if rate else None
    store = ctx.store
    cp = sync_state.start(store, dest.name, man.manifest_id, now_us())
    done = 0 if cp.acknowledged_key is None else _done(ctx, man.manifest_id, cp.acknowledged_key)
    if maintenance:
        registry.set_paused(store, dest.name, now_us())
    # A pipeline of three: this thread reads and transforms batch i+1 while a writer
    # thread sends batch i through the guard (the driver waits without the GIL) and a
    # recorder thread records batch i-1's verdicts with its checkpoint (one ledger
    # commit). Batches are acknowledged in order, at most IN_FLIGHT sent and not yet
    # acknowledged: a crash repeats those (harmlessly: the guard answers
    # already_current).
    writer = ThreadPoolExecutor(1, thread_name_prefix="destination-write")
    recorder = ThreadPoolExecutor(1, thread_name_prefix="destination-record")
    pending: deque[tuple[list[str], Future[None]]] = deque()

    def send(docs: list[Doc]) -> list[Verdict]:
        try:
            return target.write(docs)
        except Exception as exc:
            # sent, answer unknown: unresolved until the batch is repeated
            reason = f"uncertain: the destination did not acknowledge: {exc}"
            unsure = [Verdict(d.key, "unresolved", d.revision, d.generation,
                              d.content_hash, reason) for d in docs]  # fmt: skip
            sync_state.record(store, dest.name, man.manifest_id, unsure, now_us())
            raise

    broken: list[BaseException] = []  # a batch failed: no later one is acknowledged

    def acknowledge(n: int, keys: list[str], sent: Future[list[Verdict]],
                    rejected: list[Verdict]) -> None:  # fmt: skip
        if broken:
            raise RuntimeError(f"batch {n} not acknowledged: an earlier batch failed")
        try:
            verdicts = sent.result()
        except BaseException as exc:
            broken.append(exc)
            raise
        faults.point("after_destination_write", n)
        sync_state.record(store, dest.name, man.manifest_id, verdicts + rejected, now_us(),
                          acknowledged=keys[-1])  # fmt: skip
        faults.point("after_checkpoint", n)

    def settle(room: int) -> None:
        nonlocal done
        while len(pending) > room:
            keys, fut = pending.popleft()
            fut.result()
            done += len(keys)
            if progress:
                progress(done, man.population, lag)

    lag = 0.0
    try:
        after = cp.acknowledged_key
        n = 0
        while keys := manifests.keys(store, man.manifest_id, after, batch):
            n += 1
            if bucket is not None:
                bucket.take(len(keys))
            lag = _serve_live(ctx, dest, target, live_builder, recovery_window_s, maintenance)
            rows = latest(ctx, dest.source, keys, man.created_at, dense=True)
            docs, rejected = builder.docs(rows, keys)
            settle(IN_FLIGHT - 1)
            sync_state.mark(store, dest.name, man.manifest_id, now_us(), attempted=keys[-1])
            faults.point("before_destination_write", n)
            sent = writer.submit(send, docs)
            pending.append((keys, recorder.submit(acknowledge, n, keys, sent, rejected)))
            after = keys[-1]
        settle(0)
        sync_state.mark(store, dest.name, man.manifest_id, now_us(), finished=True)
        report.status = "finished"
    finally:
        writer.shutdown(wait=True)
        recorder.shutdown(wait=True)
        if maintenance:
            registry.set_paused(store, dest.name, None)
    while n := live_step(ctx, dest, target, live_builder):  # what waited, or came meanwhile
        report.live_written += n
    target.close()
    report.outcomes = sync_state.counts(store, dest.name, man.manifest_id)
    got = sync_state.checkpoint(store, dest.name, man.manifest_id)
    report.checkpoint = got.to_json() if got else None
    report.seconds = time.perf_counter() - started
    return report


def _done(ctx: Context, manifest_id: str, acknowledged: str) -> int:
    from feedledger.ledger.schema import manifest_keys

    with ctx.store.engine.connect() as conn:
        return int(
            conn.execute(
                select(func.count()).where(
                    manifest_keys.c.manifest_id == manifest_id, manifest_keys.c.key <= acknowledged
                )
            ).scalar_one()
        )


def _serve_live(
    ctx: Context,
    dest: Destination,
    target: Target,
    builder: Builder,
    window_s: float,
    maintenance: bool,
) -> float:
    """Between two rebuild batches: one live step here; while the live lag exceeds the
    recovery window, live steps (or, a live route run elsewhere, waiting) come first."""
    if maintenance:
        return 0.0
    live_step(ctx, dest, target, builder)
    lag = live_lag_s(ctx, dest)
    while lag > window_s and registry.get(ctx.store, dest.name).paused_at is None:
        if not live_step(ctx, dest, target, builder):
            time.sleep(0.2)
        lag = live_lag_s(ctx, dest)
    return lag
