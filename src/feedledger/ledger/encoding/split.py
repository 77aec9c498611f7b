"""The fast path of `encoding.columns`: stored attribute texts split into one column
per field without parsing any JSON.

A stored text (ledger/encoding/codec.py) is canonical JSON with each top-level field
pattern (`{"acres":"`, `","city":"`, `,"n":`, ...) and the closing `"}` replaced by a
one-byte token. So a text that holds no unescaped `"` (no nested string, no field the
codebook lacks) and no control character other than those tokens
(`encoding.codec.field_tokens`) is a flat object whose values are the pieces between its
tokens: a string's piece is its JSON text without the quotes, a non-string's piece its
literal text (`2.50`, `-0`, `1e5`, `true`, `null`; the last value's piece ends with
the object's `}`).

A string piece may hold escapes (`\\"`, `\\\\`, `\\u00e9`, ...): such a row is in the fast
form when every `"` in it is escaped (none is structure the tokens miss), and each
such cell is unescaped on its own (`json.loads` of the piece, quoted).

`split` takes a batch of stored texts (Arrow) of one codebook and groups the rows by
their sequence of tokens (a *template*: which fields, in which order, string or not --
one template for a source whose records all have the same fields). Each template's
rows are split at once: their tokens made one separator (numpy, over the bytes of the
batch) and polars' `split_exact` cutting every row at it. A non-string piece must be a
JSON number, `true`, `false` or `null` (`null`: a null cell); a row with anything else
(an empty object or array) is left to the caller, as is every row outside the fast
form; the caller reads those through the JSON path.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import polars as pl
import pyarrow as pa

from feedledger.ledger.encoding.codec import FieldTokens

__all__ = ["MAX_TEMPLATES", "Split", "split", "text_bytes", "text_offsets"]

MAX_TEMPLATES = 16  # token sequences split per batch; rows of any further one go the slow way
_SEP = 0x1F
_QUOTE, _BACKSLASH = 0x22, 0x5C
# what a non-string value's text may be (canonical JSON keeps numbers as stated)
_LITERAL = r"^(?:-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null)$"

Mask = npt.NDArray[np.bool_]
Ints = npt.NDArray[np.int64]


class UnknownName(ValueError):
    """A split row names a field outside the columns asked for."""


@dataclass(frozen=True, slots=True)
class Split:
    """`frame`: one String column per name asked for, one row per row of `done`'s
    positions (in order); `done`: which rows of the batch are in `frame`."""

    frame: pl.DataFrame
    done: Mask


def text_offsets(texts: pa.Array) -> npt.NDArray[np.int64]:
    kind = np.int64 if texts.type == pa.large_string() else np.int32
    width = np.dtype(kind).itemsize  # (frombuffer's offset is in bytes)
    raw = np.frombuffer(texts.buffers()[1], kind, len(texts) + 1, texts.offset * width)
    return raw.astype(np.int64) - int(raw[0])


def text_bytes(texts: pa.Array, size: int) -> npt.NDArray[np.uint8]:
    buf = texts.buffers()[2]
    if buf is None or size == 0:
        return np.zeros(0, np.uint8)
    kind = np.int64 if texts.type == pa.large_string() else np.int32
    width = np.dtype(kind).itemsize
    start = int(np.frombuffer(texts.buffers()[1], kind, 1, texts.offset * width)[0])
    return np.frombuffer(buf, np.uint8, size, start)


def _rows_of(at: npt.NDArray[np.int64], offsets: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The row of each byte position in `at`."""
    return np.searchsorted(offsets, at, side="right") - 1


def _unescaped_quote(texts: list[str | None]) -> Mask:
    """Which of `texts` hold a `"` that no backslash escapes (a JSON string's own
    quotes: structure the tokens do not stand for). Escapes read left to right: each
    `\\\\` is one, then each `\\"` is one. (Python string methods: these rows are
    the few holding a quote or a backslash.)"""
    return np.array(
        [t is None or '"' in t.replace("\\\\", "").replace('\\"', "") for t in texts],
        np.bool_,
    )


