"""A JSON object's `features` array as (parsed value, exact text) pairs: each feature's
text sliced from the answer, never re-serialised (sources/arcgis_query.py keeps an
ArcGIS GeoJSON page's features as the server wrote them).

`split_features` (a GeoJSON page): msgspec slices each feature (`msgspec.Raw`) and
parses only its `type`, `id` and `properties`, skipping the geometry's coordinates
(about four times faster than parsing them all); a page it does not take -- NaN,
a feature spread over several lines, a `features` member that is not an array --
is left to `split_page`, which parses every feature whole with the stdlib's C
scanner and answers as before (or names what is wrong)."""

from __future__ import annotations

import json
import re
from typing import Any

import msgspec

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


class _Feature(msgspec.Struct):
    """What is read of a GeoJSON feature (its other members, the geometry, skipped)."""

    type: Any = None
    id: Any = None
    properties: Any = None


_MEMBERS = msgspec.json.Decoder(dict[str, msgspec.Raw])
_ITEMS = msgspec.json.Decoder(list[msgspec.Raw])
_FEATURE = msgspec.json.Decoder(_Feature)
_VALUE = msgspec.json.Decoder()


def split_features(body: bytes) -> tuple[dict[str, Any], list[tuple[Any, str]] | None] | None:
    """`split_page`'s answer for a GeoJSON page (UTF-8 bytes), each feature's parsed
    value holding only its `type`, `id` and `properties`; None where msgspec does not
    take the page or a feature spans lines (module docstring)."""
    try:
        top = _MEMBERS.decode(body)
        members = {k: _VALUE.decode(v) for k, v in top.items() if k != "features"}
        if "features" not in top:
            return members, None
        features: list[tuple[Any, str]] = []
        for raw in _ITEMS.decode(top["features"]):
            text = bytes(raw).decode("utf-8")
            if "\n" in text or "\r" in text:
                return None
            f = _FEATURE.decode(raw)
            features.append(({"type": f.type, "id": f.id, "properties": f.properties}, text))
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
        return None
    return members, features
