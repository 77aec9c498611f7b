"""Settling an ingest's raw object works from its file, never its bytes in memory
(`archive/settle.py`, `archive/streaming.py`): encoded from the file a chunk at a time
and checked by decoding it into the next base cache file while hashing it, the pages
behind each step handed back to the kernel, and still every payload reads back
byte-identical, the cache file is the payload's, and an object that does not decode to
the raw file's bytes never replaces it, nor does a kill while it is checked."""

from __future__ import annotations

import mmap
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
import xxhash

from archive import daily_payloads
from archive.daily_payloads import DAY, DAY0, archived_raw, sha
from feedledger.archive import LocalArchive, codec, streaming
from feedledger.archive.basecache import BaseCache
from feedledger.archive.objects import raw_rel, zst_rel
from feedledger.faults import ENV as FAULT_ENV
from helpers import Cli


def daily(days: int, rows: int) -> list[bytes]:
    """CSV snapshots a day apart, 20 rows changed each day."""
    return daily_payloads.daily(days, rows, seed=17, changes=20, span=10**9)


@pytest.fixture
def small_steps(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Steps of a few pages and no lag, so every step hands pages back (the stream's
    positions handed back to the kernel are recorded)."""
    monkeypatch.setattr(streaming, "STREAM_CHUNK", 3 * mmap.PAGESIZE)
    monkeypatch.setattr(streaming, "FRAME_STEP", 64)
    monkeypatch.setattr(streaming, "LAG", 0)
    released: list[int] = []
    real = streaming.Pages.__call__

    def recording(self: streaming.Pages, done: int) -> None:
        released.append(done)
        real(self, done)

    monkeypatch.setattr(streaming.Pages, "__call__", recording)
    return released


def test_payloads_settled_from_their_files_read_back_and_cache_the_latest(
    tmp_path: Path, small_steps: list[int]
) -> None:
    root = tmp_path / "archive"
    archive = LocalArchive(root, keyframe_every=lambda _s: 3, min_size=0)
    payloads = daily(5, rows=20_000)  # ~400 KB each: many pages, many steps
    for day, data in enumerate(payloads):
        digest = archived_raw(archive, data, day)
        del data  # settle never needs the bytes
        assert archive.settle("larimer", digest, DAY0 + day * DAY) == [digest]
        assert not (root / raw_rel(digest)).exists() and (root / zst_rel(digest)).exists()
    kinds = [archive.objects.stored(sha(p)) for p in payloads]
    assert [(k.encoding, k.depth) if k else None for k in kinds] == [
        ("keyframe", 0),
        ("delta", 1),
        ("delta", 2),
        ("keyframe", 0),
        ("delta", 1),
    ]
    fresh = LocalArchive(root)
    assert [fresh.get(sha(p)) for p in payloads] == payloads
    assert all(item.ok for item in fresh.verify("larimer"))
    # the cache file the check decoded into is the latest payload, its header's digest
    # (written once the decoding had hashed it) checked on load
    cached = BaseCache(root / "cache" / "base").load("larimer", sha(payloads[-1]))
    assert cached is not None and bytes(cached.data) == payloads[-1]
    assert (cached.depth, cached.chain) == (1, (sha(payloads[-1]), sha(payloads[-2])))
    if sys.platform.startswith("linux"):
        assert len(small_steps) > 20  # the stream went a few pages at a time


def test_an_object_that_does_not_decode_to_the_raw_file_never_replaces_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "archive"
    archive = LocalArchive(root, min_size=0)
    payloads = daily(2, rows=2_000)
    first = archived_raw(archive, payloads[0], 0)
    archive.settle("larimer", first, DAY0)
    real = streaming.encode_from

    def lying(*args: Any, **kwargs: Any) -> tuple[bytes, str]:
        stored, _ = real(*args, **kwargs)
        return stored, xxhash.xxh3_128_hexdigest(b"other bytes than the file's")

    monkeypatch.setattr(streaming, "encode_from", lying)
    second = archived_raw(archive, payloads[1], 1)
    assert archive.settle("larimer", second, DAY0 + DAY) == []
    assert (root / raw_rel(second)).exists() and not (root / zst_rel(second)).exists()
    assert all(item.ok for item in archive.verify("larimer"))
    # the base cache is still the first payload's: the checked file was discarded
    assert [p.name for p in (root / "cache" / "base" / "larimer").iterdir()] == [first]


def test_without_zstds_cffi_backend_a_settle_compresses_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(codec, "_libzstd", lambda: None)
    root = tmp_path / "archive"
    archive = LocalArchive(root, min_size=0)
    payloads = daily(3, rows=2_000)
    for day, data in enumerate(payloads):
        digest = archived_raw(archive, data, day)
        assert archive.settle("larimer", digest, DAY0 + day * DAY) == [digest]
    kinds = [archive.objects.stored(sha(p)) for p in payloads]
    assert [k.encoding if k else None for k in kinds] == ["keyframe", "delta", "delta"]
    assert [LocalArchive(root).get(sha(p)) for p in payloads] == payloads


def test_a_frame_decoded_from_a_file_checks_its_length_and_its_base(tmp_path: Path) -> None:
    base, data = daily(2, rows=2_000)
    path = tmp_path / "payload"
    path.write_bytes(data)
    stored, read = streaming.encode_from(path, sha(data), len(data), base, sha(base), 1)
    assert read == xxhash.xxh3_128_hexdigest(data)
    # the same object as the one-shot encoder's: one format
    assert codec.decode(codec.parse(stored)[0], codec.parse(stored)[1], base) == data
    into = memoryview(bytearray(len(data)))
    assert streaming.decode_into(stored, base, into) == read
    assert bytes(into) == data
    with pytest.raises(codec.FrameError):
        streaming.decode_into(stored, base, memoryview(bytearray(len(data) - 1)))
    with pytest.raises(codec.FrameError):
        streaming.decode_into(stored, None, into)  # a delta without its base
    with pytest.raises(codec.FrameError):
        streaming.decode_into(stored[: len(stored) - 10], base, into)  # cut short
    other = bytearray(base)
    other[100] ^= 0x01  # a wrong base gives other bytes (or zstd's checksum refuses)
    try:
        digest = streaming.decode_into(stored, bytes(other), into)
    except codec.FrameError:
        return
    assert digest != read


def test_a_kill_while_the_frame_is_checked_leaves_the_raw_object_and_the_old_cache(
    cli: Cli, tmp_path: Path
) -> None:
    """kill -9 mid-check (the frame decoded in part into the next base cache's temporary
    file): the raw object is there and verifies, the cache is still the day before's,
    and the source's next ingest compresses both and sweeps the temporary file."""
    cli("source", "add", "larimer", "--key", "id")
    payloads = daily(3, rows=20_000)
    files = []
    for n, data in enumerate(payloads):
        files.append(tmp_path / f"larimer_2026-08-0{n + 1}.csv")
        files[-1].write_bytes(data)
    cli("ingest", "larimer", str(files[0]), "--published-at", "2026-08-01")
    argv = ("ingest", "larimer", str(files[1]), "--published-at", "2026-08-02")
    killed = cli.proc(*argv, env={FAULT_ENV: "settle_checking:kill"})
    assert killed.returncode == -signal.SIGKILL, (killed.returncode, killed.stderr)
    root = cli.ws.archive_root
    cache = root / "cache" / "base" / "larimer"
    assert (root / raw_rel(sha(payloads[1]))).exists()
    assert not (root / zst_rel(sha(payloads[1]))).exists()
    assert sorted(p.name for p in cache.iterdir() if not p.name.startswith(".")) == [
        sha(payloads[0])
    ]
    assert any(p.name.endswith(".tmp") for p in cache.iterdir())  # the killed check's
    checked = cli.json("archive", "verify", "larimer")
    assert (checked["ok"], checked["bad"]) == (2, 0), checked

    cli("ingest", "larimer", str(files[2]), "--published-at", "2026-08-03")
    assert not any((root / raw_rel(sha(p))).exists() for p in payloads)
    assert [p.name for p in cache.iterdir()] == [sha(payloads[2])]
    kinds = [LocalArchive(root).objects.stored(sha(p)) for p in payloads]
    assert [k.encoding if k else None for k in kinds] == ["keyframe", "delta", "delta"]
    assert [LocalArchive(root).get(sha(p)) for p in payloads] == payloads
