"""Stored attribute texts split into columns without JSON
parsing (ledger/encoding/split.py, `attribute_columns.batch_frame`) give exactly the
cells of the JSON path (`attribute_columns.text_columns` over the decoded texts), and
the CSV and Parquet exports of a compact store equal the former row-by-row export."""

from __future__ import annotations

import io
import itertools
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from feedledger.formats.canonical import RawNumber, canonical
from feedledger.ledger.encoding import choose
from feedledger.ledger.encoding.codec import Codebook, field_tokens, gains, plan, plan_book
from feedledger.ledger.encoding.columns import (
    UnknownField,
    batch_frame,
    text_columns,
    with_codebooks,
)
from feedledger.ledger.readers import snapshot_rows
from feedledger.ledger.schema import CHANGE_CODES, versions
from feedledger.ledger.store import Store
from feedledger.pipeline.exports import writers as snapshot_writers
from helpers import migrate, old_csv, refused_or, top_patterns

_names = itertools.count()

TEXTS = st.one_of(
    st.text(
        alphabet=st.sampled_from(
            ["a", "Z", " ", ",", '"', "'", "\n", "\r", "\\", "é", "\t", ":", "{", "}", "\x01"]
        ),
        max_size=6,
    ),
    st.sampled_from(["", "null", "true", "1.0", "MITCHELL, EDWARD", 'A "B" \\C', "日本"]),
)
NUMBERS = st.sampled_from(["0", "-0", "-1", "2.50", "1e5", "1E-3", "-2.5e+10", "123456789012345"])
VALUES = st.one_of(
    TEXTS,
    st.none(),
    NUMBERS.map(RawNumber),
    st.booleans(),
    st.lists(st.one_of(NUMBERS.map(RawNumber), TEXTS), max_size=2),
    st.dictionaries(st.sampled_from(["x", "y"]), TEXTS, max_size=2),
)
FIELDS = ["b", "a", "c d", "é", 'q"', "z"]
RECORD = st.dictionaries(st.sampled_from(FIELDS), VALUES, max_size=6)


def _book(texts: list[str], share: int, kind: str = "plan") -> Codebook:
    """A codebook of the first `share` texts (so fields and value kinds that only later
    texts have stay untokenised, as after a schema change): as `plan` makes it, with
    two-byte tokens for the values seen twice too (`plan_book`, kind "values"), or
    every pattern those texts hold (kind "all")."""
    sample = texts[: max(share, 0)]
    if kind == "values":
        return plan_book(sample)
    if kind == "plan":
        return Codebook(plan(gains(sample)))
    return Codebook(sorted({p for t in sample for p in top_patterns(t)})[:31])


def _stored_batch(texts: list[str], book: Codebook, fields_id: int | None) -> pa.RecordBatch:
    import polars as pl

    series = pl.Series(texts, dtype=pl.String)
    # (no fields_id: a text written before codebooks, canonical as it is)
    encoded = (book.encode_series(series) if fields_id is not None else series).to_arrow()
    ids = pa.array([fields_id] * len(texts), pa.int64())
    schema = with_codebooks(
        pa.schema([("attributes", pa.string()), ("fields_id", pa.int64())]),
        {7: book} if fields_id is not None else {},
    )
    return pa.record_batch([encoded.cast(pa.string()), ids], schema=schema)


def _json_path(texts: list[str], names: list[str]) -> Any:
    try:
        return [c.to_pylist() for c in text_columns(pa.array(texts, pa.string()), names)]
    except UnknownField:
        return ("unknown",)


def _split_path(batch: pa.RecordBatch, names: list[str]) -> Any:
    try:
        frame = batch_frame(batch, names)
    except UnknownField:
        return ("unknown",)
    return [frame.get_column(n).to_list() for n in names]


