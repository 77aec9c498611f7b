"""Keeping destinations in step with the ledger: the live route, and what it shares
with the rebuild (sync/rebuild.py): reading versions, building documents.

* Live route: every payload application writes an outbox row in its own transaction;
  each destination keeps a cursor over its source's rows (whatever their notification
  status: a backfill's rows are suppressed as news, not as state). `live` reads the
  keys those rows changed, their CURRENT versions, transforms them and writes them
  through the guard, then moves the cursor -- after the destination acknowledged, so a
  crash repeats (harmlessly: `already_current`) and never loses.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from sqlalchemy import select

from feedledger.context import Context
from feedledger.ledger.queries import changed_keys
from feedledger.ledger.schema import outbox
from feedledger.ledger.store import Store
from feedledger.model.destination import Destination
from feedledger.model.timeutil import now_us
from feedledger.sync import registry
from feedledger.sync import state as sync_state
from feedledger.sync.state import Verdict
from feedledger.sync.target import Target
from feedledger.sync.transform import Doc, build, default_doc, load

BATCH = 20_000
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
    # documents refused before writing (the transform raised, or no version): how many
    # in this call, and the first one's key and reason
    rejected_before_write: int = 0
    first_rejection: str | None = None

    def note_rejections(self, *builders: Builder | None) -> None:
        for b in builders:
            if b is None:
                continue
            self.rejected_before_write += b.rejected
            self.first_rejection = self.first_rejection or b.first_rejection

    def to_json(self) -> dict[str, Any]:
        return {
            "destination": self.destination,
            "manifest": self.manifest,
            "status": self.status,
            "outcomes": self.outcomes,
            "checkpoint": self.checkpoint,
            "live_written": self.live_written,
            "seconds": round(self.seconds, 3),
            "rejected_before_write": self.rejected_before_write,
            "first_rejection": self.first_rejection,
        }


# -- reading the ledger --------------------------------------------------------------------


class VersionRow(NamedTuple):
    key: str
    attributes: str | None
    revision: str | None
    deleted: bool
    version_id: int
    valid_from: int


def _versions_sql(store: Store, known_at: int | None, keys: int = 0) -> str:
    """Versions of a key range, in the driver's own parameter style (rows come back as
    plain tuples: on the rebuild's hot path SQLAlchemy's Row objects cost more than
    the query)."""

    p = store.param
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
    with ctx.store.engine.connect() as conn:
        if dense:
            parts = [(_versions_sql(ctx.store, known_at), {"lo": keys[0], "hi": keys[-1]})]
        else:
            parts = [
                (
                    _versions_sql(ctx.store, known_at, len(chunk)),
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
        self.rejected = 0  # documents refused so far (not written), and the first one
        self.first_rejection: str | None = None

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
        if rejected:
            self.rejected += len(rejected)
            if self.first_rejection is None:
                first = rejected[0]
                self.first_rejection = f"{_key_text(first.key)}: {first.reason}"
        return docs, rejected


def _key_text(key: str) -> str:
    import json

    try:
        fields = json.loads(key)
    except ValueError:
        return key
    return ", ".join(str(f) for f in fields) if isinstance(fields, list) else key


# -- the live route -------------------------------------------------------------------------


def live_lag_s(ctx: Context, dest: Destination, now: int | None = None) -> float:
    """Seconds since the oldest ledger commit the destination has not had yet."""
    oldest = registry.lag(ctx.store, dest.name, dest.source).oldest_at
    if oldest is None:
        return 0.0
    return max(0.0, ((now or now_us()) - oldest) / 1e6)


def live_step(
    ctx: Context,
    dest: Destination,
    target: Target,
    builder: Builder,
    tally: dict[str, int] | None = None,
) -> int:
    """Apply the next outbox rows of the destination's source; returns how many keys
    were written through the guard (0: up to date, or paused for maintenance). The
    verdicts of this step are added to `tally` when given."""
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
    keys = changed_keys(ctx.store, {(r.run_id, r.payload_id) for r in rows})
    written = 0
    for start in range(0, len(keys), BATCH):
        part = keys[start : start + BATCH]
        docs, rejected = builder.docs(latest(ctx, dest.source, part, None), part)
        verdicts = target.write(docs)
        sync_state.record(ctx.store, dest.name, "live", verdicts + rejected, now_us())
        if tally is not None:
            for v in (*verdicts, *rejected):
                tally[v.verdict] = tally.get(v.verdict, 0) + 1
        written += len(part)
    registry.advance(ctx.store, dest.name, int(rows[-1].outbox_id), now_us())
    return written or 1


def live(
    ctx: Context,
    name: str,
    *,
    once: bool = True,
    poll_s: float = 2.0,
    stop: threading.Event | None = None,
) -> SyncReport:
    """Drain the live route (once), or keep draining until `stop` is set (SIGTERM: the
    CLI sets it; the step under way finishes -- its keys written, its cursor moved --
    and the report is returned). `outcomes` are the verdicts of THIS call."""
    dest = registry.get(ctx.store, name)
    report = SyncReport(dest.name, None)
    stop = stop or threading.Event()
    started = time.perf_counter()
    target = Target(dest)
    tally = dict.fromkeys(sync_state.VERDICTS, 0)
    builder: Builder | None = None
    try:
        target.ensure()
        builder = Builder(ctx, dest)
        while True:
            while not stop.is_set() and (n := live_step(ctx, dest, target, builder, tally)):
                report.live_written += n
            if once or stop.wait(poll_s):
                break
        report.status = "up_to_date" if not stop.is_set() else "stopped"
    finally:
        target.close()
    report.outcomes = tally
    report.note_rejections(builder)
    report.seconds = time.perf_counter() - started
    return report
