"""A delta is written as zstd's "patch from" (the base as the frame's
prefix, long-distance matching) through python-zstandard's CFFI backend, and, where that
backend is missing, as before (the base as a raw-content dictionary). Both forms read
back byte-identical through the same decoder, alone and mixed in one chain: archives
written before the change stay readable, and a chain written half one way, half the
other (an upgrade mid-chain) too. A payload the encoder fails on is archived raw; an
error or a SIGKILL after the encoding or after the object's write leaves every payload
readable, and the retry archives it.
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import subprocess
import sys
from importlib.metadata import requires
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from feedledger.archive import LocalArchive, codec

DAY = 86_400_000_000
DAY0 = 1_786_000_000_000_000
FETCHED = 1_790_000_000_000_000


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def snapshots(seed: int, days: int, rows: int) -> list[bytes]:
    rnd = random.Random(seed)
    table = {i: rnd.randrange(10**9) for i in range(rows)}
    out = []
    for _ in range(days):
        for key in rnd.sample(sorted(table), max(1, rows // 100)):
            table[key] = rnd.randrange(10**9)
        table[max(table) + 1] = rnd.randrange(10**9)
        del table[rnd.choice(sorted(table))]
        out.append(("id,value\n" + "".join(f"{k},{v}\n" for k, v in table.items())).encode())
    return out


@pytest.fixture
def no_cffi(monkeypatch: pytest.MonkeyPatch) -> None:
    """As on a platform without python-zstandard's CFFI backend."""
    monkeypatch.setattr(codec, "_libzstd", lambda: None)


def test_the_cffi_backend_is_there() -> None:
    # zstandard's wheel ships the backend but it needs cffi, which this project declares
    # (a runtime install without the dev extras had none); without it every delta costs
    # ~20x the CPU
    assert codec._libzstd() is not None
    required = [re.split(r"[<>=!~ ;\[]", r, maxsplit=1)[0] for r in requires("feedledger") or []]
    assert "cffi" in required and "zstandard" in required


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    base=st.binary(max_size=5000),
    edits=st.lists(st.tuples(st.integers(0, 5000), st.binary(max_size=40)), max_size=8),
)
def test_a_prefix_delta_reads_back_through_the_decoder(
    base: bytes, edits: list[tuple[int, bytes]]
) -> None:
    data = bytearray(base)
    for at, piece in edits:
        data[at : at + len(piece)] = piece
    target = bytes(data)
    stored = codec.encode_delta(target, sha(target), base, sha(base), 1)
    header, frame = codec.parse(stored)
    assert (header.sha256, header.base, header.depth) == (sha(target), sha(base), 1)
    assert codec.decode(header, frame, base) == target


