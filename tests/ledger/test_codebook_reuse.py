"""A payload's codebook (ledger/encoding/codebooks.py `choose`): the source's newest one
is reused when a probe of the sample finds it still good -- a daily's changes, written
with the same fields and values -- and a new one is planned when the texts are no
longer those it was made for (a schema change), on SQLite and PostgreSQL."""

from __future__ import annotations

import json

from feedledger.ledger.encoding import choose
from feedledger.ledger.encoding.codebooks import PROBE_EVERY
from feedledger.ledger.store import Store

CITIES = ["FORT COLLINS", "LOVELAND", "ESTES PARK", "BERTHOUD"]


def _texts(n: int, fields: tuple[str, ...] = ("owner", "city")) -> list[str]:
    rows = []
    for i in range(n):
        record = {"owner": f"OWNER {i}", "city": CITIES[i % len(CITIES)]}
        record.update({f: f"{f} {i % 3}" for f in fields if f not in record})
        rows.append(json.dumps({f: record[f] for f in fields}, separators=(",", ":")))
    return rows


def test_the_newest_codebook_is_reused_for_texts_like_its_own(store_url: str) -> None:
    from helpers import migrate

    migrate(store_url)
    store = Store(store_url)
    try:
        first, book = choose(store, "s", _texts(1000))
        assert first is not None and book.tokens
        # a later payload of the same source, fields and values: the same codebook
        again, same = choose(store, "s", _texts(PROBE_EVERY * 40)[::-1])
        assert again == first
        assert same.to_text() == book.to_text()
    finally:
        store.close()


def test_a_new_codebook_is_planned_for_new_fields(store_url: str) -> None:
    from helpers import migrate

    migrate(store_url)
    store = Store(store_url)
    try:
        first, _book = choose(store, "s", _texts(1000))
        wider = ("owner", "city", "zoning_district_name", "assessor_land_use_description")
        second, book = choose(store, "s", _texts(1000, wider))
        assert first is not None and second is not None and second != first
        assert any("zoning_district_name" in p for p in book.patterns)
        # and it is the newest from then on
        third, _ = choose(store, "s", _texts(1000, wider))
        assert third == second
    finally:
        store.close()
