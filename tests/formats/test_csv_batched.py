"""The CSV reader in batches (formats/csv_batched.py) gives the whole read's
observations: the same frame (keys, content hashes, key hashes, revisions, delete
markers), the same attribute texts and rows for any record indexes (from the spilled
file), the same publisher values; pieces cut only at line ends outside quotes; bad
input refused with the whole read's error."""

from __future__ import annotations

import csv
import io
import random
from pathlib import Path
from tempfile import TemporaryDirectory

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from feedledger.config import make_source
from feedledger.formats.csv_batched import (
    file_pieces,
    fits_whole,
    pieces,
    read_csv_batched,
    read_csv_file,
)
from feedledger.formats.csv_reader import read_csv_payload
from feedledger.formats.observations import Observations
from feedledger.formats.spill import SpilledRows
from feedledger.model.errors import BadPayloadError
from feedledger.model.types import PayloadKind

# values with what a CSV must quote or JSON must escape, and empty ones
VALUES = st.one_of(
    st.sampled_from(["", "a", "x,y", 'say "hi"', "two\nlines", "tab\there", "é", "\\", " "]),
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=6),
)


def _csv(rows: list[list[str]], header: list[str]) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue().encode()


def _same(batched: Observations, whole: Observations) -> None:
    assert batched.frame.equals(whole.frame)
    assert batched.published_values == whole.published_values
    assert batched.attr_columns == whole.attr_columns
    n = whole.frame.height
    picks = [list(range(n)), list(reversed(range(n))), random.Random(n).sample(range(n), n // 2)]
    for pick in picks:
        idx = pl.Series(pick, dtype=pl.UInt32)
        assert batched.attributes(idx).equals(whole.attributes(idx))
        rows = batched.attribute_rows(idx)
        assert rows is not None and rows.equals(whole.attribute_rows(idx))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    values=st.lists(st.lists(VALUES, min_size=4, max_size=4), min_size=1, max_size=40),
    piece=st.integers(1, 200),
    batch_rows=st.integers(1, 7),
    kind=st.sampled_from(list(PayloadKind)),
)
def test_batched_read_equals_whole_read(
    values: list[list[str]], piece: int, batch_rows: int, kind: PayloadKind
) -> None:
    header = ["id", "name", "when", "op"]
    rows = [[f"k{i}", *row[1:]] for i, row in enumerate(values)]
    data = _csv(rows, header)
    src = make_source("s", key=("id",), kind=kind, published_from="field:when")
    try:
        whole = read_csv_payload(data, src, "p")
    except BadPayloadError as exc:  # (a stray CR the whole read refuses): the same error
        with pytest.raises(BadPayloadError) as refused:
            read_csv_batched(data, src, "p", piece_bytes=piece, batch_rows=batch_rows)
        assert str(refused.value) == str(exc)
        return
    batched = read_csv_batched(data, src, "p", piece_bytes=piece, batch_rows=batch_rows)
    try:
        _same(batched, whole)
    finally:
        batched.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    values=st.lists(st.lists(VALUES, min_size=4, max_size=4), min_size=1, max_size=40),
    piece=st.integers(1, 200),
    batch_rows=st.integers(1, 7),
    lead=st.sampled_from([b"", b"\xef\xbb\xbf", b"\n\r\n", b"\xef\xbb\xbf\n"]),
)
def test_a_file_read_a_piece_at_a_time_equals_the_read_of_its_bytes(
    values: list[list[str]], piece: int, batch_rows: int, lead: bytes
) -> None:
    header = ["id", "name", "when", "op"]
    rows = [[f"k{i}", *row[1:]] for i, row in enumerate(values)]
    data = lead + _csv(rows, header)
    src = make_source("s", key=("id",), published_from="field:when")
    with TemporaryDirectory() as tmp:
        path = Path(tmp) / "p.csv"
        path.write_bytes(data)
        with path.open("rb") as handle:
            cut = list(file_pieces(handle, piece))
        # consecutive pieces of the bytes after the mark and blank lines, each ending
        # at a line end outside quotes (an even count of quote characters)
        start = data[3:] if data.startswith(b"\xef\xbb\xbf") else data
        assert b"".join(cut) == start.lstrip(b"\r\n")
        assert all(p.endswith(b"\n") and p.count(b'"') % 2 == 0 for p in cut[:-1])
        try:
            whole = read_csv_batched(data, src, "p", piece_bytes=piece, batch_rows=batch_rows)
        except BadPayloadError as exc:  # (a stray CR the whole read refuses): the same
            with pytest.raises(BadPayloadError) as refused:
                read_csv_file(path, src, "p", piece_bytes=piece, batch_rows=batch_rows)
            assert str(refused.value) == str(exc)
            return
        from_file = read_csv_file(path, src, "p", piece_bytes=piece, batch_rows=batch_rows)
        try:
            _same(from_file, whole)
        finally:
            from_file.close()
            whole.close()


def test_pieces_end_outside_quotes() -> None:
    data = b'id,v\n1,"a\nb\nc"\n2,"x""\ny"\n3,z\n'
    cut = list(pieces(data, 3))
    assert b"".join(cut) == data
    assert cut == [b"id,v\n", b'1,"a\nb\nc"\n', b'2,"x""\ny"\n', b"3,z\n"]


def test_spilled_rows_come_back_in_any_order_and_kept() -> None:
    spilled = SpilledRows(batch_rows=3)
    try:
        for start in (0, 5, 7):
            spilled.append(pl.DataFrame({"v": [str(i) for i in range(start, start + 5)]}))
        spilled.finish()
        assert spilled.height == 15  # values 0..4, 5..9, 7..11
        idx = pl.Series([11, 0, 4, 4, 6], dtype=pl.UInt32)
        expected = ["8", "0", "4", "4", "6"]
        assert spilled.rows(idx).get_column("v").to_list() == expected
        spilled.keep(idx)
        assert spilled.rows(idx).get_column("v").to_list() == expected
        # rows outside the kept ones are read again
        other = pl.Series([1, 14], dtype=pl.UInt32)
        assert spilled.rows(other).get_column("v").to_list() == ["1", "11"]
        assert spilled.rows(pl.Series([], dtype=pl.UInt32)).height == 0
    finally:
        spilled.close()
    assert not spilled.path.parent.exists()


def test_bad_csv_gets_the_whole_reads_error() -> None:
    src = make_source("s", key=("id",))
    data = b"id,v\n1,a\n2\n3,c\n"
    with pytest.raises(BadPayloadError) as whole:
        read_csv_payload(data, src, "p")
    with pytest.raises(BadPayloadError) as batched:
        read_csv_batched(data, src, "p", piece_bytes=4)
    assert str(batched.value) == str(whole.value)
    with pytest.raises(BadPayloadError, match="duplicate column"):
        read_csv_batched(b"id,id\n1,2\n", src, "p")


def test_only_a_payload_too_large_for_the_budget_is_read_in_batches() -> None:
    assert fits_whole(make_source("s", key=("id",)), 10**12)
    budgeted = make_source("s", key=("id",), memory_budget="1GiB")
    assert fits_whole(budgeted, 100 * 1024**2)
    assert not fits_whole(budgeted, 1024**3)
