"""`ledger/attr_encode.encode_rows` (stored texts made from a CSV
payload's string columns) gives exactly what the general way gives -- the canonical
JSON object's text, then `Codebook.encode_series` over it -- for any columns, names,
values (nulls, quotes, backslashes, control characters, braces, commas, non-ASCII,
empty strings) and codebook (planned from the rows, from other rows, or any subset of
patterns and value segments), and the stored texts decode back to the canonical ones."""

from __future__ import annotations

import json
import random
from collections import Counter

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from example_budget import examples
from feedledger.formats.canonical import columns_needing_escape, object_expr
from feedledger.ledger.encoding import encode_rows
from feedledger.ledger.encoding.codec import Codebook, all_gains, plan_book, row_segments

PLAIN = st.sampled_from(["a", "b", "owner", "", "é", "zone:", "x y", "c"])
ODD = st.sampled_from(["x,y", 'q"t', "{", "}a", "n\\m", "t\x01"])  # encoded the general way
PIECES = ["SPRING", "SPRINGFIELD", "FIELD", ",", "{", "}", ":", '"', "\\", "\x01", "é", " ", "null"]
VALUES = st.one_of(
    st.none(),
    st.lists(st.sampled_from(PIECES), max_size=4).map("".join),
    st.text(max_size=6),
)


def canonical(rows: pl.DataFrame) -> pl.Series:
    special = columns_needing_escape(rows)
    expr = object_expr(list(rows.columns), rows, special).alias("attributes")
    return rows.select(expr).get_column("attributes")


@st.composite
def frames(draw: st.DrawFn) -> pl.DataFrame:
    names = draw(st.lists(PLAIN, min_size=1, max_size=5, unique=True))
    if draw(st.integers(0, 9)) == 0:
        names.append(draw(ODD.filter(lambda odd: odd not in names)))
    height = draw(st.integers(1, 30))
    columns = {
        name: pl.Series(
            name, draw(st.lists(VALUES, min_size=height, max_size=height)), dtype=pl.String
        )
        for name in names
    }
    return pl.DataFrame(columns)


