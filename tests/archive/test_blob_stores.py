"""The archive's rules are written once (`archive/core.py`) over a small blob-store
protocol (`archive/blobs.py`). A third, in-memory blob store, with and without locks,
gets every rule from the core alone; the folder and S3 backends hold no rule of their
own. The two real backends are tested end to end in
tests/archive/test_content_addressed.py."""

from __future__ import annotations

import ast
import builtins
import hashlib
from collections.abc import Iterator
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

import pytest

import feedledger.archive as archive_pkg
from feedledger.archive.blobs import BlobStore
from feedledger.archive.core import BlobArchive
from feedledger.model.errors import AmbiguousPayloadError, FeedledgerError, NotFoundError

DAY1, DAY2, DAY3 = 1_786_000_000_000_000, 1_786_086_400_000_000, 1_786_172_800_000_000
FETCHED = 1_786_300_000_000_000
CSV = b"parcel_id,zoning\n1,R1\n2,C2\n"


class MemoryBlobs:
    """The smallest blob store: a dict. `locks` says whether it can hold a slot."""

    def __init__(self, *, locks: bool) -> None:
        self.keys: dict[str, bytes] = {}
        self.locks = locks
        self.slots_held: builtins.list[str] = []

    def where(self, rel: str) -> str:
        return f"mem://{rel}"

    def missing(self, sha256: str) -> str:
        return f"no archived object with sha256 {sha256} in memory"

    def prepare(self) -> None:
        return None

    def connect(self) -> None:
        return None

    def writing(self) -> AbstractContextManager[None]:
        return nullcontext()

    def slot(self, folder: str) -> AbstractContextManager[bool]:
        self.slots_held.append(folder)
        return nullcontext(self.locks)

    def exists(self, rel: str) -> bool:
        return rel in self.keys

    def create(self, rel: str, data: bytes) -> bool:
        if rel in self.keys:
            return False
        self.keys[rel] = data
        return True

    def read(self, rel: str) -> bytes | None:
        return self.keys.get(rel)

    def read_many(self, rels: builtins.list[str]) -> dict[str, bytes | OSError | None]:
        return {rel: self.keys.get(rel) for rel in rels}

    def list(self, rel_prefix: str, start_after: str | None = None) -> Iterator[str]:
        for rel in sorted(self.keys):
            if rel.startswith(rel_prefix) and (start_after is None or rel > start_after):
                yield rel


def _typed(blobs: MemoryBlobs) -> BlobStore:
    return blobs  # mypy: the in-memory store satisfies the protocol


@pytest.fixture(params=[True, False], ids=["locking", "claiming"])
def mem(request: pytest.FixtureRequest) -> MemoryBlobs:
    return MemoryBlobs(locks=request.param)


def test_rules_come_from_the_core_alone(mem: MemoryBlobs) -> None:
    archive = BlobArchive(_typed(mem))
    ref, created = archive.put("larimer", CSV, published_at=DAY1, fetched_at=FETCHED)
    assert created
    sha = hashlib.sha256(CSV).hexdigest()
    assert ref.sha256 == sha and mem.keys[f"objects/{sha[:2]}/{sha}"] == CSV
    sidecar = f"meta/larimer/{DAY1:020d}-{ref.payload_id}.json"
    assert sidecar in mem.keys and mem.slots_held == ["meta/larimer"]
    # claims are how a store without locks settles a slot, and only then
    claims = [rel for rel in mem.keys if rel.startswith("claims/")]
    assert claims == ([] if mem.locks else [f"claims/larimer/{DAY1:020d}.json"])

    # identical bytes again: a no-op returning the archived ref (its first fetched_at)
    assert archive.put("larimer", CSV, published_at=DAY1, fetched_at=FETCHED + 9) == (ref, False)
    # different bytes for the taken timestamp: kept under rejected/, refused
    with pytest.raises(AmbiguousPayloadError, match=r"mem://rejected/larimer/"):
        archive.put("larimer", b"parcel_id\n9\n", published_at=DAY1, fetched_at=FETCHED)
    (refused,) = archive.rejected("larimer")
    assert refused.kind == "ambiguous" and refused.location.startswith("mem://objects/")

    archive.put("larimer", b"parcel_id\n2\n", published_at=DAY2, fetched_at=FETCHED)
    archive.put("larimer", b"parcel_id\n3\n", published_at=DAY3, fetched_at=FETCHED)
    assert [r.published_at for r in archive.scan("larimer")] == [DAY1, DAY2, DAY3]
    assert [r.published_at for r in archive.list("larimer", DAY2, DAY2)] == [DAY2]
    assert [r.published_at for r in archive.list("larimer", DAY2)] == [DAY2, DAY3]

    # verify on read
    assert archive.get(sha) == CSV and archive.has(sha)
    mem.keys[f"objects/{sha[:2]}/{sha}"] = b"tampered"
    with pytest.raises(FeedledgerError, match="is corrupt"):
        archive.get(sha)
    with pytest.raises(NotFoundError, match="in memory"):
        archive.get("0" * 64)

    where = archive.keep_rejected("nosuch", b"\x00", reason="unknown source", filed=False)
    assert where.startswith("mem://objects/")
    assert any(rel.startswith("rejected/_unfiled/") for rel in mem.keys)


def test_a_claim_without_its_sidecar_is_completed_by_the_next_writer() -> None:
    """A writer that stopped between its claim and its sidecar (stores without locks)."""
    mem = MemoryBlobs(locks=False)
    archive = BlobArchive(mem)
    ref, _ = archive.put("larimer", CSV, published_at=DAY1, fetched_at=FETCHED)
    del mem.keys[f"meta/larimer/{DAY1:020d}-{ref.payload_id}.json"]
    with pytest.raises(AmbiguousPayloadError):
        archive.put("larimer", b"other\n", published_at=DAY1, fetched_at=FETCHED)
    assert [r.payload_id for r in archive.scan("larimer")] == [ref.payload_id]


def test_backends_hold_no_rule_of_their_own() -> None:
    """Only the core builds sidecars, refuses rivals and verifies bytes: the folder and
    S3 modules import none of the rules' helpers."""
    folder = Path(archive_pkg.__file__).parent
    rules = {"sidecar_bytes", "ambiguous", "new_ref", "parse_sidecar_bytes", "note", "parse"}
    for backend in ("local.py", "objectstore.py", "s3client.py"):
        tree = ast.parse((folder / backend).read_text())
        imported = {
            alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom)
            and (node.module or "").startswith("feedledger.archive.")
            for alias in node.names
        }
        assert not imported & rules, (backend, imported & rules)
        assert "hashlib" not in (folder / backend).read_text(), backend
