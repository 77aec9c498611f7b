"""A payload too large to hold whole (a source's `memory_budget`) is compressed after it
is archived as a keyframe streamed from its raw file (`settle_streamed`): it reads back
byte-identical and verifies, the next payload settles against it as usual, settling it
twice changes nothing, and a failing encoder leaves it raw with a warning."""

from __future__ import annotations

from pathlib import Path

import pytest

from archive import daily_payloads
from archive.daily_payloads import DAY, DAY0, archived_raw, sha
from feedledger.archive import LocalArchive, streaming
from feedledger.archive.objects import raw_rel, zst_rel


def daily(seed: int, days: int, rows: int) -> list[bytes]:
    """CSV snapshots a day apart, 5 rows changed each day."""
    return daily_payloads.daily(days, rows, seed=seed, changes=5, span=10**6)


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
