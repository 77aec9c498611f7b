"""The compiled renderer of stored texts
(ledger/encoding/render.py, stored_kernel.py) gives the CSV and Parquet columns the
general writers give, byte for byte, for every batch -- the rows it takes and the rows
it leaves to the general path spliced back in order (pipeline/exports/spliced.py) --
over random records: escapes, quotes, commas, unicode, nulls, numbers as stated,
booleans, missing fields, nested values, value tokens, several codebooks in one batch
and fields outside the columns (the "different fields" error)."""

from __future__ import annotations

import io
from typing import Any

import polars as pl
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from feedledger.formats.canonical import RawNumber, canonical
from feedledger.ledger.encoding.codec import Codebook, gains, plan, plan_book
from feedledger.ledger.encoding.columns import with_codebooks
from feedledger.pipeline.exports import spliced as snapshot_spliced
from feedledger.pipeline.exports import writers as snapshot_writers
from helpers import old_csv, refused_or, top_patterns

TEXTS = st.one_of(
    st.text(
        alphabet=st.sampled_from(
            ["a", "Z", " ", ",", '"', "'", "\n", "\r", "\\", "é", "\t", ":", "{", "}", "\x01"]
        ),
        max_size=6,
    ),
    st.sampled_from(["", "null", "true", "1.0", "MITCHELL, EDWARD", 'A "B" \\C', "日本", "R-1"]),
)
NUMBERS = st.sampled_from(["0", "-0", "-1", "2.50", "1e5", "1E-3", "-2.5e+10", "12"])
FLAT = st.one_of(TEXTS, st.none(), NUMBERS.map(RawNumber), st.booleans())
VALUES = st.one_of(
    FLAT,
    st.lists(st.one_of(NUMBERS.map(RawNumber), TEXTS), max_size=2),
    st.dictionaries(st.sampled_from(["x", "a"]), TEXTS, max_size=2),
)
FIELDS = ["b", "a", "c d", "é", 'q"', "z"]
RECORD = st.one_of(
    st.dictionaries(st.sampled_from(FIELDS), FLAT, min_size=1),
    st.dictionaries(st.sampled_from(FIELDS), VALUES, min_size=1),
)
KINDS = st.sampled_from(["plan", "values", "all", "none"])


def _book(sample: list[str], kind: str) -> Codebook | None:
    if kind == "none" or not sample:
        return None  # (texts written before codebooks: fields_id NULL)
    if kind == "values":
        return plan_book(sample)
    if kind == "plan":
        return Codebook(plan(gains(sample)))
    return Codebook(sorted({p for t in sample for p in top_patterns(t)})[:28])


def _batch(texts: list[str], books: list[Codebook | None], which: list[int]) -> pa.RecordBatch:
    """Text i encoded with books[which[i]] (fields id 10 + that index; NULL for None)."""
    stored: list[str] = []
    ids: list[int | None] = []
    for text, b in zip(texts, which, strict=True):
        book = books[b]
        if book is None:
            stored.append(text)
            ids.append(None)
        else:
            stored.append(book.encode_series(pl.Series([text], dtype=pl.String))[0])
            ids.append(10 + b)
    schema = with_codebooks(
        pa.schema([("attributes", pa.string()), ("fields_id", pa.int64())]),
        {10 + i: book for i, book in enumerate(books) if book is not None},
    )
    return pa.record_batch([pa.array(stored, pa.string()), pa.array(ids, pa.int64())], schema)


def _general_csv(batch: pa.RecordBatch, order: list[str]) -> bytes:
    """The writer without the renderer: the general path for the whole batch."""
    out = io.BytesIO()
    names, columns = snapshot_writers.columns_of(batch, order)
    snapshot_writers._header(out, columns)
    snapshot_writers._csv_rows(names, columns)(batch, out)
    return out.getvalue()


def _csv(batches: list[pa.RecordBatch], order: list[str]) -> bytes:
    out = io.BytesIO()
    snapshot_writers.write_csv(batches, out, order)
    return out.getvalue()


@st.composite
def _batches(draw: st.DrawFn) -> tuple[list[str], list[pa.RecordBatch]]:
    records = draw(st.lists(RECORD, min_size=1, max_size=14))
    texts = [canonical(r) for r in records]
    books = [_book(texts[: draw(st.integers(0, len(texts)))], draw(KINDS)) for _ in range(2)]
    # (a None book: texts written without a codebook, fields_id NULL, mixed with coded
    # ones in a batch -- tests/ledger/test_codebooks_decode.py has the decode's own cases)
    which = draw(st.lists(st.integers(0, 1), min_size=len(texts), max_size=len(texts)))
    cut = draw(st.integers(1, len(texts)))
    batches = [_batch(texts[:cut], books, which[:cut])]
    if cut < len(texts):
        batches.append(_batch(texts[cut:], books, which[cut:]))
    return texts, batches


@given(got=_batches(), order=st.permutations(FIELDS))
@settings(max_examples=200, deadline=None)
def test_csv_equals_the_general_writer(
    got: tuple[list[str], list[pa.RecordBatch]], order: list[str]
) -> None:
    texts, batches = got
    want = refused_or(lambda: old_csv(texts, order))
    assert refused_or(lambda: _csv(batches, order)) == want
    if len(batches) == 1:
        assert refused_or(lambda: _general_csv(batches[0], order)) == want


