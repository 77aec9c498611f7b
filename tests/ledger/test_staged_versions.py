"""A large SQLite payload's versions staged through scratch files (ledger/staging.py)
are stored exactly as the direct path stores them: a column written row by row or bound
once for the whole payload (a first load's `change`, `deleted`, `prev_version_id`,
`revision`), version ids written or derived from the scratch files' row numbers."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from feedledger.config import Workspace, make_source
from feedledger.context import Context
from feedledger.ledger import bulk, staging
from feedledger.pipeline.intake.ingest import ingest
from helpers import backend_store, migrate

_ROWS = """SELECT version_id, valid_from, txn_seq, content_hash, prev_version_id,
    retracted_at, geometry_hash, fields_id, change, backfill, deleted, source, key,
    retracted_by, revision, attributes, geometry, typeof(change), typeof(deleted),
    typeof(prev_version_id), typeof(revision), typeof(fields_id)
    FROM versions ORDER BY version_id"""


def _day(*runs: tuple[range, str]) -> bytes:
    return b"id,v\n" + "".join(f"{i},{v}{i}\n" for ids, v in runs for i in ids).encode()


# a first load (every row added); 10 unchanged, 10 changed, 10 added, 10 deleted; all deleted
DAYS = [
    _day((range(30), "a")),
    _day((range(10, 20), "a"), (range(20, 30), "b"), (range(30, 40), "a")),
    _day(),
]


def _stored(tmp: Path, monkeypatch: pytest.MonkeyPatch, *, staged: bool, overlapped: bool) -> Any:
    monkeypatch.setattr(bulk, "STAGE_MIN_ROWS", 1 if staged else 10**9)
    monkeypatch.setattr(bulk, "VERSION_CHUNK_ROWS", 3)
    monkeypatch.setattr(staging, "FILE_ROWS", 4)  # several files, not aligned to chunks
    monkeypatch.setattr(staging, "attach_in_transaction", lambda: overlapped)
    with backend_store("sqlite", tmp) as url:
        workspace = Workspace.create(tmp / "ws", store_url=url, archive=None)
        migrate(workspace.store_url)
        workspace.add_source(make_source("s", key=("id",)))
        with Context(workspace) as ctx:
            for day, data in enumerate(DAYS, start=1):
                ingest(ctx, "s", data, published_at=f"2026-08-0{day}", allow_mass_delete=True)
        conn = sqlite3.connect(tmp / "ledger.db")
        try:
            return conn.execute(_ROWS).fetchall()
        finally:
            conn.close()


@pytest.mark.parametrize("overlapped", [True, False], ids=["overlapped", "attach-first"])
def test_staged_versions_are_stored_as_the_direct_path_stores_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, overlapped: bool
) -> None:
    direct = _stored(tmp_path / "direct", monkeypatch, staged=False, overlapped=overlapped)
    staged = _stored(tmp_path / "staged", monkeypatch, staged=True, overlapped=overlapped)
    assert staged == direct
    changes = [row[8] for row in direct]
    assert (changes.count(0), changes.count(1), changes.count(2)) == (40, 10, 40)
    assert list(tmp_path.rglob("*stage-*")) == []


def _versions(**columns: Any) -> pl.DataFrame:
    n = len(columns["version_id"])
    base = {
        "key": [f'["{i}"]' for i in range(n)],
        "change": ["added"] * n,
        "deleted": [False] * n,
        "hash": list(range(n)),
        "revision": [None] * n,
        "idx": list(range(n)),
        "prev_version_id": [None] * n,
    }
    frame = pl.DataFrame({**base, **columns}, schema_overrides={"prev_version_id": pl.Int64})
    return frame.rename({"hash": "content_hash"}).with_columns(pl.col("revision").cast(pl.String))


def test_a_first_load_stages_only_keys_hashes_and_texts() -> None:
    layout = bulk.stage_layout(_versions(version_id=[7, 8, 9]), geo=False)
    assert layout.staged == ["key", "content_hash", "attributes"]
    assert layout.fixed == {
        "deleted": False,
        "change": 0,
        "prev_version_id": None,
        "revision": None,
    }
    assert layout.first_id == 7


def test_varying_columns_and_gapped_ids_are_staged_row_by_row() -> None:
    frame = _versions(
        version_id=[1, 2, 4],
        change=["added", "changed", "deleted"],
        deleted=[False, False, True],
        prev_version_id=[None, 5, 6],
        revision=["r1", "r1", "r1"],
    )
    layout = bulk.stage_layout(frame, geo=True)
    assert layout.staged == [
        "version_id",
        "key",
        "deleted",
        "change",
        "prev_version_id",
        "content_hash",
        "attributes",
        "geometry",
        "geometry_hash",
    ]
    assert layout.fixed == {"revision": "r1"}
    assert layout.first_id is None
