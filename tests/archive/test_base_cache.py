"""A new process archiving a source's next payload deltas against the local
cache of the source's latest payload (`archive/basecache.py`) instead of decoding its
chain; a missing, damaged or stale cache is ignored (the chain is decoded as before),
never used to write a delta against wrong bytes; a kill between the object and the
cache leaves everything readable. S3 archives have no cache and still work.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from feedledger.archive import LocalArchive, codec, open_archive
from feedledger.archive import objects as objects_module
from feedledger.archive.basecache import BaseCache, CachedBase, PendingBase
from feedledger.archive.core import BlobArchive
from helpers import Cli

DAY = 86_400_000_000
DAY0 = 1_786_000_000_000_000
FETCHED = 1_790_000_000_000_000


def days(n: int, rows: int = 400, seed: int = 3) -> list[bytes]:
    rnd = random.Random(seed)
    table = {i: rnd.randrange(10**6) for i in range(rows)}
    out = []
    for _ in range(n):
        for key in rnd.sample(sorted(table), 5):
            table[key] = rnd.randrange(10**6)
        out.append(("id,value\n" + "".join(f"{k},{v}\n" for k, v in table.items())).encode())
    return out


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def decodes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every zstd frame decoded (the header's sha256), in order."""
    seen: list[str] = []
    real = objects_module.codec.decode

    def counting(header: Any, frame: Any, base: bytes | None) -> bytes:
        seen.append(header.sha256)
        return real(header, frame, base)

    monkeypatch.setattr(objects_module.codec, "decode", counting)
    yield seen


def put(archive: BlobArchive, payloads: list[bytes], i: int) -> None:
    archive.put("larimer", payloads[i], published_at=DAY0 + i * DAY, fetched_at=FETCHED)


def cache_dir(root: Path) -> Path:
    return root / "cache" / "base" / "larimer"


def fresh(root: Path) -> LocalArchive:
    """A new process's archive: nothing remembered in memory."""
    return LocalArchive(root, keyframe_every=lambda _s: 30, min_size=0)


def write_days(root: Path, payloads: list[bytes], upto: int) -> None:
    for i in range(upto):
        put(fresh(root), payloads, i)  # one process a day


def test_a_new_process_deltas_against_the_cache_without_decoding(
    tmp_path: Path, decodes: list[str]
) -> None:
    payloads = days(8)
    write_days(tmp_path, payloads, 7)
    assert decodes == []  # every day's base came from the cache
    assert [p.name for p in cache_dir(tmp_path).iterdir()] == [sha(payloads[6])]
    archive = fresh(tmp_path)
    put(archive, payloads, 7)
    assert decodes == []
    stored = archive.objects.stored(sha(payloads[7]))
    assert stored is not None and stored.encoding == "delta" and stored.depth == 7
    assert stored.base == sha(payloads[6])
    assert [p.name for p in cache_dir(tmp_path).iterdir()] == [sha(payloads[7])]
    reader = fresh(tmp_path)
    assert [reader.get(sha(p)) for p in payloads] == payloads
    assert decodes  # reads decode the archived objects, never the cache
    assert all(i.ok for i in fresh(tmp_path).verify("larimer"))


def _then_check(root: Path, payloads: list[bytes], decodes: list[str]) -> None:
    decodes.clear()
    archive = fresh(root)
    put(archive, payloads, len(payloads) - 1)
    assert decodes, "the cache should have been ignored and the chain decoded"
    assert [fresh(root).get(sha(p)) for p in payloads] == payloads
    stored = archive.objects.stored(sha(payloads[-1]))
    assert stored is not None and stored.base == sha(payloads[-2])
    assert [p.name for p in cache_dir(root).iterdir()] == [sha(payloads[-1])]


def test_a_missing_cache_decodes_the_chain(tmp_path: Path, decodes: list[str]) -> None:
    payloads = days(6)
    write_days(tmp_path, payloads, 5)
    for path in cache_dir(tmp_path).iterdir():
        path.unlink()
    _then_check(tmp_path, payloads, decodes)


