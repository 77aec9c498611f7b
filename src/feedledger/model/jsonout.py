"""JSON output that can embed stored canonical JSON verbatim (number literals kept)."""

from __future__ import annotations

import json
import secrets
from typing import Any


class RawJSON:
    """A value already encoded as JSON text, emitted as-is."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def dumps(value: Any, *, indent: int | None = 2) -> str:
    """json.dumps that inserts RawJSON texts verbatim (so `1.10` is never rewritten)."""
    raws: dict[str, str] = {}
    token = secrets.token_hex(8)

    def default(obj: Any) -> Any:
        if isinstance(obj, RawJSON):
            marker = f"\x00{token}:{len(raws)}\x00"
            raws[json.dumps(marker)] = obj.text
            return marker
        to_json = getattr(obj, "to_json", None)
        if callable(to_json):
            return to_json()
        raise TypeError(f"not JSON serialisable: {type(obj).__name__}")

    text = json.dumps(value, default=default, indent=indent, ensure_ascii=False)
    for marker, raw in raws.items():
        text = text.replace(marker, raw, 1)
    return text
