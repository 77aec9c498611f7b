"""The compact form of a version's attribute text (issue 17): its field names, and the
punctuation around them, replaced by one-byte tokens of a per-source codebook, and the
values a field often has, with that field's pattern, by two-byte tokens.

A stored attribute text is canonical JSON (formats/canonical.py) in which each
occurrence of a codebook *pattern* -- e.g. `{"acres":"` or `","owner":"` (a field name
with the punctuation before and after it) or `"}` -- is replaced by that pattern's
token, and each occurrence of a codebook *value segment* -- a pattern and the value's
text after it, e.g. `","city":"SPRINGFIELD` -- by that segment's token. Tokens are
built from the control characters U+0001..U+001F, which canonical JSON never holds raw
(JSON escapes them): a pattern's token is one of them; a value segment's token is one
of the last three (`PREFIXES`, then never a token alone) followed by a printable ASCII
character other than `"`, `,`, `{`. Decoding replaces each token by its string
(leftmost first: a prefix always starts a two-character token), so it restores the
canonical text exactly, whatever the text holds (nested objects, a field or value the
codebook does not know: those stay as they are); a text without tokens decodes to
itself, so a row written without a codebook (fields_id NULL) is its own canonical text.

A codebook is planned from a sample of a payload's texts (`plan_book`): the patterns
that save the most bytes, at most one per token, and the value segments seen more than
once that save the most bytes over their pattern's token. A codebook without value
segments is stored as the JSON list of its patterns (the layout of migration 0010);
one with them as `{"patterns": [...], "values": [...]}`. Pure: no I/O;
`ledger/encoding/codebooks.py` keeps codebooks in the store and is the one place stored texts
are decoded.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import polars as pl

TOKENS: tuple[str, ...] = tuple(chr(c) for c in range(1, 32))
PREFIXES: tuple[str, ...] = TOKENS[-3:]  # two-character tokens' first character
SINGLES: tuple[str, ...] = TOKENS[: -len(PREFIXES)]  # one-character tokens beside them
# a two-character token's second character: printable ASCII but `"`, `,` and `{`, the
# characters a pattern starts with, so that no pattern or segment ever matches from
# inside a token (replacing them one after the other, as SQL `replace` does in
# migration 0011, then gives a text that decodes like the leftmost-first encoding)
PAIR_SECONDS = "".join(chr(c) for c in range(0x20, 0x7F) if chr(c) not in '",{')
PAIR_TOKENS: tuple[str, ...] = tuple(p + c for p in PREFIXES for c in PAIR_SECONDS)
SAMPLE_ROWS = 1000  # texts a plan looks at
MIN_SEEN = 2  # a value segment seen fewer times in a sample gets no token


def _name(name: str) -> str:
    return json.dumps(name, ensure_ascii=False)


def _load(text: str) -> object:
    return json.loads(text, parse_float=str, parse_int=str, parse_constant=str)


# the characters json.dumps(ensure_ascii=False) escapes in a string: no other
_ESCAPED = re.compile(r'["\\\x00-\x1f]')


def _scalar_text(raw: object) -> str | None:
    """A top-level value's text after its pattern (a string without its quotes), or
    None for a nested one."""
    if isinstance(raw, str):
        if _ESCAPED.search(raw) is None:
            return raw  # what json.dumps would write between its quotes
        return json.dumps(raw, ensure_ascii=False)[1:-1]
    if raw is None or isinstance(raw, bool):
        return json.dumps(raw)
    return None


@lru_cache(maxsize=4096)
def _pattern(lead: str, name: str, string: bool) -> str:
    return lead + _name(name) + ":" + ('"' if string else "")


def row_segments(text: str) -> list[tuple[str, str | None]]:
    """The (pattern, value text) pairs one canonical object text holds at its top
    level, the closing `"}` with value None; numbers keep their literal text."""
    record = json.loads(text, parse_float=_Num, parse_int=_Num, parse_constant=_Num)
    if not isinstance(record, dict) or not record:
        return []
    out: list[tuple[str, str | None]] = []
    lead = "{"
    string = False
    for name, value in record.items():
        number = isinstance(value, _Num)
        string = not number and isinstance(value, str)
        out.append(
            (_pattern(lead, str(name), string), str(value) if number else _scalar_text(value))
        )
        lead = '",' if string else ","
    if string:
        out.append(('"}', None))
    return out


class _Num(str):
    """A number's (or NaN's) literal text, told apart from a string value."""


def row_patterns(text: str) -> list[str]:
    """The patterns one canonical object text holds at its top level."""
    return [pattern for pattern, _ in row_segments(text)]


def _size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def gains(sample: Iterable[str]) -> Counter[str]:
    """Bytes each pattern would save over `sample` (canonical object texts)."""
    saved: Counter[str] = Counter()
    for text in sample:
        for pattern in row_patterns(text):
            saved[pattern] += _size(pattern) - 1
    return saved


def value_gains(sample: Iterable[str]) -> Counter[str]:
    """Bytes each value segment (pattern + value text) would save over `sample`
    beyond its pattern's one-byte token, for the segments seen at least MIN_SEEN
    times."""
    return all_gains(sample)[1]


def all_gains(sample: Iterable[str]) -> tuple[Counter[str], Counter[str]]:
    """`gains` and `value_gains` of `sample`, each text parsed once."""
    saved: Counter[str] = Counter()
    seen: Counter[str] = Counter()
    for text in sample:
        for pattern, value in row_segments(text):
            saved[pattern] += 1
            if value:
                seen[pattern + "\0" + value] += 1
    for pattern in saved:
        saved[pattern] *= _size(pattern) - 1
    values: Counter[str] = Counter()
    for both, n in seen.items():
        pattern, value = both.split("\0", 1)
        if n >= MIN_SEEN and _size(value) > 1:
            values[pattern + value] = n * (_size(value) - 1)
    return saved, values


def _best(saved: Counter[str], room: int) -> list[str]:
    ranked = sorted(saved.items(), key=lambda item: (-item[1], item[0]))
    return sorted(p for p, n in ranked[:room] if n > 0)


def plan(saved: Counter[str]) -> list[str]:
    """The patterns worth a token (most bytes saved first, at most len(TOKENS)),
    sorted; [] when nothing is worth it."""
    return _best(saved, len(TOKENS))


def plan_book(sample: Sequence[str]) -> Codebook:
    """The codebook for texts like `sample`: its patterns and, beside at most
    len(SINGLES) patterns, its most frequent values (at most len(PAIR_TOKENS))."""
    return plan_from(*all_gains(sample))


def plan_from(saved: Counter[str], values_saved: Counter[str]) -> Codebook:
    """`plan_book` of a sample whose `all_gains` these are."""
    values = _best(values_saved, len(PAIR_TOKENS))
    patterns = _best(saved, len(SINGLES) if values else len(TOKENS))
    return Codebook(patterns, values if patterns else [])


def saving(book: Codebook, saved: Counter[str], values: Counter[str]) -> int:
    """Bytes `book` saves over a sample whose `gains` / `value_gains` these are."""
    return sum(saved[p] for p in book.patterns) + sum(values[v] for v in book.values)


def covers(
    book: Codebook, saved: Counter[str], values: Counter[str] | None = None, share: float = 0.9
) -> bool:
    """Whether `book` saves at least `share` of what a new plan would over a sample
    with these `gains` (and `value_gains`)."""
    values = values if values is not None else Counter()
    best = saving(Codebook(plan(saved)), saved, values) + sum(
        values[v] for v in _best(values, len(PAIR_TOKENS))
    )
    return saving(book, saved, values) >= share * best


class Codebook:
    """Patterns and value segments <-> tokens (pattern i: TOKENS[i]; value j:
    PAIR_TOKENS[j])."""

    def __init__(self, patterns: Sequence[str], values: Sequence[str] = ()) -> None:
        room = len(SINGLES) if values else len(TOKENS)
        if len(patterns) > room or len(values) > len(PAIR_TOKENS):
            raise ValueError(f"a codebook has at most {room} patterns, {len(PAIR_TOKENS)} values")
        self.patterns = list(patterns)
        self.values = list(values)
        self.tokens = list(TOKENS[: len(patterns)]) + list(PAIR_TOKENS[: len(values)])
        strings = self.patterns + self.values
        self._strings = dict(zip(self.tokens, strings, strict=True))
        # encoding: longest first, so a value segment wins over its own pattern
        order = sorted(range(len(strings)), key=lambda i: (-len(strings[i]), i))
        self._enc_from = [strings[i] for i in order]
        self._enc_to = [self.tokens[i] for i in order]
        self._token = re.compile(
            "[" + "".join(PREFIXES) + "][" + re.escape(PAIR_SECONDS) + "]|[\x01-\x1c]"
            if self.values
            else "[\x01-\x1f]"
        )

    def to_text(self) -> str:
        if not self.values:
            return json.dumps(self.patterns, ensure_ascii=False)
        return json.dumps({"patterns": self.patterns, "values": self.values}, ensure_ascii=False)

    def encode_series(self, texts: pl.Series) -> pl.Series:
        """Canonical texts -> stored texts (nulls stay null)."""
        if not self.tokens or texts.dtype != pl.String:
            return texts
        return _replaced(texts, self._enc_from, self._enc_to)

    def decode_series(self, stored: pl.Series) -> pl.Series:
        """Stored texts -> canonical texts (nulls stay null)."""
        if not self.tokens:
            return stored
        return _replaced(stored, list(self.tokens), self.patterns + self.values)

    def decode(self, stored: str) -> str:
        strings = self._strings
        return self._token.sub(lambda m: strings.get(m.group(), m.group()), stored)


def _replaced(texts: pl.Series, old: list[str], new: list[str]) -> pl.Series:
    """`texts` with each of `old` replaced by its `new`, leftmost-first, as one lazy
    query: polars then splits the work over its threads, where the Series method runs
    it on the calling thread alone (200k parcel texts, 289 patterns: 0.23 s against
    0.33 s on 2 cores; the same result)."""
    name = texts.name
    expr = pl.col(name).str.replace_many(old, new, leftmost=True)
    return texts.to_frame().lazy().select(expr).collect().to_series().alias(name)


@lru_cache(maxsize=256)
def from_text(text: str) -> Codebook:
    """A stored codebook (its JSON list of patterns, or object of patterns and
    values), compiled once per process."""
    doc = json.loads(text)
    if isinstance(doc, dict):
        return Codebook([str(p) for p in doc["patterns"]], [str(v) for v in doc["values"]])
    return Codebook([str(p) for p in doc])


@dataclass(frozen=True, slots=True)
class FieldTokens:
    """What a reader that splits stored texts without parsing JSON needs of a codebook
    (ledger/encoding/split.py): each token of a top-level field pattern (`{"a":"`,
    `","a":`, ...) -> (the field's name, whether a string value follows it); the token
    of the closing `"}`, if any; and `expand`: (token, replacement) pairs that turn
    every other token a stored text may hold into field tokens and plain text (a
    value segment's: its pattern's token, or the pattern if the codebook has no token
    for it, then the value's text). A text that, once expanded, holds no
    `"`, no backslash and no control character outside `fields` and `end` is a flat
    object whose values are its pieces between tokens."""

    fields: dict[str, tuple[str, bool]]
    end: str | None
    expand: list[tuple[str, str]]


_LEADS = ("{", '",', ",")


def field_tokens(book: Codebook) -> FieldTokens:
    """The structural tokens of `book` (see FieldTokens); a pattern that is not one is
    left out (a text holding its token is then not split)."""
    fields: dict[str, tuple[str, bool]] = {}
    end: str | None = None
    singles = book.tokens[: len(book.patterns)]
    for token, pattern in zip(singles, book.patterns, strict=True):
        if pattern == '"}':
            end = token
            continue
        lead = next((lead for lead in _LEADS if pattern.startswith(lead)), None)
        if lead is None or not pattern.endswith((":", ':"')):
            continue
        string = pattern.endswith(':"')
        quoted = pattern[len(lead) : -2 if string else -1]
        try:
            name = json.loads(quoted)
        except ValueError:
            continue
        if isinstance(name, str) and _name(name) == quoted:
            fields[token] = (name, string)
    expand = []
    by_length = sorted(zip(book.patterns, singles, strict=True), key=lambda p: -len(p[0]))
    for token, value in zip(book.tokens[len(book.patterns) :], book.values, strict=True):
        own = next(((p, t) for p, t in by_length if value.startswith(p)), None)
        expand.append((token, value if own is None else own[1] + value[len(own[0]) :]))
    return FieldTokens(fields, end, expand)
