"""The archive: content-addressed, write-once, safe for several processes (Invariant 1).

Every behaviour that does not depend on the backend runs against both: a local folder
and S3-compatible object storage (moto's server, a fresh bucket per test). File modes,
paths and locks are the local archive's own; tests/archive/test_s3.py has the S3 ones.
"""

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
from feedledger.archive.objectstore import S3Archive
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


class Raw:
    """An archive's files or keys as stored, relative to its root or prefix, whichever the
    backend: to inspect the layout and to tamper with it."""

    def __init__(self, archive: Archive, fs: Any = None) -> None:
        self.archive = archive
        self.fs = fs

    def _full(self, rel: str) -> str:
        assert isinstance(self.archive, S3Archive)
        return f"{self.archive.bucket}/{self.archive.prefix}/{rel}"

    def names(self, area: str, suffix: str = "") -> list[str]:
        """Stored files under `area` ("objects", "meta", "rejected"), sorted."""
        if isinstance(self.archive, LocalArchive):
            base = self.archive.root / area
            found = [p for p in base.rglob(f"*{suffix}") if p.is_file()] if base.exists() else []
            rels = [p.relative_to(self.archive.root).as_posix() for p in found]
            return sorted(r for r in rels if not r.rsplit("/", 1)[-1].startswith("."))
        strip = len(self._full(""))
        keys = self.fs.find(self._full(area))
        return sorted(k[strip:] for k in keys if k.endswith(suffix))

    def sidecars(self, area: str = "meta") -> list[str]:
        return self.names(area, ".json")

    def read(self, rel: str) -> bytes:
        if isinstance(self.archive, LocalArchive):
            return (self.archive.root / rel).read_bytes()
        return bytes(self.fs.cat_file(self._full(rel)))

    def write(self, rel: str, data: bytes) -> None:
        """Overwrite (or create) a stored file behind the archive's back."""
        if isinstance(self.archive, LocalArchive):
            path = self.archive.root / rel
            if path.exists():
                path.chmod(0o644)
            path.write_bytes(data)
        else:
            self.fs.pipe_file(self._full(rel), data)

    def delete(self, rel: str) -> None:
        if isinstance(self.archive, LocalArchive):
            path = self.archive.root / rel
            path.chmod(0o644)
            path.unlink()
        else:
            self.fs.rm_file(self._full(rel))

    def sibling(self, name: str) -> str:
        """The location of a (so far empty) archive next to this one."""
        if isinstance(self.archive, LocalArchive):
            return str(self.archive.root.parent / name)
        assert isinstance(self.archive, S3Archive)
        return f"s3://{self.archive.bucket}/{name}"


def _object_rel(sha: str) -> str:
    return f"objects/{sha[:2]}/{sha}"


@pytest.fixture(params=["local", "s3"])
def archive(request: pytest.FixtureRequest, tmp_path: Path) -> Archive:
    if request.param == "local":
        return open_archive(tmp_path / "archive")
    bucket = request.getfixturevalue("s3_bucket")
    return open_archive(f"s3://{bucket}/archive")


@pytest.fixture
def raw(archive: Archive, request: pytest.FixtureRequest) -> Raw:
    if isinstance(archive, LocalArchive):
        return Raw(archive)
    return Raw(archive, request.getfixturevalue("s3_fs"))


@pytest.fixture
def local(tmp_path: Path) -> LocalArchive:
    return LocalArchive(tmp_path / "archive")


def test_open_archive_satisfies_protocol(archive: Archive, tmp_path: Path) -> None:
    assert isinstance(archive, Archive)
    assert isinstance(archive, LocalArchive | S3Archive)
    assert isinstance(open_archive(tmp_path / "folder"), LocalArchive)
    assert isinstance(open_archive("s3://bucket/prefix"), S3Archive)
    with pytest.raises(ConfigError, match="neither a folder nor an s3:// URL"):
        open_archive("gs://bucket/prefix")


def test_put_get_round_trip(archive: Archive, raw: Raw) -> None:
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
    assert raw.names("objects") == [_object_rel(sha)]
    assert archive.scan() == [ref]
    assert archive.scan("larimer") == [ref]


