"""The compiled (numba) loops of `encoding.render`: a batch of stored attribute texts
(ledger/encoding/codec.py) rendered straight to CSV lines, or to one string column per
field, for the rows in the flat form; the others are refused, row by row, for the
caller's general path.

A row is taken when it is a sequence of field tokens (`encoding.render_tables.Tables`), each
followed by its value's piece, the object closed by the end token after a string or by
`}` after a literal: a string piece holding no `"` but escaped ones (`\\"`) and no
other escape, a literal piece a JSON number, `true`, `false` or `null`; a two-byte
value token stands for its field and the start of its (string) value. Anything else
-- no token first, an unknown token, a nested value, any other escape, a field twice
-- is refused (status 1). A top-level field outside the columns is status 2 (the
caller's "different fields" error): every piece before it is a whole flat value, so
the token is at the object's top level.

Statuses: 0 taken, 1 refused, 2 a field outside the columns (the loop stops there).

Where the compiled code is cached (numba `cache=True`, see `_jit`): numba's own
choice -- NUMBA_CACHE_DIR when set, else `__pycache__` beside this file when writable,
else the user-wide cache directory (`~/.cache/numba`); the first compile takes ~7 s,
loading it ~0.3 s. When none of them is writable the functions are compiled in each
process instead (no error).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numba
import numpy as np
import numpy.typing as npt

__all__ = ["columns_text", "csv_lines", "parse_cells"]

QUOTE, BSL, COMMA, NEWLINE = 0x22, 0x5C, 0x2C, 0x0A
TAKEN, REFUSED, OUTSIDE = 0, 1, 2
NULL = 2  # a cell's flag: JSON null (absent: no flag)
PRESENT, QUOTED, ESCAPED = 1, 4, 8

# what each byte is inside a value's piece (a lookup: one load per byte)
_PLAIN, _TOKEN, _COMMA, _QUOTE, _BACKSLASH = 0, 1, 2, 3, 4
_KIND = np.zeros(256, np.uint8)
_KIND[:0x20] = _TOKEN
_KIND[COMMA], _KIND[QUOTE], _KIND[BSL] = _COMMA, _QUOTE, _BACKSLASH

U8 = npt.NDArray[np.uint8]
I64 = npt.NDArray[np.int64]


def _jit(fn: Callable[..., Any]) -> Any:
    """`fn` compiled without the GIL, cached on disk where numba can (module doc)."""
    try:
        return numba.njit(cache=True, nogil=True)(fn)
    except RuntimeError:  # "cannot cache function ...: no locator available"
        return numba.njit(nogil=True)(fn)


def _literal_py(data: U8, s: int, e: int) -> int:
    """Whether data[s:e] is a JSON number, true, false (1), null (2), or not (0)."""
    n = e - s
    if n == 4 and data[s] == 110 and data[s + 1] == 117 and data[s + 2] == 108:
        return 2 if data[s + 3] == 108 else 0
    if n == 4 and data[s] == 116 and data[s + 1] == 114 and data[s + 2] == 117:
        return 1 if data[s + 3] == 101 else 0
    if n == 5 and data[s] == 102 and data[s + 1] == 97 and data[s + 2] == 108:
        return 1 if data[s + 3] == 115 and data[s + 4] == 101 else 0
    p = s
    if p < e and data[p] == 45:  # -
        p += 1
    if p >= e:
        return 0
    if data[p] == 48:  # 0
        p += 1
    elif 49 <= data[p] <= 57:
        p = _digits(data, p, e)
    else:
        return 0
    if p < e and data[p] == 46:  # . and at least one digit
        q = _digits(data, p + 1, e)
        if q == p + 1:
            return 0
        p = q
    if p < e and (data[p] == 101 or data[p] == 69):  # e E, a sign, at least one digit
        p += 1
        if p < e and (data[p] == 43 or data[p] == 45):
            p += 1
        q = _digits(data, p, e)
        if q == p:
            return 0
        p = q
    return 1 if p == e else 0


def _digits_py(data: U8, p: int, e: int) -> int:
    """The end of the run of ASCII digits data[p:...] (p itself when there is none)."""
    while p < e and 48 <= data[p] <= 57:
        p += 1
    return p


_digits = _jit(_digits_py)
_literal = _jit(_literal_py)


def _parse_py(
    data: U8,
    s: int,
    e: int,
    t: tuple[Any, ...],
    cs: I64,
    ce: I64,
    cd: I64,
    cf: U8,
) -> int:
    """One row data[s:e] into its cells (cs/ce: its piece, cd: value token's code or
    -1, cf: flags; cs -1: absent); its status."""
    single, sstr, end, isprefix, pfid, pstr, pcomma = t[0], t[1], t[2], t[3], t[4], t[5], t[8]
    for c in range(cs.shape[0]):
        cs[c] = -1
        cd[c] = -1
        cf[c] = 0
    if e == s or data[s] >= 0x20:
        return REFUSED
    p = s
    while p < e:
        b = data[p]
        if b == end:
            return TAKEN if p == e - 1 else REFUSED
        code = -1
        if isprefix[b]:
            if p + 1 >= e or data[p + 1] >= 0x80:
                return REFUSED
            code = b * 128 + data[p + 1]
            f = pfid[code]
            is_str = pstr[code]
            p += 2
        else:
            f = single[b]
            is_str = sstr[b]
            p += 1
        if f == -5:
            return OUTSIDE
        if f < 0 or cs[f] != -1:
            return REFUSED
        flag = PRESENT
        q = p
        while q < e:
            kind = _KIND[data[q]]
            if kind == _PLAIN:
                q += 1
                continue
            if kind == _TOKEN:
                break
            if kind == _COMMA:
                flag |= QUOTED
            elif kind == _QUOTE:
                return REFUSED
            elif q + 1 < e and data[q + 1] == QUOTE:  # a backslash: only `\\"` is taken
                flag |= QUOTED | ESCAPED
                q += 1
            else:
                return REFUSED
            q += 1
        pe = q
        if code >= 0 and pcomma[code]:
            flag |= QUOTED
        if is_str:
            if q >= e:
                return REFUSED  # a string last without the closing token
        else:
            if code >= 0 or flag & ESCAPED:
                return REFUSED
            if q >= e:
                if data[e - 1] != 0x7D:  # }
                    return REFUSED
                pe = e - 1
            lit = _literal(data, p, pe)
            if lit == 0:
                return REFUSED
            if lit == 2:
                flag = NULL
        cs[f] = p
        ce[f] = pe
        cd[f] = code
        cf[f] = flag
        p = q
    # the last piece ended the row: a literal closed by `}` (a string needs the end token)
    return TAKEN


_parse = _jit(_parse_py)


def _csv_py(data: U8, offsets: I64, t: tuple[Any, ...], width: int) -> tuple[U8, U8, I64]:
    """Each taken row's CSV line (csv.writer's minimal quoting, `\\n` ends) end to end;
    each row's status; line[i]..line[i+1]: row i's line (empty unless taken)."""
    pstart, plen, dictbuf = t[6], t[7], t[9]
    n = offsets.shape[0] - 1
    out = np.empty(data.shape[0] + n * (3 * width + 1) + 64, np.uint8)
    status = np.zeros(n, np.uint8)
    line = np.zeros(n + 1, np.int64)
    cs = np.empty(width, np.int64)
    ce = np.empty(width, np.int64)
    cd = np.empty(width, np.int64)
    cf = np.empty(width, np.uint8)
    pos = 0
    for i in range(n):
        line[i] = pos
        got = _parse(data, offsets[i], offsets[i + 1], t, cs, ce, cd, cf)
        if got != TAKEN:
            status[i] = got
            if got == OUTSIDE:
                line[i + 1 :] = pos
                return out[:pos], status, line
            continue
        need = offsets[i + 1] - offsets[i] + 3 * width + 1
        for c in range(width):
            if cd[c] >= 0:
                need += plen[cd[c]]
        if pos + need > out.shape[0]:
            grown = np.empty(max(2 * out.shape[0], pos + need), np.uint8)
            grown[:pos] = out[:pos]
            out = grown
        for c in range(width):
            if c:
                out[pos] = COMMA
                pos += 1
            flag = cf[c]
            if not flag & PRESENT:
                continue
            if flag & QUOTED:
                out[pos] = QUOTE
                pos += 1
            code = cd[c]
            if code >= 0:
                ds = pstart[code]
                for j in range(plen[code]):
                    out[pos] = dictbuf[ds + j]
                    pos += 1
            for j in range(cs[c], ce[c]):
                ch = data[j]
                out[pos] = QUOTE if ch == BSL else ch  # `\\"` becomes `""`
                pos += 1
            if flag & QUOTED:
                out[pos] = QUOTE
                pos += 1
        out[pos] = NEWLINE
        pos += 1
    line[n] = pos
    return out[:pos], status, line


csv_lines = _jit(_csv_py)


def _cells_py(
    data: U8, offsets: I64, t: tuple[Any, ...], width: int
) -> tuple[U8, I64, I64, I64, U8]:
    """Each row's status and its cells (n x width: piece start, end, value token code,
    flags) -- `columns_text`'s input."""
    n = offsets.shape[0] - 1
    status = np.zeros(n, np.uint8)
    cs = np.empty((n, width), np.int64)
    ce = np.empty((n, width), np.int64)
    cd = np.empty((n, width), np.int64)
    cf = np.zeros((n, width), np.uint8)
    for i in range(n):
        got = _parse(data, offsets[i], offsets[i + 1], t, cs[i], ce[i], cd[i], cf[i])
        status[i] = got
        if got == OUTSIDE:
            break
    return status, cs, ce, cd, cf