@pytest.mark.parametrize("where", ["data", "header", "truncated", "empty"])
def test_a_corrupt_cache_is_ignored(tmp_path: Path, decodes: list[str], where: str) -> None:
    payloads = days(6)
    write_days(tmp_path, payloads, 5)
    path = cache_dir(tmp_path) / sha(payloads[4])
    raw = bytearray(path.read_bytes())
    if where == "data":
        raw[-3] ^= 0x01  # the bytes no longer give the digest in the header
    elif where == "header":
        raw[0:1] = b"x"
    elif where == "truncated":
        del raw[-10:]
    else:
        raw.clear()  # renamed but never written out (the cache is not fsync'd)
    path.write_bytes(bytes(raw))
    _then_check(tmp_path, payloads, decodes)


@pytest.mark.parametrize("damaged", [False, True])
def test_a_cache_written_before_its_digest_is_checked_against_its_name(
    tmp_path: Path, decodes: list[str], damaged: bool
) -> None:
    """An older release wrote no XXH3 digest in the header: such a file is checked by
    its sha256 (its name), used when it matches, ignored when it does not."""
    payloads = days(6)
    write_days(tmp_path, payloads, 5)
    path = cache_dir(tmp_path) / sha(payloads[4])
    header, _, data = path.read_bytes().partition(b"\n")
    doc = json.loads(header)
    assert set(doc) == {"depth", "chain", "xxh3_128"}
    del doc["xxh3_128"]
    if damaged:
        data = data[:-3] + bytes([data[-3] ^ 0x01]) + data[-2:]
    path.write_bytes(json.dumps(doc).encode() + b"\n" + data)
    if damaged:
        _then_check(tmp_path, payloads, decodes)
        return
    decodes.clear()
    put(fresh(tmp_path), payloads, 5)
    assert decodes == []  # used: its bytes hash to its name
    assert [fresh(tmp_path).get(sha(p)) for p in payloads] == payloads


def test_a_stale_cache_is_ignored(tmp_path: Path, decodes: list[str]) -> None:
    """The cache names an older payload (a kill after the object, before the cache)."""
    payloads = days(6)
    write_days(tmp_path, payloads, 3)
    old = {p.name: p.read_bytes() for p in cache_dir(tmp_path).iterdir()}
    write_days_from(tmp_path, payloads, 3, 5)
    for path in cache_dir(tmp_path).iterdir():
        path.unlink()
    for name, raw in old.items():
        (cache_dir(tmp_path) / name).write_bytes(raw)
    _then_check(tmp_path, payloads, decodes)


def test_a_cache_disagreeing_with_the_object_header_is_ignored(
    tmp_path: Path, decodes: list[str]
) -> None:
    """Right bytes, wrong depth (e.g. the object was re-encoded since): never trusted,
    or the chain would outgrow the keyframe interval."""
    payloads = days(6)
    write_days(tmp_path, payloads, 5)
    BaseCache(tmp_path / "cache" / "base").store(
        "larimer", sha(payloads[4]), CachedBase(payloads[4], 0, (sha(payloads[4]),))
    )
    _then_check(tmp_path, payloads, decodes)


def write_days_from(root: Path, payloads: list[bytes], start: int, stop: int) -> None:
    for i in range(start, stop):
        put(fresh(root), payloads, i)


class Killed(BaseException):
    pass