def test_local_path_of(local: LocalArchive) -> None:
    ref, _ = local.put("larimer", CSV, published_at=DAY1, fetched_at=FETCHED)
    sha = ref.sha256
    assert local.path_of(sha) == local.root / "objects" / sha[:2] / sha
    assert local.path_of(sha).read_bytes() == CSV


def test_sidecar_layout_and_contents(archive: Archive, raw: Raw) -> None:
    ref, _ = archive.put("larimer", CSV, published_at=DAY1, fetched_at=FETCHED)
    rel = f"meta/larimer/{DAY1:020d}-{ref.payload_id}.json"
    assert raw.sidecars() == [rel]
    doc = json.loads(raw.read(rel))
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


def test_local_sidecar_is_read_only_and_no_temporary_files(local: LocalArchive) -> None:
    ref, _ = local.put("larimer", CSV, published_at=DAY1, fetched_at=FETCHED)
    path = local.root / "meta" / "larimer" / f"{DAY1:020d}-{ref.payload_id}.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o444
    # No temporary files are left behind.
    leftovers = [p for p in local.root.rglob(".*") if p.name != ".lock"]
    assert leftovers == []


def test_identical_put_is_a_noop(archive: Archive, raw: Raw) -> None:
    first, created1 = archive.put("larimer", CSV, published_at=DAY1, fetched_at=FETCHED)
    second, created2 = archive.put(
        "larimer", CSV, published_at=DAY1, fetched_at=FETCHED + 3_600_000_000
    )
    assert (created1, created2) == (True, False)
    assert second == first  # keeps its original fetched_at
    assert second.fetched_at == FETCHED
    assert len(raw.names("objects")) == 1
    assert len(raw.sidecars()) == 1


def test_same_bytes_two_dates_share_one_object(archive: Archive, raw: Raw) -> None:
    a, created_a = archive.put("larimer", CSV, published_at=DAY1, fetched_at=FETCHED)
    b, created_b = archive.put("larimer", CSV, published_at=DAY2, fetched_at=FETCHED)
    assert created_a and created_b
    assert a.sha256 == b.sha256
    assert a.payload_id != b.payload_id
    assert len(raw.names("objects")) == 1
    assert len(raw.sidecars()) == 2
    assert archive.scan("larimer") == [a, b]


def test_same_bytes_two_sources_are_two_payloads(archive: Archive, raw: Raw) -> None:
    a, _ = archive.put("larimer", CSV, published_at=DAY1, fetched_at=FETCHED)
    b, created = archive.put("boulder", CSV, published_at=DAY1, fetched_at=FETCHED)
    assert created
    assert a.payload_id != b.payload_id
    assert len(raw.names("objects")) == 1
    assert archive.scan("boulder") == [b]
    assert {r.source for r in archive.scan()} == {"larimer", "boulder"}


def test_same_timestamp_different_bytes_is_ambiguous(archive: Archive, raw: Raw) -> None:
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
    rejected = raw.sidecars("rejected")
    assert rejected == [f"rejected/larimer/{DAY1:020d}-{other_id}.json"]
    assert rejected[0] in message  # where the refused sidecar is kept
    assert json.loads(raw.read(rejected[0]))["sha256"] == other_sha
    assert archive.scan() == [first]
    # Refused again on retry; the original stays accepted.
    with pytest.raises(AmbiguousPayloadError):
        archive.put("larimer", other, published_at=DAY1, fetched_at=FETCHED)
    assert archive.scan() == [first]
    assert len(raw.sidecars("rejected")) == 1
    # The original bytes are still welcome (no-op).
    assert archive.put("larimer", CSV, published_at=DAY1, fetched_at=FETCHED) == (first, False)


