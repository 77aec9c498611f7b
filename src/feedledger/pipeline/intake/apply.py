"""Applying one archived payload to the ledger: diff against current state, guard,
then ONE transaction (versions, state, outcomes, outbox, application, watermark)."""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from feedledger.context import Context
from feedledger.diff import DiffResult
from feedledger.formats import Observations
from feedledger.ledger.payload_txn import PayloadWrite, apply_payload
from feedledger.ledger.records import Watermark
from feedledger.ledger.runs.lookup import recent_change_counts
from feedledger.ledger.store import Store, crs_refusal, payload_crs
from feedledger.model.errors import MassDeleteError, StaleWatermarkError
from feedledger.model.payload import PayloadRef
from feedledger.model.source import SourceConfig
from feedledger.model.timeutil import iso
from feedledger.model.types import PayloadKind
from feedledger.pipeline.intake import bounded
from feedledger.timing import stage


@dataclass
class Applied:
    payload: PayloadRef
    run_id: str
    counts: dict[str, int] = field(default_factory=dict)
    changes: int = 0
    txn_seq: int = 0
    recorded_at: int = 0
    held: bool = False  # notifications held for review (an unusual burst of changes)
    # GIS sources: features whose geometry is invalid (kept as stated, never refused);
    # None for other sources
    invalid_geometries: int | None = None


def stale_error(
    src: SourceConfig, ref: PayloadRef, wm_at: int | None, wm_payload: str | None
) -> StaleWatermarkError:
    return StaleWatermarkError(
        f"published at {iso(ref.published_at)}, which is not after the source's watermark "
        f"{iso(wm_at)} (payload {wm_payload}); applying it would put older data over newer "
        "state, so it was refused and nothing changed",
        source=src.name,
        payload=ref.label,
        hint="the payload is archived, so a late or restated publication can be folded in "
        "later by a replay or backfill of the source from that date",
    )


def _with_attributes(frame: pl.DataFrame, obs: Observations, *, geo: bool) -> pl.DataFrame:
    """Add the canonical attribute text of each row's observation (null for deletes),
    and for a GIS source its geometry as stated."""
    if frame.is_empty():
        empty = [pl.lit(None, dtype=pl.String).alias("attributes")]
        if geo:
            empty.append(pl.lit(None, dtype=pl.String).alias("geometry"))
        return frame.with_columns(empty)
    idx = frame.get_column("idx")
    added = [obs.attributes(idx).alias("attributes")]
    if geo:
        added.append(obs.geometries(idx).get_column("geometry"))
    return frame.with_columns(added)


def check_crs(
    store: Store, src: SourceConfig, label: str, obs: Observations, applied: str | None
) -> None:
    """Refuse a GIS payload whose CRS differs from the one recorded for `applied`, the
    source's last applied payload (BadPayloadError naming both; nothing is written).
    Nothing to compare with before the source's first payload, nor for other formats."""
    if not src.is_geo or applied is None:
        return
    refusal = crs_refusal(src.name, label, obs.crs, payload_crs(store, applied))
    if refusal is not None:
        raise refusal


def check_source_crs(ctx: Context, src: SourceConfig, label: str, obs: Observations) -> None:
    """`check_crs` against the source's watermark as it stands (a live payload, before
    it is archived under the source)."""
    if src.is_geo:
        wm = ctx.store.watermark(src.name)
        check_crs(ctx.store, src, label, obs, wm.payload_id if wm is not None else None)


def _is_burst(store: Store, src: SourceConfig, changes: int) -> bool:
    """Far outside the source's normal volume: more than `hold_min_changes` and more than
    `hold_factor` x the median change count of its last 30 live runs (never for a
    source's first run: there is no normal yet)."""
    if changes <= src.hold_min_changes:
        return False
    recent = sorted(recent_change_counts(store, src.name))
    if not recent:
        return False
    mid = len(recent) // 2
    median = recent[mid] if len(recent) % 2 else (recent[mid - 1] + recent[mid]) / 2
    return changes > src.hold_factor * median


@dataclass(frozen=True)
class Ahead:
    """A payload's diff computed before its run holds the source's lease (while its
    bytes are still being archived): against the state at commit sequence `seq`."""

    state: pl.DataFrame
    wm: Watermark | None
    diff: DiffResult

    @property
    def seq(self) -> int:
        return self.wm.txn_seq if self.wm else 0


def diff_ahead(ctx: Context, src: SourceConfig, obs: Observations) -> Ahead | None:
    """The diff of `obs` against the source's state as it stands, read from the state
    cache without writing anything (the caller holds no lease); None when the cache
    cannot give it. Only a head start: `apply_observations` uses it if the source's
    commit sequence has not moved since, and otherwise diffs again; any error here is
    left for that diff to meet at its usual point."""
    if not bounded.ahead_fits(obs):
        return None
    try:
        with stage("diff_ahead"):
            found = ctx.cache.peek(src.name)
            if found is None:
                return None
            state, wm = found
            diff = bounded.diff(src, obs.frame, state)
    except Exception:  # see the docstring: the diff under the lease meets it again
        return None
    return Ahead(state, wm, diff)