@dataclass(frozen=True, slots=True)
class _Bytes:
    """A batch's bytes and where its tokens and backslashes are."""

    data: npt.NDArray[np.uint8]
    offsets: Ints  # each row's start in `data`, and the end
    at: Ints  # the tokens' positions
    first: Ints  # each row's first token (an index into `at`), and the end
    slashes: Ints  # the backslashes' positions


def _quotes_and_slashes(data: npt.NDArray[np.uint8]) -> tuple[Ints, Ints]:
    """The positions of every `"` and backslash (sorted), and of the backslashes.
    They are rare in most texts: found by `bytes.find` (memchr speed) unless there
    are many, then by comparing every byte."""
    raw = data.tobytes()
    if raw.count(b'"') + raw.count(b"\\") > len(raw) // 64:
        both = np.flatnonzero((data == _QUOTE) | (data == _BACKSLASH))
        return both, both[data[both] == _BACKSLASH]
    found: dict[bytes, list[int]] = {b'"': [], b"\\": []}
    for char, into in found.items():
        at = raw.find(char)
        while at != -1:
            into.append(at)
            at = raw.find(char, at + 1)
    slashes = np.array(found[b"\\"], np.int64)
    both = np.sort(np.concatenate([np.array(found[b'"'], np.int64), slashes]))
    return both, slashes


def _escaped_cells(b: _Bytes, rows: Ints) -> tuple[Ints, Ints, list[str]]:
    """Of `rows`, the cells holding an escape: (row, piece index, the string it
    stands for), each once."""
    if not b.slashes.size:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), []
    row = _rows_of(b.slashes, b.offsets)
    mine = np.isin(row, rows)
    row = row[mine]
    # the token before a backslash tells its piece
    token = np.searchsorted(b.at, b.slashes[mine], side="right") - 1
    cells = np.unique(np.stack([row, token]), axis=1)
    row, token = cells[0], cells[1]
    texts = [
        json.loads('"' + b.data[b.at[t] + 1 : b.at[t + 1]].tobytes().decode("utf-8") + '"')
        for t in token.tolist()
    ]
    return row, token - b.first[row] + 1, texts


def split(stored: pa.Array, tokens: FieldTokens, names: list[str]) -> Split:
    """The rows of `stored` (a string array of one codebook's texts) in the fast form,
    split into `names`' columns (see the module doc); UnknownName if one of them
    holds a field outside `names`."""
    if tokens.expand:
        series = pl.from_arrow(stored)
        assert isinstance(series, pl.Series)
        expanded = series.str.replace_many(
            [t for t, _ in tokens.expand], [r for _, r in tokens.expand]
        )
        stored = expanded.to_arrow().cast(pa.large_string())
    n = len(stored)
    if stored.type not in (pa.string(), pa.large_string()):
        stored = stored.cast(pa.large_string())
    offsets = text_offsets(stored)
    data = text_bytes(stored, int(offsets[-1]))
    ok = np.ones(n, np.bool_)
    if stored.null_count:
        ok &= np.asarray(stored.is_valid().to_numpy(zero_copy_only=False), np.bool_)
    at = np.flatnonzero(data < 0x20)
    escapes, slashes = _quotes_and_slashes(data)
    if escapes.size:
        rows = np.unique(_rows_of(escapes, offsets))
        ok[rows[_unescaped_quote(stored.take(pa.array(rows)).to_pylist())]] = False
    values = data[at]
    known = np.zeros(0x20, np.bool_)
    for token in [*tokens.fields, *([tokens.end] if tokens.end else [])]:
        known[ord(token)] = True
    unknown = at[~known[values]]
    if unknown.size:
        ok[_rows_of(unknown, offsets)] = False
    first = np.searchsorted(at, offsets)  # each row's first token (index into `at`)
    count = np.diff(first)
    starts = at[np.minimum(first[:-1], max(at.size - 1, 0))] if at.size else first[:-1]
    ok &= (count > 0) & (starts == offsets[:-1])  # a row starts with its first token
    found = _Bytes(data, offsets, at, first, slashes)
    parts: list[tuple[npt.NDArray[np.int64], pl.DataFrame]] = []
    left = ok.copy()
    for _ in range(MAX_TEMPLATES):
        rows = np.flatnonzero(left)
        if not rows.size:
            break
        size = int(count[rows[0]])
        template = values[first[rows[0]] : first[rows[0]] + size]
        alike = rows[count[rows] == size]
        seqs = values[first[alike][:, None] + np.arange(size)]
        match = alike[(seqs == template).all(axis=1)]
        left[match] = False
        got = _template(stored, found, match, template, tokens, names)
        if got is not None:
            kept, frame = got
            parts.append((kept, frame))
    done = np.zeros(n, np.bool_)
    for kept, _ in parts:
        done[kept] = True
    if not parts:
        empty = pl.DataFrame({name: pl.Series([], dtype=pl.String) for name in names})
        return Split(empty, done)
    if len(parts) == 1:
        return Split(parts[0][1], done)
    order = np.argsort(np.concatenate([kept for kept, _ in parts]), kind="stable")
    frame = pl.concat([frame for _, frame in parts])
    return Split(frame[pl.Series(order)], done)


