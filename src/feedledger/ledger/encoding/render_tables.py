"""The lookup arrays `encoding.render_kernel` reads a codebook's stored texts with, for one set
of columns: built from the codebook's `encoding.codec.FieldTokens`, cached per
(codebook, columns).

* `single[b]` (b < 0x20): the column of field token b; -5 for a field outside the
  columns (the caller's "different fields" error); -1 for anything else (the row is
  refused). `sstr[b]`: whether its value is a string (its pattern ends in `:"`).
* `end`: the token of `"}` (255 when the codebook has none).
* `isprefix[b]`: b starts a two-byte value token; such a token (code b*128 + second
  byte) stands for a field and the start of its value: `pfid`, `pstr` as above
  (-1: refused -- a replacement that is not a field token and printable text, or a
  field outside the columns, which the general path then reports), its text at
  `dictbuf[pstart:pstart+plen]`, `pcomma`: that text holds a comma.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from feedledger.ledger.encoding.codec import Codebook, field_tokens

__all__ = ["OUTSIDE_FIELD", "tables"]

OUTSIDE_FIELD = -5
_QUOTE, _BSL = 0x22, 0x5C
_CODES = 32 * 128


@lru_cache(maxsize=64)
def tables(patterns: tuple[str, ...], values: tuple[str, ...], columns: tuple[str, ...]) -> Any:
    """The kernel's tuple (single, sstr, end, isprefix, pfid, pstr, pstart, plen,
    pcomma, dictbuf) for a codebook (its patterns and values) and `columns`."""
    tokens = field_tokens(Codebook(list(patterns), list(values)))
    col = {name: i for i, name in enumerate(columns)}
    single = np.full(32, -1, np.int64)
    sstr = np.zeros(32, np.bool_)
    for token, (name, is_str) in tokens.fields.items():
        single[ord(token)] = col.get(name, OUTSIDE_FIELD)
        sstr[ord(token)] = is_str
    end = ord(tokens.end) if tokens.end else 255
    isprefix = np.zeros(32, np.bool_)
    pfid = np.full(_CODES, -1, np.int64)
    pstr = np.zeros(_CODES, np.bool_)
    pstart = np.zeros(_CODES, np.int64)
    plen = np.zeros(_CODES, np.int64)
    pcomma = np.zeros(_CODES, np.bool_)
    buf = bytearray()
    for token, replacement in tokens.expand:
        if len(token) != 2 or ord(token[0]) >= 32 or ord(token[1]) >= 128:
            continue
        isprefix[ord(token[0])] = True
        if not replacement or replacement[0] not in tokens.fields:
            continue
        text = replacement[1:].encode("utf-8")
        if any(b < 0x20 or b in (_QUOTE, _BSL) for b in text):
            continue
        name, is_str = tokens.fields[replacement[0]]
        if name not in col:
            continue
        code = ord(token[0]) * 128 + ord(token[1])
        pfid[code] = col[name]
        pstr[code] = is_str
        pstart[code] = len(buf)
        plen[code] = len(text)
        pcomma[code] = b"," in text
        buf += text
    dictbuf = np.frombuffer(bytes(buf), np.uint8) if buf else np.zeros(0, np.uint8)
    return (single, sstr, end, isprefix, pfid, pstr, pstart, plen, pcomma, dictbuf)
