"""A payload file its source reads in batches (pipeline/intake/ingest_file.py) is copied into
the archive's folder, archived and read from that copy a piece at a time, never held
whole: the ledger and the archive get what the file held when it was copied (whatever
happens to the caller's file meanwhile), no staged copy is left behind, and bad input is
refused with its bytes kept, as for any ingest."""

from __future__ import annotations

import hashlib
from pathlib import Path

import polars as pl
import pytest

from feedledger.archive import LocalArchive
from feedledger.archive.staged import INCOMING, StagedFile
from feedledger.config import Workspace
from feedledger.context import Context
from feedledger.formats import csv_batched
from helpers import Cli, MakeSource
from pipeline.bounded_payloads import parcels, write


@pytest.fixture
def batched(make_source: MakeSource, monkeypatch: pytest.MonkeyPatch) -> None:
    """A source whose every CSV payload is read in batches (as one hundreds of times
    larger than its budget would be)."""
    make_source("parcels", memory_budget="64MiB")
    monkeypatch.setattr(csv_batched, "WHOLE_READ_FACTOR", 10**9)


@pytest.mark.usefixtures("batched")
def test_a_payload_file_is_archived_and_read_as_it_was_copied(
    cli: Cli, workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(parcels(2000), tmp_path / "d1.csv")
    original = path.read_bytes()
    staged_at: list[Path] = []
    stage = LocalArchive.stage

    def stage_then_change(archive: LocalArchive, source: Path) -> StagedFile:
        staged = stage(archive, source)
        staged_at.append(staged.path)
        # the caller's file is rewritten once copied: what is read is the copy
        source.write_bytes(b"parcel_id,a00\nP1,written after the copy\n")
        return staged

    monkeypatch.setattr(LocalArchive, "stage", stage_then_change)
    got = cli.json("ingest", "parcels", str(path), "--published-at", "2026-08-01")
    assert got["added"] == 2000 and got["observations"] == 2000
    assert got["sha256"] == hashlib.sha256(original).hexdigest()
    [copy] = staged_at
    assert copy.parent == workspace.archive_root / INCOMING
    assert not any(copy.parent.iterdir())  # the staged name is gone
    with Context(workspace) as ctx:
        assert ctx.archive.get(got["sha256"]) == original
        assert all(item.ok for item in ctx.archive.verify("parcels"))
    cli("verify", "parcels")
    snapshot = cli("snapshot", "parcels", "--valid", "2026-08-01").stdout
    assert snapshot.count("\n") == 2001 and "written after the copy" not in snapshot


@pytest.mark.usefixtures("batched")
def test_a_bad_payload_file_is_refused_with_its_bytes_kept(
    cli: Cli, workspace: Workspace, tmp_path: Path
) -> None:
    frame = parcels(2000)
    path = write(pl.concat([frame, frame.slice(5, 1)]), tmp_path / "dupes.csv")
    result = cli("ingest", "parcels", str(path), "--published-at", "2026-08-01", expect=None)
    assert result.exit_code != 0 and "duplicate key" in result.output
    with Context(workspace) as ctx:
        [kept] = ctx.archive.rejected("parcels")
        assert kept.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
        assert ctx.store.watermark("parcels") is None
    assert not any((workspace.archive_root / INCOMING).iterdir())


def test_a_staged_copy_left_by_a_killed_ingest_is_removed(tmp_path: Path) -> None:
    folder = tmp_path / INCOMING
    folder.mkdir()
    # a pid no process has (above the kernel's pid limit)
    orphan = folder / f"{2**22 + 1}.0123456789ab.tmp"
    orphan.write_bytes(b"left behind")
    payload = tmp_path / "p.csv"
    payload.write_bytes(b"id\n1\n")
    staged = StagedFile.copy(payload, folder)
    try:
        assert not orphan.exists()
        assert staged.path.read_bytes() == b"id\n1\n" and staged.size == 5
        assert staged.digest() == hashlib.sha256(b"id\n1\n").hexdigest()
    finally:
        staged.close()
    assert not staged.path.exists()
