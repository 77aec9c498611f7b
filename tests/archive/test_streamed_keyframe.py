"""A payload too large to hold whole (a source's `memory_budget`) is compressed after it
is archived as a keyframe streamed from its raw file (`settle_streamed`): it reads back
byte-identical and verifies, the next payload settles against it as usual, settling it
twice changes nothing, and a failing encoder leaves it raw with a warning."""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

import pytest

from feedledger.archive import LocalArchive, streaming
from feedledger.archive.objects import raw_rel, zst_rel

DAY = 86_400_000_000
DAY0 = 1_786_000_000_000_000
FETCHED = 1_790_000_000_000_000


def daily(seed: int, days: int, rows: int) -> list[bytes]:
    """CSV snapshots a day apart, a few rows changed each day."""
    rnd = random.Random(seed)
    table = {i: rnd.randrange(10**6) for i in range(rows)}
    out: list[bytes] = []
    for _ in range(days):
        for key in rnd.sample(sorted(table), 5):
            table[key] = rnd.randrange(10**6)
        out.append(("id,value\n" + "".join(f"{k},{v}\n" for k, v in table.items())).encode())
    return out


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def archived_raw(archive: LocalArchive, data: bytes, day: int) -> str:
    digest = archive.put_object(data, "larimer", later=True)
    archive.put("larimer", data, published_at=DAY0 + day * DAY, fetched_at=FETCHED, sha256=digest)
    return digest


def test_a_payload_settled_from_its_file_is_a_keyframe_that_reads_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "archive"
    archive = LocalArchive(root, min_size=0)
    # chunks far smaller than the payload: the stream crosses many of them
    monkeypatch.setattr(streaming, "STREAM_CHUNK", 1000)
    payloads = daily(11, 3, rows=2000)
    first = archived_raw(archive, payloads[0], 0)
    assert archive.settle_streamed("larimer", first) == [first]
    assert archive.settle_streamed("larimer", first) == []  # twice: nothing to do
    assert not (root / raw_rel(first)).exists() and (root / zst_rel(first)).exists()
    kind = archive.objects.stored(first)
    assert kind is not None and (kind.encoding, kind.depth) == ("keyframe", 0)
    assert archive.get(first) == payloads[0]
    # an ordinary settle after it: a delta against the streamed keyframe
    second = archived_raw(archive, payloads[1], 1)
    archive.settle("larimer", second, DAY0 + DAY)
    kind = archive.objects.stored(second)
    assert kind is not None and (kind.encoding, kind.base) == ("delta", first)
    assert archive.get(second) == payloads[1]
    assert all(item.ok for item in archive.verify("larimer"))


def test_a_failing_streamed_encoder_leaves_the_object_raw_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "archive"
    archive = LocalArchive(root, min_size=0)
    data = daily(5, 1, rows=400)[0]
    digest = archived_raw(archive, data, 0)

    def broken(*_args: object, **_kwargs: object) -> bytes:
        raise RuntimeError("the encoder broke")

    monkeypatch.setattr(streaming, "encode_keyframe_from", broken)
    with pytest.warns(UserWarning, match="stays raw in the archive.*the encoder broke"):
        assert archive.settle_streamed("larimer", digest) == []
    assert (root / raw_rel(digest)).exists()
    assert archive.get(sha(data)) == data