def test_a_kill_between_the_object_and_the_cache(
    tmp_path: Path, decodes: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    payloads = days(7)
    write_days(tmp_path, payloads, 4)

    def killed(*_args: Any) -> None:
        raise Killed

    with monkeypatch.context() as patch:
        patch.setattr(BaseCache, "store", killed)
        patch.setattr(PendingBase, "publish", killed)
        with pytest.raises(Killed):
            put(fresh(tmp_path), payloads, 4)  # object written, no cache, no sidecar
    # the cache file the check decoded into is left as a temporary, never the cache
    assert {p.name for p in cache_dir(tmp_path).iterdir() if not p.name.endswith(".tmp")} == {
        sha(payloads[3])
    }
    assert [fresh(tmp_path).get(sha(p)) for p in payloads[:5]] == payloads[:5]
    decodes.clear()
    put(fresh(tmp_path), payloads, 4)  # the retry: the object exists, the sidecar is new
    put(fresh(tmp_path), payloads, 5)  # its base (day 4) is not the cached day 3
    assert decodes
    assert [p.name for p in cache_dir(tmp_path).iterdir()] == [sha(payloads[5])]
    decodes.clear()
    put(fresh(tmp_path), payloads, 6)  # the cache is right again: used
    assert decodes == []
    assert [fresh(tmp_path).get(sha(p)) for p in payloads] == payloads


def test_a_cache_for_an_object_never_written_is_ignored(tmp_path: Path, decodes: list[str]) -> None:
    """A cache file whose object and sidecar are absent (or a temporary left by a kill)
    is not the source's current base: ignored, then replaced."""
    payloads = days(6)
    write_days(tmp_path, payloads, 5)
    stray = days(1, seed=99)[0]
    (cache_dir(tmp_path) / f".{sha(stray)}.1.ab.tmp").write_bytes(b"partial")
    cache = BaseCache(tmp_path / "cache" / "base")
    cache.store("larimer", sha(stray), CachedBase(stray, 1, (sha(stray), sha(payloads[4]))))
    _then_check(tmp_path, payloads, decodes)


def test_s3_archives_keep_no_cache_and_read_back(s3_bucket: str) -> None:
    payloads = days(5)
    url = f"s3://{s3_bucket}/team/archive"
    for i in range(5):
        archive = open_archive(url, keyframe_every=lambda _s: 30)
        assert isinstance(archive, BlobArchive)
        assert archive.objects.base_cache is None
        archive.objects.min_size = 0
        put(archive, payloads, i)
    reader = open_archive(url)
    assert [reader.get(sha(p)) for p in payloads] == payloads


def test_archive_add_uses_the_cache(cli: Cli, tmp_path: Path, decodes: list[str]) -> None:
    """Whole commands on the workspace's store (both backends): `ingest` then
    `archive add` in turn, each a new archive object, none decoding a chain."""
    cli("source", "add", "larimer", "--key", "id")
    payloads = days(4, rows=600)
    stamps = [f"2026-08-0{d}" for d in range(1, 5)]
    for n, body in enumerate(payloads):
        path = tmp_path / f"larimer_{stamps[n]}.csv"
        path.write_bytes(body)
        verb = ("ingest",) if n in (0, 3) else ("archive", "add")
        cli(*verb, "larimer", str(path), "--published-at", stamps[n])
    assert decodes == []
    root = cli.ws.archive_root
    assert [p.name for p in cache_dir(root).iterdir()] == [sha(payloads[3])]
    kinds = [LocalArchive(root).objects.stored(sha(p)) for p in payloads]
    assert [k.encoding if k else None for k in kinds] == ["keyframe"] + ["delta"] * 3
    assert cli.json("archive", "verify", "larimer")["ok"] == 4


def test_the_write_check_decodes_into_the_cache_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check of a new object decodes it into the cache file it then becomes (one
    pass, no copy): `BaseCache.store` is not called, the file holds the payload."""
    payloads = days(4)
    write_days(tmp_path, payloads, 3)

    def unused(*_args: Any) -> None:
        raise AssertionError("the decode-into path should have made the cache")

    monkeypatch.setattr(BaseCache, "store", unused)
    put(fresh(tmp_path), payloads, 3)
    assert [p.name for p in cache_dir(tmp_path).iterdir()] == [sha(payloads[3])]
    loaded = BaseCache(tmp_path / "cache" / "base").load("larimer", sha(payloads[3]))
    assert loaded is not None and bytes(loaded.data) == payloads[3]
    assert loaded.depth == 3 and loaded.chain == tuple(sha(p) for p in reversed(payloads))


def test_a_check_failing_in_the_cache_file_stores_raw_and_leaves_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An encoder that writes a wrong frame: the check decoding into the cache file
    fails, the payload is stored raw, the file is removed, the old cache stays."""
    payloads = days(5)
    write_days(tmp_path, payloads, 3)
    real = codec.encode_delta

    def wrong(data: bytes, *args: Any) -> bytes:
        return real(data[:-1] + b"X", *args)  # a frame of other bytes, same header

    monkeypatch.setattr(codec, "encode_delta", wrong)
    put(fresh(tmp_path), payloads, 3)
    monkeypatch.undo()
    stored = fresh(tmp_path).objects.stored(sha(payloads[3]))
    assert stored is not None and stored.encoding == "raw"
    assert [p.name for p in cache_dir(tmp_path).iterdir()] == [sha(payloads[2])]
    put(fresh(tmp_path), payloads, 4)
    assert [fresh(tmp_path).get(sha(p)) for p in payloads] == payloads


@pytest.mark.parametrize("point", ["archive_encoded", "archive_object_written"])
def test_an_error_after_the_check_leaves_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, point: str
) -> None:
    """An error at either fault point after the check (the cache file being filled is
    discarded), then the retry: everything readable, the cache right."""
    payloads = days(5)
    write_days(tmp_path, payloads, 3)
    monkeypatch.setenv("FEEDLEDGER_FAULT", point)
    with pytest.raises(Exception, match="injected"):
        put(fresh(tmp_path), payloads, 3)
    monkeypatch.delenv("FEEDLEDGER_FAULT")
    assert [p.name for p in cache_dir(tmp_path).iterdir()] == [sha(payloads[2])]
    put(fresh(tmp_path), payloads, 3)
    put(fresh(tmp_path), payloads, 4)
    assert [p.name for p in cache_dir(tmp_path).iterdir()] == [sha(payloads[4])]
    assert [fresh(tmp_path).get(sha(p)) for p in payloads] == payloads


