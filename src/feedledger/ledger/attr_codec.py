"""The compact form of a version's attribute text (issue 17): its field names, and the
punctuation around them, replaced by one-byte tokens of a per-source codebook.

A stored attribute text is canonical JSON (formats/canonical.py) in which each
occurrence of a codebook *pattern* -- e.g. `{"acres":"` or `","owner":"` (a field name
with the punctuation before and after it) or `"}` -- is replaced by that pattern's
token: the control characters U+0001..U+001F, which canonical JSON never holds raw
(JSON escapes them). Decoding replaces each token by its pattern, so it restores the
canonical text exactly, whatever the text holds (nested objects, a field the codebook
does not know: those stay as they are); a text without tokens decodes to itself, so a
row written without a codebook (fields_id NULL) is its own canonical text.

A codebook is planned from a sample of a payload's texts (`plan`): the patterns that
save the most bytes, at most one per token. Pure: no I/O; `ledger/codebooks.py` keeps
codebooks in the store and is the one place stored texts are decoded.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import polars as pl

TOKENS: tuple[str, ...] = tuple(chr(c) for c in range(1, 32))
SAMPLE_ROWS = 1000  # texts a plan looks at


def _name(name: str) -> str:
    return json.dumps(name, ensure_ascii=False)


def row_patterns(text: str) -> list[str]:
    """The patterns one canonical object text holds at its top level."""
    record = json.loads(text, parse_float=str, parse_int=str, parse_constant=str)
    if not isinstance(record, dict) or not record:
        return []
    out: list[str] = []
    prev_str = False
    for i, (name, value) in enumerate(record.items()):
        lead = "{" if i == 0 else ('",' if prev_str else ",")
        prev_str = isinstance(value, str)
        out.append(lead + _name(str(name)) + ":" + ('"' if prev_str else ""))
    if prev_str:
        out.append('"}')
    return out


def gains(sample: Iterable[str]) -> Counter[str]:
    """Bytes each pattern would save over `sample` (canonical object texts)."""
    saved: Counter[str] = Counter()
    for text in sample:
        for pattern in row_patterns(text):
            saved[pattern] += len(pattern.encode("utf-8")) - 1
    return saved


def plan(saved: Counter[str]) -> list[str]:
    """The patterns worth a token (most bytes saved first, at most len(TOKENS)),
    sorted; [] when nothing is worth it."""
    ranked = sorted(saved.items(), key=lambda item: (-item[1], item[0]))
    return sorted(p for p, n in ranked[: len(TOKENS)] if n > 0)


def covers(book: Codebook, saved: Counter[str], share: float = 0.95) -> bool:
    """Whether `book` saves at least `share` of what a new plan for `saved` would."""
    best = sum(saved[p] for p in plan(saved))
    return sum(saved[p] for p in book.patterns) >= share * best


class Codebook:
    """Patterns <-> tokens (token i stands for patterns[i])."""

    def __init__(self, patterns: Sequence[str]) -> None:
        if len(patterns) > len(TOKENS):
            raise ValueError(f"a codebook has at most {len(TOKENS)} patterns")
        self.patterns = list(patterns)
        self.tokens = list(TOKENS[: len(patterns)])
        self._pairs = list(zip(self.tokens, self.patterns, strict=True))

    def to_text(self) -> str:
        return json.dumps(self.patterns, ensure_ascii=False)

    def encode_series(self, texts: pl.Series) -> pl.Series:
        """Canonical texts -> stored texts (nulls stay null)."""
        if not self.patterns or texts.dtype != pl.String:
            return texts
        return texts.str.replace_many(self.patterns, self.tokens).alias(texts.name)

    def decode_series(self, stored: pl.Series) -> pl.Series:
        """Stored texts -> canonical texts (nulls stay null)."""
        if not self.patterns:
            return stored
        return stored.str.replace_many(self.tokens, self.patterns).alias(stored.name)

    def decode(self, stored: str) -> str:
        for token, pattern in self._pairs:
            if token in stored:
                stored = stored.replace(token, pattern)
        return stored


@lru_cache(maxsize=256)
def from_text(text: str) -> Codebook:
    """A stored codebook (its JSON list of patterns), compiled once per process."""
    patterns = json.loads(text)
    return Codebook([str(p) for p in patterns])


@dataclass(frozen=True, slots=True)
class FieldTokens:
    """What a reader that splits stored texts without parsing JSON needs of a codebook
    (ledger/attribute_split.py): each token of a top-level field pattern (`{"a":"`,
    `","a":`, ...) -> (the field's name, whether a string value follows it); the token
    of the closing `"}`, if any; and `expand`: (token, replacement) pairs that turn
    every other token a stored text may hold into field tokens and plain text (none
    in this layout: every token is a pattern). A text that, once expanded, holds no
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
    for token, pattern in zip(book.tokens, book.patterns, strict=True):
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
    return FieldTokens(fields, end, [])
