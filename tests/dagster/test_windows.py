"""A partition selection's backfill window depends on the set of keys, never on the
order Dagster hands them in, covers every key, and starts no later than the oldest
publication still waiting (property tests)."""

from __future__ import annotations

from datetime import date, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from feedledger.dagster.windows import parse_keys, window

days = st.dates(min_value=date(2020, 1, 1), max_value=date(2030, 12, 31))


@given(st.lists(days, min_size=1, max_size=30), st.randoms(), st.none() | days)
def test_the_window_is_the_same_whatever_the_order_of_the_keys(
    picked: list[date], rnd: object, waiting: date | None
) -> None:
    keys = [d.isoformat() for d in picked]
    shuffled = list(keys)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    win = window(keys, waiting)
    assert window(shuffled, waiting) == win
    assert win.selected == sorted(set(picked))
    assert win.start <= min(picked) and win.end == max(picked)
    if waiting is not None and waiting <= win.end:
        assert win.start <= waiting  # a waiting publication is never skipped
    assert win.extended == (win.start != min(picked))


@given(st.lists(days, min_size=1, max_size=10))
def test_a_waiting_publication_after_the_selection_does_not_move_it(picked: list[date]) -> None:
    later = max(picked) + timedelta(days=1)
    win = window([d.isoformat() for d in picked], later)
    assert (win.start, win.end, win.extended) == (min(picked), max(picked), False)


@pytest.mark.parametrize("bad", [[], ["2026-13-01"], ["latest"]])
def test_keys_that_are_no_publication_dates_are_refused(bad: list[str]) -> None:
    with pytest.raises(ValueError):
        parse_keys(bad)