parse_cells = _jit(_cells_py)


def _columns_py(
    data: U8, rows: I64, cells: tuple[Any, ...], t: tuple[Any, ...]
) -> tuple[U8, I64, I64, U8]:
    """Every column's values over `rows` (taken ones): column c's bytes are
    out[start[c]:start[c+1]], its offsets offsets[c] (from 0, len(rows)+1), its
    validity valid[c] (0: null); a string unescaped (`\\"` to `"`)."""
    cs, ce, cd, cf = cells[0], cells[1], cells[2], cells[3]
    pstart, plen, dictbuf = t[6], t[7], t[9]
    m = rows.shape[0]
    width = cs.shape[1]
    start = np.zeros(width + 1, np.int64)
    for k in range(m):
        i = rows[k]
        for c in range(width):
            if cf[i, c] & PRESENT:
                start[c + 1] += ce[i, c] - cs[i, c]
                if cd[i, c] >= 0:
                    start[c + 1] += plen[cd[i, c]]
    for c in range(width):
        start[c + 1] += start[c]
    out = np.empty(start[width], np.uint8)
    offsets = np.zeros((width, m + 1), np.int64)
    valid = np.zeros((width, m), np.uint8)
    pos = start[:width].copy()
    for k in range(m):
        i = rows[k]
        for c in range(width):
            p = pos[c]
            if cf[i, c] & PRESENT:
                valid[c, k] = 1
                code = cd[i, c]
                if code >= 0:
                    ds = pstart[code]
                    for j in range(plen[code]):
                        out[p] = dictbuf[ds + j]
                        p += 1
                j = cs[i, c]
                while j < ce[i, c]:
                    ch = data[j]
                    if ch == BSL:  # (only `\\"` is taken)
                        j += 1
                        ch = data[j]
                    out[p] = ch
                    p += 1
                    j += 1
            pos[c] = p
            offsets[c, k + 1] = p - start[c]
    return out, start, offsets, valid


columns_text = _jit(_columns_py)