def test_no_room_for_the_cache_file_still_archives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, decodes: list[str]
) -> None:
    """A disk with no room for the cache file (its blocks are allocated before it is
    mapped, so this is an error there, never a fault writing the mapping): the object
    is written and checked as before; no cache, and the next day decodes the chain."""
    payloads = days(5)
    write_days(tmp_path, payloads, 3)

    def full(*_args: Any) -> None:
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr("feedledger.archive.basecache.os.posix_fallocate", full)
        patch.setattr(BaseCache, "store", lambda *_a: None)  # no room there either
        put(fresh(tmp_path), payloads, 3)
    stored = fresh(tmp_path).objects.stored(sha(payloads[3]))
    assert stored is not None and stored.encoding == "delta"
    assert [p.name for p in cache_dir(tmp_path).iterdir()] == [sha(payloads[2])]
    decodes.clear()
    put(fresh(tmp_path), payloads, 4)
    assert decodes  # the stale cache ignored, the chain decoded
    assert [fresh(tmp_path).get(sha(p)) for p in payloads] == payloads


def test_without_posix_fallocate_the_cache_is_written_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, decodes: list[str]
) -> None:
    """macOS and Windows have no posix_fallocate: the cache file is written (store),
    never mapped, and the next day deltas against it as everywhere."""
    payloads = days(5)
    write_days(tmp_path, payloads, 3)
    stored: list[str] = []
    real = BaseCache.store

    def counting(self: BaseCache, source: str, sha256: str, cached: CachedBase) -> None:
        stored.append(sha256)
        real(self, source, sha256, cached)

    with monkeypatch.context() as patch:
        patch.delattr("feedledger.archive.basecache.os.posix_fallocate")
        patch.setattr(BaseCache, "store", counting)
        put(fresh(tmp_path), payloads, 3)
    assert stored == [sha(payloads[3])]
    decodes.clear()
    put(fresh(tmp_path), payloads, 4)
    assert decodes == []  # the written cache was used
    assert [fresh(tmp_path).get(sha(p)) for p in payloads] == payloads


def test_a_killed_process_temporary_is_removed_when_the_next_file_begins(tmp_path: Path) -> None:
    """A process killed while filling a cache file leaves a payload-sized temporary; the
    next `begin` removes those of processes that are gone, and keeps a live one's."""
    import os
    import subprocess
    import sys

    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    folder = tmp_path / "cache" / "base" / "larimer"
    folder.mkdir(parents=True)
    dead = folder / f".{'a' * 64}.{int(gone.stdout)}.0123456789ab.tmp"
    live = folder / f".{'b' * 64}.{os.getppid()}.0123456789ab.tmp"
    for path in (dead, live):
        path.write_bytes(b"partial")
    data = days(1)[0]
    pending = BaseCache(tmp_path / "cache" / "base").begin(
        "larimer", sha(data), 0, (sha(data),), len(data)
    )
    assert pending is not None
    try:
        assert not dead.exists() and live.exists()
    finally:
        pending.discard()
    assert [p.name for p in folder.iterdir()] == [live.name]