@given(
    records=st.lists(RECORD, min_size=1, max_size=12),
    share=st.integers(0, 12),
    drop=st.sets(st.sampled_from(FIELDS), max_size=2),
    coded=st.booleans(),
    kind=st.sampled_from(["plan", "all", "values"]),
)
@settings(max_examples=400, deadline=None)
def test_split_equals_the_json_path(
    records: list[dict[str, Any]], share: int, drop: set[str], coded: bool, kind: str
) -> None:
    texts = [canonical(r) for r in records]
    # every field seen, or (an extra field -> UnknownField) fewer
    names = sorted({n for r in records for n in r} - drop) or ["b"]
    book = _book(texts, share, kind)
    batch = _stored_batch(texts, book, 7 if coded else None)
    assert _split_path(batch, names) == _json_path(texts, names)


def test_field_tokens_read_thetop_patterns() -> None:
    book = Codebook(['"}', '","a\\"b":"', ',"n":', '{"x":"', "not a pattern"])
    got = field_tokens(book)
    assert got.end == "\x01"
    assert got.fields == {"\x02": ('a"b', True), "\x03": ("n", False), "\x04": ("x", True)}
    assert got.expand == []


def test_field_tokens_expand_value_segments(monkeypatch: pytest.MonkeyPatch) -> None:
    """A value segment's token expands to its pattern's token and the value's text (the
    pattern itself where the codebook has no token for it): such texts are split, not
    parsed."""
    from feedledger.ledger.encoding import columns as attribute_columns

    book = Codebook(['"}', '{"n":', ',"x":"'], ['{"n":12', ',"x":"R-1', '","z":"ab'])
    got = field_tokens(book)
    assert got.fields == {"\x02": ("n", False), "\x03": ("x", True)}
    assert got.expand == [
        (book.tokens[3], "\x0212"),
        (book.tokens[4], "\x03R-1"),
        (book.tokens[5], '","z":"ab'),
    ]
    texts = [
        canonical({"n": RawNumber("12"), "x": "R-1"}),
        canonical({"n": RawNumber("3"), "x": "R-10"}),
    ]
    batch = _stored_batch(texts, book, 7)
    assert all(book.tokens[4] in t for t in batch.column("attributes").to_pylist())
    expected = _json_path(texts, ["n", "x"])

    def refused(*_args: Any) -> Any:
        raise AssertionError("the JSON path was used")

    monkeypatch.setattr(attribute_columns, "text_columns", refused)
    assert _split_path(batch, ["n", "x"]) == expected


