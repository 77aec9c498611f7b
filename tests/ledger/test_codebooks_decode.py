"""`codebooks.decode_arrow`: a column of stored texts decoded row by row by each row's
codebook, where a null `fields_id` marks a row written without one (already canonical).
Rows of both kinds in one column keep their texts: a null id once made its row null
(a null condition in `if_else`), and the general snapshot path then failed on it."""

from __future__ import annotations

import pyarrow as pa

from feedledger.ledger.encoding import decode_arrow
from feedledger.ledger.encoding.codec import plan_book

TEXTS = [f'{{"a":"x{i}","b":"y"}}' for i in range(5)]


def test_rows_without_a_codebook_keep_their_text_beside_coded_ones() -> None:
    book = plan_book(TEXTS)
    import polars as pl

    coded = book.encode_series(pl.Series(TEXTS)).to_list()
    assert coded != TEXTS  # (the codebook does code them)
    stored = pa.array([coded[0], TEXTS[1], coded[2], TEXTS[3], coded[4]])
    ids = pa.array([7, None, 7, None, 7], pa.int64())
    assert decode_arrow({7: book}, ids, stored).to_pylist() == TEXTS


def test_two_codebooks_and_uncoded_rows() -> None:
    import polars as pl

    one, two = plan_book(TEXTS[:3]), plan_book(['{"c":"z","d":"w"}'] * 3)
    other = '{"c":"z","d":"w"}'
    stored = pa.array(
        [
            one.encode_series(pl.Series([TEXTS[0]])).to_list()[0],
            two.encode_series(pl.Series([other])).to_list()[0],
            TEXTS[2],
        ]
    )
    ids = pa.array([1, 2, None], pa.int64())
    assert decode_arrow({1: one, 2: two}, ids, stored).to_pylist() == [TEXTS[0], other, TEXTS[2]]
