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

import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from feedledger.context import Context
from feedledger.ledger.queries import changed_keys
from feedledger.model.destination import Destination, generation_rank
from feedledger.model.timeutil import now_us
from feedledger.sync import registry
from feedledger.sync import state as sync_state
from feedledger.sync.kinds import DestinationKind, open_target
from feedledger.sync.state import Verdict
from feedledger.sync.transform import Doc, build, default_doc, default_docs, load, wkb_of
from feedledger.sync.versions import VersionRow, latest

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
    # a rebuild that resumed an interrupted one: where (rebuild.Resume.to_json())
    resumed: dict[str, Any] | None = None

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
            "resumed": self.resumed,
        }


class Builder:
    """Docs for one destination: its transform, generation and revision rule."""

    def __init__(self, ctx: Context, dest: Destination, generation: str | None = None) -> None:
        self.transform = load(dest.transform)
        self.generation = generation or dest.generation
        self.rank = generation_rank(self.generation)
        src = ctx.workspace.source(dest.source)
        self.use_revision = src.revision is not None
        self.geo = src.is_geo  # documents carry the geometry (GeoJSON, and WKB)
        # the default document, the version id as the revision: a function of the
        # version alone (sync/known.py)
        self.fast = self.transform is None and not self.use_revision and not self.geo
        self.store, self.source = ctx.store, dest.source
        self.rejected = 0  # documents refused so far (not written), and the first one
        self.first_rejection: str | None = None

    def docs(self, rows: dict[str, Any], keys: Sequence[str]) -> tuple[list[Doc], list[Verdict]]:
        docs: list[Doc] = []
        rejected: list[Verdict] = []
        fast = self.transform is None and not self.use_revision and not self.geo
        gen, rank = self.generation, self.rank
        if fast and len(rows) == len(keys):  # the rebuild's batch: every key found
            return default_docs(map(rows.__getitem__, keys), gen, rank), rejected
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
                        geo=self.geo,
                    )
                )
            except Exception as exc:
                reason = f"transform failed: {type(exc).__name__}: {exc}"
                rejected.append(Verdict(key, "rejected", None, self.generation, None, reason))
        if self.geo and docs:
            docs = self._with_wkb(docs, rows, rejected)
        self._note(rejected)
        return docs, rejected

    def built(self, docs: Sequence[Doc], known_at: int | None) -> list[Doc]:
        """`docs`, those not built yet (sync/known.py: a Doc with no `doc` that is not
        `deleted`) built from the ledger's versions visible at `known_at`."""
        todo = sorted(d.key for d in docs if d.doc is None and not d.deleted)
        if not todo:
            return list(docs)
        dense = 2 * len(todo) >= len(docs)
        rows = latest(self.store, self.source, todo, known_at, dense=dense, geo=self.geo)
        made, rejected = self.docs(rows, todo)
        if rejected:
            raise RuntimeError(
                f"{len(rejected)} key(s) the outcome ledger confirmed cannot be built: "
                f"{rejected[0].key}: {rejected[0].reason}"
            )
        by_key = {d.key: d for d in made}
        return [by_key.get(d.key, d) for d in docs]

    def _note(self, rejected: list[Verdict]) -> None:
        if rejected:
            self.rejected += len(rejected)
            if self.first_rejection is None:
                first = rejected[0]
                self.first_rejection = f"{_key_text(first.key)}: {first.reason}"

    def _with_wkb(
        self, docs: list[Doc], rows: dict[str, Any], rejected: list[Verdict]
    ) -> list[Doc]:
        """A GIS source's docs with their version's geometry as WKB (a tombstone none);
        a geometry that cannot be written as WKB rejects its record."""
        texts = [None if d.deleted else VersionRow(*rows[d.key]).geometry for d in docs]
        out: list[Doc] = []
        for d, wkb in zip(docs, wkb_of(texts), strict=True):
            if isinstance(wkb, str):
                rejected.append(Verdict(d.key, "rejected", None, self.generation, None, wkb))
            else:
                out.append(d._replace(wkb=wkb))
        return out


def _key_text(key: str) -> str:
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
    target: DestinationKind,
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
    rows = registry.pending(ctx.store, dest.source, cursor, LIVE_ROWS)
    if not rows:
        return 0
    keys = changed_keys(ctx.store, {(r.run_id, r.payload_id) for r in rows})
    written = 0
    for start in range(0, len(keys), BATCH):
        part = keys[start : start + BATCH]
        found = latest(ctx.store, dest.source, part, None, geo=builder.geo)
        docs, rejected = builder.docs(found, part)
        outcome = target.write_batch(docs).plus(rejected)
        sync_state.record(ctx.store, dest.name, "live", outcome, now_us())
        if tally is not None:
            for verdict, n in outcome.tally().items():
                tally[verdict] = tally.get(verdict, 0) + n
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
    src = ctx.workspace.source(dest.source)
    target = open_target(dest, geo=src.is_geo, store=ctx.store, key=src.key)
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
