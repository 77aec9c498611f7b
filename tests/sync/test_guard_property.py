"""Property: whatever the interleaving of live writes (each key's revisions in order,
redelivered at will) and historical writes (any revision a rebuild may have read, late
by any amount), a destination behind the guard ends equal to the ledger's current state
-- and never holds an older revision than one it already had."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from feedledger.model.destination import Destination
from feedledger.sync.target import Target
from feedledger.sync.transform import Doc, content_hash

KEYS = ["a", "b", "c"]


def make(key: str, rev: int, deleted: bool) -> Doc:
    body = None if deleted else json.dumps({"v": f"{key}{rev}"})
    return Doc(json.dumps([key]), rev, "M-1", 1, content_hash(body), deleted, body)


@st.composite
def histories(draw: st.DrawFn) -> tuple[dict[str, list[tuple[int, bool]]], list[tuple[str, int]]]:
    """Per key its ledger history (increasing revisions, some deletes) and an
    interleaving of writes: ("live", i) delivers revision i of the key in order, a
    ("hist", j) any earlier-read revision j at any position."""
    ledger: dict[str, list[tuple[int, bool]]] = {}
    for key in KEYS:
        revs = sorted(draw(st.sets(st.integers(1, 50), min_size=1, max_size=6)))
        ledger[key] = [(r, draw(st.booleans()) and i > 0) for i, r in enumerate(revs)]
    events: list[tuple[str, int]] = []
    live_pos = dict.fromkeys(KEYS, 0)
    pending = [k for k in KEYS for _ in ledger[k]]
    order = draw(st.permutations(pending))
    for key in order:
        i = live_pos[key]
        live_pos[key] += 1
        events.append((key, i))
        if draw(st.booleans()):  # a historical write of some revision read earlier
            events.append((key, -1 - draw(st.integers(0, i))))
        if draw(st.integers(0, 4)) == 0:  # a redelivery of the same live write
            events.append((key, i))
    return ledger, events


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(case=histories())
def test_any_interleaving_ends_at_the_ledgers_current_state(tmp_path: Path, case: object) -> None:
    ledger, events = case  # type: ignore[misc]
    db = tmp_path / f"p{abs(hash(str(events)))}.db"
    t = Target(Destination("p", "s", "sqlite", str(db), "docs"))
    t.ensure()
    try:
        high: dict[str, int] = {}
        for key, i in events:
            rev, deleted = ledger[key][i if i >= 0 else -1 - i]
            t.write([make(key, rev, deleted)])
            row = {r[0]: r for r in t.rows()}[json.dumps([key])]
            assert int(row[1]) >= high.get(key, 0)  # never backwards
            high[key] = int(row[1])
        final = {r[0]: (int(r[1]), bool(r[4])) for r in t.rows()}
        for key, history in ledger.items():
            assert final[json.dumps([key])] == history[-1]
    finally:
        t.close()
        db.unlink(missing_ok=True)