@given(got=_batches(), order=st.permutations(FIELDS))
@settings(max_examples=120, deadline=None)
def test_parquet_columns_equal_the_general_ones(
    got: tuple[list[str], list[pa.RecordBatch]], order: list[str]
) -> None:
    _texts, batches = got
    names, columns = snapshot_writers.columns_of(batches[0], order)
    general = snapshot_writers._general_table(names, columns)
    for batch in batches:
        want = refused_or(lambda batch=batch: general(batch).to_pylist())

        def fast(batch: pa.RecordBatch = batch) -> Any:
            diff = snapshot_writers.DIFFERENT
            table = snapshot_spliced.table(batch, columns, general, diff)
            assert table is None or all(t == pa.string() for t in table.schema.types)
            return (table if table is not None else general(batch)).to_pylist()

        assert refused_or(fast) == want


def test_the_flat_rows_are_rendered_and_the_others_spliced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Flat rows never reach the general path; a nested one does, alone, in its place."""
    records: list[dict[str, Any]] = [
        {"a": f"v{i}", "b": RawNumber("2.50"), "c": None, "d": True, "e": 'x "y", é'}
        for i in range(6)
    ]
    records[3]["c"] = [1, {"x": "y"}]
    texts = [canonical(r) for r in records]
    patterns = ['{"a":"', '","b":', ',"c":', ',"d":', ',"e":"', '"}']
    batch = _batch(texts, [Codebook(patterns)], [0] * len(texts))
    seen: list[int] = []
    general = snapshot_writers._csv_rows

    def counting(names: list[str], columns: list[str]) -> Any:
        inner = general(names, columns)

        def write(got: pa.RecordBatch, handle: Any) -> None:
            seen.append(got.num_rows)
            inner(got, handle)

        return write

    monkeypatch.setattr(snapshot_writers, "_csv_rows", counting)
    assert _csv([batch], []) == old_csv(texts, [])
    assert seen == [1]


def test_a_field_outside_the_columns_is_refused() -> None:
    texts = [canonical({"a": "x", "b": "y"}), canonical({"a": "x", "c": "z"})]
    batch = _batch(texts, [Codebook(['{"a":"', '","b":"', '","c":"', '"}'])], [0, 0])
    assert refused_or(lambda: _csv([batch], [])) == refused_or(lambda: old_csv(texts, []))
    assert refused_or(lambda: _csv([batch], []))[0] == "refused"


def test_an_uncachable_kernel_is_compiled_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """No writable cache location: numba's "no locator" error means no cache, not a
    failure."""
    from feedledger.ledger.encoding import render_kernel

    calls: list[dict[str, Any]] = []

    def njit(**options: Any) -> Any:
        calls.append(options)
        if options.get("cache"):
            raise RuntimeError("cannot cache function 'f': no locator available for file")
        return lambda fn: fn

    monkeypatch.setattr(render_kernel.numba, "njit", njit)
    assert render_kernel._jit(len)("abc") == 3
    assert calls == [{"cache": True, "nogil": True}, {"nogil": True}]


def test_without_numba_the_general_path_writes_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    texts = [canonical({"a": f"v{i}", "b": RawNumber("1"), "c": 'x, "y"'}) for i in range(5)]
    batch = _batch(texts, [Codebook(['{"a":"', '","b":', ',"c":"', '"}'])], [0] * 5)
    monkeypatch.setitem(
        sys.modules, "feedledger.ledger.encoding.render_kernel", None
    )  # ImportError
    assert snapshot_spliced.stored_render.csv_lines(batch, ["a", "b", "c"]) is None
    assert _csv([batch], []) == old_csv(texts, [])


def test_rows_of_two_codebooks_stay_in_row_order() -> None:
    """Every row taken, the codebooks interleaved: the lines in row order (each
    codebook's rows are rendered together)."""
    texts = [canonical({"a": f"v{i}", "b": str(i)}) for i in range(6)]
    books: list[Codebook | None] = [
        Codebook(['{"a":"', '","b":"', '"}']),
        Codebook(['"}', '{"a":"', '","b":"']),
    ]
    batch = _batch(texts, books, [0, 1, 0, 1, 1, 0])
    assert _csv([batch], []) == old_csv(texts, [])
    names, columns = snapshot_writers.columns_of(batch, [])
    general = snapshot_writers._general_table(names, columns)
    table = snapshot_spliced.table(batch, columns, general, "x")
    assert table is not None and table.to_pylist() == general(batch).to_pylist()


@given(
    records=st.lists(st.dictionaries(st.sampled_from(FIELDS), FLAT, min_size=1), max_size=12),
    which=st.lists(st.integers(0, 1), min_size=12, max_size=12),
    order=st.permutations(FIELDS),
)
@settings(max_examples=100, deadline=None)
def test_flat_rows_of_several_codebooks(
    records: list[dict[str, Any]], which: list[int], order: list[str]
) -> None:
    """Flat records (most rows taken), two codebooks of every pattern seen (tokens in
    two orders) interleaved at random in one batch."""
    if not records:
        return
    texts = [canonical(r) for r in records]
    patterns = sorted({p for t in texts for p in top_patterns(t)})[:28]
    books: list[Codebook | None] = [Codebook(patterns), Codebook(patterns[::-1])]
    batch = _batch(texts, books, which[: len(texts)])
    assert refused_or(lambda: _csv([batch], order)) == refused_or(lambda: old_csv(texts, order))
    names, columns = snapshot_writers.columns_of(batch, order)
    general = snapshot_writers._general_table(names, columns)
    want = refused_or(lambda: general(batch).to_pylist())

    def fast() -> Any:
        table = snapshot_spliced.table(batch, columns, general, snapshot_writers.DIFFERENT)
        assert table is not None
        return table.to_pylist()

    assert refused_or(fast) == want