def _still_current(store: Store, src: SourceConfig, ahead: Ahead | None) -> Ahead | None:
    if ahead is None:
        return None
    wm = store.watermark(src.name)
    return ahead if (wm.txn_seq if wm else 0) == ahead.seq else None


def apply_observations(
    ctx: Context,
    src: SourceConfig,
    ref: PayloadRef,
    obs: Observations,
    *,
    run_id: str,
    holder: str,
    backfill: bool = False,
    allow_mass_delete: bool = False,
    outbox_status: str = "pending",
    hold_bursts: bool = False,
    ahead: Ahead | None = None,
    reserved: tuple[int, int] | None = None,
) -> Applied:
    """Diff `obs` against the source's state and apply it in one transaction; the caller
    holds the source's lease. `ahead`: the diff computed before the lease (`diff_ahead`),
    used when the source has not changed since. `reserved`: (first, count) version ids
    reserved with the lease for that diff; used when it is the diff applied, else skipped."""
    store: Store = ctx.store
    with stage("state_load"):
        ahead = _still_current(store, src, ahead)
        state, wm = (ahead.state, ahead.wm) if ahead is not None else ctx.cache.load(src.name)
        # under a budget, a state cache file written in partitions is read a partition
        # at a time by the diff and the next state, never mapped whole
        stored = ctx.cache.stored(src.name, wm) if src.memory_budget is not None else None
    seq = wm.txn_seq if wm else 0
    if wm is not None and wm.published_at is not None and ref.published_at <= wm.published_at:
        raise stale_error(src, ref, wm.published_at, wm.payload_id)
    geo = src.is_geo
    check_crs(store, src, ref.label, obs, wm.payload_id if wm is not None else None)

    obs_rows = obs.frame.height
    with stage("diff"):
        if ahead is not None:
            diff = ahead.diff
        elif obs.on_disk:
            diff = bounded.diff_taking(src, obs, state, stored)
        else:
            diff = bounded.diff(src, obs.frame, state, stored)
        bounded.keep_rows(src, obs, diff)
    counts = diff.counts
    live = counts["live_before"]
    if live and not allow_mass_delete and src.kind == PayloadKind.SNAPSHOT:
        share = counts["deleted"] / live
        if share > src.mass_delete_threshold:
            raise MassDeleteError(
                f"would delete {counts['deleted']:,} of {live:,} live entities "
                f"({share:.0%}), more than the allowed {src.mass_delete_threshold:.0%}; "
                "an empty or truncated export is the usual cause. Nothing was changed",
                source=src.name,
                payload=ref.label,
                hint="if the deletions are real, run again with --allow-mass-delete",
            )

    n = diff.versions.height
    held = hold_bursts and _is_burst(store, src, n)
    if held:
        outbox_status = "held"
    if reserved is not None and ahead is not None and reserved[1] == n:
        first_id = reserved[0]
    else:
        first_id = store.allocate_version_ids(n)
    with stage("attributes"):
        versions = diff.versions.with_columns(
            (pl.int_range(n, dtype=pl.Int64) + first_id).alias("version_id")
        )
        # the versions' attribute texts are encoded a chunk at a time as they are written
        outcomes = _with_attributes(diff.outcomes, obs, geo=geo)
    # The state after this payload is known now; write it beside the transaction and
    # publish it only once the transaction committed (its commit sequence is seq + 1).
    with stage("next_state"):
        after = bounded.next_state(src, obs_rows, state, versions, diff.state_rows, stored)
    pending = ctx.cache.prepare(src.name, after, seq + 1)
    try:
        with stage("transaction"):
            txn_seq, recorded_at = apply_payload(
                store,
                PayloadWrite(
                    ref=ref,
                    run_id=run_id,
                    holder=holder,
                    backfill=backfill,
                    versions=versions,
                    encode=obs.attributes,
                    rows=obs.attribute_rows,
                    outcomes=outcomes,
                    counts=counts,
                    expected_seq=seq,
                    outbox_status=outbox_status,
                    geometries=obs.geometries if geo else None,
                    crs=obs.crs,
                    fields=obs.fields,
                    chunk_rows=bounded.chunk_rows(src),
                ),
            )
    except BaseException:
        pending.discard()
        raise
    with stage("cache_publish"):
        if txn_seq == seq + 1:
            pending.publish()
        else:  # pragma: no cover - apply_payload guarantees seq + 1
            pending.discard()
    with stage("statistics"):
        store.refresh_statistics(n, live)
    return Applied(
        payload=ref,
        run_id=run_id,
        counts=counts,
        changes=n,
        txn_seq=txn_seq,
        recorded_at=recorded_at,
        held=held,
        invalid_geometries=obs.invalid_geometries if geo else None,
    )