def test_the_common_case_is_split_not_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A flat record of strings, numbers, booleans and nulls, escapes included, never
    reaches the JSON path."""
    from feedledger.ledger.encoding import columns as attribute_columns

    records = [
        {"a": f"v{i}", "b": RawNumber("2.50"), "c": None, "d": True, "e": 'x "y" \\ é\n'}
        for i in range(50)
    ]
    texts = [canonical(r) for r in records]
    # (the patterns as the texts hold them: `plan` of this release sees a number as a
    # string and plans `","b":"`, which never occurs)
    patterns = ['{"a":"', '","b":', ',"c":', ',"d":', ',"e":"', '"}']
    book = Codebook(patterns)

    def refused(*_args: Any) -> Any:
        raise AssertionError("the JSON path was used")

    monkeypatch.setattr(attribute_columns, "text_columns", refused)
    frame = batch_frame(_stored_batch(texts, book, 7), ["a", "b", "c", "d", "e"])
    assert frame.row(3) == ("v3", "2.50", None, "true", 'x "y" \\ é\n')


def test_a_sliced_batch_is_split_from_its_own_rows() -> None:
    """An Arrow slice (an offset into the batch's buffers) reads its own rows."""
    texts = [canonical({"a": f"v{i}", "b": "x \\ y" if i % 2 else "z"}) for i in range(9)]
    batch = _stored_batch(texts, Codebook(['{"a":"', '","b":"', '"}']), 7)
    frame = batch_frame(batch.slice(3, 4), ["a", "b"])
    assert frame.rows() == [("v3", "x \\ y"), ("v4", "z"), ("v5", "x \\ y"), ("v6", "z")]


# -- the exports of a compact store ---------------------------------------------------

FLAT = st.one_of(TEXTS, st.none(), NUMBERS.map(RawNumber), st.booleans())
VERSION = st.tuples(
    st.sampled_from(["k1", "k2", "k3", "k10", "é"]),  # key
    st.integers(1, 4),  # valid_from (day)
    st.booleans(),  # deleted
    st.one_of(
        st.dictionaries(st.sampled_from(FIELDS), FLAT, min_size=1),
        st.dictionaries(st.sampled_from(FIELDS), VALUES, min_size=1),
    ),
)
_stores: dict[str, Store] = {}


def _load(store: Store, source: str, history: list[tuple[Any, ...]]) -> None:
    """`history` as compact versions: texts written against a codebook planned from
    the first half (`codebooks.choose`), as an ingest writes them."""
    texts = [canonical(record) for *_rest, record in history]
    fields_id, book = choose(store, source, texts[: len(texts) // 2 + 1])
    import polars as pl

    stored = book.encode_series(pl.Series(texts, dtype=pl.String)).to_list()
    base = 1_000 * next(_names)
    rows = [
        {
            "version_id": base + i,
            "source": source,
            "key": json.dumps([key], ensure_ascii=False),
            "valid_from": day,
            "recorded_at": 10 * i + 10,
            "txn_seq": i + 1,
            "retracted_at": None,
            "backfill": False,
            "deleted": deleted,
            "change": CHANGE_CODES["deleted" if deleted else "changed"],
            "content_hash": 0,
            "attributes": None if deleted else stored[i],
            "fields_id": None if deleted else fields_id,
        }
        for i, (key, day, deleted, _record) in enumerate(history)
    ]
    with store.begin() as conn:
        conn.execute(versions.insert(), rows)


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    history=st.lists(VERSION, min_size=1, max_size=12),
    batch=st.integers(1, 5),
    order=st.permutations(FIELDS),
)
def test_compact_store_exports_equal_the_row_by_row_export(
    store_url: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    history: list[Any],
    batch: int,
    order: list[str],
) -> None:
    if store_url not in _stores:
        migrate(store_url)
        _stores[store_url] = Store(store_url)
        request.addfinalizer(lambda: _stores.pop(store_url).engine.dispose())
    store = _stores[store_url]
    source = f"s{next(_names)}"
    _load(store, source, history)
    for valid in (1, 4):
        decoded = [a for _k, a, _g in snapshot_rows.rows(store, source, valid, batch=batch)]

        def fast(valid: int = valid) -> bytes:
            out = io.BytesIO()
            found = snapshot_rows.batches(store, source, valid, batch=batch, stored=True)
            snapshot_writers.write_csv(found, out, order)
            return out.getvalue()

        want = refused_or(lambda decoded=decoded: old_csv(decoded, order))
        assert refused_or(fast) == want
        if isinstance(want, tuple):
            continue
        target = tmp_path / f"{source}-{valid}.parquet"
        found = snapshot_rows.batches(store, source, valid, batch=batch, stored=True)
        snapshot_writers.write_parquet(found, target, order)
        table = pq.read_table(target)
        assert all(t == pa.string() for t in table.schema.types)
        records = [json.loads(a, parse_float=RawNumber, parse_int=RawNumber) for a in decoded]
        for name in table.column_names:
            expected = [
                None
                if r.get(name) is None
                else (
                    r[name] if isinstance(r[name], str) else json.dumps(r[name], ensure_ascii=False)
                )
                for r in records
            ]
            assert table.column(name).to_pylist() == expected, name


def test_compact_store_snapshot_reads_the_codebooks(store_url: str) -> None:
    """The stored-form batches carry the source's codebooks and fields ids."""
    migrate(store_url)
    store = Store(store_url)
    try:
        _load(store, "src", [("k1", 1, False, {"a": "x", "b": RawNumber("1")})] * 3)
        (got,) = list(snapshot_rows.batches(store, "src", 1, stored=True))
        assert got.schema.names == ["key", "attributes", "fields_id"]
        assert batch_frame(got, ["a", "b"]).row(0) == ("x", "1")
        with store.engine.connect() as conn:
            n = conn.execute(text("SELECT count(*) FROM field_lists")).scalar()
        assert n == 1
    finally:
        store.engine.dispose()
