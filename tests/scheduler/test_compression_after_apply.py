"""A scheduler's attempt returns once its payload is applied: the raw object's
compression (archive/settle.py), then the store's checkpoint, are queued on the
process's own thread and run after it, in order, so each payload is still a delta
against the one before. `settled` waits for the queue; closing the scheduler drains
it. Until then the raw object is a valid payload object (`archive verify` passes)."""

from __future__ import annotations

import io
import random
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from feedledger.archive import LocalArchive
from feedledger.archive.core import BlobArchive
from feedledger.ledger.store import Store
from feedledger.model.timeutil import iso, parse_instant, to_us
from feedledger.scheduler.loop import Options, Scheduler
from helpers import Cli

SRC = "parcels"
DAYS = ["2026-08-01", "2026-08-02", "2026-08-03"]
HANG_S = 60.0  # a generous deadline for a gate, never a timing assertion


class DayClock:
    def __init__(self, day: str) -> None:
        self.day = day

    def now_us(self) -> int:
        return to_us(parse_instant(f"{self.day}T12:00:00", "UTC"))

    def sleep(self, seconds: float, stop: threading.Event) -> None:
        stop.wait(0)


def publish(feed: Path, rnd: random.Random, values: dict[int, int], day: str) -> None:
    """A daily snapshot of 600 rows, a few changed each day (a delta compresses it)."""
    for key in rnd.sample(sorted(values), 6):
        values[key] = rnd.randrange(10**6)
    text = "id,value\n" + "".join(f"{k},{v}\n" for k, v in sorted(values.items()))
    (feed / f"{SRC}_{day}.csv").write_text(text)


def stored(cli: Cli) -> dict[str, tuple[bool, bool]]:
    """Each payload's (raw object present, compressed object present), by date."""
    objects = cli.ws.archive_root / "objects"
    found = {}
    for ref in cli.json("archive", "list", SRC):
        sha = ref["sha256"]
        raw = objects / sha[:2] / sha
        found[ref["published_at"][:10]] = (raw.exists(), raw.with_suffix(".zst").exists())
    return found


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """Compression waits until the gate opens (the real one, then)."""
    opened = threading.Event()
    real = BlobArchive.settle

    def gated(self: BlobArchive, source: str, sha256: str, published_at: int) -> list[str]:
        assert opened.wait(HANG_S), "the test never opened the gate"
        return real(self, source, sha256, published_at)

    monkeypatch.setattr(BlobArchive, "settle", gated)
    yield opened
    opened.set()


def test_an_attempt_returns_before_its_object_is_compressed_then_it_is(
    cli: Cli, tmp_path: Path, gate: threading.Event
) -> None:
    feed = tmp_path / "feed"
    feed.mkdir()
    cli("source", "add", SRC, "--key", "id", "--fetch", str(feed))
    rnd = random.Random(5)
    values = {i: rnd.randrange(10**6) for i in range(600)}
    clock = DayClock(DAYS[0])
    sched = Scheduler(cli.ws.config_path, Options(workers=1, dispatch=False), clock, io.StringIO())
    try:
        for day in DAYS:
            publish(feed, rnd, values, day)
            clock.day = day
            (future,) = sched.tick(wait=True)
            attempt = future.result()
            assert attempt is not None and attempt.outcome == "applied", attempt
        # every payload applied while none was compressed yet: raw, valid objects
        assert stored(cli) == dict.fromkeys(DAYS, (True, False))
        assert cli.json("archive", "verify", SRC)["ok"] == len(DAYS)
        gate.set()
        sched.settled()
        assert stored(cli) == dict.fromkeys(DAYS, (False, True))
    finally:
        gate.set()
        sched.close()
    # compressed in publisher order: each payload a delta against the one before
    archive = LocalArchive(cli.ws.archive_root)
    refs = cli.json("archive", "list", SRC)
    kinds = [archive.objects.stored(r["sha256"]) for r in refs]
    assert [k.encoding if k else None for k in kinds] == ["keyframe", "delta", "delta"]
    for ref, day in zip(refs, DAYS, strict=True):
        assert archive.get(ref["sha256"]) == (feed / f"{SRC}_{day}.csv").read_bytes()
    assert cli.json("archive", "verify", SRC)["ok"] == len(DAYS)


def test_closing_the_scheduler_compresses_what_is_queued(cli: Cli, tmp_path: Path) -> None:
    feed = tmp_path / "feed"
    feed.mkdir()
    cli("source", "add", SRC, "--key", "id", "--fetch", str(feed))
    rnd = random.Random(6)
    values = {i: rnd.randrange(10**6) for i in range(600)}
    clock = DayClock(DAYS[0])
    sched = Scheduler(cli.ws.config_path, Options(workers=1, dispatch=False), clock, io.StringIO())
    for day in DAYS[:2]:
        publish(feed, rnd, values, day)
        clock.day = day
        sched.tick(wait=True)
    sched.close()
    assert stored(cli) == dict.fromkeys(DAYS[:2], (False, True))
    assert cli.json("archive", "verify", SRC)["ok"] == 2


def test_the_log_a_payload_wrote_is_checkpointed_on_the_queue_after_it(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not by the next payload's warm-up beside its parse: each applied payload queues
    the store's checkpoint after its compression (SQLite; a no-op on PostgreSQL)."""
    feed = tmp_path / "feed"
    feed.mkdir()
    cli("source", "add", SRC, "--key", "id", "--fetch", str(feed))
    rnd = random.Random(7)
    values = {i: rnd.randrange(10**6) for i in range(600)}
    calls: list[tuple[str, str | None]] = []
    real = Store.checkpoint

    def seen(self: Store) -> None:
        other = Store(cli.ws.store_url)
        try:
            wm = other.watermark(SRC)
        finally:
            other.engine.dispose()
        calls.append((threading.current_thread().name, iso(wm.published_at) if wm else None))
        real(self)

    monkeypatch.setattr(Store, "checkpoint", seen)
    clock = DayClock(DAYS[0])
    sched = Scheduler(cli.ws.config_path, Options(workers=1, dispatch=False), clock, io.StringIO())
    try:
        for day in DAYS[:2]:
            publish(feed, rnd, values, day)
            clock.day = day
            sched.tick(wait=True)
            sched.settled()
    finally:
        sched.close()
    queued = [at[:10] for name, at in calls if name.startswith("after-apply") and at]
    assert queued == DAYS[:2]  # once after each payload, its commit seen