def test_keep_rejected_stores_bytes_and_a_note(archive: Archive, raw: Raw) -> None:
    data = b"no date in here\n"
    where = archive.keep_rejected("larimer", data, original_name="x.csv", reason="no date")
    sha = hashlib.sha256(data).hexdigest()
    assert archive.get(sha) == data
    [note] = raw.sidecars("rejected")
    # filed under its (known) source, and `where` is the bytes' location
    assert note.startswith(f"rejected/larimer/{sha[:16]}-")
    assert isinstance(where, str) and where.endswith(_object_rel(sha))
    assert where.startswith("s3://") == isinstance(archive, S3Archive)
    doc = json.loads(raw.read(note))
    assert (doc["sha256"], doc["reason"], doc["original_name"]) == (sha, "no date", "x.csv")
    # The same bytes and reason again: nothing new; a bad source name is no problem.
    assert archive.keep_rejected("larimer", data, original_name="x.csv", reason="no date")
    assert archive.keep_rejected("../bad name", data, reason="unknown source")
    assert archive.keep_rejected("typo", data, reason="undeclared source", filed=False)
    notes = raw.sidecars("rejected")
    assert len(notes) == 3
    assert sum(n.startswith("rejected/_unfiled/") for n in notes) == 2
    assert archive.scan() == []


def test_objects_are_read_only_and_never_overwritten(local: LocalArchive) -> None:
    ref, _ = local.put("larimer", CSV, published_at=DAY1, fetched_at=FETCHED)
    path = local.path_of(ref.sha256)
    assert stat.S_IMODE(path.stat().st_mode) == 0o444
    before = path.stat()
    local.put("larimer", CSV, published_at=DAY2, fetched_at=FETCHED)
    local.put("larimer", CSV, published_at=DAY1, fetched_at=FETCHED)
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns, after.st_size) == (
        before.st_ino,
        before.st_mtime_ns,
        before.st_size,
    )


def test_put_restores_a_missing_object(archive: Archive, raw: Raw) -> None:
    ref, _ = archive.put("larimer", CSV, published_at=DAY1, fetched_at=FETCHED)
    raw.delete(_object_rel(ref.sha256))
    assert not archive.has(ref.sha256)
    assert archive.put("larimer", CSV, published_at=DAY1, fetched_at=FETCHED) == (ref, False)
    assert archive.get(ref.sha256) == CSV


def test_empty_payload(archive: Archive) -> None:
    ref, created = archive.put("larimer", b"", published_at=DAY1, fetched_at=FETCHED)
    assert created and ref.size == 0
    assert archive.get(ref.sha256) == b""


def test_scan_and_list_order_and_bounds(archive: Archive, raw: Raw) -> None:
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
    assert open_archive(raw.sibling("nowhere")).scan() == []
    assert open_archive(raw.sibling("nowhere")).list("larimer") == []


def test_list_window_over_many_payloads(archive: Archive) -> None:
    refs = [
        archive.put("larimer", f"day {i}\n".encode(), published_at=DAY1 + i, fetched_at=FETCHED)[0]
        for i in range(30)
    ]
    assert archive.list("larimer", DAY1 + 10, DAY1 + 19) == refs[10:20]
    assert archive.list("larimer", DAY1 + 25) == refs[25:]
    assert archive.list("larimer", None, DAY1 + 2) == refs[:3]
    assert archive.list("larimer", 0, 0) == []


def test_scan_skips_broken_sidecar_with_warning(archive: Archive, raw: Raw) -> None:
    good, _ = archive.put("larimer", CSV, published_at=DAY1, fetched_at=FETCHED)
    broken = f"meta/larimer/{DAY2:020d}-{'ab' * 12}.json"
    raw.write(broken, b"{not json")
    name = broken.rsplit("/", 1)[1]
    with pytest.warns(UserWarning, match=name):
        assert archive.scan() == [good]
    with pytest.warns(UserWarning, match=name):
        assert archive.list("larimer") == [good]