def test_the_two_forms_decode_alike_and_the_prefix_one_is_smaller(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    base, target = snapshots(5, 2, rows=20_000)
    prefix = codec.encode_delta(target, sha(target), base, sha(base), 1)
    monkeypatch.setattr(codec, "_libzstd", lambda: None)
    dictionary = codec.encode_delta(target, sha(target), base, sha(base), 1)
    assert prefix != dictionary
    for stored in (prefix, dictionary):
        header, frame = codec.parse(stored)
        assert codec.decode(header, frame, base) == target
        assert len(stored) < len(target)
    assert len(prefix) < len(target) // 20  # 200 of 20,000 rows changed
    assert len(prefix) <= len(dictionary)


def test_a_prefix_delta_needs_its_base() -> None:
    base, target = snapshots(6, 2, rows=2_000)
    header, frame = codec.parse(codec.encode_delta(target, sha(target), base, sha(base), 1))
    wrong = base.replace(b"1", b"2")
    with pytest.raises(codec.FrameError):
        codec.decode(header, frame, None)
    with pytest.raises(codec.FrameError, match="cannot be decompressed"):
        codec.decode(header, frame, wrong)  # the frame's checksum (objects.py: sha256 too)


@pytest.mark.parametrize("backend", ["cffi", "no-cffi"])
def test_the_write_check_compares_every_byte_the_frame_gives_back(
    monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    """`codec.verify` (the check before an encoded object replaces the raw bytes) passes
    only for exactly the payload's bytes: a frame that decodes, checksum and all, to
    bytes one bit or one byte away from them is refused, with the base as bytes or as
    a view of a mapped file (the base cache's)."""
    if backend == "no-cffi":
        monkeypatch.setattr(codec, "_libzstd", lambda: None)
    base, target = snapshots(7, 2, rows=2_000)
    stored = codec.encode_delta(target, sha(target), base, sha(base), 1)
    for reference in (base, memoryview(bytearray(base))):
        codec.verify(stored, sha(target), target, reference)
        for other in (
            target[:-1] + bytes([target[-1] ^ 1]),
            bytes([target[0] ^ 0x80]) + target[1:],
            target[:-1],
            target + b"\n",
        ):
            with pytest.raises(codec.FrameError, match="does not decode"):
                codec.verify(stored, sha(target), other, reference)


def _archive(root: Path, payloads: list[bytes], days: range) -> None:
    for i in days:  # one process a day: nothing remembered, the base cache off
        archive = LocalArchive(root, keyframe_every=lambda _s: 30, min_size=0)
        archive.objects.base_cache = None
        archive.put("larimer", payloads[i], published_at=DAY0 + i * DAY, fetched_at=FETCHED)


def _read_all(root: Path, payloads: list[bytes], seed: int) -> None:
    rnd = random.Random(seed)
    for i in rnd.sample(range(len(payloads)), len(payloads)):
        reader = LocalArchive(root, keyframe_every=lambda _s: 30, min_size=0)
        assert reader.get(sha(payloads[i])) == payloads[i]
    in_order = LocalArchive(root, keyframe_every=lambda _s: 30, min_size=0)
    assert [in_order.get(sha(p)) for p in payloads] == payloads


@pytest.mark.parametrize("first", ["dictionary", "prefix"])
def test_a_chain_written_half_in_each_form_reads_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, first: str
) -> None:
    payloads = snapshots(9, 10, rows=1_500)
    real = codec._libzstd
    forms = {"dictionary": lambda: None, "prefix": real}
    second = "prefix" if first == "dictionary" else "dictionary"
    monkeypatch.setattr(codec, "_libzstd", forms[first])
    _archive(tmp_path, payloads, range(5))
    monkeypatch.setattr(codec, "_libzstd", forms[second])
    _archive(tmp_path, payloads, range(5, 10))
    monkeypatch.setattr(codec, "_libzstd", real)
    archive = LocalArchive(tmp_path, keyframe_every=lambda _s: 30, min_size=0)
    depths = [archive.objects.stored(sha(p)) for p in payloads]
    assert [s.depth if s else None for s in depths] == list(range(10))
    _read_all(tmp_path, payloads, seed=1)
    assert all(item.ok for item in archive.verify("larimer"))


def test_an_archive_written_without_the_cffi_backend_reads_back(
    tmp_path: Path, no_cffi: None
) -> None:
    payloads = snapshots(11, 6, rows=1_000)
    _archive(tmp_path, payloads, range(6))
    _read_all(tmp_path, payloads, seed=2)


# -- the write's boundaries: an encoder failure, an error and a kill at each step ----------


def test_an_encoder_failure_stores_the_payload_raw(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    payloads = snapshots(12, 4, rows=1_000)
    _archive(tmp_path, payloads, range(1))

    def failing(*_args: object) -> bytes:
        raise codec.FrameError("zstd could not compress the delta (injected)")

    with monkeypatch.context() as patch:
        patch.setattr(codec, "encode_delta", failing)
        _archive(tmp_path, payloads, range(1, 2))
    with monkeypatch.context() as patch:
        patch.setattr(codec, "encode_keyframe", lambda *_a: (_ for _ in ()).throw(MemoryError()))
        patch.setattr(codec, "encode_delta", failing)
        _archive(tmp_path, payloads, range(2, 3))
    _archive(tmp_path, payloads, range(3, 4))  # a delta against the raw day 3
    archive = LocalArchive(tmp_path, keyframe_every=lambda _s: 30, min_size=0)
    kinds = [archive.objects.stored(sha(p)) for p in payloads]
    assert [k.encoding if k else None for k in kinds] == ["keyframe", "raw", "raw", "delta"]
    _read_all(tmp_path, payloads, seed=3)


@pytest.mark.parametrize("at", [-3, 20, 40], ids=["frame", "header", "header-sha"])
def test_a_frame_that_decodes_to_other_bytes_is_never_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, at: int
) -> None:
    """The raw bytes are not kept once encoded: an encoder that silently returns a
    wrong frame (a flipped byte in its output) must cost bytes on disk, not the payload
    -- the write decodes what it is about to store and keeps the payload raw."""
    payloads = snapshots(13, 3, rows=1_000)
    _archive(tmp_path, payloads, range(1))
    real = codec.encode_delta

    def flipped(*args: Any) -> bytes:
        good = bytearray(real(*args))
        good[at] ^= 0x40  # in the zstd frame, or in the header before it
        return bytes(good)

    with monkeypatch.context() as patch:
        patch.setattr(codec, "encode_delta", flipped)
        _archive(tmp_path, payloads, range(1, 2))
    archive = LocalArchive(tmp_path, keyframe_every=lambda _s: 30, min_size=0)
    kinds = [archive.objects.stored(sha(p)) for p in payloads[:2]]
    assert [k.encoding if k else None for k in kinds] == ["keyframe", "raw"]
    _read_all(tmp_path, payloads[:2], seed=4)


_PUT = """
import sys
from pathlib import Path
from feedledger.archive import LocalArchive
root, at, data, fetched = Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4])
archive = LocalArchive(root, keyframe_every=lambda _s: 30, min_size=0)
archive.put("larimer", data.read_bytes(), published_at=at, fetched_at=fetched)
"""


@pytest.mark.parametrize("mode", ["kill", "error"])
@pytest.mark.parametrize("point", ["archive_encoded", "archive_object_written"])
def test_a_kill_or_an_error_while_archiving_leaves_every_payload_readable(
    tmp_path: Path, point: str, mode: str
) -> None:
    payloads = snapshots(13, 4, rows=1_000)
    root = tmp_path / "archive"
    _archive(root, payloads, range(3))
    day3 = tmp_path / "day3.csv"
    day3.write_bytes(payloads[3])
    env = {k: v for k, v in os.environ.items() if k != "FEEDLEDGER_FAULT"}
    env["FEEDLEDGER_FAULT"] = point + (":kill" if mode == "kill" else "")
    argv = [sys.executable, "-c", _PUT, str(root), str(DAY0 + 3 * DAY), str(day3), str(FETCHED)]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    if mode == "kill":
        assert done.returncode == -9, done.stderr
    else:
        assert done.returncode == 1 and "InjectedFailure" in done.stderr, done.stderr
    reader = LocalArchive(root, keyframe_every=lambda _s: 30, min_size=0)
    assert [reader.get(sha(p)) for p in payloads[:3]] == payloads[:3]
    assert [r.sha256 for r in reader.scan("larimer")] == [sha(p) for p in payloads[:3]]
    # the object is there (checked on read) only once it was written
    assert reader.has(sha(payloads[3])) == (point == "archive_object_written")
    if reader.has(sha(payloads[3])):
        assert reader.get(sha(payloads[3])) == payloads[3]
    env.pop("FEEDLEDGER_FAULT")
    again = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    assert again.returncode == 0, again.stderr
    assert [r.sha256 for r in reader.scan("larimer")] == [sha(p) for p in payloads]
    # the base cache (off for days 0-2): after a rerun that wrote the object, the new
    # payload's alone, any temporary the kill left removed; after one that found the
    # object there, none -- a kill's temporary stays until the source's next object
    names = [p.name for p in (root / "cache" / "base" / "larimer").iterdir()]
    cached = [n for n in names if not n.endswith(".tmp")]
    temporaries = len(names) - len(cached)
    if point == "archive_encoded":
        assert (cached, temporaries) == ([sha(payloads[3])], 0)
    else:
        assert (cached, temporaries) == ([], 1 if mode == "kill" else 0)
    _read_all(root, payloads, seed=4)
    assert all(item.ok for item in reader.verify("larimer"))
