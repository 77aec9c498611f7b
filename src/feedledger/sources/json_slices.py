"""A JSON object's `features` array as (parsed value, exact text) pairs: each feature
is parsed once by the stdlib's C scanner and its text sliced from the answer, never
re-serialised (sources/arcgis_query.py keeps an ArcGIS GeoJSON page's features as the
server wrote them)."""

from __future__ import annotations

import json
import re
from typing import Any

_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


def _ws(text: str, pos: int) -> int:
    match = _WS.match(text, pos)
    assert match is not None  # the pattern matches the empty string
    return match.end()


def _expect(text: str, pos: int, char: str, what: str) -> int:
    if text[pos : pos + 1] != char:
        found = repr(text[pos : pos + 10]) if pos < len(text) else "the end"
        raise ValueError(f"expected {char!r} {what} at character {pos}, found {found}")
    return _ws(text, pos + 1)


def split_page(text: str) -> tuple[dict[str, Any], list[tuple[Any, str]] | None]:
    """A JSON object's members other than `features`, and its `features` array as
    (parsed value, exact text) pairs -- each value parsed once by the C scanner, its
    text sliced from `text`, never re-serialised. None: no features array."""
    scan = _DECODER.raw_decode
    members: dict[str, Any] = {}
    features: list[tuple[Any, str]] | None = None
    pos = _expect(text, _ws(text, 0), "{", "to open the answer")
    if text[pos : pos + 1] == "}":
        return members, features
    while True:
        key, pos = scan(text, pos)
        if not isinstance(key, str):
            raise ValueError(f"a member name is not a string at character {pos}")
        pos = _expect(text, _ws(text, pos), ":", "after a member name")
        if key == "features" and text[pos : pos + 1] == "[":
            features = []
            pos = _ws(text, pos + 1)
            if text[pos : pos + 1] == "]":
                pos += 1
            else:
                while True:
                    value, end = scan(text, pos)
                    features.append((value, text[pos:end]))
                    pos = _ws(text, end)
                    if text[pos : pos + 1] == "]":
                        pos += 1
                        break
                    pos = _expect(text, pos, ",", "between features")
        else:
            members[key], pos = scan(text, pos)
        pos = _ws(text, pos)
        if text[pos : pos + 1] == "}":
            break
        pos = _expect(text, pos, ",", "between members")
    if _ws(text, pos + 1) != len(text):
        raise ValueError(f"extra data after the answer at character {pos + 1}")
    return members, features