def test_scan_skips_inconsistent_sidecar(archive: Archive, raw: Raw) -> None:
    good, _ = archive.put("larimer", CSV, published_at=DAY1, fetched_at=FETCHED)
    doc: dict[str, Any] = json.loads(raw.read(f"meta/larimer/{DAY1:020d}-{good.payload_id}.json"))
    doc["sha256"] = "0" * 64  # no longer matches its payload id
    raw.write(f"meta/larimer/{DAY2:020d}-{good.payload_id}.json", json.dumps(doc).encode())
    with pytest.warns(UserWarning, match="does not match"):
        assert archive.scan("larimer") == [good]


def test_corrupt_object_is_detected_on_get(archive: Archive, raw: Raw) -> None:
    ref, _ = archive.put("larimer", CSV, published_at=DAY1, fetched_at=FETCHED)
    raw.write(_object_rel(ref.sha256), b"parcel_id,zoning\n1,XX\n")
    with pytest.raises(FeedledgerError, match="corrupt") as info:
        archive.get(ref.sha256)
    assert ref.sha256 in str(info.value)
    assert _object_rel(ref.sha256) in str(info.value)  # names the damaged file or key


def test_get_missing_and_malformed(archive: Archive) -> None:
    missing = hashlib.sha256(b"never stored").hexdigest()
    with pytest.raises(NotFoundError, match=missing):
        archive.get(missing)
    assert not archive.has(missing)
    assert not archive.has("../../etc/passwd")
    with pytest.raises(NotFoundError):
        archive.get("../../etc/passwd")


def test_put_rejects_unsafe_source_and_bad_instants(archive: Archive) -> None:
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
    location: str,
    data: bytes,
    published_at: int,
    barrier: Any,
    results: Any,
) -> None:
    archive = open_archive(location)
    barrier.wait()
    try:
        ref, created = archive.put("larimer", data, published_at=published_at, fetched_at=FETCHED)
        results.put(("ok", ref.payload_id, created))
    except AmbiguousPayloadError as exc:
        results.put(("ambiguous", str(exc), False))
    except Exception as exc:  # pragma: no cover - reported to the parent
        results.put(("error", repr(exc), False))


def _run_concurrently(location: str, jobs: list[tuple[bytes, int]]) -> list[tuple[str, str, bool]]:
    """Each job in its own process (the S3 credentials and endpoint are inherited)."""
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(len(jobs))
    results = ctx.Queue()
    procs = [
        ctx.Process(target=_put_worker, args=(location, data, ts, barrier, results))
        for data, ts in jobs
    ]
    for proc in procs:
        proc.start()
    out = [results.get(timeout=60) for _ in procs]
    for proc in procs:
        proc.join(timeout=60)
        assert proc.exitcode == 0
    return out


def test_concurrent_put_of_same_bytes(archive: Archive, raw: Raw) -> None:
    payloads = [(f"row,{i}\n".encode() * 1000, DAY1 + i) for i in range(5)]
    # Each payload is put by two processes at the same moment.
    outcomes = _run_concurrently(archive.location, [job for job in payloads for _ in range(2)])
    assert all(kind == "ok" for kind, _, _ in outcomes), outcomes
    for data, ts in payloads:
        pid = payload_id_for("larimer", ts, hashlib.sha256(data).hexdigest())
        created = [c for _, p, c in outcomes if p == pid]
        assert sorted(created) == [False, True]
    assert len(archive.scan()) == 5
    assert len(raw.names("objects")) == 5
    assert len(raw.sidecars()) == 5
    for ref in archive.scan():
        assert archive.get(ref.sha256)
    if isinstance(archive, LocalArchive):
        assert [p for p in archive.root.rglob("*.tmp")] == []


def test_concurrent_put_of_rival_bytes(archive: Archive, raw: Raw) -> None:
    jobs = [(b"version a\n", DAY1), (b"version b\n", DAY1)]
    outcomes = _run_concurrently(archive.location, jobs)
    kinds = sorted(kind for kind, _, _ in outcomes)
    assert kinds == ["ambiguous", "ok"], outcomes
    assert len(archive.scan()) == 1
    assert len(raw.sidecars("rejected")) == 1
    assert len(raw.names("objects")) == 2
    if isinstance(archive, LocalArchive):
        assert os.listdir(archive.root / "meta" / "larimer").count(".lock") == 1