def books(texts: list[str], rnd: random.Random) -> list[Codebook]:
    """The plan of these texts, and subsets of every pattern and segment they hold
    (a string pattern without its bare one and the other way round, segments whose
    pattern has no token, ...)."""
    patterns: set[str] = set()
    segments: set[str] = set()
    for text in texts:
        for pattern, value in row_segments(text):
            patterns.add(pattern)
            if pattern.endswith(":"):
                patterns.add(pattern + '"')  # the string form, though this value is not
            elif pattern.endswith(':"'):
                patterns.add(pattern[:-1])  # and the bare one
            if value and len(value) > 1:
                segments.add(pattern + value)
                segments.add(pattern + value[: len(value) // 2 + 1])  # a prefix
    out = [plan_book(texts)]
    for _ in range(3):
        some = sorted(p for p in patterns if rnd.random() < 0.6)[:25]
        values = sorted(s for s in segments if rnd.random() < 0.6)[:80]
        out.append(Codebook(some, values if some and len(some) <= 28 else []))
    return out


@settings(max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=frames(), other=frames(), seed=st.integers(0, 2**32))
def test_column_encoding_equals_the_general_encoding(
    rows: pl.DataFrame, other: pl.DataFrame, seed: int
) -> None:
    texts = canonical(rows)
    rnd = random.Random(seed)
    known = texts.to_list() + canonical(other).to_list()
    for book in [*books(known, rnd), plan_book(canonical(other).to_list())]:
        general = book.encode_series(texts)
        fast = encode_rows(book, rows)
        assert fast.to_list() == general.to_list()
        assert [book.decode(t) for t in fast.to_list()] == texts.to_list()


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=frames(), seed=st.integers(0, 2**32))
def test_columns_of_few_distinct_values_encode_as_the_general_encoding(
    rows: pl.DataFrame, seed: int
) -> None:
    """Every column repeated: each has few distinct values for its rows, so its value
    segments are replaced once per distinct value, then looked up."""
    rows = pl.concat([rows] * 17)
    texts = canonical(rows)
    for book in books(texts.to_list(), random.Random(seed)):
        fast = encode_rows(book, rows)
        assert fast.to_list() == book.encode_series(texts).to_list()


@settings(max_examples=examples(50), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=frames(), seed=st.integers(0, 2**32), probe=st.integers(1, 40))
def test_columns_judged_by_their_first_rows_encode_as_the_general_encoding(
    rows: pl.DataFrame, seed: int, probe: int
) -> None:
    """A column whose first rows hold many distinct values is encoded row by row without
    its distinct values being counted (`_PROBE`): the same texts as counted, few or not."""
    from feedledger.ledger.encoding import encode

    rows = pl.concat([rows] * 17)
    texts = canonical(rows)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(encode, "_PROBE", probe)
        for book in books(texts.to_list(), random.Random(seed)):
            fast = encode_rows(book, rows)
            assert fast.to_list() == book.encode_series(texts).to_list()


def test_a_parcel_like_chunk_with_a_quoted_row_and_nulls(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = pl.DataFrame(
        {
            "parcel_id": [f"P{i:06d}" for i in range(1000)],
            "city": ["SPRINGFIELD", "SPRINGFIELD WEST", None, "SHELBYVILLE"] * 250,
            "owner": ['JOHN "JACK" SMITH' if i == 7 else f"OWNER {i % 13}" for i in range(1000)],
            "zone": [None if i % 5 == 0 else "R1" for i in range(1000)],
        }
    )
    texts = canonical(rows)
    book = plan_book(texts.to_list())
    assert book.values  # value segments (city, zone, owner) are in it
    expected = book.encode_series(texts).to_list()
    general: list[int] = []
    real = Codebook.encode_series

    def counted(self: Codebook, texts: pl.Series) -> pl.Series:
        general.append(texts.len())
        return real(self, texts)

    monkeypatch.setattr(Codebook, "encode_series", counted)
    assert encode_rows(book, rows).to_list() == expected
    assert general == [1]  # only the row with a quote went the general way
    # slices of the chunk: the quote's row within one, outside the other
    assert encode_rows(book, rows.slice(5, 10)).to_list() == expected[5:15]
    assert encode_rows(book, rows.slice(8, 500)).to_list() == expected[8:508]
    assert general == [1, 1]
    assert encode_rows(Codebook([]), rows).to_list() == texts.to_list()


def _reference_segments(text: str) -> list[tuple[str, str | None]]:
    """`row_segments` written plainly: every pattern and string value through
    json.dumps (the fast path takes a string as it is when json.dumps would)."""
    record = json.loads(text, parse_float=Literal, parse_int=Literal, parse_constant=Literal)
    if not isinstance(record, dict) or not record:
        return []
    out: list[tuple[str, str | None]] = []
    string = False
    for i, (name, value) in enumerate(record.items()):
        lead = "{" if i == 0 else ('",' if string else ",")
        number = isinstance(value, Literal)
        string = isinstance(value, str) and not number
        pattern = lead + json.dumps(name, ensure_ascii=False) + ":" + ('"' if string else "")
        if number:
            text_of: str | None = str(value)
        elif isinstance(value, str):
            text_of = json.dumps(value, ensure_ascii=False)[1:-1]
        elif value is None or isinstance(value, bool):
            text_of = json.dumps(value)
        else:
            text_of = None
        out.append((pattern, text_of))
    if string:
        out.append(('"}', None))
    return out


class Literal(str):
    pass


SCALARS = st.one_of(
    st.text(max_size=12),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.none(),
    st.lists(st.integers(0, 9), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(0, 9), max_size=2),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.dictionaries(st.text(max_size=8), SCALARS, max_size=6), max_size=12))
def test_segments_and_gains_equal_a_plain_reading(records: list[dict[str, object]]) -> None:
    texts = [json.dumps(r, ensure_ascii=False, separators=(",", ":")) for r in records]
    for text in texts:
        assert row_segments(text) == _reference_segments(text)
    saved, values = all_gains(texts)
    want: Counter[str] = Counter()
    seen: Counter[tuple[str, str]] = Counter()
    for text in texts:
        for pattern, value in _reference_segments(text):
            want[pattern] += len(pattern.encode()) - 1
            if value:
                seen[pattern, value] += 1
    assert saved == want
    assert values == Counter(
        {
            pattern + value: n * (len(value.encode()) - 1)
            for (pattern, value), n in seen.items()
            if n >= 2 and len(value.encode()) > 1
        }
    )
