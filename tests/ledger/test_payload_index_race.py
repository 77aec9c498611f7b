"""The payload index under two processes at once (a live run registering what it just
archived while a backfill indexes the archive): the second to insert finds the first's
row and reports the payload present -- or, for other bytes at the same publisher
timestamp, ambiguous -- never a store error (CI once saw `duplicate key value violates
unique constraint "payloads_pkey"` from a live run racing a backfill on PostgreSQL)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from feedledger.config import Workspace
from feedledger.ledger.store import Store
from feedledger.model.errors import AmbiguousPayloadError
from feedledger.model.payload import PayloadRef
from helpers import payload_ref

DAY = 1_785_996_000_000_000  # 2026-08-06T06:00:00Z


def ref_of(data: bytes, source: str = "larimer") -> PayloadRef:
    return payload_ref(source, data, DAY, DAY + 1, "parcels.csv")


@pytest.fixture
def stores(workspace: Workspace) -> Iterator[tuple[Store, Store]]:
    a, b = Store(workspace.store_url), Store(workspace.store_url)
    yield a, b
    a.engine.dispose()
    b.engine.dispose()


def other_registers_between_look_and_insert(
    monkeypatch: pytest.MonkeyPatch, mine: Store, other: Store, theirs: PayloadRef
) -> None:
    """`mine`'s first look finds nothing; right after it, `other` indexes `theirs`.

    PostgreSQL: `other` really commits while `mine`'s transaction is open (it holds no
    lock after a read). SQLite serialises writers (BEGIN IMMEDIATE), so no other
    process can get in there: the row is indexed first and the look is made to miss it,
    which is what `mine` would see had it looked a moment earlier."""
    real = Store._indexed
    looked: list[int] = []

    def look(self: Store, conn: Any, ref: PayloadRef) -> bool:
        if self is not mine or looked:
            return real(self, conn, ref)
        looked.append(1)
        if mine.dialect == "postgresql":
            assert not real(self, conn, ref)
            assert other.register_payload(theirs)
        return False

    if mine.dialect != "postgresql":
        assert other.register_payload(theirs)
    monkeypatch.setattr(Store, "_indexed", look)


def test_same_payload_indexed_by_another_process_meanwhile_is_present(
    stores: tuple[Store, Store], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = stores
    ref = ref_of(b"parcel_id,zone\n1,R1\n")
    other_registers_between_look_and_insert(monkeypatch, a, b, ref)
    assert a.register_payload(ref) is False
    assert a.list_payloads("larimer") == [ref]
    assert a.register_payload(ref) is False


def test_other_bytes_indexed_meanwhile_at_the_same_timestamp_are_ambiguous(
    stores: tuple[Store, Store], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = stores
    mine, theirs = ref_of(b"parcel_id,zone\n1,R1\n"), ref_of(b"parcel_id,zone\n1,R2\n")
    other_registers_between_look_and_insert(monkeypatch, a, b, theirs)
    with pytest.raises(AmbiguousPayloadError) as info:
        a.register_payload(mine)
    assert theirs.payload_id in str(info.value) and "ambiguous" in str(info.value)
    assert a.list_payloads("larimer") == [theirs]
