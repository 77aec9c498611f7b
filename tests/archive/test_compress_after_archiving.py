"""An object stored raw first (`put_object(..., later=True)`, an ingest's) and
compressed after its publication is archived (`settle`): any sequence of payloads,
some of them never settled (a kill before compressing), reads back byte-identical and
verifies; a settle also compresses the raw ones a kill left just before it; the chain
of deltas never loops; an object store compresses at once and settles nothing."""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from feedledger.archive import LocalArchive, streaming
from feedledger.archive.objects import raw_rel, zst_rel
from feedledger.archive.settle import BEHIND

DAY = 86_400_000_000
DAY0 = 1_786_000_000_000_000
FETCHED = 1_790_000_000_000_000


def daily(seed: int, days: int, rows: int = 400) -> list[bytes]:
    """CSV snapshots a day apart, a few rows changed each day (now and then a day
    repeats the bytes of the day before)."""
    rnd = random.Random(seed)
    table = {i: rnd.randrange(10**6) for i in range(rows)}
    out: list[bytes] = []
    for _ in range(days):
        if out and rnd.random() < 0.15:
            out.append(out[-1])
            continue
        for key in rnd.sample(sorted(table), 5):
            table[key] = rnd.randrange(10**6)
        out.append(("id,value\n" + "".join(f"{k},{v}\n" for k, v in table.items())).encode())
    return out


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def ingest_like(archive: LocalArchive, data: bytes, day: int, *, settle: bool) -> None:
    """What an ingest does to the archive: the object raw, the publication, then (unless
    killed before) the object compressed."""
    digest = archive.put_object(data, "larimer", later=True)
    at = DAY0 + day * DAY
    archive.put("larimer", data, published_at=at, fetched_at=FETCHED, sha256=digest)
    if settle:
        archive.settle("larimer", digest, at)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10**6),
    settled=st.lists(st.booleans(), min_size=1, max_size=10),
    every=st.integers(1, 4),
)
def test_payloads_stored_raw_then_settled_read_back_identical(
    seed: int, settled: list[bool], every: int
) -> None:
    import tempfile  # lazy: one folder per hypothesis example

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "archive"
        archive = LocalArchive(root, keyframe_every=lambda _s: every, min_size=0)
        payloads = daily(seed, len(settled))
        for day, (data, settle) in enumerate(zip(payloads, settled, strict=True)):
            ingest_like(archive, data, day, settle=settle)
        fresh = LocalArchive(root, keyframe_every=lambda _s: every, min_size=0)
        for data in random.Random(seed).sample(payloads, len(payloads)):
            assert fresh.get(sha(data)) == data
        assert all(item.ok for item in fresh.verify("larimer"))
        # the last payload settled: it and up to BEHIND raw ones before it are compressed
        last = max((i for i, s in enumerate(settled) if s), default=None)
        if last is not None:
            for data in payloads[max(0, last - BEHIND) : last + 1]:
                if data in payloads[last + 1 :]:
                    continue  # the same bytes again later, not yet settled
                assert not (root / raw_rel(sha(data))).exists()
                assert (root / zst_rel(sha(data))).exists()


def test_a_settle_compresses_the_raw_ones_a_kill_left_as_a_chain(tmp_path: Path) -> None:
    root = tmp_path / "archive"
    archive = LocalArchive(root, min_size=0)
    payloads = daily(7, 4)
    assert len({sha(p) for p in payloads}) == 4
    ingest_like(archive, payloads[0], 0, settle=True)
    ingest_like(archive, payloads[1], 1, settle=False)
    ingest_like(archive, payloads[2], 2, settle=False)
    assert (root / raw_rel(sha(payloads[1]))).exists()
    ingest_like(archive, payloads[3], 3, settle=True)
    kinds = [archive.objects.stored(sha(p)) for p in payloads]
    assert [(k.encoding, k.depth) if k else None for k in kinds] == [
        ("keyframe", 0),
        ("delta", 1),
        ("delta", 2),
        ("delta", 3),
    ]
    assert [k.base if k else None for k in kinds[1:]] == [sha(p) for p in payloads[:3]]
    assert not any((root / raw_rel(sha(p))).exists() for p in payloads)
    # the base cache holds the latest payload, for the next delta
    assert [p.name for p in (root / "cache" / "base" / "larimer").iterdir()] == [sha(payloads[3])]


def test_settling_twice_changes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "archive"
    archive = LocalArchive(root, min_size=0)
    payloads = daily(3, 2)
    for day, data in enumerate(payloads):
        ingest_like(archive, data, day, settle=True)
    before = sorted(p.name for p in (root / "objects").rglob("*"))
    assert archive.settle("larimer", sha(payloads[1]), DAY0 + DAY) == []
    assert sorted(p.name for p in (root / "objects").rglob("*")) == before


def test_a_failing_encoder_leaves_the_object_raw_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "archive"
    archive = LocalArchive(root, min_size=0)
    payloads = daily(5, 2)
    ingest_like(archive, payloads[0], 0, settle=True)

    def broken(*_args: object, **_kwargs: object) -> bytes:
        raise RuntimeError("the encoder broke")

    monkeypatch.setattr(streaming, "encode_from", broken)
    with pytest.warns(UserWarning, match="stays raw in the archive.*the encoder broke"):
        ingest_like(archive, payloads[1], 1, settle=True)
    assert (root / raw_rel(sha(payloads[1]))).exists()
    assert archive.get(sha(payloads[1])) == payloads[1]
    assert all(item.ok for item in archive.verify("larimer"))
