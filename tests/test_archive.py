"""The archive: content-addressed, write-once, safe for several processes (Invariant 1)."""

from __future__ import annotations

import hashlib
import json
import multiprocessing as mp
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from feedledger.archive import Archive, LocalArchive, open_archive
from feedledger.model.errors import (
    AmbiguousPayloadError,
    BadPayloadError,
    ConfigError,
    FeedledgerError,
    NotFoundError,
)
from feedledger.model.payload import payload_id_for
from feedledger.model.timeutil import parse_instant, to_us

DAY1 = to_us(parse_instant("2026-08-06", "America/Denver"))
DAY2 = to_us(parse_instant("2026-08-07", "America/Denver"))
DAY3 = to_us(parse_instant("2026-08-08", "America/Denver"))
FETCHED = to_us(parse_instant("2026-08-09T10:00:00Z"))
CSV = b"parcel_id,zoning\n1,R1\n2,C2\n"


def _objects(root: Path) -> list[Path]:
    return sorted(p for p in (root / "objects").rglob("*") if p.is_file())


def _sidecars(root: Path, area: str = "meta") -> list[Path]:
    base = root / area
    return sorted(p for p in base.rglob("*.json")) if base.exists() else []


@pytest.fixture
def archive(tmp_path: Path) -> LocalArchive:
    return open_archive(tmp_path / "archive")


def test_open_archive_satisfies_protocol(archive: LocalArchive) -> None:
    assert isinstance(archive, LocalArchive)
    assert isinstance(archive, Archive)


def test_put_get_round_trip(archive: LocalArchive) -> None:
    ref, created = archive.put(
        "larimer",
        CSV,
        published_at=DAY1,
        fetched_at=FETCHED,
        original_name="larimer_2026-08-06.csv",
        content_type="text/csv",
    )
    sha = hashlib.sha256(CSV).hexdigest()
    assert created is True
    assert ref.sha256 == sha
    assert ref.payload_id == payload_id_for("larimer", DAY1, sha)
    assert (ref.source, ref.published_at, ref.fetched_at, ref.size) == (
        "larimer",
        DAY1,
        FETCHED,
        len(CSV),
    )
    assert ref.original_name == "larimer_2026-08-06.csv"
    assert ref.content_type == "text/csv"
    assert archive.get(sha) == CSV
    assert archive.has(sha)
    assert archive.path_of(sha) == archive.root / "objects" / sha[:2] / sha
    assert archive.scan() == [ref]
    assert archive.scan("larimer") == [ref]


def test_sidecar_layout_and_contents(archive: LocalArchive) -> None:
    ref, _ = archive.put("larimer", CSV, published_at=DAY1, fetched_at=FETCHED)
    path = archive.root / "meta" / "larimer" / f"{DAY1:020d}-{ref.payload_id}.json"
    doc = json.loads(path.read_text())
    assert doc == {
        "format": 1,
        "payload_id": ref.payload_id,
        "source": "larimer",
        "sha256": ref.sha256,
        "published_at": "2026-08-06T06:00:00+00:00",
        "published_at_us": DAY1,
        "fetched_at": "2026-08-09T10:00:00+00:00",
        "fetched_at_us": FETCHED,
        "size": len(CSV),
        "original_name": None,
        "content_type": None,
    }
    assert stat.S_IMODE(path.stat().st_mode) == 0o444
    # No temporary files are left behind.
    leftovers = [p for p in archive.root.rglob(".*") if p.name != ".lock"]
    assert leftovers == []


def test_identical_put_is_a_noop(archive: LocalArchive) -> None:
    first, created1 = archive.put("larimer", CSV, published_at=DAY1, fetched_at=FETCHED)
    second, created2 = archive.put(
        "larimer", CSV, published_at=DAY1, fetched_at=FETCHED + 3_600_000_000
    )
    assert (created1, created2) == (True, False)
    assert second == first  # keeps its original fetched_at
    assert second.fetched_at == FETCHED
    assert len(_objects(archive.root)) == 1
    assert len(_sidecars(archive.root)) == 1


def test_same_bytes_two_dates_share_one_object(archive: LocalArchive) -> None:
    a, created_a = archive.put("larimer", CSV, published_at=DAY1, fetched_at=FETCHED)
    b, created_b = archive.put("larimer", CSV, published_at=DAY2, fetched_at=FETCHED)
    assert created_a and created_b
    assert a.sha256 == b.sha256
    assert a.payload_id != b.payload_id
    assert len(_objects(archive.root)) == 1
    assert len(_sidecars(archive.root)) == 2
    assert archive.scan("larimer") == [a, b]


def test_same_bytes_two_sources_are_two_payloads(archive: LocalArchive) -> None:
    a, _ = archive.put("larimer", CSV, published_at=DAY1, fetched_at=FETCHED)
    b, created = archive.put("boulder", CSV, published_at=DAY1, fetched_at=FETCHED)
    assert created
    assert a.payload_id != b.payload_id
    assert len(_objects(archive.root)) == 1
    assert archive.scan("boulder") == [b]
    assert {r.source for r in archive.scan()} == {"larimer", "boulder"}