def _template(
    stored: pa.Array,
    b: _Bytes,
    rows: Ints,
    template: npt.NDArray[np.uint8],
    tokens: FieldTokens,
    names: list[str],
) -> tuple[npt.NDArray[np.int64], pl.DataFrame] | None:
    """The rows of one token sequence split (the rows kept, their frame); None when
    the sequence is not a flat object's (left to the caller)."""
    seq = [chr(t) for t in template]
    end = tokens.end
    fields = seq[:-1] if end is not None and seq[-1] == end else seq
    if end is not None and end in fields:
        return None
    if len(fields) == len(seq) and tokens.fields[fields[-1]][1]:
        return None  # a string value last but no closing token: not a whole object
    wanted = set(names)
    pieces: dict[str, int] = {}
    for i, token in enumerate(fields):
        name = tokens.fields[token][0]
        if name in pieces:
            return None
        if name not in wanted:
            raise UnknownName(name)
        pieces[name] = i + 1
    if rows.size == len(stored):
        flat = b.data.copy()
        flat[b.at] = _SEP
        sub_offsets = b.offsets
    else:
        sub = stored.take(pa.array(rows))
        sub_offsets = text_offsets(sub)
        flat = text_bytes(sub, int(sub_offsets[-1])).copy()
        flat[flat < 0x20] = _SEP
    texts = pa.LargeStringArray.from_buffers(
        len(rows), pa.py_buffer(sub_offsets), pa.py_buffer(flat)
    )
    series = pl.from_arrow(texts)
    assert isinstance(series, pl.Series)
    cut = series.str.split_exact(chr(_SEP), len(seq)).struct.unnest()
    last = len(seq) if len(fields) == len(seq) else -1  # a non-string last: ends in `}`
    cols: list[pl.Expr] = []
    literal = pl.lit(True)
    checked = False  # any non-string piece (its literal text checked)
    for name in names:
        at = pieces.get(name)
        if at is None:
            cols.append(pl.lit(None, pl.String).alias(name))
            continue
        col = pl.col(cut.columns[at])
        if tokens.fields[fields[at - 1]][1]:
            cols.append(col.alias(name))
            continue
        if at == last:
            col = col.str.strip_suffix("}")
        literal = literal & col.str.contains(_LITERAL)
        checked = True
        cols.append(pl.when(col == "null").then(None).otherwise(col).alias(name))
    if checked:
        frame = cut.select([*cols, literal.alias("_literal")])
        fine = frame.get_column("_literal").to_numpy()
        frame = frame.drop("_literal")
        if not fine.all():
            frame = frame.filter(pl.Series(fine))
            rows = rows[fine]
    else:
        frame = cut.select(cols)
    # (a row with an escape outside a string piece failed the literal check above)
    cell_rows, cell_pieces, cell_texts = _escaped_cells(b, rows)
    by_piece = {at: name for name, at in pieces.items() if tokens.fields[fields[at - 1]][1]}
    for piece in np.unique(cell_pieces).tolist():
        column = by_piece.get(piece)
        if column is None:
            continue
        hit = np.flatnonzero(cell_pieces == piece)
        where = np.searchsorted(rows, cell_rows[hit])
        texts = [cell_texts[i] for i in hit.tolist()]
        frame = frame.with_columns(frame.get_column(column).scatter(where, texts))
    return rows, frame
