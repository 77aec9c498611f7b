"""A payload with a key twice is refused, and one without is read, whether its rows
come in key order (checked by comparing neighbours, formats/readers.py `_distinct`) or
not (distinct key hashes, then the texts), for single and compound keys; an empty or
blank key field is named with its rows."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from feedledger.config import make_source
from feedledger.formats import read_observations
from feedledger.model.errors import BadPayloadError

KEYS = st.lists(st.sampled_from(["A", "B", "C", "D", "E", "a", "b", "AA", "B ", "10", "9"]))


def _csv(rows: list[tuple[str, ...]], names: tuple[str, ...]) -> bytes:
    lines = [",".join((*names, "v"))] + [",".join((*row, str(i))) for i, row in enumerate(rows)]
    return ("\n".join(lines) + "\n").encode()


def _read(rows: list[tuple[str, ...]], names: tuple[str, ...]) -> int:
    src = make_source("s", key=names, format="csv")
    return read_observations(_csv(rows, names), src, label="p.csv").frame.height


@settings(max_examples=150, deadline=None)
@given(keys=KEYS.filter(bool), order=st.sampled_from(["as drawn", "sorted", "reversed"]))
def test_a_key_twice_is_refused_in_any_row_order(keys: list[str], order: str) -> None:
    if order != "as drawn":
        keys = sorted(keys, reverse=order == "reversed")
    rows = [(k,) for k in keys]
    if len(set(keys)) == len(keys):
        assert _read(rows, ("id",)) == len(keys)
    else:
        with pytest.raises(BadPayloadError, match="duplicate key"):
            _read(rows, ("id",))


@settings(max_examples=100, deadline=None)
@given(first=KEYS.filter(bool), second=KEYS, sort=st.booleans())
def test_a_compound_key_twice_is_refused(first: list[str], second: list[str], sort: bool) -> None:
    rows = [(a, b) for a, b in zip(first, second + ["Z"] * len(first), strict=False)]
    if sort:
        rows.sort()
    if len(set(rows)) == len(rows):
        assert _read(rows, ("a", "b")) == len(rows)
    else:
        with pytest.raises(BadPayloadError, match="duplicate key"):
            _read(rows, ("a", "b"))


def test_an_empty_or_blank_key_is_named_with_its_rows() -> None:
    with pytest.raises(BadPayloadError, match=re.escape("rows 2, 3: null or empty key ['id']")):
        _read([("A",), ("",), ("",), ("B",)], ("id",))
    with pytest.raises(BadPayloadError, match=r"row 3: key \['id'\] is only whitespace"):
        _read([("A",), ("B",), (" ",), ("C",)], ("id",))