def test_same_timestamp_different_bytes_is_ambiguous(archive: LocalArchive) -> None:
    first, _ = archive.put("larimer", CSV, published_at=DAY1, fetched_at=FETCHED)
    other = CSV + b"3,R2\n"
    other_sha = hashlib.sha256(other).hexdigest()
    other_id = payload_id_for("larimer", DAY1, other_sha)
    with pytest.raises(AmbiguousPayloadError) as info:
        archive.put("larimer", other, published_at=DAY1, fetched_at=FETCHED)
    message = str(info.value)
    assert isinstance(info.value, BadPayloadError)
    assert "larimer" in message
    assert first.payload_id in message and other_id in message
    assert "2026-08-06T06:00:00+00:00" in message
    assert "ambiguous" in message
    # The bad bytes are kept for inspection, but not accepted.
    assert archive.get(other_sha) == other
    rejected = _sidecars(archive.root, "rejected")
    assert [p.name for p in rejected] == [f"{DAY1:020d}-{other_id}.json"]
    assert rejected[0].parent == archive.root / "rejected" / "larimer"
    assert json.loads(rejected[0].read_text())["sha256"] == other_sha
    assert archive.scan() == [first]
    # Refused again on retry; the original stays accepted.
    with pytest.raises(AmbiguousPayloadError):
        archive.put("larimer", other, published_at=DAY1, fetched_at=FETCHED)
    assert archive.scan() == [first]
    assert len(_sidecars(archive.root, "rejected")) == 1
    # The original bytes are still welcome (no-op).
    assert archive.put("larimer", CSV, published_at=DAY1, fetched_at=FETCHED) == (first, False)


def test_objects_are_read_only_and_never_overwritten(archive: LocalArchive) -> None:
    ref, _ = archive.put("larimer", CSV, published_at=DAY1, fetched_at=FETCHED)
    path = archive.path_of(ref.sha256)
    assert stat.S_IMODE(path.stat().st_mode) == 0o444
    before = path.stat()
    archive.put("larimer", CSV, published_at=DAY2, fetched_at=FETCHED)
    archive.put("larimer", CSV, published_at=DAY1, fetched_at=FETCHED)
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns, after.st_size) == (
        before.st_ino,
        before.st_mtime_ns,
        before.st_size,
    )


def test_put_restores_a_missing_object(archive: LocalArchive) -> None:
    ref, _ = archive.put("larimer", CSV, published_at=DAY1, fetched_at=FETCHED)
    path = archive.path_of(ref.sha256)
    path.chmod(0o644)
    path.unlink()
    assert not archive.has(ref.sha256)
    assert archive.put("larimer", CSV, published_at=DAY1, fetched_at=FETCHED) == (ref, False)
    assert archive.get(ref.sha256) == CSV


def test_empty_payload(archive: LocalArchive) -> None:
    ref, created = archive.put("larimer", b"", published_at=DAY1, fetched_at=FETCHED)
    assert created and ref.size == 0
    assert archive.get(ref.sha256) == b""


def test_scan_and_list_order_and_bounds(archive: LocalArchive) -> None:
    c, _ = archive.put("larimer", b"c", published_at=DAY3, fetched_at=FETCHED)
    a, _ = archive.put("larimer", b"a", published_at=DAY1, fetched_at=FETCHED)
    b, _ = archive.put("larimer", b"b", published_at=DAY2, fetched_at=FETCHED)
    z, _ = archive.put("boulder", b"z", published_at=DAY2, fetched_at=FETCHED)
    assert archive.scan("larimer") == [a, b, c]
    assert archive.scan() == sorted([a, b, c, z], key=lambda r: (r.published_at, r.payload_id))
    assert archive.list("larimer") == [a, b, c]
    assert archive.list("larimer", DAY2) == [b, c]
    assert archive.list("larimer", None, DAY2) == [a, b]
    assert archive.list("larimer", DAY2, DAY2) == [b]  # inclusive at both ends
    assert archive.list("larimer", DAY1 + 1, DAY3 - 1) == [b]
    assert archive.list("larimer", DAY3 + 1) == []
    assert archive.list("unknown") == []
    assert archive.scan("unknown") == []
    assert open_archive(archive.root / "nowhere").scan() == []


def test_scan_skips_broken_sidecar_with_warning(archive: LocalArchive) -> None:
    good, _ = archive.put("larimer", CSV, published_at=DAY1, fetched_at=FETCHED)
    broken = archive.root / "meta" / "larimer" / f"{DAY2:020d}-{'ab' * 12}.json"
    broken.write_text("{not json")
    with pytest.warns(UserWarning, match=broken.name):
        assert archive.scan() == [good]
    with pytest.warns(UserWarning, match=broken.name):
        assert archive.list("larimer") == [good]


