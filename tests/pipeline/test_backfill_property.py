"""Property tests for backfill and replay: random daily snapshot sequences, a random
prefix applied live and the rest only archived, then a backfill of the whole window with
a random interruption (rerun until it completes) must end with exactly the standing
history of ONE uninterrupted live run of the same payloads; a replay from any day of the
window (interrupted or not) must leave that standing history unchanged while keeping
every version it retracted. SQLite and PostgreSQL."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import BACKENDS
from example_budget import examples
from feedledger import faults
from feedledger.config import Workspace
from feedledger.context import Context
from feedledger.ledger import queries
from feedledger.ledger.records import Version
from feedledger.ledger.runs.lookup import list_runs
from feedledger.pipeline.catchup.backfill import NothingToDo, backfill
from feedledger.pipeline.catchup.replay import replay
from feedledger.pipeline.intake.archiving import archive_add
from feedledger.pipeline.intake.ingest import ingest
from feedledger.pipeline.verify import verify
from pipeline.history_model import KEYS, Payload, csv_bytes, day, expected_history, fresh_workspace

SOURCE = "s"
WINDOW = ("2026-08-01", "2026-08-20")
DAY0_US = 1_785_542_400_000_000  # 2026-08-01T00:00Z
DAY_US = 86_400_000_000

# key -> [(valid_from, deleted, attributes)] of the standing (non-retracted) versions
Standing = dict[str, list[tuple[int, bool, str | None]]]

SETTINGS = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# fault points inside a payload transaction: they fire on the first one a run reaches
TXN_POINTS = ["mid_transaction", "before_commit", "after_commit"]

snapshot = st.dictionaries(
    st.sampled_from(KEYS), st.sampled_from(["1", "2", "", "x,y", 'q"']), max_size=len(KEYS)
)


@dataclass(frozen=True)
class Scenario:
    seq: list[Payload]
    live: int  # payloads 0..live-1 are ingested live, the rest only archived
    fault: str | None  # interruption of the first backfill attempt
    sticky: bool  # the fault stays armed on the reruns (only for faults that progress)

    @property
    def backfilled(self) -> int:
        return len(self.seq) - self.live


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    seq = draw(st.lists(snapshot, min_size=2, max_size=6))
    live = draw(st.integers(0, len(seq)))
    m = len(seq) - live
    fault, sticky = None, False
    if m:
        point = draw(st.sampled_from([None, "after_payload", *TXN_POINTS]))
        fault = f"after_payload:{draw(st.integers(1, m))}" if point == "after_payload" else point
        # a fault that fires after a payload committed still lets each rerun progress
        sticky = fault is not None and fault.startswith("after_") and draw(st.booleans())
    return Scenario(seq, live, fault, sticky)


@st.composite
def replays(draw: st.DrawFn, n: int) -> list[tuple[int, str | None]]:
    """1-2 replays: (start day index, interruption)."""
    out: list[tuple[int, str | None]] = []
    for _ in range(draw(st.integers(1, 2))):
        start = draw(st.integers(0, n - 1))
        fault = draw(st.sampled_from([None, "after_retraction", "after_payload", *TXN_POINTS]))
        if fault == "after_payload":
            fault = f"after_payload:{draw(st.integers(1, n - start))}"
        out.append((start, fault))
    return out


@contextmanager
def injected(spec: str | None) -> Iterator[None]:
    if spec is None:
        yield
        return
    os.environ[faults.ENV] = spec
    try:
        yield
    finally:
        del os.environ[faults.ENV]


def key_text(k: str) -> str:
    return json.dumps([k])


def day_us(i: int) -> int:
    return DAY0_US + i * DAY_US


def versions(
    ctx: Context, *, include_retracted: bool = False, known_at: int | None = None
) -> list[Version]:
    """All versions of the source, key by key (history order)."""
    out: list[Version] = []
    for k in KEYS:
        out += queries.history(
            ctx.store,
            SOURCE,
            key_text(k),
            include_retracted=include_retracted,
            known_at=known_at,
        )
    return out


def standing_of(vs: list[Version]) -> Standing:
    out: Standing = {}
    for v in vs:
        out.setdefault(json.loads(v.key)[0], []).append((v.valid_from, v.deleted, v.attributes))
    return out


def as_model(h: Standing) -> dict[str, list[tuple[int, str | None]]]:
    """The standing history in test_history_property's naive-model shape."""
    return {
        k: [
            ((vf - DAY0_US) // DAY_US, None if deleted else json.loads(attrs or "{}")["v"])
            for vf, deleted, attrs in chain
        ]
        for k, chain in h.items()
    }


_reference_cache: dict[tuple[str, str], Standing] = {}


def reference(backend: str, seq: list[Payload]) -> Standing:
    """Standing history of ONE uninterrupted live run of `seq` in a fresh workspace."""
    cache_key = (backend, json.dumps(seq, sort_keys=True))
    if cache_key not in _reference_cache:
        with fresh_workspace(backend) as ws, Context(ws) as ctx:
            for i, p in enumerate(seq):
                ingest(ctx, SOURCE, csv_bytes(p), published_at=day(i))
            _reference_cache[cache_key] = standing_of(versions(ctx))
    return _reference_cache[cache_key]


def check_ledger(ws: Workspace, seq: list[Payload], ref: Standing) -> Standing:
    """Standing history == reference (and the naive model), watermark at the last
    payload's date, verify() ok. Returns the standing history."""
    with Context(ws) as ctx:
        got = standing_of(versions(ctx))
        wm = ctx.store.watermark(SOURCE)
        report = verify(ctx, SOURCE)
    assert got == ref
    assert as_model(got) == expected_history(seq)
    assert wm is not None and wm.published_at == day_us(len(seq) - 1)
    assert report["ok"], report
    return got


def check_interrupted(ws: Workspace, seq: list[Payload]) -> int:
    """After an interruption the ledger is consistent and stands exactly as a live run
    of the payloads up to the watermark would. Returns that number of payloads."""
    with Context(ws) as ctx:
        got = standing_of(versions(ctx))
        wm = ctx.store.watermark(SOURCE)
        report = verify(ctx, SOURCE)
    done = 0
    if wm is not None and wm.published_at is not None:
        done = (wm.published_at - DAY0_US) // DAY_US + 1
    assert as_model(got) == expected_history(seq[:done])
    assert report["ok"], report
    return done


def progress_of(fault: str) -> int:
    """Payloads a backfill or replay interrupted at `fault` has committed."""
    if fault.startswith("after_payload:"):
        return int(fault.split(":")[1])
    return {"after_retraction": 0, "mid_transaction": 0, "before_commit": 0, "after_commit": 1}[
        fault
    ]


def run_backfill(ws: Workspace, sc: Scenario) -> int:
    """The backfill of the whole window, interrupted as `sc` says and rerun until it
    completes. Returns the number of attempts."""
    done, attempts = sc.live, 0
    while True:
        attempts += 1
        armed = sc.fault if (attempts == 1 or sc.sticky) else None
        with injected(armed), Context(ws) as ctx:
            try:
                backfill(ctx, SOURCE, *WINDOW)
                return attempts
            except faults.InjectedFailure:
                assert armed is not None
        step = progress_of(armed)
        now = check_interrupted(ws, sc.seq)
        assert now == done + step, (armed, done, now)
        done = now
        assert attempts <= sc.backfilled + 1, "the reruns make no progress"


def build(backend: str, ws: Workspace, sc: Scenario) -> Standing:
    """Live prefix, archive the rest, interrupted backfill + reruns; checks property 1.
    Returns the standing history."""
    ref = reference(backend, sc.seq)
    with Context(ws) as ctx:
        for i, p in enumerate(sc.seq):
            data = csv_bytes(p)
            if i < sc.live:
                ingest(ctx, SOURCE, data, published_at=day(i))
            else:
                archive_add(ctx, SOURCE, data, published_at=day(i), original_name=f"{day(i)}.csv")
    if sc.backfilled == 0:  # nothing to do is a success
        with Context(ws) as ctx:
            assert isinstance(backfill(ctx, SOURCE, *WINDOW), NothingToDo)
    else:
        attempts = run_backfill(ws, sc)
        if sc.fault is not None:
            assert attempts >= 2  # the fault did fire
        with Context(ws) as ctx:
            runs = [r for r in list_runs(ctx.store, SOURCE) if r.kind == "backfill"]
        # one backfill, one run id, resumed after each interruption
        assert [r.status for r in runs] == ["succeeded"]
        assert [r["status"] for r in runs[0].resumed] == ["failed"] * (attempts - 1)
    got = check_ledger(ws, sc.seq, ref)
    # versions written by the backfill are flagged as such, live ones are not
    with Context(ws) as ctx:
        for v in versions(ctx):
            assert v.backfill == (v.valid_from >= day_us(sc.live)), v
    return got


def run_replay(
    backend: str, ws: Workspace, seq: list[Payload], start: int, fault: str | None
) -> None:
    """Replay from day `start` (interrupted at `fault`, then rerun); checks property 2."""
    with Context(ws) as ctx:
        before = {v.version_id: v for v in versions(ctx, include_retracted=True)}
        before_standing = standing_of(versions(ctx))
        wm_before = ctx.store.watermark(SOURCE)
        n_runs = len(list_runs(ctx.store, SOURCE))
    assert wm_before is not None

    if fault is not None:
        with injected(fault), Context(ws) as ctx, pytest.raises(faults.InjectedFailure):
            replay(ctx, SOURCE, day(start))
        assert check_interrupted(ws, seq) == start + progress_of(fault)
    with Context(ws) as ctx:
        replay(ctx, SOURCE, day(start))

    # the standing history is the same again (and as the reference, and the model)
    assert check_ledger(ws, seq, reference(backend, seq)) == before_standing

    with Context(ws) as ctx:
        after = {v.version_id: v for v in versions(ctx, include_retracted=True)}
        standing_ids = {v.version_id for v in versions(ctx)}
        as_known_before = standing_of(versions(ctx, known_at=wm_before.recorded_at))
        runs = list_runs(ctx.store, SOURCE)[n_runs:]
    cut = day_us(start)
    # nothing is ever deleted: every earlier version is still there, unchanged; those
    # standing from the cut on are now retracted, the earlier ones still stand
    for vid, old in before.items():
        assert vid in after, f"version {vid} vanished"
        new = after[vid]
        same = ("key", "valid_from", "deleted", "attributes", "run_id", "payload_id")
        assert [getattr(new, f) for f in same] == [getattr(old, f) for f in same]
        if old.retracted_at is not None:
            assert new.retracted_at == old.retracted_at, f"version {vid} retracted again"
        elif old.valid_from >= cut:
            assert new.retracted_at is not None, f"version {vid} was not retracted"
        else:
            assert vid in standing_ids, f"version {vid} before the cut no longer stands"
    # what stands anew was written by the replay, from the cut on
    for vid in standing_ids - before.keys():
        assert after[vid].valid_from >= cut and after[vid].backfill, after[vid]
    # bitemporal: as known just before the replay, the history is what it was then
    assert as_known_before == before_standing
    statuses = ["failed", "succeeded"] if fault is not None else ["succeeded"]
    assert [(r.kind, r.status) for r in runs] == [("replay", s) for s in statuses]


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
@settings(SETTINGS, max_examples=examples(5))
@given(sc=scenarios())
def test_interrupted_backfill_matches_one_uninterrupted_live_run(
    backend: str, sc: Scenario
) -> None:
    with fresh_workspace(backend) as ws:
        build(backend, ws, sc)


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
@settings(SETTINGS, max_examples=examples(6))
@given(sc=scenarios(), data=st.data())
def test_replay_keeps_standing_history_and_retracted_versions(
    backend: str, sc: Scenario, data: st.DataObject
) -> None:
    plan = data.draw(replays(len(sc.seq)), label="replays")
    with fresh_workspace(backend) as ws:
        build(backend, ws, sc)
        for start, fault in plan:
            run_replay(backend, ws, sc.seq, start, fault)
