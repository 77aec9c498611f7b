"""Stored attribute texts made straight from a payload's string columns (issue 17,
target 5): what `Codebook.encode_series` gives for the rows' canonical JSON objects
(`formats.canonical.object_expr`), without making that text and scanning it again.

`encode_series` replaces, leftmost first and longest first, every codebook string in
the object's text. For a row whose values hold no character JSON escapes (no `"`, no
backslash, no control character), where each replacement falls is known from the
columns alone:

* Every codebook string holds a `"` (a pattern is `{"name":`, `","name":"`, ... or
  `"}`; a value segment is a pattern and a value's text), and such a value holds none,
  so no replacement starts inside a value or runs from one value into what follows it.
  (A `{` or `,` in a value cannot start one either: after it, the text would have to
  read `"name":`, and what follows a value is its closing quote, then `,` or `}`.)
* So the text is matched only where a field's piece starts: its lead (`{` first, then
  `",` after a string, `,` after a null), its quoted name and `:`. The strings of the
  codebook that match there are that field's string pattern `P:"` (before a value) or
  its bare pattern `P:` (before a value's quote, or `null`), and the value segments of
  the one or the other whose value text the row's value starts with (`P:null` for a
  null). The longest of them wins: that is the replacement, and the rest of the value
  follows as it is.
* After the last field: `"}` (a string last) or `}` (a null last, never in a codebook).

A column with few distinct values in the rows (a city, a zoning code) has its pieces
made once per distinct value and looked up, instead of matched row by row.

A row whose values do hold such a character is encoded the general way (its canonical
text, then `encode_series`), and put in its place. `tests/ledger/test_attribute_encode.py` checks
both ways give the same texts, over random columns, values and codebooks.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from feedledger.formats.canonical import JSON_SPECIAL, json_string, object_texts
from feedledger.ledger.encoding.codec import Codebook

__all__ = ["encode_rows"]

# marks a value's start for a value segment's prefix match: a control character, so
# never in a value encoded here (those values hold no character JSON escapes)
_START = "\x00"


def encode_rows(book: Codebook, rows: pl.DataFrame) -> pl.Series:
    """The stored texts (`book`'s tokens) of the canonical JSON objects of `rows` (string
    columns, nulls allowed), one per row: equal to `book.encode_series` of their texts."""
    names = sorted(rows.columns)
    schema = rows.schema  # once: polars builds it anew on each access (all the columns)
    if not names or not book.tokens or any(schema[n] != pl.String or not _plain(n) for n in names):
        return book.encode_series(object_texts(rows, list(rows.columns)))
    texts = rows.select(_object(book, rows, names).alias("attributes")).get_column("attributes")
    # the rows going the general way, in one scan of each column whose bytes hold such
    # a character at all (most hold none: the scan of their bytes is cheaper)
    brace = '"}' in book.patterns
    odd = [n for n in names if _may_escape(rows.get_column(n), brace=brace)]
    if not odd:
        return texts
    tests = [pl.col(n).str.contains_any(JSON_SPECIAL) for n in odd]
    if brace:
        tests += [pl.col(n).str.starts_with("}") for n in odd]
    flagged = rows.select(pl.any_horizontal(tests).fill_null(False).alias("flagged")).get_column(
        "flagged"
    )
    at = flagged.arg_true()
    if at.is_empty():
        return texts
    general = book.encode_series(object_texts(rows.filter(flagged), list(rows.columns)))
    return texts.scatter(at, general)


def _may_escape(column: pl.Series, *, brace: bool) -> bool:
    """Whether some value of `column` may hold a character JSON escapes (a `"`, a
    backslash, a control character) or, with `brace`, a `}` (where a value starting
    with one may begin a codebook string): False means none does."""
    data: Any = column.to_arrow()
    if isinstance(data, pa.ChunkedArray):
        data = data.combine_chunks()
    if data.type != pa.large_string():
        data = data.cast(pa.large_string())
    buffer = data.buffers()[2]
    if buffer is None:  # no bytes: nulls and empty strings
        return False
    offsets = np.frombuffer(data.buffers()[1], np.int64)
    start, end = int(offsets[data.offset]), int(offsets[data.offset + len(data)])
    view = np.frombuffer(buffer, np.uint8, count=end - start, offset=start)
    found = bool((view < 0x20).any() or (view == 0x22).any() or (view == 0x5C).any())
    return found or (brace and bool((view == 0x7D).any()))


def _plain(name: str) -> bool:
    """A field name in whose JSON text no codebook string can start (see the module's
    docstring): no quote, backslash, brace, comma or control character."""
    return not any(c in '"\\{},' or c < " " for c in name)


def _object(book: Codebook, rows: pl.DataFrame, names: list[str]) -> pl.Expr:
    tokens = dict(zip(book.patterns, book.tokens, strict=False))
    pairs = dict(zip(book.values, book.tokens[len(book.patterns) :], strict=True))
    pieces: list[pl.Expr] = []
    for i, name in enumerate(names):
        if i == 0:
            pieces.append(_field(name, ("{",), tokens, pairs, rows))
            continue
        prev = names[i - 1]
        after_string = _field(name, ('",', ","), tokens, pairs, rows)
        if rows.get_column(prev).null_count():
            after_null = _field(name, (",",), tokens, pairs, rows)
            pieces.append(pl.when(pl.col(prev).is_null()).then(after_null).otherwise(after_string))
        else:
            pieces.append(after_string)
    last = names[-1]
    end = pl.lit(tokens.get('"}', '"}'))
    if rows.get_column(last).null_count():
        end = pl.when(pl.col(last).is_null()).then(pl.lit("}")).otherwise(end)
    pieces.append(end)
    return pl.concat_str(pieces)


def _field(
    name: str,
    leads: tuple[str, ...],
    tokens: dict[str, str],
    pairs: dict[str, str],
    rows: pl.DataFrame,
) -> pl.Expr:
    """One field's piece: its lead, name and value, encoded. `leads`: where the
    codebook's strings may start, first to last -- after a string value the `"` of
    `",` first, and, if nothing the codebook holds starts there, the `,` after it
    (passing the `"` over as it is)."""
    quoted = json_string(name)
    froms: list[str] = []  # a string value: the value's start, then what it starts with
    tos: list[str] = []
    before: str | None = None  # what stands before a string value no segment matched
    null: str | None = None  # what a null value is written as
    for lead in leads:
        passed = leads[0][: len(leads[0]) - len(lead)]
        bare = lead + quoted + ":"
        string = bare + '"'
        if before is None:
            segments = sorted(
                (
                    (segment[len(string) :], token)
                    for segment, token in pairs.items()
                    if segment.startswith(string) and len(segment) > len(string)
                ),
                key=lambda item: -len(item[0]),
            )
            froms.extend(_START + text for text, _ in segments)
            tos.extend(passed + token for _, token in segments)
            if string in tokens:
                before = passed + tokens[string]
            elif bare in tokens:
                before = passed + tokens[bare] + '"'
        if null is None:
            for cut in range(4, 0, -1):  # the longest segment `P:null` starts with
                if bare + "null"[:cut] in pairs:
                    null = passed + pairs[bare + "null"[:cut]] + "null"[cut:]
                    break
            else:
                if bare in tokens:
                    null = passed + tokens[bare] + "null"
    froms.append(_START)
    tos.append(before if before is not None else leads[0] + quoted + ':"')
    if len(froms) > 1:
        value = _few_values(
            rows.get_column(name),
            pl.concat_str([pl.lit(_START), pl.col(name)]).str.replace_many(
                froms, tos, leftmost=True
            ),
        )
    else:
        value = pl.concat_str([pl.lit(tos[0]), pl.col(name)])
    if not rows.get_column(name).null_count():
        return value
    if null is None:
        null = leads[0] + quoted + ":null"
    return pl.when(pl.col(name).is_null()).then(pl.lit(null)).otherwise(value)


# a column with at most 1/_FEW as many distinct values as rows (a city, a zoning code) has
# its value segments replaced in its distinct values, then looked up row by row
_FEW = 16
# a column whose first _PROBE rows alone hold more than 1/_FEW distinct values is taken
# for one of many (an owner, a sale date) without counting the distinct values of all of
# its rows, and encoded row by row (the same texts either way, only the cost differs)
_PROBE = 2048


def _few_values(column: pl.Series, value: pl.Expr) -> pl.Expr:
    """`value` (an expression of `column` alone, row by row), made once per distinct value
    of a column with few and looked up (null for a null: the caller writes those)."""
    if column.len() > _PROBE:
        probe = column.head(_PROBE)
        if probe.n_unique() * _FEW > _PROBE:
            return value
    distinct = column.drop_nulls().unique()
    if distinct.len() * _FEW > column.len():
        return value
    made = distinct.to_frame().select(value.alias("made")).get_column("made")
    return pl.col(column.name).replace_strict(distinct, made, default=None, return_dtype=pl.String)
