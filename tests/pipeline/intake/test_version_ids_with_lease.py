"""A live ingest whose diff was computed before it took the source's lease reserves its
version ids in the lease's transaction (one fsync'd transaction fewer), and uses them
only for that diff: a diff made again under the lease takes ids of its own and the
reserved ones are skipped. Either way the versions are the same and their ids unique.
SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from feedledger.config import Workspace
from feedledger.context import Context
from feedledger.ledger.schema import counters, versions
from feedledger.ledger.store import Store
from feedledger.pipeline.intake import apply
from feedledger.pipeline.intake.ingest import ingest
from helpers import MakeSource

DAY1 = b"parcel_id,zoning\nA,R1\nB,C2\nC,A1\n"
DAY2 = b"parcel_id,zoning\nA,R1\nB,C3\nD,I1\n"  # B changed, C deleted, D added


def _ids(ctx: Context) -> list[tuple[str, int, int]]:
    """(key, valid_from, version_id) of every version."""
    with ctx.store.engine.connect() as conn:
        rows = conn.execute(
            select(versions.c.key, versions.c.valid_from, versions.c.version_id)
        ).all()
    return sorted((str(k), int(v), int(i)) for k, v, i in rows)


def _counter(ctx: Context) -> int:
    with ctx.store.engine.connect() as conn:
        value = conn.execute(select(counters.c.value).where(counters.c.name == "version_id"))
        return int(value.scalar_one())


def test_a_diff_made_ahead_takes_its_ids_with_the_lease(
    workspace: Workspace, make_source: MakeSource, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_source("parcels", key="parcel_id", format="csv", kind="snapshot")
    with Context(Workspace.load(workspace.config_path)) as ctx:
        ingest(ctx, "parcels", DAY1, published_at="2026-08-01")
        before = _counter(ctx)
        first = {i for _k, _v, i in _ids(ctx)}

        def refused(self: Store, n: int) -> int:
            raise AssertionError("version ids allocated in a transaction of their own")

        monkeypatch.setattr(Store, "allocate_version_ids", refused)
        got = ingest(ctx, "parcels", DAY2, published_at="2026-08-02")
        assert got.changes == 3
        day2 = sorted(i for _k, _v, i in _ids(ctx) if i not in first)
        assert day2 == list(range(before + 1, before + 4))
        assert _counter(ctx) == before + 3


def test_a_diff_made_again_under_the_lease_takes_ids_of_its_own(
    workspace: Workspace, make_source: MakeSource, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As when another worker moved the source between the diff ahead and the lease:
    the payload is diffed again under it, with ids allocated for that diff."""
    make_source("parcels", key="parcel_id", format="csv", kind="snapshot")
    with Context(Workspace.load(workspace.config_path)) as ctx:
        ingest(ctx, "parcels", DAY1, published_at="2026-08-01")
        before = _counter(ctx)
        first = {i for _k, _v, i in _ids(ctx)}
        monkeypatch.setattr(apply, "_still_current", lambda store, src, ahead: None)
        calls: list[int] = []
        allocate = Store.allocate_version_ids

        def counted(self: Store, n: int) -> int:
            calls.append(n)
            return allocate(self, n)

        monkeypatch.setattr(Store, "allocate_version_ids", counted)
        got = ingest(ctx, "parcels", DAY2, published_at="2026-08-02")
        assert got.changes == 3 and calls == [3]
        ids = _ids(ctx)
    # the three reserved with the lease are skipped; the diff's own three follow them
    assert sorted(i for _k, _v, i in ids if i not in first) == list(range(before + 4, before + 7))
    assert [(k, i in first) for k, _v, i in ids] == [
        ('["A"]', True),
        ('["B"]', True),
        ('["B"]', False),
        ('["C"]', True),
        ('["C"]', False),
        ('["D"]', False),
    ]
