"""The rebuild: a manifest's keys in key order, a batch at a time, each key's version
AS OF the manifest's boundary, through the destination's guard (live route and shared
pieces: sync/live.py). The checkpoint records a batch as attempted before it is
sent and as acknowledged after the destination committed; a crash repeats at most the
unacknowledged batches (IN_FLIGHT). A token bucket leaves `live_reserve` of `rate` to
the live route, which runs between batches; when the live lag exceeds the recovery
window the rebuild waits for it. `maintenance` instead pauses the live route to that
destination for the rebuild (its rows wait; nothing is lost).
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from feedledger import faults
from feedledger.context import Context
from feedledger.ledger.store import Store
from feedledger.model.destination import Destination
from feedledger.model.errors import ConfigError
from feedledger.model.timeutil import now_us
from feedledger.sync import known as known_rows
from feedledger.sync import manifests, registry
from feedledger.sync import state as sync_state
from feedledger.sync.kinds import DestinationKind, open_target
from feedledger.sync.known import Known
from feedledger.sync.live import (
    BATCH,
    Builder,
    Progress,
    SyncReport,
    live_lag_s,
    live_step,
)
from feedledger.sync.pg_batch import Build
from feedledger.sync.state import Outcome, Verdict
from feedledger.sync.transform import Doc, default_docs_of
from feedledger.sync.versions import latest, latest_texts

IN_FLIGHT = 2  # rebuild batches sent and not yet acknowledged, at most


@dataclass(frozen=True)
class Resume:
    """Where an unfinished rebuild of `manifest` resumes: after `keys_done` of
    `population` keys acknowledged, at batch `batch` of `batches` (the batches already
    acknowledged plus those left at this batch size; without one, at the average size
    of those acknowledged)."""

    manifest: str
    keys_done: int
    population: int
    batch: int
    batches: int

    def to_json(self) -> dict[str, Any]:
        return {
            "manifest": self.manifest,
            "keys_done": self.keys_done,
            "population": self.population,
            "batch": self.batch,
            "batches": self.batches,
        }


def resume_point(
    store: Store, destination: str, man: manifests.Manifest, batch: int | None = None
) -> Resume | None:
    """Where a rebuild of `man` into `destination` resumes (None: none begun, or the last
    one finished -- a new one starts at the first batch)."""
    cp = sync_state.checkpoint(store, destination, man.manifest_id)
    if cp is None or cp.status != "running" or cp.acknowledged_key is None:
        return None
    done = manifests.count(store, man.manifest_id, upto=cp.acknowledged_key)
    size = batch or max(1, round(done / max(cp.batches, 1)))
    left = math.ceil(max(0, man.population - done) / size)
    at = cp.batches + 1 if left else cp.batches
    return Resume(man.name, done, man.population, at, cp.batches + left)


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
    on_resume: Callable[[Resume], None] | None = None,
) -> SyncReport:
    """Rebuild destination `name` from manifest `manifest_name` (see the module);
    `progress` is called after each acknowledged batch, `on_resume` once, before the
    first batch, when an interrupted rebuild of the same manifest resumes."""
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
    builder = Builder(ctx, dest, man.generation)
    target = open_target(
        dest,
        geo=builder.geo,
        store=ctx.store,
        rebuild=man.manifest_id,
        key=ctx.workspace.source(dest.source).key,
    )
    target.ensure()
    live_builder = Builder(ctx, dest)
    bucket = TokenBucket(rate * (1 - live_reserve)) if rate else None
    store = ctx.store
    resumed = resume_point(store, dest.name, man, batch)
    cp = sync_state.start(store, dest.name, man.manifest_id, now_us())
    done = (
        0
        if cp.acknowledged_key is None
        else manifests.count(store, man.manifest_id, upto=cp.acknowledged_key)
    )
    if resumed is not None:
        report.resumed = resumed.to_json()
        if on_resume is not None:
            on_resume(resumed)
    if maintenance:
        registry.set_paused(store, dest.name, now_us())
    # A pipeline: this thread reads and transforms the next batch while writer threads
    # send the batches in flight through the guard (the driver waits without the GIL)
    # and a recorder thread records the verdicts of each written batch with its
    # checkpoint (one ledger commit). A PostgreSQL destination has IN_FLIGHT writers,
    # each on its own connection: the server stages batch i+1 (its COPY) while it
    # upserts batch i, instead of one after the other (batches have disjoint keys, and
    # each one's upsert keeps the guard). Batches are acknowledged in order, at most
    # IN_FLIGHT sent and not yet acknowledged: a crash repeats those (harmlessly: the
    # guard answers already_current), whichever of them the destination committed.
    writers = min(IN_FLIGHT, target.writers)
    writer = ThreadPoolExecutor(writers, thread_name_prefix="destination-write")
    recorder = ThreadPoolExecutor(1, thread_name_prefix="destination-record")
    pending: deque[tuple[int, Future[None]]] = deque()  # each batch's key count

    def send(docs: Sequence[Doc], ticket: int, build: Build | None) -> Outcome:
        try:
            return target.write_batch(docs, ticket, build)
        except Exception as exc:
            # sent, answer unknown: unresolved until the batch is repeated
            reason = f"uncertain: the destination did not acknowledge: {exc}"
            unsure = [Verdict(d.key, "unresolved", d.revision, d.generation,
                              d.content_hash, reason) for d in docs]  # fmt: skip
            sync_state.record(store, dest.name, man.manifest_id, unsure, now_us())
            raise

    broken: list[BaseException] = []  # a batch failed: no later one is acknowledged

    def acknowledge(n: int, last: str, sent: Future[Outcome],
                    rejected: list[Verdict], known: Known) -> None:  # fmt: skip
        if broken:
            raise RuntimeError(f"batch {n} not acknowledged: an earlier batch failed")
        try:
            outcome = replace(sent.result().plus(rejected), known=known)
            faults.point("after_destination_write", n)
            sync_state.record(store, dest.name, man.manifest_id, outcome, now_us(),
                              acknowledged=last)  # fmt: skip
        except BaseException as exc:
            # the write failed, or recording its verdicts did: either way no later batch
            # may move the checkpoint past this one (it is repeated on resume)
            broken.append(exc)
            raise
        faults.point("after_checkpoint", n)

    def settle(room: int) -> None:
        nonlocal done
        while len(pending) > room:
            size, fut = pending.popleft()
            fut.result()
            done += size
            if progress:
                progress(done, man.population, lag)

    lag = 0.0
    try:
        after = cp.acknowledged_key
        n = 0
        confirmed_last = True  # the last batch was all confirming rows (sync/known.py)
        while True:
            n += 1
            # what the outcome ledger confirms of the next keys (sync/known.py): a batch
            # likely not written (a resync) whose every key has a confirming row is
            # those rows, probed by their recorded hashes -- no manifest key, version or
            # document read; the keys the destination does not hold as current are read
            # from the ledger and built whole (in the writer thread)
            known = Known(dest.name, man.manifest_id, builder.generation, dest.created_at,
                          "", "")  # fmt: skip
            probing = builder.fast and target.probing()
            build: Build | None = None
            whole = (
                known_rows.next_batch(store, known, man.manifest_id, after, batch, builder.rank)
                if probing and (confirmed_last or n % 8 == 0)
                else None
            )
            confirmed_last = whole is not None
            rejected: list[Verdict] = []
            docs: Sequence[Doc]
            if whole is not None:
                assert whole.docs is not None
                docs, size, last = whole.docs, len(whole.docs), whole.hi
                build = partial(builder.built, known_at=man.created_at)
            else:
                keys = manifests.keys(store, man.manifest_id, after, batch)
                if not keys:
                    break
                size, last = len(keys), keys[-1]
                known.lo, known.hi = keys[0], keys[-1]
                if probing:
                    docs = known_rows.docs(store, known, builder.rank)
                    if len(docs) < len(keys):
                        have = {d.key for d in docs}
                        missing = [k for k in keys if k not in have]
                        dense = 2 * len(missing) >= len(keys)
                        rows = latest(store, dest.source, missing, man.created_at, dense=dense)
                        more, rejected = builder.docs(rows, missing)
                        docs = [*docs, *more]
                    build = partial(builder.built, known_at=man.created_at)
                else:  # (its rows read by the recorder, as it records the batch)
                    fetched = (
                        latest_texts(store, dest.source, keys, man.created_at)
                        if builder.fast
                        else None
                    )
                    if fetched is not None:  # every key found: the default documents
                        docs = default_docs_of(*fetched, builder.generation, builder.rank)
                    else:
                        rows = latest(store, dest.source, keys, man.created_at, dense=True,
                                      geo=builder.geo)  # fmt: skip
                        docs, rejected = builder.docs(rows, keys)
            if bucket is not None:
                bucket.take(size)
            lag = _serve_live(ctx, dest, target.live(), live_builder, recovery_window_s,
                              maintenance)  # fmt: skip
            settle(IN_FLIGHT - 1)
            sync_state.mark(store, dest.name, man.manifest_id, now_us(), attempted=last)
            faults.point("before_destination_write", n)
            sent = writer.submit(send, docs, target.ticket(), build)
            pending.append((size, recorder.submit(acknowledge, n, last, sent, rejected, known)))
            after = last
        settle(0)
        faults.point("before_destination_finish")
        target.finish()  # what the rebuild wrote becomes the destination (a new file's swap)
        sync_state.mark(store, dest.name, man.manifest_id, now_us(), finished=True)
        report.status = "finished"
    except BaseException:
        target.close()  # the destination's connections with it (a lost one is invalidated)
        raise
    finally:
        writer.shutdown(wait=True)
        recorder.shutdown(wait=True)
        if maintenance:
            registry.set_paused(store, dest.name, None)
    while n := live_step(ctx, dest, target.live(), live_builder):  # what waited, or came
        report.live_written += n
    target.close()
    report.note_rejections(builder, live_builder)
    report.outcomes = sync_state.counts(store, dest.name, man.manifest_id)
    got = sync_state.checkpoint(store, dest.name, man.manifest_id)
    report.checkpoint = got.to_json() if got else None
    report.seconds = time.perf_counter() - started
    return report


def _serve_live(
    ctx: Context,
    dest: Destination,
    target: DestinationKind,
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
