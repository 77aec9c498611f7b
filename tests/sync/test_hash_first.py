"""A resync sends the destination each document's key, position, generation and content
hash first; only the documents whose held row is not already current travel whole (a
PostgreSQL destination: sync/pg_batch.py), and every key still gets its own verdict --
on SQLite too, where the batch is judged against the rows held in one transaction.
"""

from __future__ import annotations

from feedledger.sync.target import Target
from feedledger.sync.transform import Doc
from sync.guard_destinations import doc, held, target


def by_key(t: Target, docs: list[Doc]) -> dict[str, str]:
    return {v.key.strip('[]"'): v.verdict for v in t.write(docs)}


def sent(t: Target) -> tuple[int, int]:
    """(documents probed by key and hash only, documents sent whole) so far."""
    assert t.batches is not None
    return t.batches.probed, t.batches.whole


def loaded(place: tuple[str, str, str]) -> list[Doc]:
    """K-0..K-29 at revision 5, generation M-3, and a tombstone T-0, written by one
    target (closed): what the destination holds before a resync."""
    docs = [*(doc(f"K-{i}", 5, {"name": f"k{i}"}) for i in range(30)), doc("T-0", 5, None)]
    t = target(place)
    try:
        assert set(by_key(t, docs).values()) == {"accepted"}
    finally:
        t.close()
    return docs


def test_a_resync_of_what_the_destination_holds_sends_no_document_whole(
    place: tuple[str, str, str],
) -> None:
    docs = loaded(place)
    t = target(place)  # another process: it has sent nothing yet
    try:
        assert set(by_key(t, docs).values()) == {"already_current"}
        if place[0] == "postgres":
            assert sent(t) == (len(docs), 0)
        assert held(t, "T-0") == (5, "M-3", True)
    finally:
        t.close()


def test_changed_tombstoned_and_regenerated_records_are_sent_whole_and_judged(
    place: tuple[str, str, str],
) -> None:
    docs = loaded(place)
    same = docs[:20] + docs[28:]  # K-0..K-19, K-28, K-29, T-0: unchanged
    changed = [
        doc("K-20", 6, {"name": "k20 six"}),  # a newer revision
        doc("K-21", 6, {"name": "k21 six"}),
        doc("K-22", 5, None),  # deleted at the revision held
        doc("K-23", 7, None),  # deleted by a newer revision
        doc("K-24", 5, {"name": "k24"}, gen="M-4"),  # the same record, a newer generation
        doc("K-25", 6, {"name": "k25 six"}, gen="M-2"),  # an older generation
        doc("K-26", 4, {"name": "k26 four"}),  # an older revision
        doc("K-27", 5, {"name": "k27 other"}),  # same revision, other content
        doc("N-0", 1, {"name": "new"}),  # a key the destination does not hold
    ]
    t = target(place)
    try:
        got = by_key(t, [*same[:10], *changed, *same[10:]])
        if place[0] == "postgres":
            # every document probed; only the nine not current sent whole
            assert sent(t) == (len(same) + len(changed), len(changed))
        # a batch most of whose documents were written: the next is sent whole at once
        # (upserted first), and after it one mostly current is probed first again
        more = [doc(f"M-{i}", 1, {"name": f"m{i}"}) for i in range(6)]
        assert set(by_key(t, more).values()) == {"accepted"}
        again = by_key(t, [*more, doc("K-0", 5, {"name": "k0"})])
        if place[0] == "postgres":
            probed, whole = sent(t)
            assert (probed, whole) == (len(same) + len(changed) + 6, len(changed) + 6 + 7)
            assert by_key(t, [*more, doc("K-1", 5, {"name": "k1"})]) == {
                **{f"M-{i}": "already_current" for i in range(6)},
                "K-1": "already_current",
            }
            assert sent(t) == (probed + 7, whole)
    finally:
        t.close()
    assert got == {
        **{d.key.strip('[]"'): "already_current" for d in same},
        "K-20": "accepted",
        "K-21": "accepted",
        "K-22": "accepted",
        "K-23": "accepted",
        "K-24": "accepted",
        "K-25": "rejected",
        "K-26": "superseded",
        "K-27": "unresolved",
        "N-0": "accepted",
    }
    assert again == {**{f"M-{i}": "already_current" for i in range(6)}, "K-0": "already_current"}
    t = target(place)
    try:
        assert held(t, "K-20") == (6, "M-3", False)
        assert held(t, "K-22") == (5, "M-3", True)
        assert held(t, "K-23") == (7, "M-3", True)
        assert held(t, "K-24") == (5, "M-4", False)
        assert held(t, "K-25") == (5, "M-3", False)
        assert held(t, "K-26") == (5, "M-3", False)
        assert held(t, "K-27") == (5, "M-3", False)
        assert held(t, "N-0") == (1, "M-3", False)
    finally:
        t.close()