def test_scan_skips_inconsistent_sidecar(archive: LocalArchive) -> None:
    good, _ = archive.put("larimer", CSV, published_at=DAY1, fetched_at=FETCHED)
    doc: dict[str, Any] = json.loads(
        (archive.root / "meta" / "larimer" / f"{DAY1:020d}-{good.payload_id}.json").read_text()
    )
    doc["sha256"] = "0" * 64  # no longer matches its payload id
    forged = archive.root / "meta" / "larimer" / f"{DAY2:020d}-{good.payload_id}.json"
    forged.write_text(json.dumps(doc))
    with pytest.warns(UserWarning, match="does not match"):
        assert archive.scan("larimer") == [good]


def test_corrupt_object_is_detected_on_get(archive: LocalArchive) -> None:
    ref, _ = archive.put("larimer", CSV, published_at=DAY1, fetched_at=FETCHED)
    path = archive.path_of(ref.sha256)
    path.chmod(0o644)
    path.write_bytes(b"parcel_id,zoning\n1,XX\n")
    with pytest.raises(FeedledgerError, match="corrupt") as info:
        archive.get(ref.sha256)
    assert ref.sha256 in str(info.value)


def test_get_missing_and_malformed(archive: LocalArchive) -> None:
    missing = hashlib.sha256(b"never stored").hexdigest()
    with pytest.raises(NotFoundError, match=missing):
        archive.get(missing)
    assert not archive.has(missing)
    assert not archive.has("../../etc/passwd")
    with pytest.raises(NotFoundError):
        archive.get("../../etc/passwd")


def test_put_rejects_unsafe_source_and_bad_instants(archive: LocalArchive) -> None:
    for bad in ("../escape", "a/b", ".hidden", ""):
        with pytest.raises(ConfigError):
            archive.put(bad, CSV, published_at=DAY1, fetched_at=FETCHED)
    with pytest.raises(ConfigError):
        archive.put("larimer", CSV, published_at=-1, fetched_at=FETCHED)
    with pytest.raises(TypeError):
        archive.put("larimer", CSV, published_at=1.5, fetched_at=FETCHED)  # type: ignore[arg-type]
    assert archive.scan() == []


# -- several processes ------------------------------------------------------------------


def _put_worker(
    root: str,
    data: bytes,
    published_at: int,
    barrier: Any,
    results: Any,
) -> None:
    archive = LocalArchive(Path(root))
    barrier.wait()
    try:
        ref, created = archive.put("larimer", data, published_at=published_at, fetched_at=FETCHED)
        results.put(("ok", ref.payload_id, created))
    except AmbiguousPayloadError as exc:
        results.put(("ambiguous", str(exc), False))
    except Exception as exc:  # pragma: no cover - reported to the parent
        results.put(("error", repr(exc), False))


def _run_concurrently(root: Path, jobs: list[tuple[bytes, int]]) -> list[tuple[str, str, bool]]:
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(len(jobs))
    results = ctx.Queue()
    procs = [
        ctx.Process(target=_put_worker, args=(str(root), data, ts, barrier, results))
        for data, ts in jobs
    ]
    for proc in procs:
        proc.start()
    out = [results.get(timeout=60) for _ in procs]
    for proc in procs:
        proc.join(timeout=60)
        assert proc.exitcode == 0
    return out


def test_concurrent_put_of_same_bytes(tmp_path: Path) -> None:
    root = tmp_path / "archive"
    payloads = [(f"row,{i}\n".encode() * 1000, DAY1 + i) for i in range(5)]
    # Each payload is put by two processes at the same moment.
    outcomes = _run_concurrently(root, [job for job in payloads for _ in range(2)])
    assert all(kind == "ok" for kind, _, _ in outcomes), outcomes
    for data, ts in payloads:
        pid = payload_id_for("larimer", ts, hashlib.sha256(data).hexdigest())
        created = [c for _, p, c in outcomes if p == pid]
        assert sorted(created) == [False, True]
    archive = LocalArchive(root)
    assert len(archive.scan()) == 5
    assert len(_objects(root)) == 5
    for ref in archive.scan():
        assert archive.get(ref.sha256)
    assert [p for p in root.rglob("*.tmp")] == []


def test_concurrent_put_of_rival_bytes(tmp_path: Path) -> None:
    root = tmp_path / "archive"
    outcomes = _run_concurrently(root, [(b"version a\n", DAY1), (b"version b\n", DAY1)])
    kinds = sorted(kind for kind, _, _ in outcomes)
    assert kinds == ["ambiguous", "ok"], outcomes
    archive = LocalArchive(root)
    assert len(archive.scan()) == 1
    assert len(_sidecars(root, "rejected")) == 1
    assert len(_objects(root)) == 2
    assert os.listdir(root / "meta" / "larimer").count(".lock") == 1
