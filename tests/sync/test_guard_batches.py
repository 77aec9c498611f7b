"""A batch through the guard gets one verdict per key whatever its mix (PostgreSQL answers
only the minority of keys: those written, or those already current), and a batch the
destination already holds writes nothing: no row rewritten, none locked.
"""

from __future__ import annotations

from sqlalchemy import create_engine, text

from feedledger.sync.target import Target
from feedledger.sync.transform import Doc
from sync.guard_destinations import doc, target


def by_key(t: Target, docs: list[Doc]) -> dict[str, str]:
    return {v.key.strip('[]"'): v.verdict for v in t.write(docs)}


def held_rows(place: tuple[str, str, str]) -> dict[str, tuple[int, ...]]:
    """revision and written_at of every row, and on PostgreSQL its xmin and xmax (a row
    rewritten or locked changes them)."""
    kind, url, table = place
    cols = "key, revision, written_at"
    if kind == "postgres":
        cols += ", xmin::text::bigint, xmax::text::bigint"
    if kind == "postgres":
        engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    else:
        engine = create_engine(f"sqlite:///{url}")
    try:
        with engine.connect() as conn:
            return {r[0]: tuple(r[1:]) for r in conn.execute(text(f"SELECT {cols} FROM {table}"))}
    finally:
        engine.dispose()


def test_every_key_of_a_mixed_batch_gets_its_own_verdict(place: tuple[str, str, str]) -> None:
    t = target(place)
    try:
        first = [doc(f"K-{i}", 5, {"name": f"k{i}"}) for i in range(6)]
        assert set(by_key(t, first).values()) == {"accepted"}
        # more written than current
        mixed = [
            *(doc(f"N-{i}", 1, {"name": f"n{i}"}) for i in range(5)),  # new
            doc("K-0", 5, {"name": "k0"}),  # same everything
            doc("K-1", 4, {"name": "k1 old"}),  # an older revision
            doc("K-2", 5, {"name": "k2 other"}),  # same revision, other content
            doc("K-3", 6, {"name": "k3 new"}),  # a newer revision
            doc("K-4", 6, {"name": "k4 older gen"}, gen="M-2"),  # an older generation
            doc("K-5", 5, None),  # its deletion
        ]
        got = by_key(t, mixed)
        assert got == {
            **{f"N-{i}": "accepted" for i in range(5)},
            "K-0": "already_current",
            "K-1": "superseded",
            "K-2": "unresolved",
            "K-3": "accepted",
            "K-4": "rejected",
            "K-5": "accepted",
        }
        # more current than written
        again = [
            *(doc(f"N-{i}", 1, {"name": f"n{i}"}) for i in range(5)),
            doc("K-3", 6, {"name": "k3 new"}),
            doc("K-5", 5, {"name": "k5"}),  # the deletion wins over the state it deletes
            doc("K-0", 7, {"name": "k0 seven"}),
            doc("X-1", 1, {"name": "x"}),
        ]
        assert by_key(t, again) == {
            **{f"N-{i}": "already_current" for i in range(5)},
            "K-3": "already_current",
            "K-5": "superseded",
            "K-0": "accepted",
            "X-1": "accepted",
        }
    finally:
        t.close()


def test_a_batch_the_destination_already_holds_writes_and_locks_nothing(
    place: tuple[str, str, str],
) -> None:
    docs = [doc(f"K-{i}", 3, {"name": f"k{i}"}) for i in range(40)]
    t = target(place)
    try:
        assert set(by_key(t, docs).values()) == {"accepted"}
    finally:
        t.close()
    before = held_rows(place)
    # a resync (another process: a Target that has not just written most of a batch,
    # which would upsert its next batch first)
    t = target(place)
    try:
        assert set(by_key(t, docs).values()) == {"already_current"}
        # ... and a batch with one key changed writes that one only
        changed = [*docs[:5], doc("K-5", 4, {"name": "k5 four"}), *docs[6:]]
        got = by_key(t, changed)
    finally:
        t.close()
    assert got == {**{f"K-{i}": "already_current" for i in range(40)}, "K-5": "accepted"}
    after = held_rows(place)
    assert {k: v for k, v in after.items() if "K-5" not in k} == {
        k: v for k, v in before.items() if "K-5" not in k
    }
    assert after[doc("K-5", 4, {}).key] != before[doc("K-5", 4, {}).key]
    if place[0] == "postgres":
        assert {row[3] for k, row in after.items() if "K-5" not in k} == {0}  # never locked
